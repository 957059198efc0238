//! Attack on `serve`'s notification relay (issue 25, item 4): one client holds a `GET`
//! stream open and never reads it while an aggregated server floods log messages. The
//! other client must still get every message: each client has its own bounded queue
//! (`server/outbox.rs`), so the slow one lags (and drops) alone. Before, one task sent to
//! the clients in turn and stalled on the slow one, queueing without bound behind it.
//!
//! Real peers: a Python SDK server over stdio as the upstream, `HttpServer` on 127.0.0.1,
//! and the clients speaking streamable HTTP over plain sockets and reqwest.
#![cfg(feature = "server")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolbelt_exec::{Executor, Registry, ToolSetOptions, ToolSetRefresh};
use toolbelt_mcp::server::{
    CancellationToken, HttpServeOptions, HttpServer, ToolServer, UpstreamOptions, Upstreams,
};
use toolbelt_mcp::{ConnectionConfig, McpToolSet, ToolSet, TransportConfig};

/// Log messages the upstream sends, and their size: far more than the slow client's socket
/// buffers take (a few MiB), less than one client's queue holds (8 MiB).
const MESSAGES: usize = 400;
const MESSAGE_BYTES: usize = 16 * 1024;

const ACCEPT: &str = "application/json, text/event-stream";

/// Opens an MCP session on `url`; its id.
async fn open_session(http: &reqwest::Client, url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "attack", "version": "1"}}});
    let response = http
        .post(url)
        .header("Accept", ACCEPT)
        .json(&init)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    response.bytes().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = http
        .post(url)
        .header("Accept", ACCEPT)
        .header("Mcp-Session-Id", &session)
        .json(&initialized)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    session
}

/// A `GET` stream of `session` whose headers are read and nothing more, on a socket with a
/// small receive buffer: a client that has stopped reading.
async fn stalled_stream(url: &reqwest::Url, session: &str) -> tokio::net::TcpStream {
    let addr = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n",
        url.path()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "the stream opened"
        );
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_never_reads_does_not_stall_the_others_during_a_log_flood() {
    toolbelt_testkit::require_python_mcp_sdk();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flood_server.py");
    let upstream = McpToolSet::builder(
        "flood",
        ConnectionConfig::new(TransportConfig::stdio(
            toolbelt_testkit::python(),
            [fixture.display().to_string()],
        ))
        .with_timeout(Duration::from_secs(120)),
    )
    .build()
    .unwrap();
    let upstreams = Upstreams::new(
        vec![upstream.clone()],
        UpstreamOptions {
            connect_timeout: Duration::from_secs(30),
            always_prefix: false,
        },
    );
    let registry = Registry::new();
    for set in upstreams.tool_sets() {
        registry
            .add_tool_set(set, ToolSetOptions::new().refresh(ToolSetRefresh::OnRun))
            .unwrap();
    }
    let stop = CancellationToken::new();
    upstreams.start(stop.child_token());
    let server = ToolServer::new(Arc::new(Executor::new(Arc::new(registry))))
        .with_upstreams(upstreams.clone());
    let http_server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        server,
        HttpServeOptions::default(),
    )
    .await
    .unwrap();
    let url = http_server.url().unwrap();
    let serving = tokio::spawn(http_server.run(stop.clone()));

    let http = reqwest::Client::new();
    let slow = open_session(&http, &url).await;
    let _stalled = stalled_stream(&reqwest::Url::parse(&url).unwrap(), &slow).await;
    let good = open_session(&http, &url).await;
    let stream = http
        .get(&url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &good)
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success(), "{}", stream.status());
    let counting = tokio::spawn(async move {
        let (mut seen, mut text) = (0, Vec::new());
        let mut body = stream.bytes_stream();
        while seen < MESSAGES {
            let Some(Ok(chunk)) = body.next().await else {
                break;
            };
            text.extend_from_slice(&chunk);
            while let Some(end) = text.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = text.drain(..=end).collect();
                if line.starts_with(b"data:")
                    && line.windows(15).any(|w| w == b"\"logger\":\"flood")
                {
                    seen += 1;
                }
            }
        }
        seen
    });

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "flood", "arguments": {"count": MESSAGES, "size": MESSAGE_BYTES}}});
    let answer = http
        .post(&url)
        .header("Accept", ACCEPT)
        .header("Mcp-Session-Id", &good)
        .json(&call)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(answer.contains(&format!("sent {MESSAGES}")), "{answer}");
    // Stalled behind the slow client, the good one got a fraction and then nothing: the
    // guard turns that into a failure.
    let seen = tokio::time::timeout(Duration::from_secs(60), counting)
        .await
        .map(|seen| seen.unwrap());
    assert_eq!(seen, Ok(MESSAGES), "the good client got every log message");

    stop.cancel();
    let _ = serving.await;
    upstream.close().await.unwrap();
}
