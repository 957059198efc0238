//! OAuth 2.1 against a real authorization server and a protected MCP server on 127.0.0.1
//! (see `oauth_support`): discovery from the 401, registration, PKCE, the code exchange,
//! the call; refresh; step-up on `insufficient_scope`; tokens in a 0600 file that the next
//! connection uses without a new login; a forged `state` and a foreign issuer refused.
#![cfg(feature = "server")]

use crate::oauth_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use oauth_support::{ADMIN_SCOPE, OAuthWorld, PRE_CLIENT_ID, PRE_CLIENT_SECRET, READ_SCOPE, Twist};
use toolbelt_core::{ToolContext, ToolSet};
use toolbelt_mcp::auth::login;
use toolbelt_mcp::{AuthorizeMode, ConnectionConfig, McpToolSet, OAuthConfig, TransportConfig};

pub(crate) fn config(world: &OAuthWorld, tokens: &Path, mode: AuthorizeMode) -> ConnectionConfig {
    config_for(&world.mcp_url, tokens, mode)
}

pub(crate) fn config_for(url: &str, tokens: &Path, mode: AuthorizeMode) -> ConnectionConfig {
    ConnectionConfig::new(TransportConfig::streamable_http(url))
        .with_timeout(Duration::from_secs(30))
        .with_oauth(OAuthConfig {
            authorize: mode,
            token_dir: Some(tokens.to_path_buf()),
            ..OAuthConfig::default()
        })
}

/// A login (as `toolbelt mcp login` runs it) that follows the authorization in a browser,
/// for the server of `world`, keeping tokens in `tokens`.
pub(crate) async fn login_in_browser(
    world: &OAuthWorld,
    tokens: &Path,
) -> Result<toolbelt_mcp::auth::LoginOutcome, toolbelt_mcp::McpError> {
    login(
        "protected",
        &config(world, tokens, AuthorizeMode::Never),
        AuthorizeMode::Follow,
    )
    .await
}

/// `config` with the client the authorization server knows in advance (id and secret).
fn preregistered(mut config: ConnectionConfig) -> ConnectionConfig {
    if let Some(oauth) = config.oauth.as_mut() {
        oauth.client_id = Some(PRE_CLIENT_ID.into());
        oauth.client_secret = Some(PRE_CLIENT_SECRET.into());
    }
    config
}

/// Calls `tool` with `{"text": text}` on a new connection; the text it answered.
pub(crate) async fn call(
    config: ConnectionConfig,
    tool: &str,
    text: &str,
) -> Result<String, String> {
    let set = McpToolSet::builder("protected", config).build().unwrap();
    let ctx = ToolContext::for_call("c1");
    let result = async {
        let tools = set.tools(&ctx).await.map_err(|e| e.to_string())?;
        let tool = tools
            .iter()
            .find(|t| t.declaration().name.as_str() == tool)
            .ok_or_else(|| format!("no tool {tool}"))?;
        let args = serde_json::json!({ "text": text }).to_string();
        let output = tool
            .call(ctx.clone(), &args)
            .await
            .map_err(|e| e.to_string())?;
        Ok(output.llm_text())
    }
    .await;
    set.close().await.unwrap();
    result
}

/// The token files in `dir` (not the refresh lock files beside them).
fn token_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_401_leads_through_discovery_registration_and_pkce_to_a_successful_call() {
    let world = OAuthWorld::start(Twist::None).await;
    let tokens = tempfile::tempdir().unwrap();
    let answer = call(
        config(&world, tokens.path(), AuthorizeMode::Follow),
        "echo",
        "hi",
    )
    .await;
    assert_eq!(answer.unwrap(), "hi");

    let log = world.log();
    assert!(log.count("mcp:401") >= 1, "{:?}", log.events);
    for step in [
        "prm",
        "as-metadata",
        "register",
        "authorize",
        "token:authorization_code",
    ] {
        assert_eq!(log.count(step), 1, "{step}: {:?}", log.events);
    }
    let authorization = &log.authorizations[0];
    assert_eq!(authorization["code_challenge_method"], "S256");
    assert!(!authorization["code_challenge"].is_empty());
    assert_eq!(
        authorization["resource"], world.mcp_url,
        "RFC 8707 resource"
    );
    assert_eq!(authorization["scope"], READ_SCOPE, "the challenge's scope");
    assert!(authorization["redirect_uri"].starts_with("http://127.0.0.1:"));
    // The token endpoint checked the verifier against the challenge; the MCP server saw
    // the token it issued.
    assert!(log.token_requests[0].contains_key("code_verifier"));
    assert!(log.bearers.iter().any(|b| b.starts_with("access-")));
}

/// Set in the second process of the token-reuse test: the MCP server's URL, and the token
/// directory.
const CHILD_URL: &str = "TOOLBELT_OAUTH_TEST_CHILD_URL";
const CHILD_DIR: &str = "TOOLBELT_OAUTH_TEST_CHILD_DIR";

#[tokio::test(flavor = "multi_thread")]
async fn tokens_are_kept_in_a_private_file_and_used_by_the_next_process_without_a_login() {
    if let (Ok(url), Ok(dir)) = (std::env::var(CHILD_URL), std::env::var(CHILD_DIR)) {
        // The second process: nothing but the token file is shared with the first, and it
        // has no way to authorize.
        let answer = call(
            config_for(&url, Path::new(&dir), AuthorizeMode::Never),
            "echo",
            "again",
        );
        println!("child answered: {}", answer.await.unwrap());
        return;
    }
    let world = OAuthWorld::start(Twist::None).await;
    let temp = tempfile::tempdir().unwrap();
    let tokens = temp.path().join("state/oauth");
    let outcome = login_in_browser(&world, &tokens).await.unwrap();
    assert_eq!(
        token_files(&tokens),
        std::slice::from_ref(&outcome.token_file)
    );
    let mode = std::fs::metadata(&outcome.token_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the token file is the owner's only");
    let dir_mode = std::fs::metadata(&tokens).unwrap().permissions().mode();
    assert_eq!(
        dir_mode & 0o777,
        0o700,
        "a token directory it creates is private"
    );
    let stored = std::fs::read_to_string(&outcome.token_file).unwrap();
    assert!(
        stored.contains("access-"),
        "the file holds the access token"
    );

    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            toolbelt_testkit::test_name(
                module_path!(),
                "tokens_are_kept_in_a_private_file_and_used_by_the_next_process_without_a_login",
            )
            .as_str(),
            "--nocapture",
        ])
        .env(CHILD_URL, &world.mcp_url)
        .env(CHILD_DIR, &tokens)
        .output();
    let child = tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("the second process finishes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("child answered: again"),
        "second process: {}\n{stdout}\n{}",
        child.status,
        String::from_utf8_lossy(&child.stderr)
    );
    let log = world.log();
    assert_eq!(log.count("authorize"), 1, "{:?}", log.events);
    assert_eq!(log.count("register"), 1, "{:?}", log.events);
    assert!(
        log.count("mcp") >= 3,
        "the second process was served: {:?}",
        log.events
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_access_token_is_refreshed_and_the_call_goes_through() {
    let world = OAuthWorld::start(Twist::None).await;
    let tokens = tempfile::tempdir().unwrap();
    login_in_browser(&world, tokens.path()).await.unwrap();
    world.expire_access_tokens();

    let answer = call(
        config(&world, tokens.path(), AuthorizeMode::Never),
        "echo",
        "fresh",
    )
    .await;
    assert_eq!(answer.unwrap(), "fresh");
    let log = world.log();
    assert_eq!(log.count("token:refresh_token"), 1, "{:?}", log.events);
    assert_eq!(
        log.count("authorize"),
        1,
        "refreshing needs no new login: {:?}",
        log.events
    );
    // The refreshed token was written back for the next process.
    let stored = std::fs::read_to_string(&token_files(tokens.path())[0]).unwrap();
    let newest = log.bearers.last().unwrap();
    assert!(
        stored.contains(newest.as_str()),
        "the file holds the refreshed token"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_403_insufficient_scope_steps_up_to_the_union_of_scopes() {
    let world = OAuthWorld::start(Twist::None).await;
    let tokens = tempfile::tempdir().unwrap();
    let answer = call(
        config(&world, tokens.path(), AuthorizeMode::Follow),
        "admin_echo",
        "root",
    )
    .await;
    assert_eq!(answer.unwrap(), "root");
    let log = world.log();
    assert_eq!(log.count("mcp:403"), 1, "{:?}", log.events);
    assert_eq!(log.count("authorize"), 2, "{:?}", log.events);
    let second: Vec<&str> = log.authorizations[1]["scope"].split(' ').collect();
    assert!(
        second.contains(&READ_SCOPE) && second.contains(&ADMIN_SCOPE),
        "{second:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_way_to_authorize_a_401_fails_and_says_so() {
    let world = OAuthWorld::start(Twist::None).await;
    let tokens = tempfile::tempdir().unwrap();
    let err = call(
        config(&world, tokens.path(), AuthorizeMode::Never),
        "echo",
        "x",
    )
    .await
    .unwrap_err();
    assert!(err.to_lowercase().contains("auth"), "{err}");
    assert!(token_files(tokens.path()).is_empty());
    assert_eq!(world.log().count("authorize"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preregistered_confidential_client_skips_registration() {
    let world = OAuthWorld::start(Twist::None).await;
    let tokens = tempfile::tempdir().unwrap();
    let config = preregistered(config(&world, tokens.path(), AuthorizeMode::Follow));
    assert_eq!(call(config.clone(), "echo", "pre").await.unwrap(), "pre");
    let log = world.log();
    assert_eq!(log.count("register"), 0, "{:?}", log.events);
    assert_eq!(log.authorizations[0]["client_id"], PRE_CLIENT_ID);
    // The secret is not in the configuration's debug form (which may be logged).
    let debug = format!("{config:?}");
    assert!(!debug.contains(PRE_CLIENT_SECRET), "{debug}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_client_uses_the_client_credentials_grant_without_a_user() {
    let world = OAuthWorld::start(Twist::None).await;
    let tokens = tempfile::tempdir().unwrap();
    let config = preregistered(config(
        &world,
        tokens.path(),
        AuthorizeMode::ClientCredentials,
    ));
    assert_eq!(call(config, "echo", "m2m").await.unwrap(), "m2m");
    let log = world.log();
    assert_eq!(log.count("token:client_credentials"), 1, "{:?}", log.events);
    assert_eq!(
        log.count("authorize") + log.count("register"),
        0,
        "{:?}",
        log.events
    );
    let request = &log.token_requests[0];
    assert_eq!(request["resource"], world.mcp_url, "RFC 8707 resource");
    assert_eq!(request["scope"], READ_SCOPE, "the challenge's scope");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_metadata_document_is_the_client_id_where_the_server_accepts_one() {
    const DOCUMENT: &str = "https://client.example/toolbelt.json";
    for (twist, registrations) in [(Twist::MetadataDocuments, 0), (Twist::None, 1)] {
        let world = OAuthWorld::start(twist).await;
        let tokens = tempfile::tempdir().unwrap();
        let mut config = config(&world, tokens.path(), AuthorizeMode::Follow);
        if let Some(oauth) = config.oauth.as_mut() {
            oauth.client_metadata_url = Some(DOCUMENT.into());
        }
        assert_eq!(call(config, "echo", "doc").await.unwrap(), "doc");
        let log = world.log();
        assert_eq!(
            log.count("register"),
            registrations,
            "{twist:?}: {:?}",
            log.events
        );
        let used = log.authorizations[0]["client_id"] == DOCUMENT;
        assert_eq!(used, registrations == 0, "{twist:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_with_a_forged_state_is_refused_and_no_token_is_stored() {
    let world = OAuthWorld::start(Twist::WrongState).await;
    let tokens = tempfile::tempdir().unwrap();
    let err = login_in_browser(&world, tokens.path()).await.unwrap_err();
    assert!(err.to_string().contains("state"), "{err}");
    let log = world.log();
    assert_eq!(
        log.count("token:authorization_code"),
        0,
        "the forged code is never exchanged"
    );
    for file in token_files(tokens.path()) {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(!text.contains("access-"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_naming_another_issuer_is_refused_before_any_token_request() {
    let world = OAuthWorld::start(Twist::WrongIssuer).await;
    let tokens = tempfile::tempdir().unwrap();
    let err = login_in_browser(&world, tokens.path()).await.unwrap_err();
    assert!(err.to_string().contains("issuer"), "{err}");
    let log = world.log();
    assert_eq!(log.count("register"), 0, "{:?}", log.events);
    assert_eq!(log.count("authorize"), 0, "{:?}", log.events);
}

/// A log sink for [`tokens_never_reach_the_logs`].
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn tokens_never_reach_the_logs() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .finish();
    // One thread, so every task's events reach this subscriber.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let log = tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let world = OAuthWorld::start(Twist::None).await;
            let tokens = tempfile::tempdir().unwrap();
            let config = config(&world, tokens.path(), AuthorizeMode::Follow);
            assert_eq!(call(config.clone(), "echo", "a").await.unwrap(), "a");
            world.expire_access_tokens();
            assert_eq!(call(config, "echo", "b").await.unwrap(), "b");
            world.log()
        })
    });
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("toolbelt_mcp") || logs.contains("rmcp"),
        "logs were captured"
    );
    assert_eq!(log.count("token:refresh_token"), 1, "{:?}", log.events);
    let mut secrets: Vec<String> = log.bearers.clone();
    secrets.extend(
        log.token_requests
            .iter()
            .filter_map(|form| form.get("refresh_token").cloned()),
    );
    assert!(secrets.len() >= 2, "{secrets:?}");
    for secret in secrets {
        // "access-3" must not match inside "access-31": compare whole words.
        let leaked = logs
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .any(|word| word == secret);
        assert!(!leaked, "{secret} is in the logs");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_login_to_a_server_without_oauth_says_so() {
    // A server that answers 404 to everything: no 401 challenge, no metadata of any kind.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, axum::Router::new()).await });
    let tokens = tempfile::tempdir().unwrap();
    let err = login(
        "plain",
        &config_for(&url, tokens.path(), AuthorizeMode::Never),
        AuthorizeMode::Follow,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("does not use OAuth"), "{err}");
    assert!(token_files(tokens.path()).is_empty());
}
