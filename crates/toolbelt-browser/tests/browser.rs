//! The browser tools against a real Chromium and pages served on 127.0.0.1 by the test.

use crate::browser_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::extract::Query;
use axum::response::{Html, Redirect};
use axum::routing::get;
use base64::Engine as _;
use browser_support::*;
use toolbelt_browser::{BrowserOptions, BrowserToolSet};
use toolbelt_core::{ContentBlock, ToolError, ToolSet};

const HOME: &str = r#"<!doctype html><html><head><title>Test home</title></head><body>
<h1>Welcome to the test page</h1>
<p id="msg">before the click</p>
<button onclick="document.getElementById('msg').textContent = 'after the click'">Press me</button>
<a href="/form">Go to the form</a>
</body></html>"#;

const FORM: &str = r#"<!doctype html><html><head><title>Form</title></head><body>
<form action="/hello" method="get">
  <label>Your name <input name="name" placeholder="name"></label>
  <button type="submit">Send</button>
</form></body></html>"#;

#[derive(serde::Deserialize)]
struct Hello {
    name: String,
}

fn site() -> Router {
    Router::new()
        .route("/", get(|| async { Html(HOME) }))
        .route("/form", get(|| async { Html(FORM) }))
        .route(
            "/hello",
            get(|Query(q): Query<Hello>| async move {
                // The name is echoed as text (the test controls it; escaping kept simple).
                let name = q.name.replace('<', "&lt;");
                Html(format!(
                    "<html><head><title>Hello</title></head><body><p>Hello, {name}!</p></body></html>"
                ))
            }),
        )
}

/// A page on an allowed host whose every kind of request aims at `secret` (another host).
fn attack_site(secret: String) -> Router {
    let page = format!(
        r#"<!doctype html><html><head><title>loading</title>
<link rel="stylesheet" href="{secret}/style.css"><script src="{secret}/script.js"></script></head>
<body><p>attack page</p><img src="{secret}/pixel.png"><iframe src="{secret}/frame"></iframe>
<script>
fetch("{secret}/data").then(
  r => r.text().then(t => {{ document.title = "fetched: " + t; }}),
  e => {{ document.title = "fetch failed"; }});
</script></body></html>"#
    );
    let redirect_to = format!("{secret}/after-redirect");
    Router::new()
        .route("/attack", get(move || async move { Html(page) }))
        .route(
            "/redirect",
            get(move || async move { Redirect::temporary(&redirect_to) }),
        )
}

fn ref_of<'a>(snapshot: &'a str, what: &str) -> &'a str {
    let line = snapshot
        .lines()
        .find(|l| l.contains(what) && l.contains("[ref="))
        .unwrap_or_else(|| panic!("no element {what:?} with a ref in:\n{snapshot}"));
    let start = line.find("[ref=").unwrap() + 5;
    let end = start + line[start..].find(']').unwrap();
    &line[start..end]
}

#[tokio::test(flavor = "multi_thread")]
async fn navigate_snapshot_and_click_a_button_that_changes_text() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    let page = navigate(&set, &format!("{base}/")).await;
    assert!(page.contains("Page: Test home"), "{page}");
    assert!(
        page.contains(r#"heading "Welcome to the test page" [level=1]"#),
        "{page}"
    );
    assert!(page.contains("before the click"), "{page}");
    assert!(page.contains("[url=/form]"), "{page}");
    // Nothing was refused: failures of the network (not the policy) are not reported.
    assert!(!page.contains("Note:"), "{page}");

    let button = ref_of(&page, r#"button "Press me""#).to_string();
    let after = call(&set, "browser_click", &format!(r#"{{"ref":"{button}"}}"#))
        .await
        .unwrap()
        .llm_text();
    assert!(after.contains("after the click"), "{after}");
    assert!(!after.contains("before the click"), "{after}");

    // A click on a link follows it and returns the new page.
    let link = ref_of(&after, "Go to the form").to_string();
    let form = call(&set, "browser_click", &format!(r#"{{"ref":"{link}"}}"#))
        .await
        .unwrap()
        .llm_text();
    assert!(form.contains("Page: Form"), "{form}");
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn type_in_a_field_and_submit_the_form() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    let page = navigate(&set, &format!("{base}/form")).await;
    let field = ref_of(&page, r#"textbox "Your name""#).to_string();
    let typed = call(
        &set,
        "browser_type",
        &format!(r#"{{"ref":"{field}","text":"Ada"}}"#),
    )
    .await
    .unwrap()
    .llm_text();
    assert!(typed.contains(r#"textbox "Your name" [ref="#), "{typed}");
    assert!(
        typed.contains(r#": "Ada""#),
        "the field shows its value:\n{typed}"
    );

    // Typing again replaces the text, and Enter submits the form.
    let field = ref_of(&typed, r#"textbox "Your name""#).to_string();
    let submitted = call(
        &set,
        "browser_type",
        &format!(r#"{{"ref":"{field}","text":"Grace","submit":true}}"#),
    )
    .await
    .unwrap()
    .llm_text();
    assert!(submitted.contains("Hello, Grace!"), "{submitted}");
    assert!(submitted.contains("/hello?name=Grace"), "{submitted}");
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reference_from_before_a_navigation_is_refused_clearly() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    let page = navigate(&set, &format!("{base}/")).await;
    let button = ref_of(&page, "Press me").to_string();
    navigate(&set, &format!("{base}/form")).await;
    // The form page's snapshot made new references; e999 names nothing.
    let err = call(&set, "browser_click", r#"{"ref":"e999"}"#)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    assert!(err.to_string().contains("browser_snapshot"), "{err}");
    let err = call(&set, "browser_click", r##"{"ref":"#1; alert(1)"}"##)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not an element reference"),
        "{err}"
    );
    drop(button);
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_screenshot_is_a_png_of_the_viewport() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options().with_viewport(640, 480));
    navigate(&set, &format!("{base}/")).await;
    let shot = call(&set, "browser_screenshot", "{}").await.unwrap();
    assert!(
        shot.llm_text().contains(&format!("{base}/")),
        "{}",
        shot.llm_text()
    );
    let [ContentBlock::Image { mime_type, data }] = shot.blocks.as_slice() else {
        panic!("expected one image block, got {:?}", shot.blocks.len());
    };
    assert_eq!(mime_type, "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (640, 480));
    set.close().await.unwrap();
}

/// Starts a browser and returns its group's live processes and its profile directory.
async fn started(set: &BrowserToolSet, base: &str) -> (u32, Vec<u32>, std::path::PathBuf) {
    call(set, "browser_navigate", &format!(r#"{{"url":"{base}/"}}"#))
        .await
        .unwrap();
    let pid = set.browser_pid().await.expect("a browser runs");
    let members = group_members(pid);
    assert!(
        members.len() > 1,
        "Chromium runs several processes in its group: {members:?}"
    );
    let profile = user_data_dir(pid);
    assert!(profile.is_dir());
    (pid, members, profile)
}

#[tokio::test(flavor = "multi_thread")]
async fn browser_close_leaves_no_process_and_no_profile() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    let started_at = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    let (pid, members, profile) = started(&set, &base).await;
    let out = call(&set, "browser_close", "{}").await.unwrap();
    assert_eq!(out.llm_text(), "The browser was closed.");
    let left: Vec<u32> = members.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "still running after close: {left:?}");
    assert!(group_members(pid).is_empty());
    assert!(!profile.exists(), "{} was not removed", profile.display());
    assert_eq!(set.browser_pid().await, None);

    // Chromium's own temporary folders were inside the profile, so none is left in /tmp
    // (other tests' browsers in this binary put theirs in their profiles too).
    let leftovers: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("org.chromium.Chromium.")
        })
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= started_at)
        })
        .map(|e| e.path())
        .collect();
    assert!(
        leftovers.is_empty(),
        "left in the temporary folder: {leftovers:?}"
    );

    // The next call starts a new browser with a new profile.
    let (_, _, second) = started(&set, &base).await;
    assert_ne!(second, profile);
    set.close().await.unwrap();
    assert!(!second.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_tool_set_kills_the_browser() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    let navigate = tool(&set, "browser_navigate").await;
    let (_, members, profile) = started(&set, &base).await;
    drop(set);
    let left: Vec<u32> = members.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "still running after drop: {left:?}");
    assert!(!profile.exists());
    // A tool kept after its set is gone fails instead of starting an unowned browser.
    let err = navigate
        .call(
            toolbelt_core::ToolContext::for_call("late"),
            &format!(r#"{{"url":"{base}/"}}"#),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("dropped"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_browser_is_replaced_on_the_next_call_with_a_note() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    let (pid, members, _) = started(&set, &base).await;
    for member in &members {
        // SAFETY: signalling processes of our own browser.
        unsafe { libc_kill(*member) };
    }
    // The crash is over before the next call: every thread of the main process has exited.
    toolbelt_testkit::eventually_async(
        "the browser ending after SIGKILL",
        Duration::from_secs(10),
        || fully_exited(pid).then_some(()),
    )
    .await;
    let page = navigate(&set, &format!("{base}/")).await;
    assert!(page.contains("Note: the browser had stopped"), "{page}");
    assert!(page.contains("Welcome to the test page"), "{page}");
    assert_ne!(set.browser_pid().await, Some(pid));
    set.close().await.unwrap();
}

unsafe extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

unsafe fn libc_kill(pid: u32) {
    // SIGKILL is 9 on Linux.
    unsafe { kill(pid as i32, 9) };
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_metadata_and_other_schemes_are_refused_without_an_allow_list() {
    let base = serve(site(), "127.0.0.1").await;
    let set = BrowserToolSet::new(BrowserOptions::default().with_chromium(chromium()));
    let err = call(&set, "browser_navigate", &format!(r#"{{"url":"{base}/"}}"#))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Rejected { .. }), "{err}");
    assert!(err.to_string().contains("loopback"), "{err}");

    let err = call(
        &set,
        "browser_navigate",
        r#"{"url":"http://169.254.169.254/latest/meta-data/"}"#,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("metadata"), "{err}");

    for url in [
        "file:///etc/passwd",
        "data:text/html,<p>hi</p>",
        "javascript:alert(1)",
        "chrome://version",
    ] {
        let err = call(&set, "browser_navigate", &format!(r#"{{"url":"{url}"}}"#))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("only http and https"),
            "{url}: {err}"
        );
    }
    // Nothing was refused by starting a browser: none was needed.
    assert_eq!(set.browser_pid().await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_page_cannot_reach_a_refused_host_by_any_request() {
    let (secret, hits) = counting_server().await;
    let base = serve(attack_site(secret.clone()), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    let opened = navigate(&set, &format!("{base}/attack")).await;
    let page = opened + &snapshot_until(&set, "Page: fetch failed").await;
    assert!(page.contains("attack page"), "{page}");
    for path in ["style.css", "script.js", "pixel.png", "frame", "data"] {
        assert!(
            page.contains(&format!(
                "refused a request: {secret}/{path}: 127.0.0.2 resolves only to \
                 addresses that are not public (127.0.0.2 is a loopback address)"
            )),
            "{path} not refused:\n{page}"
        );
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the refused host was reached"
    );

    // A redirect from the allowed host to the refused one is refused too.
    let page = navigate(&set, &format!("{base}/redirect")).await;
    assert!(page.contains("Toolbelt refused this request"), "{page}");
    assert!(page.contains("127.0.0.2 is a loopback address"), "{page}");
    // The allowed page itself is never among the refusals.
    for line in page.lines().filter(|l| l.starts_with("Note: refused")) {
        assert!(!line.contains(&base), "{line}");
    }
    assert!(
        page.contains(&format!("refused a request: {secret}/after-redirect")),
        "{page}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_page_does_reach_the_host_when_the_policy_allows_it() {
    // The control for the test above: with 127.0.0.2 allowed, the same requests arrive.
    let (secret, hits) = counting_server().await;
    let base = serve(attack_site(secret), "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options().with_addresses(
        toolbelt_builtin::web::AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap()),
    ));
    navigate(&set, &format!("{base}/attack")).await;
    snapshot_until(&set, "Page: fetched: internal secret").await;
    assert!(hits.load(Ordering::SeqCst) >= 2, "img, iframe, fetch…");
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blocked_domain_is_refused_for_subresources_too() {
    let (secret, hits) = counting_server().await;
    let base = serve(attack_site(secret), "127.0.0.1").await;
    let domains = toolbelt_builtin::web::DomainPolicy::new()
        .block("127.0.0.2")
        .unwrap();
    let set = BrowserToolSet::new(
        loopback_options()
            .with_addresses(
                toolbelt_builtin::web::AddressPolicy::default()
                    .allow("127.0.0.0/8".parse().unwrap()),
            )
            .with_domains(domains),
    );
    let opened = navigate(&set, &format!("{base}/attack")).await;
    let page = opened + &snapshot_until(&set, "Page: fetch failed").await;
    assert!(page.contains("is blocked (rule 127.0.0.2)"), "{page}");
    assert!(
        page.contains("/data: the domain 127.0.0.2 is blocked"),
        "fetch: {page}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_chromium_is_a_clear_error() {
    let set = BrowserToolSet::new(BrowserOptions::default().with_chromium("/nonexistent/chromium"));
    let err = call(&set, "browser_snapshot", "{}").await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("/nonexistent/chromium"), "{message}");
    assert!(message.contains("apt-get install chromium"), "{message}");
}
