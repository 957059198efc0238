//! OAuth 2.1 against a real authorization server and a protected MCP server on 127.0.0.1
//! (see `oauth_support`): discovery from the 401, registration, PKCE, the code exchange,
//! the call; refresh; step-up on `insufficient_scope`; tokens in a 0600 file that the next
//! connection uses without a new login; a forged `state` and a foreign issuer refused.
#![cfg(feature = "server")]

mod oauth_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use oauth_support::{ADMIN_SCOPE, OAuthWorld, PRE_CLIENT_ID, PRE_CLIENT_SECRET, READ_SCOPE, Twist};
use toolbelt_core::{ToolContext, ToolSet};
use toolbelt_mcp::auth::login;
use toolbelt_mcp::{AuthorizeMode, ConnectionConfig, McpToolSet, OAuthConfig, TransportConfig};

fn config(world: &OAuthWorld, tokens: &Path, mode: AuthorizeMode) -> ConnectionConfig {
    ConnectionConfig::new(TransportConfig::streamable_http(&world.mcp_url))
        .with_timeout(Duration::from_secs(30))
        .with_oauth(OAuthConfig {
            authorize: mode,
            token_dir: Some(tokens.to_path_buf()),
            ..OAuthConfig::default()
        })
}

/// Calls `tool` with `{"text": text}` on a new connection; the text it answered.
async fn call(config: ConnectionConfig, tool: &str, text: &str) -> Result<String, String> {
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

fn token_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
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

#[tokio::test(flavor = "multi_thread")]
async fn tokens_are_kept_in_a_private_file_and_used_by_the_next_connection_without_a_login() {
    let world = OAuthWorld::start(Twist::None).await;
    let temp = tempfile::tempdir().unwrap();
    let tokens = temp.path().join("state/oauth");
    let outcome = login(
        "protected",
        &config(&world, &tokens, AuthorizeMode::Never),
        AuthorizeMode::Follow,
    )
    .await
    .unwrap();
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

    // A new connection, with nothing shared in memory and no way to authorize, succeeds
    // with the stored token.
    let answer = call(
        config(&world, &tokens, AuthorizeMode::Never),
        "echo",
        "again",
    )
    .await;
    assert_eq!(answer.unwrap(), "again");
    let log = world.log();
    assert_eq!(log.count("authorize"), 1, "{:?}", log.events);
    assert_eq!(log.count("register"), 1, "{:?}", log.events);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_access_token_is_refreshed_and_the_call_goes_through() {
    let world = OAuthWorld::start(Twist::None).await;
    let tokens = tempfile::tempdir().unwrap();
    login(
        "protected",
        &config(&world, tokens.path(), AuthorizeMode::Never),
        AuthorizeMode::Follow,
    )
    .await
    .unwrap();
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
    let mut config = config(&world, tokens.path(), AuthorizeMode::Follow);
    if let Some(oauth) = config.oauth.as_mut() {
        oauth.client_id = Some(PRE_CLIENT_ID.into());
        oauth.client_secret = Some(PRE_CLIENT_SECRET.into());
    }
    assert_eq!(call(config.clone(), "echo", "pre").await.unwrap(), "pre");
    let log = world.log();
    assert_eq!(log.count("register"), 0, "{:?}", log.events);
    assert_eq!(log.authorizations[0]["client_id"], PRE_CLIENT_ID);
    // The secret is not in the configuration's debug form (which may be logged).
    let debug = format!("{config:?}");
    assert!(!debug.contains(PRE_CLIENT_SECRET), "{debug}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_with_a_forged_state_is_refused_and_no_token_is_stored() {
    let world = OAuthWorld::start(Twist::WrongState).await;
    let tokens = tempfile::tempdir().unwrap();
    let err = login(
        "protected",
        &config(&world, tokens.path(), AuthorizeMode::Never),
        AuthorizeMode::Follow,
    )
    .await
    .unwrap_err();
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
    let err = login(
        "protected",
        &config(&world, tokens.path(), AuthorizeMode::Never),
        AuthorizeMode::Follow,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("issuer"), "{err}");
    let log = world.log();
    assert_eq!(log.count("register"), 0, "{:?}", log.events);
    assert_eq!(log.count("authorize"), 0, "{:?}", log.events);
}
