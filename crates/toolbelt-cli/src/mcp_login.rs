//! `toolbelt mcp login`: authorize with an HTTP MCP server that uses OAuth, once, and keep
//! its tokens for the later `toolbelt mcp`, `tools` and `serve` commands (which use and
//! refresh them); and the `--oauth-*` flags with which `toolbelt mcp tools` and `call`
//! authorize on the fly when a server answers 401.
//!
//! The authorization URL is printed on stderr and opened in the browser; the browser comes
//! back to a listener on 127.0.0.1. `--no-browser` fetches the URL and follows its
//! redirects instead, for authorization servers that approve without a person (test
//! servers, CI). A client secret is read from `TOOLBELT_OAUTH_CLIENT_SECRET`, never from
//! the command line, where other users could see it. Tokens go to
//! `$XDG_STATE_HOME/toolbelt/oauth` (`TOOLBELT_OAUTH_DIR` moves it), one 0600 file per
//! server.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};
use toolbelt::mcp::auth::{login, logout};
use toolbelt::mcp::{
    AuthorizeMode, ConnectionConfig, McpServersFile, McpToolSet, OAuthConfig, TransportConfig,
};
use toolbelt::{ToolContext, ToolSet};

use crate::common::{CliError, EXIT_OK, Outcome};

/// The environment variable a client secret is read from.
const CLIENT_SECRET_VAR: &str = "TOOLBELT_OAUTH_CLIENT_SECRET";

/// Flags of `toolbelt mcp login`.
#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("login_server")
        .required(true)
        .args(["http", "config"]),
))]
pub struct LoginArgs {
    /// A server speaking streamable HTTP at this URL.
    #[arg(long, value_name = "URL")]
    http: Option<String>,
    /// An `mcpServers` JSON file; its `oauth` object (client_id, client_secret, scopes) is
    /// used.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server to use from --config (may be left out when the file has only one).
    #[arg(long, value_name = "NAME", requires = "config")]
    server: Option<String>,
    /// A scope to ask for (repeatable); default: what the server's challenge or metadata
    /// names.
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// Fetch the authorization URL and follow its redirects instead of opening a browser
    /// (for authorization servers that approve without a person).
    #[arg(long, conflicts_with = "print_url")]
    no_browser: bool,
    /// Print the authorization URL without opening a browser.
    #[arg(long)]
    print_url: bool,
    /// Forget the server's stored tokens instead of logging in.
    #[arg(long, conflicts_with_all = ["no_browser", "print_url", "scopes"])]
    logout: bool,
    #[command(flatten)]
    oauth: OAuthArgs,
}

/// OAuth flags shared by `toolbelt mcp login`, `tools` and `call`.
#[derive(Args, Debug, Clone, Default)]
pub struct OAuthArgs {
    /// On a 401, authorize by fetching the authorization URL and following its redirects,
    /// without a browser (for authorization servers that approve without a person).
    #[arg(long)]
    oauth_no_browser: bool,
    /// On a 401, authorize in the browser (the URL is printed on stderr too); the approval
    /// must come within --connect-timeout (`toolbelt mcp login` has no such limit).
    #[arg(long, conflicts_with = "oauth_no_browser")]
    oauth_browser: bool,
    /// On a 401, use the client credentials grant (no user; needs --oauth-client-id and
    /// TOOLBELT_OAUTH_CLIENT_SECRET): for machine clients.
    #[arg(long, conflicts_with_all = ["oauth_no_browser", "oauth_browser"])]
    oauth_client_credentials: bool,
    /// A client registered with the authorization server ahead of time (its secret, if it
    /// has one, from TOOLBELT_OAUTH_CLIENT_SECRET); default: register dynamically.
    #[arg(long, value_name = "ID")]
    oauth_client_id: Option<String>,
    /// The https URL of a client ID metadata document you host, used as the client id where
    /// the authorization server accepts them.
    #[arg(long, value_name = "URL")]
    oauth_client_metadata_url: Option<String>,
    /// The loopback port of the redirect URI, for a pre-registered client whose redirect URI
    /// names one; default: any free port.
    #[arg(long, value_name = "PORT")]
    oauth_redirect_port: Option<u16>,
}

impl OAuthArgs {
    /// Sets the OAuth settings of an HTTP server's configuration from the flags (a
    /// configuration file's `oauth` object is kept where no flag overrides it).
    pub fn apply(&self, config: &mut ConnectionConfig) -> Result<(), CliError> {
        let any = self.oauth_no_browser
            || self.oauth_browser
            || self.oauth_client_credentials
            || self.oauth_client_id.is_some()
            || self.oauth_client_metadata_url.is_some()
            || self.oauth_redirect_port.is_some();
        if !any {
            return Ok(());
        }
        if !matches!(config.transport, TransportConfig::StreamableHttp { .. }) {
            return Err(CliError::usage(
                "the --oauth-* flags apply to streamable HTTP servers (--http); a legacy SSE \
                 server takes a token with --header 'Authorization: Bearer …'",
            ));
        }
        let oauth = config.oauth.get_or_insert_with(OAuthConfig::default);
        if self.oauth_no_browser {
            oauth.authorize = AuthorizeMode::Follow;
        } else if self.oauth_browser {
            oauth.authorize = AuthorizeMode::Browser;
        } else if self.oauth_client_credentials {
            oauth.authorize = AuthorizeMode::ClientCredentials;
        }
        if let Some(client_id) = &self.oauth_client_id {
            oauth.client_id = Some(client_id.clone());
            oauth.client_secret = std::env::var(CLIENT_SECRET_VAR)
                .ok()
                .filter(|s| !s.is_empty());
        }
        if self.oauth_client_metadata_url.is_some() {
            oauth.client_metadata_url = self.oauth_client_metadata_url.clone();
        }
        if self.oauth_redirect_port.is_some() {
            oauth.redirect_port = self.oauth_redirect_port;
        }
        Ok(())
    }
}

/// Runs `toolbelt mcp login`.
pub async fn run(args: LoginArgs) -> Outcome {
    let (name, mut config) = connection(&args)?;
    if args.logout {
        let removed = logout(&name, &config).map_err(|e| CliError::failed(e.to_string()))?;
        eprintln!(
            "{}",
            if removed {
                format!("Forgot the tokens of {name}.")
            } else {
                format!("No tokens were stored for {name}.")
            }
        );
        return Ok(EXIT_OK);
    }
    args.oauth.apply(&mut config)?;
    if !args.scopes.is_empty() {
        config.oauth.get_or_insert_with(OAuthConfig::default).scopes = args.scopes.clone();
    }
    let mode = if args.oauth.oauth_client_credentials {
        AuthorizeMode::ClientCredentials
    } else if args.no_browser {
        AuthorizeMode::Follow
    } else if args.print_url {
        AuthorizeMode::Print
    } else {
        AuthorizeMode::Browser
    };
    let outcome = login(&name, &config, mode)
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    eprintln!(
        "Logged in to {name} (client {}, scopes: {}); tokens in {}",
        outcome.client_id,
        if outcome.scopes.is_empty() {
            "none named".to_string()
        } else {
            outcome.scopes.join(" ")
        },
        outcome.token_file.display()
    );
    // Prove the tokens work: the server lists its tools to them.
    let ctx = ToolContext::new();
    let set = McpToolSet::builder(name.as_str(), config)
        .build()
        .map_err(|e| CliError::usage(e.to_string()))?;
    let listed = set.tools(&ctx).await;
    if let Err(err) = set.close().await {
        tracing::warn!(server = name.as_str(), "closing failed: {err}");
    }
    let tools = listed.map_err(|e| CliError::failed(e.to_string()))?;
    match tools.len() {
        1 => eprintln!("The server lists 1 tool."),
        n => eprintln!("The server lists {n} tools."),
    }
    Ok(EXIT_OK)
}

fn connection(args: &LoginArgs) -> Result<(String, ConnectionConfig), CliError> {
    let (name, config) = if let Some(url) = &args.http {
        (
            url.clone(),
            ConnectionConfig::new(TransportConfig::streamable_http(url)),
        )
    } else if let Some(path) = &args.config {
        let in_file =
            |e: &dyn std::fmt::Display| CliError::usage(format!("{}: {e}", path.display()));
        let file = McpServersFile::load(path).map_err(|e| in_file(&e))?;
        let name = match (&args.server, &file.names()[..]) {
            (Some(name), _) => name.clone(),
            (None, [only]) => only.to_string(),
            (None, _) => return Err(in_file(&"choose a server with --server")),
        };
        let config = file.server(&name).map_err(|e| in_file(&e))?;
        (name, config)
    } else {
        return Err(CliError::usage("name a server with --http or --config"));
    };
    if !matches!(config.transport, TransportConfig::StreamableHttp { .. }) {
        return Err(CliError::usage(format!(
            "{name} is not a streamable HTTP server; OAuth is for those"
        )));
    }
    Ok((name, config.with_timeout(Duration::from_secs(30))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http() -> ConnectionConfig {
        ConnectionConfig::new(TransportConfig::streamable_http("https://mcp.example/mcp"))
    }

    #[test]
    fn without_oauth_flags_the_configuration_is_left_as_it_was() {
        let mut config = http();
        OAuthArgs::default().apply(&mut config).unwrap();
        assert!(
            config.oauth.is_none(),
            "stored tokens are still used; nothing else changes"
        );
    }

    #[test]
    fn oauth_flags_choose_how_a_401_is_answered_and_which_client_is_used() {
        let mut config = http();
        let args = OAuthArgs {
            oauth_no_browser: true,
            oauth_client_id: Some("app".into()),
            oauth_redirect_port: Some(8765),
            ..OAuthArgs::default()
        };
        args.apply(&mut config).unwrap();
        let oauth = config.oauth.unwrap();
        assert_eq!(oauth.authorize, AuthorizeMode::Follow);
        assert_eq!(oauth.client_id.as_deref(), Some("app"));
        assert_eq!(oauth.redirect_port, Some(8765));
    }

    #[test]
    fn oauth_flags_on_a_server_without_oauth_support_are_usage_errors() {
        let args = OAuthArgs {
            oauth_browser: true,
            ..OAuthArgs::default()
        };
        for transport in [
            TransportConfig::sse("https://mcp.example/sse"),
            TransportConfig::stdio("server", Vec::<String>::new()),
        ] {
            let err = args
                .apply(&mut ConnectionConfig::new(transport))
                .unwrap_err();
            assert_eq!(err.code, crate::common::EXIT_USAGE, "{}", err.message);
            assert!(err.message.contains("--header"), "{}", err.message);
        }
    }
}
