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
//!   visible tools change (an aggregated MCP server reported a new list or came up, a tool was
//!   added).
//! - Aggregated MCP servers ([`Upstreams`], given to [`ToolServer::with_upstreams`]) connect
//!   in the background, each attempt bounded by [`UpstreamOptions::connect_timeout`] and
//!   failures retried with a growing delay, so `initialize` and `tools/list` are answered at
//!   once with whatever is up; a server's tools appear (with `list_changed`) when it connects.
//!   A `tools/call` naming a tool nobody offers yet waits for the servers' first attempts. The
//!   status resource `toolbelt://status` (JSON: each server connected, connecting, or failed
//!   with the error) and the log say where each server stands. A resource rather than a tool:
//!   the state is for the people and programs watching the server, and a tool would sit in
//!   every model's tool list.
//! - The relay is faithful: a server's progress reaches the client under the client's
//!   progress token; the `logging` capability is declared, `logging/setLevel` is forwarded to
//!   every server that logs and their `notifications/message` to every client; a client's
//!   cancellation cancels the server's call; resources (list, templates, read, subscribe and
//!   updates), prompts (list, get) and completions are relayed. Titles, descriptions,
//!   annotations (absent ones stay absent), `_meta`, content annotations (audience, priority)
//!   and structured content pass unchanged (rmcp's types end to end; what Toolbelt's
//!   `ToolOutput` has no field for rides in a private `_meta` key taken out before answering).
//! - A server's requests to its client (`elicitation/create`, `sampling/createMessage`,
//!   `roots/list`) go to the client whose call to that server is in flight (the most recent
//!   one when several are; with none, the most recently connected client that declared the
//!   capability), and its answer or error goes back unchanged. A client that did not declare
//!   the capability is not asked: the server gets -32601 saying so. `roots/list` with no
//!   client offering roots gets the tool set's own roots (`toolbelt serve`: `--dir`); a
//!   client's `notifications/roots/list_changed` is passed on to every server. The
//!   upstream sessions declare elicitation, sampling and roots, since a client that connects
//!   later may offer them.
//! - Names on a clash, one rule for everything an aggregated server offers: the built-in
//!   tools keep theirs; then, in configuration order, the first connected server keeps a
//!   name and a later one's is offered as `{server}_{name}` (tools and prompts) or under
//!   `toolbelt://servers/{server}/{uri}` (resource URIs and templates, the server's name with
//!   `%` and `/` percent-encoded). A server that is not up yet does not hold its names, so
//!   when it connects a later server's name can gain its prefix (with `list_changed`);
//!   [`UpstreamOptions::always_prefix`] prefixes every aggregated name and avoids that.
//! - HTTP ([`HttpServer`]): sessions with ids that end when idle and are capped (or on the
//!   client's `DELETE`: 200, and 404 for an id no session has, as for a `POST`), a bearer
//!   token (401 without it, its `WWW-Authenticate` naming the resource metadata served
//!   at `/.well-known/oauth-protected-resource/mcp`, and `error="invalid_token"` for a wrong
//!   one; required off loopback), `Host` and `Origin` allow lists (403),
//!   JSON-RPC errors for malformed bodies (400 with -32700 or -32600), TCP_NODELAY, and a
//!   graceful shutdown. Replicas behind a load balancer share their sessions through a
//!   [`SharedSessionStore`] ([`HttpServeOptions::shared_sessions`]): a session opened on one
//!   replica is accepted by every other (the handshake is replayed there), each call's
//!   context names its session ([`ToolServer::with_session_context`]), the deferred tools a
//!   session loaded are listed by every replica, and what one replica has for a client
//!   (a notification for its `GET` stream, the answer to a request it sent the client)
//!   reaches the replica that needs it through the store's messages.
//! - stdio ([`serve_stdio`]): stdout carries only the protocol; a SIGTERM-driven shutdown
//!   never waits on a blocked stdin read. A line that is JSON but not a JSON-RPC message gets
//!   a -32600 error; a line that is not JSON gets a -32700 parse error with `id: null` (rmcp
//!   would skip it and leave the client waiting). Parse errors are rate-limited to 10 a
//!   second, so a peer that echoes errors back as garbage cannot start a storm; the lines
//!   beyond that go unanswered and the log counts them.
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

mod approval;
mod bus;
mod convert;
mod deferred;
mod handler;
mod http;
mod line_filter;
mod malformed;
mod outbox;
mod relay;
mod requests;
mod sessions;
mod shared;
mod stdio;
mod upstream;

pub use approval::ElicitingApprover;
pub use convert::{call_result, error_result, mcp_tool};
pub use deferred::{TOOL_SEARCH, ToolRanker};
pub use handler::{DEFAULT_HEARTBEAT, ToolServer};
pub use http::{HttpServeOptions, HttpServer};
pub use sessions::{DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT};
pub use shared::{SharedSessionStore, SharedStoreError};
pub use stdio::serve_stdio;
pub use upstream::{DEFAULT_CONNECT_TIMEOUT, UpstreamOptions, UpstreamStatus, Upstreams};

/// The token that stops [`serve_stdio`], [`HttpServer::run`] and
/// [`ToolServer::watch_registry`] (re-exported so callers need not depend on `tokio-util`).
pub use tokio_util::sync::CancellationToken;
