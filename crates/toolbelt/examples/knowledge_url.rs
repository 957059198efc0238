//! A web page as a knowledge source, read through WebFetch's guarded fetcher, then searched
//! with `knowledge_search`.
//!
//! The program serves one HTML page on 127.0.0.1 itself. A loopback address is exactly what
//! WebFetch's address guard refuses (a page could otherwise make an agent read a service on
//! the machine), so the first index is refused before anything connects; the second allows
//! 127.0.0.1 explicitly, as `toolbelt knowledge index --allow-address 127.0.0.1` does, and
//! the page is indexed and searched, each passage cited by its URL. It ends on its own and
//! exits non-zero if any step does not do what it says. Run with
//! `cargo run -p toolbelt --example knowledge_url --features knowledge`.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolbelt::builtin::web::AddressPolicy;
use toolbelt::knowledge::{
    KnowledgeBase, KnowledgeToolOptions, MemoryStore, Source, WebFetchSource, knowledge_search_tool,
};
use toolbelt::{Tool, ToolContext};

const GUIDE: &str = "<html><head><title>Release guide</title></head><body>\
<h2>Rollback</h2><p>Run <code>make rollback</code> to restore the previous release; it \
takes about a minute.</p>\
<h2>Hotfixes</h2><p>Branch from the release tag, fix, and tag a patch version.</p>\
</body></html>";

/// Serves `GUIDE` to every request on 127.0.0.1; returns the page's URL and a count of the
/// connections made.
async fn serve_page() -> std::io::Result<(String, Arc<AtomicUsize>)> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let url = format!("http://{}/guide", listener.local_addr()?);
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                // The request head, at most 8 KiB; its content does not matter here.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{GUIDE}",
                    GUIDE.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    Ok((url, connections))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, connections) = serve_page().await?;
    let sources = [Source::new(&url)];

    // WebFetch's default guard: loopback is refused where the connection would be made.
    let guarded = KnowledgeBase::new(Arc::new(MemoryStore::new()))
        .with_url_fetcher(Arc::new(WebFetchSource::new(AddressPolicy::default())?));
    let report = guarded.index(&sources).await?;
    println!(
        "default guard: {} unreadable, {} chunks, {} connections",
        report.skipped_unreadable,
        report.chunks,
        connections.load(Ordering::SeqCst)
    );
    if report.skipped_unreadable != 1 || report.chunks != 0 {
        return Err(format!("the guard should refuse {url}: {report:?}").into());
    }
    if connections.load(Ordering::SeqCst) != 0 {
        return Err("the guard let a connection through".into());
    }

    // 127.0.0.1 allowed explicitly, and nothing else.
    let allowed = AddressPolicy::default().allow_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let base = Arc::new(
        KnowledgeBase::new(Arc::new(MemoryStore::new()))
            .with_url_fetcher(Arc::new(WebFetchSource::new(allowed)?)),
    );
    let report = base.index(&sources).await?;
    println!(
        "127.0.0.1 allowed: {} added, {} chunks",
        report.added, report.chunks
    );
    if report.added != 1 || report.chunks == 0 {
        return Err(format!("{url} was not indexed: {report:?}").into());
    }

    let tool = knowledge_search_tool(base, KnowledgeToolOptions::default())?;
    let answer = tool
        .call(
            ToolContext::for_call("k1"),
            &json!({"query": "how do I rollback to the previous release?"}).to_string(),
        )
        .await?
        .llm_text();
    println!("\nknowledge_search(\"how do I rollback to the previous release?\"):\n{answer}");
    let first = answer
        .lines()
        .find(|l| l.starts_with("[1] "))
        .ok_or("no passage was found")?;
    if !first.starts_with(&format!("[1] {url}")) || !first.contains("Rollback") {
        return Err(
            format!("the best passage is not the guide's Rollback section: {first}").into(),
        );
    }
    if !answer.contains("make rollback") {
        return Err("the passage lost its text".into());
    }
    Ok(())
}
