//! The `mcpServers` JSON file that Claude Desktop, Cursor and Claude Code use.
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "files":  { "command": "npx", "args": ["-y", "some-server"], "env": {"ROOT": "${HOME}"} },
//!     "remote": { "type": "http", "url": "https://example.invalid/mcp",
//!                 "headers": {"Authorization": "Bearer ${API_TOKEN}"} },
//!     "legacy": { "type": "sse", "url": "http://127.0.0.1:8080/sse" }
//!   }
//! }
//! ```
//!
//! - A server with `command` is stdio (`args`, `env`, `cwd` optional; `type: "stdio"` may be
//!   given). Its environment is scrubbed: it inherits only the core variables (`PATH`, `HOME`,
//!   the locale, …; see [`toolbelt_core::env`]) and never the parent's secrets. `env` sets
//!   what it needs (`"GITHUB_TOKEN": "${GITHUB_TOKEN}"` passes one variable on, by name);
//!   `env_vars` (Codex's field, also spelled `envVars`) lists parent variables it may
//!   inherit as they are, as names or `*` patterns. A server with `url` is remote: `type` `sse`, or `http` / `streamable-http` /
//!   `streamable_http`; a `url` without a `type` is streamable HTTP.
//! - `${VAR}` is replaced by the environment variable `VAR` in the command, args, env values,
//!   cwd, url and header values; `${VAR:-fallback}` uses `fallback` when `VAR` is unset. A
//!   variable that is unset and has no fallback is an error naming the server, the field and
//!   the variable.
//! - Toolbelt's own optional fields: `timeout_ms`, `description`; `disabled: true` hides a
//!   server from [`McpServersFile::servers`].
//!
//! Variables are expanded when a server is asked for, so one server with a missing
//! variable does not make the others unusable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::config::{ConnectionConfig, DEFAULT_TIMEOUT, TransportConfig};

/// Why a config file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("cannot read MCP config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON of the expected shape.
    #[error("invalid MCP config: {0}")]
    Invalid(String),
    /// A server entry has neither a usable `command` nor a `url`.
    #[error("MCP server {server:?} in the config: {problem}")]
    BadServer {
        /// The server's name.
        server: String,
        /// What is wrong.
        problem: String,
    },
    /// A `${VAR}` names a variable that is not set and has no fallback.
    #[error(
        "MCP server {server:?}: {field} uses ${{{variable}}}, which is not set (set it, or write ${{{variable}:-default}})"
    )]
    MissingVariable {
        /// The server's name.
        server: String,
        /// The field holding the reference, for example `headers.Authorization`.
        field: String,
        /// The variable's name.
        variable: String,
    },
    /// No server of that name is in the file.
    #[error("no MCP server named {name:?} in the config; it has: {}", if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    UnknownServer {
        /// The name asked for.
        name: String,
        /// The names in the file.
        available: Vec<String>,
    },
}

type Lookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A parsed `mcpServers` file.
#[derive(Clone)]
pub struct McpServersFile {
    /// In the file's order: it decides which server keeps a tool name on a clash.
    servers: IndexMap<String, RawServer>,
    lookup: Lookup,
}

impl std::fmt::Debug for McpServersFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServersFile")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Debug, Clone, Deserialize)]
struct FileShape {
    #[serde(rename = "mcpServers")]
    mcp_servers: IndexMap<String, RawServer>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawServer {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default, alias = "envVars")]
    env_vars: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    disabled: bool,
    /// OAuth settings of a remote server (`client_id`, `client_secret`, `scopes`, …).
    #[serde(default)]
    oauth: Option<crate::auth::OAuthConfig>,
}

impl McpServersFile {
    /// Reads and parses `path`, expanding variables from the process environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses `text`, expanding variables from the process environment.
    pub fn parse(text: &str) -> Result<Self, ConfigFileError> {
        Self::parse_with(text, |name| std::env::var(name).ok())
    }

    /// Parses `text`, expanding variables with `lookup`.
    pub fn parse_with(
        text: &str,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Result<Self, ConfigFileError> {
        let shape: FileShape = serde_json::from_str(text).map_err(|err| {
            ConfigFileError::Invalid(format!(
                "{err} (expected {{\"mcpServers\": {{\"name\": {{...}}}}}})"
            ))
        })?;
        Ok(Self {
            servers: shape.mcp_servers,
            lookup: Arc::new(lookup),
        })
    }

    /// The names of all servers in the file, disabled ones included, in order.
    pub fn names(&self) -> Vec<&str> {
        self.servers.keys().map(String::as_str).collect()
    }

    /// The configuration of server `name`, with variables expanded.
    pub fn server(&self, name: &str) -> Result<ConnectionConfig, ConfigFileError> {
        let raw = self
            .servers
            .get(name)
            .ok_or_else(|| ConfigFileError::UnknownServer {
                name: name.to_string(),
                available: self.servers.keys().cloned().collect(),
            })?;
        self.resolve(name, raw)
    }

    /// Every server that is not disabled, in the file's order, with its configuration (or why
    /// it is unusable).
    pub fn servers(&self) -> Vec<(String, Result<ConnectionConfig, ConfigFileError>)> {
        self.servers
            .iter()
            .filter(|(_, raw)| !raw.disabled)
            .map(|(name, raw)| (name.clone(), self.resolve(name, raw)))
            .collect()
    }

    fn resolve(&self, name: &str, raw: &RawServer) -> Result<ConnectionConfig, ConfigFileError> {
        let expand = |field: &str, value: &str| expand_vars(name, field, value, &*self.lookup);
        let bad = |problem: String| ConfigFileError::BadServer {
            server: name.to_string(),
            problem,
        };
        let kind = raw.kind.as_deref().map(str::to_ascii_lowercase);
        let transport = match (kind.as_deref(), &raw.command, &raw.url) {
            (None | Some("stdio"), Some(command), _) => TransportConfig::Stdio {
                command: expand("command", command)?,
                args: raw
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, arg)| expand(&format!("args[{i}]"), arg))
                    .collect::<Result<_, _>>()?,
                env: raw
                    .env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), expand(&format!("env.{k}"), v)?)))
                    .collect::<Result<_, ConfigFileError>>()?,
                env_vars: raw.env_vars.clone(),
                cwd: raw
                    .cwd
                    .as_deref()
                    .map(|cwd| expand("cwd", cwd).map(PathBuf::from))
                    .transpose()?,
            },
            (Some("stdio"), None, _) => {
                return Err(bad("type \"stdio\" needs a \"command\"".into()));
            }
            (kind, _, Some(url)) => {
                let url = expand("url", url)?;
                let headers = raw
                    .headers
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), expand(&format!("headers.{k}"), v)?)))
                    .collect::<Result<_, ConfigFileError>>()?;
                match kind {
                    Some("sse") => TransportConfig::Sse { url, headers },
                    None
                    | Some("http" | "streamable-http" | "streamable_http" | "streamablehttp") => {
                        TransportConfig::StreamableHttp { url, headers }
                    }
                    Some(other) => {
                        return Err(bad(format!(
                            "unknown type {other:?} (use \"stdio\", \"sse\", \"http\" or \"streamable-http\")"
                        )));
                    }
                }
            }
            (Some(other), _, None) => {
                return Err(bad(format!("type {other:?} needs a \"url\"")));
            }
            (None, None, None) => {
                return Err(bad(
                    "needs a \"command\" (stdio) or a \"url\" (remote)".into()
                ));
            }
        };
        Ok(ConnectionConfig {
            transport,
            timeout: raw
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_TIMEOUT),
            description: raw.description.clone(),
            client_info: Default::default(),
            oauth: raw
                .oauth
                .as_ref()
                .map(|oauth| {
                    let mut oauth = oauth.clone();
                    let expand_opt = |field: &str, value: &Option<String>| {
                        value.as_deref().map(|v| expand(field, v)).transpose()
                    };
                    oauth.client_id = expand_opt("oauth.client_id", &oauth.client_id)?;
                    oauth.client_secret = expand_opt("oauth.client_secret", &oauth.client_secret)?;
                    Ok::<_, ConfigFileError>(oauth)
                })
                .transpose()?,
        })
    }
}

/// Replaces `${VAR}` and `${VAR:-fallback}` in `value`.
fn expand_vars(
    server: &str,
    field: &str,
    value: &str,
    lookup: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Result<String, ConfigFileError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // An unterminated reference is kept as written.
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let reference = &after[..end];
        let (variable, fallback) = match reference.split_once(":-") {
            Some((variable, fallback)) => (variable, Some(fallback)),
            None => (reference, None),
        };
        match (lookup(variable), fallback) {
            (Some(found), _) => out.push_str(&found),
            (None, Some(fallback)) => out.push_str(fallback),
            (None, None) => {
                return Err(ConfigFileError::MissingVariable {
                    server: server.to_string(),
                    field: field.to_string(),
                    variable: variable.to_string(),
                });
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "TOKEN" => Some("t0k".into()),
            _ => None,
        }
    }

    const FILE: &str = r#"{"mcpServers": {
        "files": {"command": "node", "args": ["${HOME}/srv.js", "--x"], "env": {"ROOT": "${HOME}"}, "env_vars": ["GITHUB_TOKEN", "AWS_*"], "cwd": "${HOME}"},
        "claude-code": {"type": "stdio", "command": "python3", "args": ["-m", "srv"]},
        "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "remote2": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
        "cursor": {"url": "http://127.0.0.1:9/mcp"},
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse", "timeout_ms": 1500},
        "needs-var": {"type": "sse", "url": "http://${MISSING_HOST}/sse"},
        "fallback": {"command": "${MISSING_BIN:-python3}"},
        "off": {"command": "x", "disabled": true}
    }}"#;

    #[test]
    fn stdio_entries_expand_variables_everywhere() {
        let file = McpServersFile::parse_with(FILE, lookup).unwrap();
        let config = file.server("files").unwrap();
        assert_eq!(
            config.transport,
            TransportConfig::Stdio {
                command: "node".into(),
                args: vec!["/home/ada/srv.js".into(), "--x".into()],
                env: BTreeMap::from([("ROOT".into(), "/home/ada".into())]),
                env_vars: vec!["GITHUB_TOKEN".into(), "AWS_*".into()],
                cwd: Some("/home/ada".into()),
            }
        );
        assert_eq!(
            file.server("claude-code").unwrap().transport.kind(),
            "stdio"
        );
    }

    #[test]
    fn remote_entries_choose_the_transport_from_type() {
        let file = McpServersFile::parse_with(FILE, lookup).unwrap();
        match file.server("remote").unwrap().transport {
            TransportConfig::StreamableHttp { headers, .. } => {
                assert_eq!(headers["Authorization"], "Bearer t0k");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            file.server("remote2").unwrap().transport.kind(),
            "streamable_http"
        );
        assert_eq!(
            file.server("cursor").unwrap().transport.kind(),
            "streamable_http"
        );
        let legacy = file.server("legacy").unwrap();
        assert_eq!(legacy.transport.kind(), "sse");
        assert_eq!(legacy.timeout, Duration::from_millis(1500));
    }

    #[test]
    fn a_missing_variable_is_named_with_its_server_and_field() {
        let file = McpServersFile::parse_with(FILE, lookup).unwrap();
        let err = file.server("needs-var").unwrap_err();
        assert_eq!(
            err.to_string(),
            "MCP server \"needs-var\": url uses ${MISSING_HOST}, which is not set (set it, or write ${MISSING_HOST:-default})"
        );
        assert_eq!(
            file.server("fallback").unwrap().transport,
            TransportConfig::stdio("python3", Vec::<String>::new())
        );
    }

    #[test]
    fn unknown_servers_list_the_available_names_and_disabled_ones_are_hidden() {
        let file = McpServersFile::parse_with(FILE, lookup).unwrap();
        let err = file.server("nope").unwrap_err().to_string();
        assert!(err.contains("files") && err.contains("legacy"), "{err}");
        let listed: Vec<String> = file.servers().into_iter().map(|(n, _)| n).collect();
        assert!(!listed.contains(&"off".to_string()));
        assert!(listed.contains(&"needs-var".to_string()));
    }

    #[test]
    fn malformed_files_and_entries_are_explained() {
        let err = McpServersFile::parse_with("{}", lookup).unwrap_err();
        assert!(err.to_string().contains("mcpServers"), "{err}");
        let file = McpServersFile::parse_with(
            r#"{"mcpServers": {"x": {"type": "ws", "url": "u"}}}"#,
            lookup,
        )
        .unwrap();
        assert!(
            file.server("x")
                .unwrap_err()
                .to_string()
                .contains("unknown type \"ws\"")
        );
        let file = McpServersFile::parse_with(r#"{"mcpServers": {"x": {}}}"#, lookup).unwrap();
        assert!(
            file.server("x")
                .unwrap_err()
                .to_string()
                .contains("needs a \"command\"")
        );
    }
}
