//! WebSearch and duckduckgo_search against result pages served on 127.0.0.1.
//!
//! The pages are hand-written reproductions of DuckDuckGo's HTML results page, its Instant
//! Answer API and SearXNG's JSON API (`tests/fixtures/web/`): this machine has no access to
//! those services, so nothing could be recorded from them.
#![cfg(feature = "web")]

use crate::web_support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};
use toolbelt_builtin::web::{
    DuckDuckGoOptions, SearxngProvider, WebOptions, WebSearchOptions, tools,
};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{DynTool, ToolError};
use web_support::*;

type Params = Query<std::collections::HashMap<String, String>>;

/// A DuckDuckGo look-alike: `/html/` serves the results page for any query except
/// `nothing` (no results) and `bot` (the bot check); `/` is the Instant Answer API, with an
/// answer for queries about rust, an empty answer otherwise, and HTTP 500 for `broken api`.
fn duckduckgo() -> Router {
    Router::new()
        .route(
            "/html/",
            get(|Query(q): Params| async move {
                let page = match q.get("q").map(String::as_str) {
                    Some("nothing") => fixture("ddg_no_results.html"),
                    Some("bot") => fixture("ddg_anomaly.html"),
                    _ => fixture("ddg_results.html"),
                };
                ([(header::CONTENT_TYPE, "text/html; charset=UTF-8")], page)
            }),
        )
        .route(
            "/",
            get(|Query(q): Params| async move {
                let query = q.get("q").cloned().unwrap_or_default();
                if query == "broken api" {
                    return (StatusCode::INTERNAL_SERVER_ERROR, "upstream failure").into_response();
                }
                let body = if query.contains("rust programming") {
                    fixture("ddg_instant_answer.json")
                } else {
                    fixture("ddg_instant_answer_empty.json")
                };
                // The API labels its JSON as JavaScript.
                ([(header::CONTENT_TYPE, "application/x-javascript")], body).into_response()
            }),
        )
}

fn searxng() -> Router {
    Router::new().route(
        "/search",
        get(|Query(q): Params| async move {
            if q.get("format").map(String::as_str) != Some("json") {
                return (StatusCode::FORBIDDEN, "format not allowed").into_response();
            }
            (
                [(header::CONTENT_TYPE, "application/json")],
                fixture("searxng.json"),
            )
                .into_response()
        }),
    )
}

fn web_tools(server: &TestServer) -> Vec<DynTool> {
    tools(&WebOptions::default().with_duckduckgo(ddg_options(server))).unwrap()
}

fn ddg_options(server: &TestServer) -> DuckDuckGoOptions {
    DuckDuckGoOptions::default()
        .with_api_url(server.url("/"))
        .with_html_url(server.url("/html/"))
        .with_user_agent("toolbelt-test/1.0")
}

fn result_urls(out: &toolbelt_core::ToolOutput) -> Vec<String> {
    out.meta.as_ref().unwrap()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn duckduckgo_results_page_is_parsed_unwrapped_and_deduplicated() {
    let server = TestServer::start(duckduckgo()).await;
    let search = tool(&web_tools(&server), "WebSearch");
    let out = call(&search, json!({"query": "rust async runtime"}))
        .await
        .unwrap();

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].param("q").as_deref(), Some("rust async runtime"));
    assert_eq!(seen[0].user_agent, "toolbelt-test/1.0");

    // The ad is skipped, the second Tokio result removed, and links unwrapped exactly once
    // (the wiki URL keeps its own %2F).
    assert_eq!(
        result_urls(&out),
        [
            "https://tokio.example.org/",
            "https://docs.example.com/async-book/01_getting_started/02_why_async.html",
            "https://blog.example.net/2024/03/comparing-async-runtimes?utm_source=feed&lang=en",
            "https://forum.example.org/t/which-async-runtime-should-i-use/10234",
            "https://crates.example.com/crates/smol",
            "https://wiki.example.com/wiki/Async%2Fawait",
        ]
    );
    let results = &out.meta.as_ref().unwrap()["results"];
    assert_eq!(
        results[1]["title"],
        "Why Async? - Asynchronous Programming in Rust"
    );
    assert_eq!(
        results[1]["snippet"],
        "Async code in Rust needs a runtime to drive futures to completion: the language \
         provides the syntax, while crates provide executors & reactors."
    );
    assert_eq!(
        results[3]["snippet"],
        "I'm starting a new project and I'm not sure whether to pick Tokio or something smaller..."
    );
    let text = out.llm_text();
    assert!(text.starts_with("Web search results for \"rust async runtime\":\n\n1. Tokio - An asynchronous Rust runtime\n   https://tokio.example.org/\n   Tokio is an asynchronous runtime"), "{text}");
    assert!(
        !text.contains("Sponsored") && !text.contains("hosting.example.net"),
        "{text}"
    );
}

#[tokio::test]
async fn domain_filters_keep_or_drop_results() {
    let server = TestServer::start(duckduckgo()).await;
    let search = tool(&web_tools(&server), "WebSearch");
    let allowed = call(
        &search,
        json!({"query": "rust async runtime", "allowed_domains": ["example.com"]}),
    )
    .await
    .unwrap();
    assert_eq!(
        result_urls(&allowed),
        [
            "https://docs.example.com/async-book/01_getting_started/02_why_async.html",
            "https://crates.example.com/crates/smol",
            "https://wiki.example.com/wiki/Async%2Fawait",
        ]
    );
    let blocked = call(
        &search,
        json!({"query": "rust async runtime", "blocked_domains": ["*.example.com", "forum.example.org"]}),
    )
    .await
    .unwrap();
    assert_eq!(
        result_urls(&blocked),
        [
            "https://tokio.example.org/",
            "https://blog.example.net/2024/03/comparing-async-runtimes?utm_source=feed&lang=en",
        ]
    );
}

#[tokio::test]
async fn allowed_and_blocked_domains_together_are_refused() {
    let server = TestServer::start(duckduckgo()).await;
    let search = tool(&web_tools(&server), "WebSearch");
    let err = call(
        &search,
        json!({"query": "rust", "allowed_domains": ["a.example"], "blocked_domains": ["b.example"]}),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
    assert!(err.to_string().contains("not both"), "{err}");
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn no_results_is_a_normal_answer_and_a_bot_check_is_an_error() {
    let server = TestServer::start(duckduckgo()).await;
    let search = tool(&web_tools(&server), "WebSearch");
    let none = call(&search, json!({"query": "nothing"})).await.unwrap();
    assert!(!none.is_error);
    assert_eq!(none.llm_text(), "No results found for \"nothing\".");
    let err = call(&search, json!({"query": "bot"})).await.unwrap_err();
    assert!(err.to_string().contains("bot check"), "{err}");
}

#[tokio::test]
async fn searxng_json_results_are_read() {
    let server = TestServer::start(searxng()).await;
    let provider = SearxngProvider::new(server.url("")).unwrap();
    let options = WebOptions::default().with_search(
        WebSearchOptions::default()
            .with_provider(Arc::new(provider))
            .with_max_results(3),
    );
    let search = tool(&tools(&options).unwrap(), "WebSearch");
    let out = call(&search, json!({"query": "rust async runtime"}))
        .await
        .unwrap();
    let seen = server.seen();
    assert_eq!(seen[0].param("format").as_deref(), Some("json"));
    assert_eq!(seen[0].param("q").as_deref(), Some("rust async runtime"));
    // The duplicate Tokio URL (without its trailing slash) is dropped; the cap is 3.
    assert_eq!(
        result_urls(&out),
        [
            "https://tokio.example.org/",
            "https://docs.example.com/async-book/",
            "https://crates.example.com/crates/smol",
        ]
    );
    let results = &out.meta.as_ref().unwrap()["results"];
    assert_eq!(
        results[1]["snippet"],
        "This book aims to be a comprehensive, up-to-date guide to Rust's async ecosystem, suitable for beginners and old hands alike."
    );
    assert_eq!(out.meta.as_ref().unwrap()["provider"], "searxng");
}

#[tokio::test]
async fn a_searxng_instance_without_json_output_is_explained() {
    let server = TestServer::start(Router::new().route(
        "/search",
        get(|| async { (StatusCode::FORBIDDEN, "403 Forbidden") }),
    ))
    .await;
    let provider = SearxngProvider::new(server.url("/")).unwrap();
    let options = WebOptions::default()
        .with_search(WebSearchOptions::default().with_provider(Arc::new(provider)));
    let search = tool(&tools(&options).unwrap(), "WebSearch");
    let err = call(&search, json!({"query": "rust"})).await.unwrap_err();
    assert!(err.to_string().contains("search.formats"), "{err}");
}

fn answer(out: &toolbelt_core::ToolOutput) -> Value {
    out.structured
        .clone()
        .expect("duckduckgo_search returns structured output")
}

#[tokio::test]
async fn instant_answer_gives_a_summary_and_five_results() {
    let server = TestServer::start(duckduckgo()).await;
    let ddg = tool(&web_tools(&server), "duckduckgo_search");
    let out = call(&ddg, json!({"query": "rust programming language"}))
        .await
        .unwrap();
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "no fallback when the API answered");
    assert_eq!(seen[0].param("format").as_deref(), Some("json"));
    assert_eq!(
        seen[0].param("q").as_deref(),
        Some("rust programming language")
    );
    assert_eq!(seen[0].user_agent, "toolbelt-test/1.0");

    let a = answer(&out);
    assert_eq!(a["source"], "instant_answer");
    assert_eq!(a["heading"], "Rust (programming language)");
    assert!(
        a["summary"]
            .as_str()
            .unwrap()
            .starts_with("Rust is a general-purpose programming language")
    );
    assert_eq!(
        a["summary_url"],
        "https://encyclopedia.example.org/wiki/Rust_(programming_language)"
    );
    let results = a["results"].as_array().unwrap();
    let titles: Vec<&str> = results
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "Official site",
            "Memory safety",
            "Cargo (package manager)",
            "C++",
            "Go (programming language)"
        ]
    );
    assert_eq!(
        results[2]["snippet"],
        "The build system and package manager of Rust."
    );
    assert_eq!(results[3]["url"], "https://duckduckgo.com/C%2B%2B");
}

#[tokio::test]
async fn an_empty_instant_answer_falls_back_to_web_results() {
    let server = TestServer::start(duckduckgo()).await;
    let ddg = tool(&web_tools(&server), "duckduckgo_search");
    let out = call(&ddg, json!({"query": "rust async runtime"}))
        .await
        .unwrap();
    let paths: Vec<String> = server
        .seen()
        .iter()
        .map(|s| s.uri.split('?').next().unwrap().to_string())
        .collect();
    assert_eq!(paths, ["/", "/html/"]);
    let a = answer(&out);
    assert_eq!(a["source"], "web_results");
    assert_eq!(a["summary"], "");
    let results = a["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0]["url"], "https://tokio.example.org/");
}

#[tokio::test]
async fn a_failing_instant_answer_api_falls_back_too() {
    let server = TestServer::start(duckduckgo()).await;
    let ddg = tool(&web_tools(&server), "duckduckgo_search");
    let out = call(&ddg, json!({"query": "broken api"})).await.unwrap();
    assert_eq!(answer(&out)["source"], "web_results");
}

#[tokio::test]
async fn an_empty_query_is_a_clear_error_without_a_request() {
    let server = TestServer::start(duckduckgo()).await;
    let ddg = tool(&web_tools(&server), "duckduckgo_search");
    let err = call(&ddg, json!({"query": "   "})).await.unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
    assert!(err.to_string().contains("query is empty"), "{err}");
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn duckduckgo_timeout_is_configurable() {
    let addr = silent_server().await;
    let options = DuckDuckGoOptions::default()
        .with_api_url(format!("http://{addr}/"))
        .with_html_url(format!("http://{addr}/html/"))
        .with_timeout(Duration::from_millis(200));
    let ddg = tool(
        &tools(&WebOptions::default().with_duckduckgo(options)).unwrap(),
        "duckduckgo_search",
    );
    let err = call(&ddg, json!({"query": "anything"})).await.unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("Instant Answer API") && text.contains("results page"),
        "{text}"
    );
}

#[tokio::test]
async fn a_custom_http_client_is_used() {
    let server = TestServer::start(duckduckgo()).await;
    let client = reqwest::Client::builder()
        .default_headers(
            [(reqwest::header::ACCEPT_LANGUAGE, "de-DE".parse().unwrap())]
                .into_iter()
                .collect(),
        )
        .build()
        .unwrap();
    let options = ddg_options(&server).with_client(client);
    let ddg = tool(
        &tools(&WebOptions::default().with_duckduckgo(options)).unwrap(),
        "duckduckgo_search",
    );
    let out = call(&ddg, json!({"query": "rust programming language"}))
        .await
        .unwrap();
    assert_eq!(answer(&out)["source"], "instant_answer");
}

#[tokio::test]
async fn the_builtin_set_has_the_web_tools_by_default_and_can_leave_them_out() {
    let dir = tempfile::tempdir().unwrap();
    let set = BuiltinToolSet::new(BuiltinOptions::new(dir.path())).unwrap();
    let names: Vec<&str> = set.tool_list().iter().map(|t| t.name()).collect();
    for name in ["WebFetch", "WebSearch", "duckduckgo_search"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let without =
        BuiltinToolSet::new(BuiltinOptions::new(dir.path()).with_web(WebOptions::disabled()))
            .unwrap();
    assert!(
        !without
            .tool_list()
            .iter()
            .any(|t| t.name().starts_with("Web"))
    );
}

#[tokio::test]
async fn every_web_tool_parameter_is_described_with_claude_code_names() {
    let server = TestServer::start(duckduckgo()).await;
    let expected: [(&str, &[&str], &[&str]); 3] = [
        ("WebFetch", &["url", "prompt"], &["url", "prompt"]),
        (
            "WebSearch",
            &["query", "allowed_domains", "blocked_domains"],
            &["query"],
        ),
        ("duckduckgo_search", &["query"], &["query"]),
    ];
    let tools = web_tools(&server);
    for (name, properties, required) in expected {
        let declaration = tool(&tools, name).declaration().clone();
        let schema = &declaration.input_schema;
        let props = schema["properties"].as_object().unwrap();
        let mut names: Vec<&str> = props.keys().map(String::as_str).collect();
        names.sort();
        let mut want = properties.to_vec();
        want.sort();
        assert_eq!(names, want, "{name}");
        for (prop, spec) in props {
            let description = spec["description"].as_str().unwrap_or("");
            assert!(!description.is_empty(), "{name}.{prop} has no description");
        }
        let mut req: Vec<&str> = declaration.required_properties();
        req.sort();
        let mut want_req = required.to_vec();
        want_req.sort();
        assert_eq!(req, want_req, "{name}");
        assert!(declaration.meta.is_read_only(), "{name} is read-only");
    }
}
