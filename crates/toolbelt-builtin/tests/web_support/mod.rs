//! Helpers shared by the web tool tests: real HTTP servers on 127.0.0.1, request recording,
//! fixtures, and calling tools.
#![allow(dead_code)]

pub mod hostile;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use toolbelt_core::{DynTool, ToolContext, ToolError, ToolOutput};

/// One request a test server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Path and query, as sent.
    pub uri: String,
    /// The `User-Agent` header.
    pub user_agent: String,
}

impl Seen {
    /// The decoded value of a query parameter.
    pub fn param(&self, name: &str) -> Option<String> {
        let url = reqwest::Url::parse(&format!("http://127.0.0.1{}", self.uri)).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// A server on 127.0.0.1 that records every request it gets.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl TestServer {
    /// Serves `router` on a free port of 127.0.0.1 until the test's runtime ends.
    pub async fn start(router: Router) -> Self {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        let router = router.layer(middleware::from_fn(move |req: Request, next: Next| {
            let log = log.clone();
            async move {
                let user_agent = req
                    .headers()
                    .get("user-agent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let uri = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default();
                log.lock().unwrap().push(Seen { uri, user_agent });
                next.run(req).await
            }
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Self { addr, seen }
    }

    /// Serves `router` from a thread and runtime of its own, with ordinary stacks, for a test
    /// whose own runtime is constrained (small stacks); it serves until the process ends.
    pub fn start_on_own_thread(router: Router) -> Self {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                sender.send(TestServer::start(router).await).unwrap();
                std::future::pending::<()>().await
            });
        });
        receiver.recv().unwrap()
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

/// A server on 127.0.0.1 that accepts connections and never answers.
pub async fn silent_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    addr
}

/// A fixture file of `tests/fixtures/web/`.
pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/web/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The named tool of a list.
pub fn tool(tools: &[DynTool], name: &str) -> DynTool {
    tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool named {name}"))
        .clone()
}

/// Calls a tool with JSON arguments.
pub async fn call(tool: &DynTool, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    tool.call(ToolContext::for_call("test"), &args.to_string())
        .await
}
