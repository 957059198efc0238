//! WebFetch against real HTTP servers on 127.0.0.1.
#![cfg(feature = "web")]

use crate::web_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde_json::json;
use toolbelt_builtin::web::{
    AddressPolicy, ContentProcessor, DomainPolicy, FetchedPage, WebFetchOptions, web_fetch_tool,
};
use toolbelt_core::{DynTool, ToolContext, ToolError};
use web_support::*;

const PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>Release notes</title>
<style>body { color: red }</style>
<script>var tracking = "should not appear";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>
<h1>Version 2.0</h1>
<p>This release adds <strong>streaming</strong> and <a href="/docs/streams">stream docs</a>.</p>
<ul><li>Faster builds</li><li>Fewer bugs</li></ul>
<script>document.write("nor this")</script>
</body></html>"#;

const HUGE_TOTAL: usize = 64 * 1024 * 1024;

/// A 64 MiB body streamed in 64 KiB chunks, counting in `sent_total` the bytes it produced before
/// its client went away.
fn huge_body(sent_total: Arc<AtomicUsize>) -> Body {
    let chunk = vec![b'x'; 64 * 1024];
    let stream = futures::stream::unfold(0usize, move |sent| {
        let chunk = chunk.clone();
        let sent_total = sent_total.clone();
        async move {
            if sent >= HUGE_TOTAL {
                return None;
            }
            sent_total.fetch_add(chunk.len(), Ordering::SeqCst);
            Some((Ok::<_, std::io::Error>(chunk.clone()), sent + chunk.len()))
        }
    });
    Body::from_stream(stream)
}

fn site() -> Router {
    site_counting(Arc::default())
}

/// The test site; `/huge` counts what it sends in `huge_sent`.
fn site_counting(huge_sent: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/page",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route(
            "/notes.txt",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    "line one\nline two\n",
                )
            }),
        )
        .route(
            "/data.json",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    r#"{"ok":true}"#,
                )
            }),
        )
        .route(
            "/latin1",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain; charset=iso-8859-1")],
                    b"caf\xe9".to_vec(),
                )
            }),
        )
        .route(
            "/logo.png",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/png")],
                    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
                )
            }),
        )
        .route(
            "/undeclared-binary",
            get(|| async {
                Response::builder()
                    .body(Body::from(b"\x7fELF\x02\x01\x01\0\0\0\0\0".to_vec()))
                    .unwrap()
            }),
        )
        .route(
            "/huge",
            get(move || {
                let huge_sent = huge_sent.clone();
                async move {
                    Response::builder()
                        .header(header::CONTENT_TYPE, "text/plain")
                        .body(huge_body(huge_sent))
                        .unwrap()
                }
            }),
        )
        .route(
            "/missing",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "text/html")],
                    "<h1>Not here</h1>",
                )
            }),
        )
        .route("/moved", get(|| async { Redirect::temporary("/page") }))
        .route(
            "/chain/{n}",
            get(|n: Path<u32>| async move {
                if n.0 == 0 {
                    Redirect::to("/page").into_response()
                } else {
                    Redirect::to(&format!("/chain/{}", n.0 - 1)).into_response()
                }
            }),
        )
        .route(
            "/elsewhere",
            get(|| async { Redirect::permanent("http://docs.example.invalid/new-home?x=1") }),
        )
        .route(
            "/to-metadata",
            get(|| async {
                Redirect::temporary(
                    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
                )
            }),
        )
        // Same host under the www rule: followed, so the hop is checked again.
        .route(
            "/to-www",
            get(|headers: axum::http::HeaderMap| async move {
                let host = headers[header::HOST].to_str().unwrap().to_string();
                Redirect::temporary(&format!("http://www.{host}/page"))
            }),
        )
}

/// WebFetch allowed to reach 127.0.0.1, as in every test that needs the local server.
fn local_options() -> WebFetchOptions {
    WebFetchOptions::default()
        .with_addresses(AddressPolicy::default().allow("127.0.0.1/32".parse().unwrap()))
}

fn fetch_tool(options: WebFetchOptions) -> DynTool {
    web_fetch_tool(options).unwrap()
}

async fn fetch(tool: &DynTool, url: &str) -> Result<toolbelt_core::ToolOutput, ToolError> {
    call(tool, json!({"url": url, "prompt": "What changed?"})).await
}

#[tokio::test]
async fn html_becomes_markdown_without_scripts_styles_or_navigation() {
    let server = TestServer::start(site()).await;
    let out = fetch(&fetch_tool(local_options()), &server.url("/page"))
        .await
        .unwrap();
    assert!(!out.is_error);
    let expected = format!(
        "URL: {}\nTitle: Release notes\n\n# Version 2.0\n\nThis release adds **streaming** and \
         [stream docs](/docs/streams).\n\n- Faster builds\n- Fewer bugs",
        server.url("/page")
    );
    assert_eq!(out.llm_text(), expected);
    let meta = out.meta.unwrap();
    assert_eq!(meta["media_type"], "text/html");
    assert_eq!(meta["status"], 200);
}

#[tokio::test]
async fn text_passes_through_and_charsets_are_decoded() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options());
    let text = fetch(&tool, &server.url("/notes.txt")).await.unwrap();
    assert_eq!(
        text.llm_text(),
        format!("URL: {}\n\nline one\nline two\n", server.url("/notes.txt"))
    );
    let json_body = fetch(&tool, &server.url("/data.json")).await.unwrap();
    assert!(json_body.llm_text().ends_with("\n\n{\"ok\":true}"));
    let latin1 = fetch(&tool, &server.url("/latin1")).await.unwrap();
    assert!(
        latin1.llm_text().ends_with("\n\ncafé"),
        "{}",
        latin1.llm_text()
    );
}

#[tokio::test]
async fn binary_content_is_refused_declared_or_sniffed() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options());
    let err = fetch(&tool, &server.url("/logo.png")).await.unwrap_err();
    assert!(
        err.to_string().contains("binary content (image/png)"),
        "{err}"
    );
    let err = fetch(&tool, &server.url("/undeclared-binary"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("binary content"), "{err}");
}

#[tokio::test]
async fn body_limit_stops_reading_an_oversized_stream() {
    let huge_sent = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(site_counting(huge_sent.clone())).await;
    let tool = fetch_tool(local_options().with_max_body_bytes(64 * 1024));
    let out = fetch(&tool, &server.url("/huge")).await.unwrap();
    assert!(!out.is_error);
    let text = out.llm_text();
    assert!(
        text.contains("larger than 65536 bytes; only its beginning was read"),
        "{}",
        &text[..200]
    );
    let meta = out.meta.unwrap();
    assert_eq!(meta["body_bytes"], 64 * 1024);
    assert_eq!(meta["body_truncated"], true);
    // The server was stopped long before it could send everything: the limit was applied
    // while streaming, not after downloading the body.
    let sent = huge_sent.load(Ordering::SeqCst);
    assert!(sent < HUGE_TOTAL / 2, "{sent} bytes were produced");
}

#[tokio::test]
async fn default_body_limit_is_one_mebibyte() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options());
    let out = fetch(&tool, &server.url("/huge")).await.unwrap();
    assert_eq!(out.meta.unwrap()["body_bytes"], 1024 * 1024);
}

#[tokio::test]
async fn long_content_is_cut_with_a_marker_when_no_processor_is_set() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options().with_max_content_chars(8));
    let out = fetch(&tool, &server.url("/notes.txt")).await.unwrap();
    assert!(
        out.llm_text()
            .ends_with("\n\nline one… [10 more characters not shown]"),
        "{}",
        out.llm_text()
    );
    assert_eq!(out.meta.unwrap()["omitted_chars"], 10);
}

/// A processor that records what it was given and answers from it.
#[derive(Debug, Default)]
struct RecordingProcessor {
    seen: Mutex<Vec<(String, String, String)>>,
}

#[async_trait]
impl ContentProcessor for RecordingProcessor {
    async fn process(
        &self,
        _ctx: &ToolContext,
        page: &FetchedPage,
        prompt: &str,
    ) -> Result<String, ToolError> {
        self.seen.lock().unwrap().push((
            page.url.clone(),
            prompt.to_string(),
            page.content.clone(),
        ));
        Ok(format!(
            "{} characters about {prompt}",
            page.content.chars().count()
        ))
    }
}

#[tokio::test]
async fn the_prompt_and_content_go_to_the_processor() {
    let server = TestServer::start(site()).await;
    let processor = Arc::new(RecordingProcessor::default());
    let tool = fetch_tool(local_options().with_processor(processor.clone()));
    let out = call(
        &tool,
        json!({"url": server.url("/moved"), "prompt": "the new features"}),
    )
    .await
    .unwrap();
    let seen = processor.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let (url, prompt, content) = &seen[0];
    assert_eq!(url, &server.url("/page"));
    assert_eq!(prompt, "the new features");
    assert!(content.starts_with("# Version 2.0"));
    assert!(out.llm_text().ends_with(&format!(
        "{} characters about the new features",
        content.chars().count()
    )));
    assert!(
        tool.declaration()
            .description
            .contains("answers the prompt")
    );
}

#[tokio::test]
async fn same_host_redirects_are_followed_up_to_five() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options());
    let moved = fetch(&tool, &server.url("/moved")).await.unwrap();
    assert!(
        moved
            .llm_text()
            .starts_with(&format!("URL: {}\n", server.url("/page")))
    );
    assert!(moved.llm_text().contains("# Version 2.0"));

    // /chain/4 is five redirects away from the page.
    let five = fetch(&tool, &server.url("/chain/4")).await.unwrap();
    assert!(
        five.llm_text().contains("# Version 2.0"),
        "{}",
        five.llm_text()
    );

    let before = server.hits();
    let err = fetch(&tool, &server.url("/chain/5")).await.unwrap_err();
    assert!(err.to_string().contains("too many redirects"), "{err}");
    assert_eq!(
        server.hits() - before,
        6,
        "the sixth redirect must not be followed"
    );
}

#[tokio::test]
async fn cross_host_redirects_come_back_as_a_notice() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options());
    let out = fetch(&tool, &server.url("/elsewhere")).await.unwrap();
    assert!(!out.is_error);
    assert!(
        out.llm_text().contains(
            "redirected (HTTP 308) to a different host: http://docs.example.invalid/new-home?x=1"
        ),
        "{}",
        out.llm_text()
    );
    assert!(out.llm_text().contains("call WebFetch again"));
    assert_eq!(
        out.meta.unwrap()["redirect_url"],
        "http://docs.example.invalid/new-home?x=1"
    );
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn a_redirect_to_the_metadata_service_is_not_followed_and_fetching_it_is_refused() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options());
    let out = fetch(&tool, &server.url("/to-metadata")).await.unwrap();
    let target = out.meta.unwrap()["redirect_url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(target.starts_with("http://169.254.169.254/"));
    // The model follows the notice explicitly: the guard refuses before connecting.
    let err = fetch(&tool, &target).await.unwrap_err();
    assert!(matches!(err, ToolError::Rejected { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("169.254.169.254 is the cloud metadata address"),
        "{err}"
    );
}

#[tokio::test]
async fn loopback_is_refused_by_default_before_any_request() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(WebFetchOptions::default());
    let err = fetch(&tool, &server.url("/page")).await.unwrap_err();
    assert!(matches!(err, ToolError::Rejected { .. }), "{err:?}");
    assert!(
        err.to_string().contains("127.0.0.1 is a loopback address"),
        "{err}"
    );

    // A name is refused after DNS resolution, by the client's resolver.
    let by_name = format!("http://localhost:{}/page", server.port());
    let err = fetch(&tool, &by_name).await.unwrap_err();
    assert!(matches!(err, ToolError::Rejected { .. }), "{err:?}");
    assert!(
        err.to_string().contains("localhost resolves only to addresses that are not public (127.0.0.1 is a loopback address)"),
        "{err}"
    );

    // IPv4-mapped IPv6 spelling does not get around it.
    let mapped = format!("http://[::ffff:127.0.0.1]:{}/page", server.port());
    assert!(matches!(
        fetch(&tool, &mapped).await,
        Err(ToolError::Rejected { .. })
    ));
    assert_eq!(
        server.hits(),
        0,
        "a refused fetch must not reach the server"
    );
}

#[tokio::test]
async fn metadata_and_private_addresses_are_refused_without_connecting() {
    let tool = fetch_tool(local_options());
    for (url, reason) in [
        (
            "http://169.254.169.254/latest/meta-data/",
            "the cloud metadata address",
        ),
        (
            "http://[::ffff:a9fe:a9fe]/latest/meta-data/",
            "the cloud metadata address",
        ),
        ("http://10.0.0.1/admin", "a private network address"),
        ("http://[fd00::1]/", "a unique-local address"),
        ("http://[fe80::1]/", "a link-local address"),
        ("http://0.0.0.0:1/", "an unspecified address"),
    ] {
        let err = fetch(&tool, url).await.unwrap_err();
        assert!(matches!(err, ToolError::Rejected { .. }), "{url}: {err:?}");
        assert!(err.to_string().contains(reason), "{url}: {err}");
    }
}

#[tokio::test]
async fn an_allowed_name_is_reached_through_the_guarded_resolver() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(local_options());
    let out = fetch(
        &tool,
        &format!("http://localhost:{}/notes.txt", server.port()),
    )
    .await
    .unwrap();
    assert!(out.llm_text().ends_with("line one\nline two\n"));
}

#[tokio::test]
async fn blocked_domains_and_allow_lists_are_enforced_before_connecting() {
    let server = TestServer::start(site()).await;
    let blocked =
        fetch_tool(local_options().with_domains(DomainPolicy::new().block("localhost").unwrap()));
    for host in ["localhost", "api.localhost"] {
        let err = fetch(&blocked, &format!("http://{host}:{}/page", server.port()))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Rejected { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains(&format!("the domain {host} is blocked (rule localhost)")),
            "{err}"
        );
    }

    let allow_only = fetch_tool(
        local_options().with_domains(DomainPolicy::new().allow("docs.example.invalid").unwrap()),
    );
    let err = fetch(&allow_only, &server.url("/page")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("not in the list of allowed domains"),
        "{err}"
    );

    // Block is checked first: allowed and blocked at once means blocked.
    let both = fetch_tool(
        local_options()
            .with_domains(DomainPolicy::from_lists(["localhost"], ["*.localhost"]).unwrap()),
    );
    let err = fetch(&both, &format!("http://a.localhost:{}/page", server.port()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("blocked (rule *.localhost)"),
        "{err}"
    );
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let addr = silent_server().await;
    let tool = fetch_tool(local_options().with_timeout(Duration::from_millis(300)));
    let err = fetch(&tool, &format!("http://{addr}/")).await.unwrap_err();
    assert!(
        matches!(err, ToolError::Timeout { limit } if limit == Duration::from_millis(300)),
        "{err:?}"
    );
}

#[tokio::test]
async fn error_statuses_are_reported_with_the_page() {
    let server = TestServer::start(site()).await;
    let out = fetch(&fetch_tool(local_options()), &server.url("/missing"))
        .await
        .unwrap();
    assert!(out.is_error);
    assert!(
        out.llm_text().contains("HTTP status: 404\n"),
        "{}",
        out.llm_text()
    );
    assert!(out.llm_text().ends_with("# Not here"));
}

#[tokio::test]
async fn bad_urls_are_invalid_arguments() {
    let tool = fetch_tool(local_options());
    for url in [
        "",
        "example",
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "http://user:pw@127.0.0.1/",
    ] {
        let err = fetch(&tool, url).await.unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { .. }),
            "{url}: {err:?}"
        );
    }
}

#[tokio::test]
async fn cancellation_stops_a_fetch() {
    let addr = silent_server().await;
    let tool = fetch_tool(local_options());
    let token = tokio_util::sync::CancellationToken::new();
    let ctx = ToolContext::for_call("c").with_cancellation(token.clone());
    let args = json!({"url": format!("http://{addr}/"), "prompt": "x"}).to_string();
    let call = tokio::spawn(async move { tool.call(ctx, &args).await });
    token.cancel();
    assert!(matches!(call.await.unwrap(), Err(ToolError::Cancelled)));
}

#[tokio::test]
async fn every_redirect_hop_is_checked_against_the_policy_again() {
    let server = TestServer::start(site()).await;
    let tool = fetch_tool(
        local_options().with_domains(DomainPolicy::new().block("www.localhost").unwrap()),
    );
    let start = format!("http://localhost:{}/to-www", server.port());
    let err = fetch(&tool, &start).await.unwrap_err();
    assert!(matches!(err, ToolError::Rejected { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("the domain www.localhost is blocked"),
        "{err}"
    );
    assert_eq!(server.hits(), 1, "only the first hop reached the server");
}

/// The PDFs of files_pdf.rs (a real one by fpdf2, hostile ones by hand) in a temp folder.
#[cfg(feature = "pdf")]
fn pdf_fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/make_pdfs.py");
    let out = std::process::Command::new(toolbelt_testkit::python())
        .arg(script)
        .arg(dir.path())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "making the PDFs failed (run .ci/install-peers for fpdf2): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[cfg(feature = "pdf")]
#[tokio::test(flavor = "multi_thread")]
async fn a_pdf_is_read_as_its_text_by_page_and_a_hostile_one_is_refused() {
    let fixtures = pdf_fixtures();
    let read = |name: &str| std::fs::read(fixtures.path().join(name)).unwrap();
    let (real, bomb) = (read("real.pdf"), read("bomb.pdf"));
    let declared = |bytes: Vec<u8>| {
        move || async move { ([(header::CONTENT_TYPE, "application/pdf")], bytes) }
    };
    let undeclared = real.clone();
    let router = Router::new()
        .route("/papers/real.pdf", get(declared(real)))
        .route("/bomb.pdf", get(declared(bomb)))
        .route(
            "/download",
            get(move || async move { Response::builder().body(Body::from(undeclared)).unwrap() }),
        )
        .route(
            "/endless.pdf",
            get(|| async {
                Response::builder()
                    .header(header::CONTENT_TYPE, "application/pdf")
                    .body(huge_body(Arc::default()))
                    .unwrap()
            }),
        );
    let server = TestServer::start(router).await;
    let tool = fetch_tool(local_options());

    let out = fetch(&tool, &server.url("/papers/real.pdf")).await.unwrap();
    let text = out.llm_text();
    assert!(!out.is_error, "{text}");
    let one = text.find("--- real.pdf: page 1 of 3 ---").expect(&text);
    let alpha = text.find("Page one alpha").expect(&text);
    let gamma = text.find("Page three gamma").expect(&text);
    assert!(one < alpha && alpha < gamma, "{text}");
    assert_eq!(out.meta.unwrap()["media_type"], "application/pdf");
    // Sniffed when no type is declared.
    let out = fetch(&tool, &server.url("/download")).await.unwrap();
    assert!(
        out.llm_text().contains("Page two beta"),
        "{}",
        out.llm_text()
    );

    // A compression bomb and a PDF past the size limit are refused with the reason.
    let err = fetch(&tool, &server.url("/bomb.pdf")).await.unwrap_err();
    assert!(err.to_string().contains("cannot be read"), "{err}");
    let err = fetch(&tool, &server.url("/endless.pdf")).await.unwrap_err();
    assert!(err.to_string().contains("larger than 16 MiB"), "{err}");
    // Still answering.
    let out = fetch(&tool, &server.url("/papers/real.pdf")).await.unwrap();
    assert!(out.llm_text().contains("Page one alpha"));
}
