//! WebFetch on hostile pages: nesting of 10,000, 40,000 and 100,000 levels in several shapes
//! and a 5 MB flat page, served from 127.0.0.1. Prints the median wall time of a fetch (HTTP
//! on loopback included; it is a few milliseconds of it) and the length of the answer.
//!
//! `cargo bench -p toolbelt-builtin --bench html_conversion` (add `-- quick` for one run each).

#[path = "../tests/web_support/hostile.rs"]
#[allow(dead_code)]
mod hostile;

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::routing::get;
use hostile::{SHAPES, flat_page, nested_page};
use toolbelt_builtin::web::{AddressPolicy, FetchOutcome, WebFetchOptions, WebFetcher};
use toolbelt_core::ToolContext;

const LEVELS: [usize; 3] = [10_000, 40_000, 100_000];
const FLAT_BYTES: usize = 5 * 1024 * 1024;

fn site() -> Router {
    Router::new()
        .route(
            "/nested/{shape}/{levels}",
            get(|Path((shape, levels)): Path<(String, usize)>| async move {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    nested_page(&shape, levels),
                )
            }),
        )
        .route(
            "/flat",
            get(|| async { ([(header::CONTENT_TYPE, "text/html")], flat_page(FLAT_BYTES)) }),
        )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs = if std::env::args().any(|a| a == "quick") {
        1
    } else {
        5
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, site()).await.unwrap() });
    let fetcher = WebFetcher::new(
        WebFetchOptions::default()
            .with_addresses(AddressPolicy::default().allow("127.0.0.1/32".parse().unwrap()))
            .with_max_body_bytes(16 * 1024 * 1024)
            .with_timeout(Duration::from_secs(120)),
    )
    .unwrap();
    let mut paths: Vec<String> = Vec::new();
    for (shape, _, _) in SHAPES {
        for levels in LEVELS {
            paths.push(format!("/nested/{shape}/{levels}"));
        }
    }
    paths.push("/flat".to_string());
    println!(
        "{:<28} {:>10} {:>12} {:>12}",
        "page", "bytes", "median", "content"
    );
    for path in paths {
        let url = format!("http://{addr}{path}");
        let mut times = Vec::new();
        let mut answer = (0, 0);
        for _ in 0..runs {
            let started = Instant::now();
            let outcome = fetcher.fetch(&ToolContext::for_call("bench"), &url).await;
            times.push(started.elapsed());
            match outcome {
                Ok(FetchOutcome::Page(page)) => {
                    // A nested page's deepest text must survive; the flat page has none.
                    let kept = page.content.contains(hostile::BOTTOM) || path == "/flat";
                    assert!(kept, "{path}: {}", page.content);
                    answer = (page.body_bytes, page.content.len())
                }
                other => panic!("{path}: {other:?}"),
            }
        }
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "{path:<28} {:>10} {:>10.1}ms {:>12}",
            answer.0,
            median.as_secs_f64() * 1000.0,
            answer.1
        );
    }
}
