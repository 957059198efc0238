//! The authorization itself (discovery, client, PKCE, redirect, exchange) and the per
//! connection session that supplies bearer tokens, refreshes them and steps up scopes.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, ClientCredentialsConfig,
    OAuthClientConfig, WWWAuthenticateParams,
};
use tokio::sync::Mutex;
use url::{Host, Url};

use super::callback::CallbackListener;
use super::store::{TokenFile, TokenRecord};
use super::{AuthorizeMode, OAuthConfig};
use crate::config::{ConnectionConfig, TransportConfig};
use crate::error::{FailureKind, McpError, Step};

/// How long a login waits for the user to approve in the browser.
const APPROVAL_WAIT: Duration = Duration::from_secs(300);
/// How many new authorizations one connection may start (a first one and a step-up);
/// a server that keeps asking for more is refused instead of looping.
const MAX_AUTHORIZATIONS: u32 = 3;
/// How many redirects the no-browser follower takes before giving up.
const MAX_FOLLOWED_REDIRECTS: usize = 10;

/// Why a legacy SSE server cannot log in.
pub(crate) const SSE_HAS_NO_OAUTH: &str = "OAuth is supported on the streamable HTTP transport; \
     the legacy SSE transport takes a token as a header (Authorization: Bearer …)";

/// What [`login`] did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoginOutcome {
    /// The file the tokens were written to (mode 0600).
    pub token_file: PathBuf,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The client id used (pre-registered or registered now).
    pub client_id: String,
}

/// Authorizes with the server of `config` now, and stores its tokens for later
/// connections. `mode` says how the user approves ([`AuthorizeMode::Never`] is refused).
pub async fn login(
    server: &str,
    config: &ConnectionConfig,
    mode: AuthorizeMode,
) -> Result<LoginOutcome, McpError> {
    let fail =
        |message: String| McpError::new(server, Step::Connect, FailureKind::Configuration, message);
    let url = match &config.transport {
        TransportConfig::StreamableHttp { url, .. } => url.as_str(),
        TransportConfig::Sse { .. } => return Err(fail(SSE_HAS_NO_OAUTH.into())),
        TransportConfig::Stdio { .. } => {
            return Err(fail(
                "OAuth applies to HTTP servers, not to stdio ones".into(),
            ));
        }
    };
    if mode == AuthorizeMode::Never {
        return Err(fail(
            "a login needs a way to approve: browser, print or follow".into(),
        ));
    }
    let oauth = config.oauth.clone().unwrap_or_default();
    let file = token_file(url, &oauth).map_err(fail)?;
    let challenge = probe_challenge(url).await;
    let manager = authorize(url, &file, &oauth, mode, challenge.as_deref(), &[])
        .await
        .map_err(fail)?;
    let record = file.read().map_err(fail)?;
    Ok(LoginOutcome {
        token_file: file.path().to_path_buf(),
        scopes: manager.get_current_scopes().await,
        client_id: record.map(|r| r.client_id).unwrap_or_default(),
    })
}

/// Forgets the stored tokens of the server of `config`; whether there were any.
pub fn logout(server: &str, config: &ConnectionConfig) -> Result<bool, McpError> {
    let fail =
        |message: String| McpError::new(server, Step::Close, FailureKind::Configuration, message);
    let url = match &config.transport {
        TransportConfig::StreamableHttp { url, .. } | TransportConfig::Sse { url, .. } => url,
        TransportConfig::Stdio { .. } => return Ok(false),
    };
    let oauth = config.oauth.clone().unwrap_or_default();
    token_file(url, &oauth)
        .map_err(fail)?
        .remove()
        .map_err(fail)
}

fn token_file(url: &str, oauth: &OAuthConfig) -> Result<TokenFile, String> {
    let dir = oauth.token_dir().ok_or_else(|| {
        format!(
            "no directory for OAuth tokens: set HOME, XDG_STATE_HOME or {}",
            super::TOKEN_DIR_VAR
        )
    })?;
    Ok(TokenFile::new(&dir, url))
}

/// The server's `WWW-Authenticate` challenge to an unauthenticated request, if it sends
/// one (it names the resource metadata and the scopes it wants).
async fn probe_challenge(url: &str) -> Option<String> {
    let request = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"toolbelt","version":"0"}}}"#,
        );
    let response = request.send().await.ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)?
        .to_str()
        .ok()
        .map(str::to_string)
}

/// Refuses plain `http` except on loopback hosts, where nothing crosses a network.
fn require_secure(what: &str, address: &str) -> Result<(), String> {
    let url =
        Url::parse(address).map_err(|err| format!("{what} {address:?} is not a URL: {err}"))?;
    let loopback = match url.host() {
        Some(Host::Domain(domain)) => {
            let domain = domain.trim_end_matches('.').to_ascii_lowercase();
            domain == "localhost" || domain.ends_with(".localhost")
        }
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!(
            "{what} {address} is not https: OAuth needs https except on loopback addresses"
        )),
    }
}

fn check_endpoints(metadata: &AuthorizationMetadata) -> Result<(), String> {
    require_secure(
        "the authorization endpoint",
        &metadata.authorization_endpoint,
    )?;
    require_secure("the token endpoint", &metadata.token_endpoint)?;
    if let Some(registration) = &metadata.registration_endpoint {
        require_secure("the registration endpoint", registration)?;
    }
    Ok(())
}

/// rmcp's errors, worded for a user; none of them carries a token.
fn describe(err: AuthError) -> String {
    match err {
        AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        } => format!(
            "the authorization server's metadata names issuer {received_issuer}, not {expected_issuer}: refused"
        ),
        other => other.to_string(),
    }
}

/// One whole authorization: discovery, the client, the user's approval, the exchange. The
/// tokens end in `file`; the returned manager uses them.
///
/// `previous_scopes` are those of the grant being stepped up (empty for a first login).
async fn authorize(
    url: &str,
    file: &TokenFile,
    oauth: &OAuthConfig,
    mode: AuthorizeMode,
    challenge: Option<&str>,
    previous_scopes: &[String],
) -> Result<AuthorizationManager, String> {
    if mode == AuthorizeMode::Never {
        return Err("the server needs authorization: log in first (toolbelt mcp login)".into());
    }
    require_secure("the MCP server", url)?;
    let mut manager = AuthorizationManager::new(url).await.map_err(describe)?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(describe)?;
    if !resolution.source.is_discovered() {
        if challenge.is_none() {
            return Err(format!(
                "{url} asks for no authorization and publishes no OAuth metadata: it does not use OAuth"
            ));
        }
        tracing::info!("{url} publishes no OAuth metadata; using the default endpoints");
    }
    let metadata = resolution.metadata;
    check_endpoints(&metadata)?;
    manager.set_metadata(metadata.clone());

    let scopes = if !oauth.scopes.is_empty() {
        let mut scopes = previous_scopes.to_vec();
        scopes.extend(oauth.scopes.iter().cloned());
        let challenged = challenge
            .and_then(|c| {
                Url::parse(url)
                    .ok()
                    .map(|base| WWWAuthenticateParams::parse(c, &base))
            })
            .and_then(|params| params.scope);
        scopes.extend(
            challenged
                .iter()
                .flat_map(|s| s.split_whitespace().map(str::to_string)),
        );
        dedup(scopes)
    } else if previous_scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        manager.select_scopes(Some(&previous_scopes.join(" ")), &[])
    };
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    if mode == AuthorizeMode::ClientCredentials {
        return client_credentials(manager, url, file, oauth, metadata, scopes).await;
    }

    let listener = CallbackListener::bind(oauth.redirect_port.unwrap_or(0))
        .await
        .map_err(|err| format!("cannot listen on 127.0.0.1 for the redirect: {err}"))?;
    let redirect_uri = listener.redirect_uri().to_string();

    // The client: pre-registered, else a client ID metadata document the server accepts,
    // else a dynamic registration (the MCP specification's order).
    let accepts_metadata_documents = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let client = match (&oauth.client_id, &oauth.client_metadata_url) {
        (Some(client_id), _) => {
            let mut client =
                OAuthClientConfig::new(client_id, &redirect_uri).with_scopes(scopes.clone());
            if let Some(secret) = &oauth.client_secret {
                client = client.with_client_secret(secret);
            }
            manager.configure_client(client.clone()).map_err(describe)?;
            client
        }
        (None, Some(document)) if accepts_metadata_documents => {
            if !document.starts_with("https://") {
                return Err(format!(
                    "the client metadata document {document} must be an https URL"
                ));
            }
            let client =
                OAuthClientConfig::new(document, &redirect_uri).with_scopes(scopes.clone());
            manager.configure_client(client.clone()).map_err(describe)?;
            client
        }
        _ => manager
            .register_client(
                oauth.client_name.as_deref().unwrap_or("toolbelt"),
                &redirect_uri,
                &scope_refs,
            )
            .await
            .map_err(|err| format!("dynamic client registration failed: {}", describe(err)))?,
    };
    let authorization_url = manager
        .get_authorization_url(&scope_refs)
        .await
        .map_err(describe)?;
    let state = Url::parse(&authorization_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or("the authorization URL carries no state")?;

    // The file learns the metadata and the client first (keeping any tokens it has until
    // new ones replace them), so the exchange below can save the tokens beside them.
    let previous = file.read()?;
    file.write(&TokenRecord {
        url: url.to_string(),
        metadata,
        client_id: client.client_id.clone(),
        client_secret: client.client_secret.clone(),
        credentials: previous.and_then(|r| r.credentials),
    })?;
    manager.set_credential_store(file.clone());

    let approved = async {
        tokio::time::timeout(APPROVAL_WAIT, listener.wait(&state))
            .await
            .map_err(|_| format!("no approval arrived within {}s", APPROVAL_WAIT.as_secs()))?
    };
    let callback = match mode {
        AuthorizeMode::Never
        | AuthorizeMode::Browser
        | AuthorizeMode::Print
        | AuthorizeMode::ClientCredentials => {
            eprintln!("Open this URL to authorize toolbelt:\n\n    {authorization_url}\n");
            if mode == AuthorizeMode::Browser {
                open_browser(&authorization_url);
            }
            approved.await?
        }
        AuthorizeMode::Follow => {
            let follower = follow(&authorization_url, &redirect_uri);
            tokio::pin!(approved, follower);
            // Biased: when the listener has its answer (a code or the server's refusal), that
            // answer wins over the follower's view of the same redirect.
            tokio::select! {
                biased;
                callback = &mut approved => callback?,
                Err(problem) = &mut follower => return Err(problem),
            }
        }
    };
    manager
        .exchange_code_for_token_with_issuer(&callback.code, &state, callback.issuer.as_deref())
        .await
        .map_err(|err| format!("the token exchange failed: {}", describe(err)))?;
    Ok(manager)
}

/// The client credentials grant: the configured client authenticates itself, no user takes
/// part. The token is requested for the server's URL (RFC 8707) and stored like any other.
async fn client_credentials(
    mut manager: AuthorizationManager,
    url: &str,
    file: &TokenFile,
    oauth: &OAuthConfig,
    metadata: AuthorizationMetadata,
    scopes: Vec<String>,
) -> Result<AuthorizationManager, String> {
    let (Some(client_id), Some(client_secret)) = (&oauth.client_id, &oauth.client_secret) else {
        return Err("the client credentials grant needs a client id and its secret".into());
    };
    let grant = ClientCredentialsConfig::ClientSecret {
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scopes,
        resource: Some(url.to_string()),
    };
    manager
        .configure_client_credentials(&grant)
        .map_err(describe)?;
    let previous = file.read()?;
    file.write(&TokenRecord {
        url: url.to_string(),
        metadata,
        client_id: client_id.clone(),
        client_secret: Some(client_secret.clone()),
        credentials: previous.and_then(|r| r.credentials),
    })?;
    manager.set_credential_store(file.clone());
    manager
        .exchange_client_credentials(&grant)
        .await
        .map_err(|err| format!("the client credentials grant failed: {}", describe(err)))?;
    Ok(manager)
}

fn dedup(scopes: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    scopes
        .into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect()
}

/// Opens `url` in the user's browser; failing that, the printed URL is enough.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped in the background so no zombie is left.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(err) => {
            tracing::info!("could not open a browser ({opener}: {err}); open the URL yourself")
        }
    }
}

/// Fetches the authorization URL as a browser would and follows its redirects, each of
/// them https or loopback, until one goes to the redirect URI, which is then delivered to
/// the listener. Ends with an error when the server answers without redirecting back (it
/// wants a person); never returns `Ok` before the delivery.
async fn follow(authorization_url: &str, redirect_uri: &str) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|err| err.to_string())?;
    let mut current = Url::parse(authorization_url).map_err(|err| err.to_string())?;
    for _ in 0..MAX_FOLLOWED_REDIRECTS {
        require_secure("an authorization redirect", current.as_str())?;
        let response = client
            .get(current.clone())
            .send()
            .await
            .map_err(|err| format!("fetching the authorization URL failed: {err}"))?;
        if current.as_str().starts_with(redirect_uri) {
            // The listener refuses a redirect that is not this login's; waiting on would
            // only time out.
            return match response.status() {
                status if status.is_success() => Ok(()),
                _ => Err("the redirect back was refused: its state is not this login's".into()),
            };
        }
        let status = response.status();
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .filter(|_| status.is_redirection());
        let Some(location) = location else {
            return Err(format!(
                "the authorization server answered {status} without redirecting back: it wants a person to approve (use a browser)"
            ));
        };
        current = current
            .join(location)
            .map_err(|err| format!("a bad redirect {location:?}: {err}"))?;
    }
    Err(format!(
        "more than {MAX_FOLLOWED_REDIRECTS} redirects from the authorization server"
    ))
}

/// A connection's OAuth state: the stored tokens of its URL, and how to get new ones.
pub(crate) struct OAuthSession {
    url: String,
    config: OAuthConfig,
    state: Mutex<SessionState>,
}

#[derive(Default)]
struct SessionState {
    loaded: bool,
    file: Option<TokenFile>,
    manager: Option<AuthorizationManager>,
    authorizations: u32,
}

impl OAuthSession {
    /// The session for `url`; `config` is the server's `oauth` settings (none: stored
    /// tokens only).
    pub fn new(url: &str, config: Option<&OAuthConfig>) -> Self {
        Self {
            url: url.to_string(),
            config: config.cloned().unwrap_or_default(),
            state: Mutex::default(),
        }
    }

    /// Reads the token file once; a manager is built from it when it holds tokens.
    async fn load(&self, state: &mut SessionState) -> Result<(), AuthError> {
        if state.loaded {
            return Ok(());
        }
        state.loaded = true;
        let Ok(file) = token_file(&self.url, &self.config) else {
            return Ok(());
        };
        let record = file.read().map_err(AuthError::CredentialStoreError)?;
        if let Some(record) = record.filter(|r| r.credentials.is_some()) {
            let mut manager = AuthorizationManager::new(self.url.as_str()).await?;
            manager.set_metadata(record.metadata);
            // The redirect URI plays no part in refreshing.
            let mut client = OAuthClientConfig::new(record.client_id, "http://127.0.0.1/callback");
            if let Some(secret) = record.client_secret {
                client = client.with_client_secret(secret);
            }
            manager.configure_client(client)?;
            manager.set_credential_store(file.clone());
            state.manager = Some(manager);
        }
        state.file = Some(file);
        Ok(())
    }

    /// The access token to send, refreshed first when it has expired; `None` without one.
    pub async fn bearer(&self) -> Result<Option<String>, AuthError> {
        let mut state = self.state.lock().await;
        self.load(&mut state).await?;
        let Some(manager) = &state.manager else {
            return Ok(None);
        };
        match manager.get_access_token().await {
            Ok(token) => Ok(Some(token)),
            Err(AuthError::AuthorizationRequired) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// After a 401 to a request that carried `sent`: a token to retry with (another
    /// request's fresh one, a refreshed one, or one from a new authorization when the
    /// configuration allows it), or `None` to give the 401 to the caller.
    pub async fn unauthorized(
        &self,
        challenge: &str,
        sent: Option<&str>,
    ) -> Result<Option<String>, AuthError> {
        let mut state = self.state.lock().await;
        self.load(&mut state).await?;
        if let Some(manager) = &state.manager {
            if let Ok(current) = manager.get_access_token().await
                && Some(current.as_str()) != sent
            {
                return Ok(Some(current));
            }
            if sent.is_some() && manager.refresh_token().await.is_ok() {
                return manager.get_access_token().await.map(Some);
            }
        }
        self.reauthorize(&mut state, challenge, &[]).await
    }

    /// After a 403: when the challenge says `insufficient_scope`, a token from a new
    /// authorization asking for the granted scopes plus the challenged ones (step-up).
    pub async fn insufficient_scope(&self, challenge: &str) -> Result<Option<String>, AuthError> {
        let base = Url::parse(&self.url)?;
        if !WWWAuthenticateParams::parse(challenge, &base).is_insufficient_scope() {
            return Ok(None);
        }
        let mut state = self.state.lock().await;
        self.load(&mut state).await?;
        let granted = match &state.file {
            Some(file) => file
                .read()
                .ok()
                .flatten()
                .and_then(|r| r.credentials)
                .map(|c| c.granted_scopes)
                .unwrap_or_default(),
            None => Vec::new(),
        };
        self.reauthorize(&mut state, challenge, &granted).await
    }

    async fn reauthorize(
        &self,
        state: &mut SessionState,
        challenge: &str,
        previous_scopes: &[String],
    ) -> Result<Option<String>, AuthError> {
        if self.config.authorize == AuthorizeMode::Never {
            return Ok(None);
        }
        if state.authorizations >= MAX_AUTHORIZATIONS {
            tracing::warn!(
                "{}: the server keeps asking for authorization; giving up",
                self.url
            );
            return Ok(None);
        }
        state.authorizations += 1;
        let file = match &state.file {
            Some(file) => file.clone(),
            None => token_file(&self.url, &self.config).map_err(AuthError::CredentialStoreError)?,
        };
        let manager = authorize(
            &self.url,
            &file,
            &self.config,
            self.config.authorize,
            Some(challenge),
            previous_scopes,
        )
        .await
        .map_err(AuthError::AuthorizationFailed)?;
        let token = manager.get_access_token().await?;
        state.manager = Some(manager);
        state.file = Some(file);
        Ok(Some(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_refused_except_on_loopback() {
        assert!(require_secure("x", "https://auth.example/token").is_ok());
        assert!(require_secure("x", "http://127.0.0.1:9/token").is_ok());
        assert!(require_secure("x", "http://localhost:9/token").is_ok());
        assert!(require_secure("x", "http://[::1]:9/token").is_ok());
        let err = require_secure("the token endpoint", "http://auth.example/token").unwrap_err();
        assert!(err.contains("not https"), "{err}");
        assert!(require_secure("x", "http://10.0.0.1/token").is_err());
        assert!(require_secure("x", "ftp://127.0.0.1/token").is_err());
    }
}
