//! How to reach an MCP server: the transport, its parameters, a timeout and who we are.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The default timeout for connecting, initializing, listing and calling.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The transport to a server.
///
/// In JSON (and in [`ConnectionConfig`]'s serde form) the variant is chosen by a
/// `transport` field: `"stdio"`, `"sse"` or `"streamable_http"` (with `"http"` and
/// `"streamable-http"` accepted as aliases).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum TransportConfig {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program to run (looked up on `PATH`).
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Variables set in the server's environment. The parent's environment is not
        /// inherited beyond [`toolbelt_core::env::CORE_VARS`] (`PATH`, `HOME`, the locale,
        /// …), and never its secrets: a server that needs a token gets it here
        /// (`"GITHUB_TOKEN": "${GITHUB_TOKEN}"` in an `mcpServers` file).
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// Names (or `*` patterns) of the parent's variables the server may also inherit,
        /// secrets included if named (Codex's `env_vars`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env_vars: Vec<String>,
        /// The working directory, when not the current one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
    },
    /// The legacy HTTP+SSE transport (protocol 2024-11-05): a GET event stream plus POSTs
    /// to the endpoint the server announces.
    Sse {
        /// The SSE endpoint, for example `http://127.0.0.1:8080/sse`.
        url: String,
        /// Static headers sent with every request.
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    /// The streamable HTTP transport (protocol 2025-03-26 and later).
    #[serde(alias = "http", alias = "streamable-http")]
    StreamableHttp {
        /// The MCP endpoint, for example `http://127.0.0.1:3000/mcp`.
        url: String,
        /// Static headers sent with every request.
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

impl TransportConfig {
    /// A stdio transport running `command` with `args`.
    pub fn stdio<I, S>(command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        TransportConfig::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            env_vars: Vec::new(),
            cwd: None,
        }
    }

    /// A legacy SSE transport to `url`.
    pub fn sse(url: impl Into<String>) -> Self {
        TransportConfig::Sse {
            url: url.into(),
            headers: BTreeMap::new(),
        }
    }

    /// A streamable HTTP transport to `url`.
    pub fn streamable_http(url: impl Into<String>) -> Self {
        TransportConfig::StreamableHttp {
            url: url.into(),
            headers: BTreeMap::new(),
        }
    }

    /// The transport's name as written in configuration (`stdio`, `sse`, `streamable_http`).
    pub fn kind(&self) -> &'static str {
        match self {
            TransportConfig::Stdio { .. } => "stdio",
            TransportConfig::Sse { .. } => "sse",
            TransportConfig::StreamableHttp { .. } => "streamable_http",
        }
    }
}

/// Who the client says it is in `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    /// The client's name.
    pub name: String,
    /// The client's version.
    pub version: String,
}

impl Default for ClientInfo {
    fn default() -> Self {
        Self {
            name: "toolbelt".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// Everything needed to reach one MCP server.
///
/// ```
/// use std::time::Duration;
/// use toolbelt_mcp::{ConnectionConfig, TransportConfig};
///
/// let config = ConnectionConfig::new(TransportConfig::stdio("python3", ["-m", "my_server"]))
///     .with_timeout(Duration::from_secs(10))
///     .with_description("Reads and writes the team's notes");
/// assert_eq!(config.transport.kind(), "stdio");
///
/// let remote: ConnectionConfig = serde_json::from_str(
///     r#"{"transport": "http", "url": "http://127.0.0.1:3000/mcp", "timeout_ms": 5000}"#,
/// )?;
/// assert_eq!(remote.transport.kind(), "streamable_http");
/// assert_eq!(remote.timeout, Duration::from_secs(5));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionConfig {
    /// The transport and its parameters.
    #[serde(flatten)]
    pub transport: TransportConfig,
    /// The limit for connecting, each handshake step, listing, and a call whose context has
    /// no deadline of its own.
    #[serde(default = "default_timeout", rename = "timeout_ms", with = "millis")]
    pub timeout: Duration,
    /// What the server offers, in a sentence (the broker shows it to models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who the client says it is.
    #[serde(default)]
    pub client_info: ClientInfo,
    /// OAuth for the HTTP transports: a pre-registered client, scopes, and whether a
    /// connection may start an authorization (see [`crate::auth`]). Without it, tokens
    /// stored by a login ([`crate::auth::login`], `toolbelt mcp login`) for the server's URL
    /// are still used and refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<crate::auth::OAuthConfig>,
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

impl ConnectionConfig {
    /// A configuration for `transport` with the default timeout and client info.
    pub fn new(transport: TransportConfig) -> Self {
        Self {
            transport,
            timeout: DEFAULT_TIMEOUT,
            description: None,
            client_info: ClientInfo::default(),
            oauth: None,
        }
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the client info sent in `initialize`.
    pub fn with_client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.client_info = ClientInfo {
            name: name.into(),
            version: version.into(),
        };
        self
    }

    /// Sets the OAuth settings (remote transports only; ignored for stdio).
    pub fn with_oauth(mut self, oauth: crate::auth::OAuthConfig) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Adds a static header (remote transports only; ignored for stdio).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        match &mut self.transport {
            TransportConfig::Sse { headers, .. }
            | TransportConfig::StreamableHttp { headers, .. } => {
                headers.insert(name.into(), value.into());
            }
            TransportConfig::Stdio { .. } => {}
        }
        self
    }

    /// Sets an environment variable of the server (stdio only; ignored for remote
    /// transports).
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let TransportConfig::Stdio { env, .. } = &mut self.transport {
            env.insert(name.into(), value.into());
        }
        self
    }

    /// Lets the server inherit the parent's variables named by `pattern` (a name, or `*` as a
    /// wildcard), even ones that look like secrets (stdio only; ignored for remote
    /// transports).
    pub fn with_parent_env(mut self, pattern: impl Into<String>) -> Self {
        if let TransportConfig::Stdio { env_vars, .. } = &mut self.transport {
            env_vars.push(pattern.into());
        }
        self
    }

    /// The environment policy of a stdio server: the core allow-list, the named parent
    /// variables, and `env` set explicitly. `None` for remote transports.
    pub fn env_policy(&self) -> Option<toolbelt_core::EnvPolicy> {
        let TransportConfig::Stdio { env, env_vars, .. } = &self.transport else {
            return None;
        };
        let policy = env_vars
            .iter()
            .fold(toolbelt_core::EnvPolicy::new(), |p, pattern| {
                p.allow(pattern)
            });
        Some(env.iter().fold(policy, |p, (k, v)| p.set(k, v)))
    }

    /// Sets the working directory (stdio only; ignored for remote transports).
    pub fn with_cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let TransportConfig::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(dir.into());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamable_http_accepts_its_aliases() {
        for name in ["streamable_http", "http", "streamable-http"] {
            let json = format!(r#"{{"transport": "{name}", "url": "http://127.0.0.1:1/mcp"}}"#);
            let config: ConnectionConfig = serde_json::from_str(&json).unwrap();
            assert_eq!(config.transport.kind(), "streamable_http", "{name}");
        }
    }

    #[test]
    fn stdio_config_reads_command_args_env_and_cwd() {
        let config: ConnectionConfig = serde_json::from_str(
            r#"{"transport": "stdio", "command": "node", "args": ["a.js"],
                "env": {"K": "V"}, "cwd": "/tmp", "description": "d"}"#,
        )
        .unwrap();
        assert_eq!(
            config.transport,
            TransportConfig::Stdio {
                command: "node".into(),
                args: vec!["a.js".into()],
                env: BTreeMap::from([("K".into(), "V".into())]),
                env_vars: Vec::new(),
                cwd: Some("/tmp".into()),
            }
        );
        assert_eq!(config.timeout, DEFAULT_TIMEOUT);
        assert_eq!(config.description.as_deref(), Some("d"));
    }

    #[test]
    fn a_stdio_server_inherits_the_core_variables_what_it_names_and_never_secrets() {
        let config = ConnectionConfig::new(TransportConfig::stdio("srv", Vec::<String>::new()))
            .with_env("SERVER_MODE", "test")
            .with_parent_env("GITHUB_TOKEN")
            .with_parent_env("AWS_*");
        let parent = [
            ("PATH", "/usr/bin"),
            ("OPENAI_API_KEY", "sk-1"),
            ("TOOLBELT_SERVE_TOKEN", "t"),
            ("GITHUB_TOKEN", "gh"),
            ("AWS_PROFILE", "dev"),
            ("EDITOR", "vi"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        let policy = config.env_policy().unwrap();
        let names: Vec<String> = policy
            .resolve_from(parent)
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect();
        assert_eq!(
            names,
            ["AWS_PROFILE", "GITHUB_TOKEN", "PATH", "SERVER_MODE"]
        );
        let remote = ConnectionConfig::new(TransportConfig::sse("http://127.0.0.1:1/sse"));
        assert!(remote.env_policy().is_none());
    }

    #[test]
    fn an_unknown_transport_is_refused() {
        let err = serde_json::from_str::<ConnectionConfig>(r#"{"transport": "carrier-pigeon"}"#)
            .unwrap_err();
        assert!(err.to_string().contains("carrier-pigeon"), "{err}");
    }
}
