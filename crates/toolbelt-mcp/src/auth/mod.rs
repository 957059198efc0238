//! OAuth 2.1 for the HTTP transports, on rmcp's authorization support.
//!
//! A server that answers `401` with `WWW-Authenticate: Bearer resource_metadata=…` is
//! authorized the way the MCP specification describes: protected resource metadata
//! (RFC 9728, from the challenge or the well-known URL), authorization server metadata
//! (RFC 8414 or OpenID discovery, its `issuer` checked), a client from the configuration
//! ([`OAuthConfig::client_id`]), a client ID metadata document
//! ([`OAuthConfig::client_metadata_url`]) or dynamic registration (RFC 7591), the authorization code
//! flow with PKCE (S256) and the `resource` parameter (RFC 8707), scopes from the challenge
//! or the metadata, a loopback redirect listener on 127.0.0.1, and the token exchange.
//! Tokens are kept per server in a file of mode 0600 (see [`default_token_dir`]) and used
//! by every later connection to that URL: refreshed when they expire or are rejected, and
//! re-authorized with the union of scopes when the server answers
//! `403 insufficient_scope` (step-up), when [`OAuthConfig::authorize`] allows a new
//! authorization.
//!
//! [`login`] authorizes ahead of time (what `toolbelt mcp login` runs); a connection whose
//! configuration sets [`ConnectionConfig::oauth`](crate::ConnectionConfig::oauth) with an
//! [`AuthorizeMode`] other than [`AuthorizeMode::Never`] authorizes on its first 401.
//!
//! ## Safety
//! - Tokens never appear in logs, errors or command lines; the token file is written
//!   atomically with mode 0600 in a 0700 directory, and is used only for the URL it
//!   records.
//! - The server URL and every endpoint of the authorization server must be `https`, except
//!   on loopback hosts (`localhost`, `127.0.0.0/8`, `[::1]`) where `http` is accepted.
//! - Metadata whose `issuer` does not match the authorization server it was fetched for is
//!   refused (rmcp checks it), and rmcp refuses metadata URLs on private, link-local or
//!   cloud-metadata addresses unless the server itself is on one.
//! - The redirect listener binds 127.0.0.1 only, refuses a redirect whose `state` is not
//!   this login's, and closes after the one code.

mod callback;
mod flow;
mod store;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub(crate) use flow::OAuthSession;
pub use flow::{LoginOutcome, login, logout};
pub use store::{TOKEN_DIR_VAR, default_token_dir};

/// How a new authorization is carried out when a server asks for one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuthorizeMode {
    /// Never start an authorization during a connection: use the stored tokens (refreshing
    /// them), and fail on a 401 without them (log in first with [`login`]).
    #[default]
    Never,
    /// Print the authorization URL on stderr and open it in the user's browser.
    Browser,
    /// Print the authorization URL on stderr and wait for the redirect.
    Print,
    /// Fetch the authorization URL without a browser and follow its redirects to the
    /// loopback listener: for authorization servers that approve without asking a person
    /// (test servers, CI, pre-approved clients). Never for a server that shows a login
    /// page: the redirect never comes and the wait times out.
    Follow,
    /// No user at all: the client credentials grant with the configured
    /// [`client_id`](OAuthConfig::client_id) and [`client_secret`](OAuthConfig::client_secret)
    /// (machine-to-machine clients, MCP's `client_credentials` extension).
    ClientCredentials,
}

/// OAuth settings of one server (the `oauth` object of its configuration).
///
/// ```
/// let config: toolbelt_mcp::OAuthConfig = serde_json::from_str(
///     r#"{"client_id": "my-app", "scopes": ["files:read"], "authorize": "browser"}"#,
/// )?;
/// assert_eq!(config.authorize, toolbelt_mcp::AuthorizeMode::Browser);
/// // As Claude Code writes it:
/// let config: toolbelt_mcp::OAuthConfig =
///     serde_json::from_str(r#"{"clientId": "my-app", "callbackPort": 8765}"#)?;
/// assert_eq!(config.redirect_port, Some(8765));
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// The camel-case names other clients write in `mcpServers` files (`clientId`,
/// `clientSecret`, `callbackPort`) are read too, and fields this crate does not know are
/// ignored, so one file serves them all.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthConfig {
    /// A client registered with the authorization server ahead of time; without one the
    /// client registers itself dynamically (RFC 7591).
    #[serde(default, alias = "clientId", skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The secret of a pre-registered confidential client.
    #[serde(
        default,
        alias = "clientSecret",
        skip_serializing_if = "Option::is_none"
    )]
    pub client_secret: Option<String>,
    /// The https URL of a client ID metadata document you host, used as the client id by
    /// authorization servers that accept them (`client_id_metadata_document_supported`)
    /// when no [`client_id`](Self::client_id) is set; others get a dynamic registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for; empty: the challenge's, else the protected resource's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The name sent with a dynamic registration (default `toolbelt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// The loopback port of the redirect URI (default: any free port; a pre-registered
    /// client whose redirect URI names a port needs it).
    #[serde(
        default,
        alias = "callbackPort",
        skip_serializing_if = "Option::is_none"
    )]
    pub redirect_port: Option<u16>,
    /// Whether and how a connection authorizes on a 401 (default: never; use [`login`]).
    #[serde(default)]
    pub authorize: AuthorizeMode,
    /// Where the token files are (default [`default_token_dir`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_dir: Option<PathBuf>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("client_name", &self.client_name)
            .field("redirect_port", &self.redirect_port)
            .field("authorize", &self.authorize)
            .field("token_dir", &self.token_dir)
            .finish()
    }
}

impl OAuthConfig {
    /// Settings that authorize on a 401 in `mode`, with a dynamically registered client.
    pub fn authorizing(mode: AuthorizeMode) -> Self {
        Self {
            authorize: mode,
            ..Self::default()
        }
    }

    /// The directory of the token files, if one can be found.
    pub fn token_dir(&self) -> Option<PathBuf> {
        self.token_dir.clone().or_else(default_token_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::McpServersFile;

    #[test]
    fn an_mcp_servers_entry_carries_oauth_settings_with_variables_expanded() {
        let file = McpServersFile::parse_with(
            r#"{"mcpServers": {
                "ours": {"type": "http", "url": "https://mcp.example/mcp",
                         "oauth": {"client_id": "app", "client_secret": "${SECRET}",
                                   "scopes": ["read"], "authorize": "print"}},
                "theirs": {"type": "http", "url": "https://other.example/mcp",
                           "oauth": {"clientId": "cc-app", "callbackPort": 8765,
                                     "authServerMetadataUrl": "https://auth.example/x"}}
            }}"#,
            |name| (name == "SECRET").then(|| "s3cret".to_string()),
        )
        .unwrap();
        let ours = file.server("ours").unwrap().oauth.unwrap();
        assert_eq!(ours.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(ours.scopes, ["read"]);
        assert_eq!(ours.authorize, AuthorizeMode::Print);
        assert!(
            !format!("{ours:?}").contains("s3cret"),
            "the secret is never in debug output"
        );
        let theirs = file.server("theirs").unwrap().oauth.unwrap();
        assert_eq!(theirs.client_id.as_deref(), Some("cc-app"));
        assert_eq!(theirs.redirect_port, Some(8765));
        assert_eq!(theirs.authorize, AuthorizeMode::Never);
    }
}
