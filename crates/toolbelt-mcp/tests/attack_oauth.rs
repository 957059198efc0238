//! Attacks on the OAuth token store and the redirect listener (issue 25, items 8 and 9),
//! against the real authorization and MCP servers of `oauth_support`: a token file planted
//! as a link, or by another user, and a token folder others may write are refused with a
//! clear error (and a link's target is left alone); idle connections to the redirect
//! listener do not hold up the real redirect.
#![cfg(feature = "server")]

use crate::common::free_port;
use crate::oauth::{call, config, login_in_browser};
use crate::oauth_support::{OAuthWorld, Twist};

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use toolbelt_mcp::AuthorizeMode;
use toolbelt_mcp::auth::login;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A login whose tokens are in `<temp>/oauth`; returns the token file.
async fn logged_in(world: &OAuthWorld, temp: &Path) -> std::path::PathBuf {
    let outcome = login_in_browser(world, &temp.join("oauth")).await.unwrap();
    outcome.token_file
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_file_planted_as_a_link_is_refused_and_its_target_left_alone() {
    let world = OAuthWorld::start(Twist::None).await;
    let temp = tempfile::tempdir().unwrap();
    let token_file = logged_in(&world, temp.path()).await;
    // The link leads to a file with the real tokens, readable by all: followed, it would
    // be used, and made 0600.
    let target = temp.path().join("victim.json");
    std::fs::copy(&token_file, &target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::remove_file(&token_file).unwrap();
    std::os::unix::fs::symlink(&target, &token_file).unwrap();

    let err = call(
        config(&world, &temp.path().join("oauth"), AuthorizeMode::Never),
        "echo",
        "hi",
    )
    .await
    .expect_err("a linked token file is not used");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(mode(&target), 0o644, "the link's target was not changed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_folder_other_users_may_write_is_refused() {
    let world = OAuthWorld::start(Twist::None).await;
    let temp = tempfile::tempdir().unwrap();
    logged_in(&world, temp.path()).await;
    let folder = temp.path().join("oauth");
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o1777)).unwrap();

    let err = call(config(&world, &folder, AuthorizeMode::Never), "echo", "hi")
        .await
        .expect_err("tokens from a folder others may write are not used");
    assert!(
        err.contains("other users may write to it") && err.contains(&folder.display().to_string()),
        "{err}"
    );
    // A login does not write there either.
    let err = login_in_browser(&world, &folder).await.unwrap_err();
    assert!(
        err.to_string().contains("other users may write to it"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(tests_as_root),
    ignore = "giving the planted file to another user needs root (CAP_CHOWN)"
)]
async fn a_token_file_planted_by_another_user_is_refused() {
    let world = OAuthWorld::start(Twist::None).await;
    let temp = tempfile::tempdir().unwrap();
    let token_file = logged_in(&world, temp.path()).await;
    // `nobody` owns it now, as if planted before the folder became private.
    std::os::unix::fs::chown(&token_file, Some(65534), Some(65534)).unwrap();

    let err = call(
        config(&world, &temp.path().join("oauth"), AuthorizeMode::Never),
        "echo",
        "hi",
    )
    .await
    .expect_err("another user's token file is not used");
    assert!(err.contains("belongs to another user"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_to_the_redirect_listener_do_not_hold_up_the_login() {
    let world = OAuthWorld::start(Twist::None).await;
    let temp = tempfile::tempdir().unwrap();
    let port = free_port();
    // Ten connections that never send a request, made as soon as the listener is up (and
    // so before the redirect, which needs a registration and an authorization first).
    let idlers = std::thread::spawn(move || {
        let mut held = Vec::new();
        while held.len() < 10 {
            match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(stream) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        held
    });
    let mut config = config(&world, &temp.path().join("oauth"), AuthorizeMode::Never);
    config.oauth.as_mut().unwrap().redirect_port = Some(port);
    // Served one at a time, 10 s each, they held the redirect for over 100 s; this guard
    // turns such a hang into a failure, with room to spare for a slow machine.
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        login("protected", &config, AuthorizeMode::Follow),
    )
    .await
    .expect("the login is not held up by idle connections")
    .expect("the login succeeds");
    assert!(outcome.token_file.is_file());
    let held = idlers.join().unwrap();
    assert_eq!(held.len(), 10);
}
