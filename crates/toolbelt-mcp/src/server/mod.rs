//! Serving a registry over MCP: Toolbelt's tools (and the tools of the servers it aggregates)
//! to any MCP client, over stdio or streamable HTTP.
//!
//! Every call runs through the [`Executor`](toolbelt_exec::Executor): validation, hooks and
//! middleware apply exactly as for a model's calls.
//!
//! - Results: a tool's output becomes MCP content (text, images, audio, resource links,
//!   embedded resources); `structuredContent` when the tool declared an output schema;
//!   `isError: true` for result-level failures *and* for failed calls (invalid arguments,
//!   rejections, timeouts), so the client's model reads them. An unknown tool is a JSON-RPC
//!   error, as MCP specifies.
//! - Progress: when a client sends a progress token, a streaming tool's chunks and any
//!   [`ToolContext::report_progress`](toolbelt_core::ToolContext::report_progress) reach it
//!   as `notifications/progress`, and long calls send a heartbeat.
//! - Cancellation: a client's `notifications/cancelled` cancels the call's context.
//! - `notifications/tools/list_changed` goes to every client on
//!   [`ToolServer::notify_tools_changed`], and from [`ToolServer::watch_registry`] whenever the
//!   visible tools change (an aggregated MCP server reported a new list, a tool was added).
//! - HTTP ([`HttpServer`]): sessions with ids that end when idle and are capped, a bearer
//!   token (401 without it; required off loopback), `Host` and `Origin` allow lists (403),
//!   JSON-RPC errors for malformed bodies (400 with -32700 or -32600), TCP_NODELAY, and a
//!   graceful shutdown.
//! - stdio ([`serve_stdio`]): stdout carries only the protocol; a SIGTERM-driven shutdown
//!   never waits on a blocked stdin read. A line that is JSON but not a JSON-RPC message gets
//!   a -32600 error; a line that is not JSON is skipped (rmcp's choice, as the other MCP
//!   SDKs do: there is no id to answer, and answering garbage can start an error storm with
//!   a peer that echoes it).
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use toolbelt_exec::{Executor, Registry};
//! use toolbelt_mcp::server::{CancellationToken, HttpServeOptions, HttpServer, ToolServer};
//!
//! # async fn run() -> std::io::Result<()> {
//! let registry = Arc::new(Registry::new()); // register tools and tool sets here
//! let server = ToolServer::new(Arc::new(Executor::new(registry)));
//! let stop = CancellationToken::new();
//! let watcher = server.watch_registry(Duration::from_millis(500), stop.child_token());
//! let options = HttpServeOptions { token: Some("secret".into()), ..Default::default() };
//! let http = HttpServer::bind("127.0.0.1:0".parse().unwrap(), server, options).await?;
//! println!("serving on {}", http.url()?);
//! http.run(stop.clone()).await?; // returns once `stop` is cancelled (on SIGTERM, say)
//! stop.cancel();
//! let _ = watcher.await;
//! # Ok(()) }
//! ```

mod convert;
mod handler;
mod http;
mod line_filter;
mod malformed;
mod relay;
mod sessions;
mod stdio;
mod upstream;

pub use convert::{call_result, error_result, mcp_tool};
pub use handler::{DEFAULT_HEARTBEAT, ToolServer};
pub use http::{HttpServeOptions, HttpServer};
pub use sessions::{DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT};
pub use stdio::serve_stdio;
pub use upstream::{DEFAULT_CONNECT_TIMEOUT, UpstreamOptions, UpstreamStatus, Upstreams};

/// The token that stops [`serve_stdio`], [`HttpServer::run`] and
/// [`ToolServer::watch_registry`] (re-exported so callers need not depend on `tokio-util`).
pub use tokio_util::sync::CancellationToken;
