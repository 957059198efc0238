//! The MCP servers a [`ToolServer`](super::ToolServer) aggregates, connected in the
//! background.
//!
//! A server that is slow to start, fails, or never answers must not hold up the clients: the
//! server answers `initialize` at once and lists whatever is connected. Each aggregated server
//! gets a task that connects, initializes and lists its tools within the connect timeout;
//! until that succeeds its tool set lists nothing, and after a failure the task tries again
//! with a growing delay (1 s doubling to 60 s). When a server comes up its tools appear, and
//! [`ToolServer::watch_registry`](super::ToolServer::watch_registry) sends
//! `notifications/tools/list_changed`. Every change of state is logged, and the status
//! resource (`toolbelt://status`) says what each server is doing now.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use toolbelt_core::{
    Declaration, DynTool, DynToolSet, Tool, ToolContext, ToolError, ToolOutput, ToolSet,
};

use super::requests::{CallingClient, CallsInFlight};
use crate::McpToolSet;

/// How long [`Upstreams`] waits for one server to connect and list its tools, by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The first and the longest wait before trying a failed server again.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_LONGEST: Duration = Duration::from_secs(60);

/// How [`Upstreams`] connects and names what it relays.
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    /// How long one attempt to connect, initialize and list tools may take.
    pub connect_timeout: Duration,
    /// Prefix every tool, prompt, resource and template of an aggregated server with the
    /// server's name, not only the ones whose name (or URI) an earlier one took.
    pub always_prefix: bool,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            always_prefix: false,
        }
    }
}

/// What an aggregated server is doing, as the status resource shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum UpstreamStatus {
    /// The first attempt, or a retry, is under way.
    Connecting {
        /// Which attempt (1 for the first).
        attempt: u32,
    },
    /// Connected; its tools, resources and prompts are offered.
    Connected,
    /// The last attempt (or listing) failed; another follows after `retry_in_ms`.
    Failed {
        /// Why, as the MCP client reported it.
        error: String,
        /// When the failure happened, in seconds since the Unix epoch.
        since: u64,
        /// The wait before the next attempt, in milliseconds (absent when the failure was a
        /// listing of a connected server, retried on the next listing).
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_in_ms: Option<u64>,
    },
}

/// One aggregated server.
pub(crate) struct Upstream {
    pub(crate) name: String,
    pub(crate) set: McpToolSet,
    status: RwLock<UpstreamStatus>,
    /// The clients' calls to this server now, so its requests reach the right client.
    pub(crate) calls: Arc<CallsInFlight>,
}

impl Upstream {
    pub(crate) fn status(&self) -> UpstreamStatus {
        self.status
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn is_connected(&self) -> bool {
        matches!(self.status(), UpstreamStatus::Connected)
    }

    fn set_status(&self, status: UpstreamStatus) {
        *self.status.write().unwrap_or_else(|e| e.into_inner()) = status;
    }
}

/// The MCP servers a [`ToolServer`](super::ToolServer) aggregates, in configuration order
/// (which decides who keeps a name on a clash), connected in the background.
///
/// Register [`Upstreams::tool_sets`] in the executor's registry (in this order), give the
/// `Upstreams` to [`ToolServer::with_upstreams`](super::ToolServer::with_upstreams), and call
/// [`Upstreams::start`]. Whoever made the tool sets closes them.
#[derive(Clone)]
pub struct Upstreams {
    pub(crate) servers: Arc<Vec<Arc<Upstream>>>,
    pub(crate) options: UpstreamOptions,
    /// Told when a server connects, so the server can announce its resources and prompts.
    connected: Arc<tokio::sync::Notify>,
    /// How many servers have not finished their first attempt yet (0 when all have).
    first_attempts: tokio::sync::watch::Sender<usize>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("Upstreams")
            .field("servers", &names)
            .field("options", &self.options)
            .finish()
    }
}

impl Upstreams {
    /// The servers behind `sets`, in the order given (configuration order). Each set's name
    /// is its server's name.
    pub fn new(sets: Vec<McpToolSet>, options: UpstreamOptions) -> Self {
        let servers = sets
            .into_iter()
            .map(|set| {
                Arc::new(Upstream {
                    name: ToolSet::name(&set).to_string(),
                    set,
                    status: RwLock::new(UpstreamStatus::Connecting { attempt: 1 }),
                    calls: Arc::default(),
                })
            })
            .collect();
        let servers: Vec<Arc<Upstream>> = servers;
        let (first_attempts, _) = tokio::sync::watch::channel(servers.len());
        Self {
            servers: Arc::new(servers),
            options,
            connected: Arc::default(),
            first_attempts,
        }
    }

    /// One tool set per server, in order: each lists nothing until its server is connected,
    /// then the server's tools. Closing one closes its server's session.
    pub fn tool_sets(&self) -> Vec<DynToolSet> {
        self.servers
            .iter()
            .map(|upstream| {
                Arc::new(BackgroundSet {
                    upstream: upstream.clone(),
                    tracked: Mutex::default(),
                }) as DynToolSet
            })
            .collect()
    }

    /// Each server's name and state, in order.
    pub fn status(&self) -> Vec<(String, UpstreamStatus)> {
        self.servers
            .iter()
            .map(|s| (s.name.clone(), s.status()))
            .collect()
    }

    /// Starts connecting every server, each in a task of its own, until connected or `stop`
    /// is cancelled. Returns at once.
    pub fn start(&self, stop: CancellationToken) {
        for upstream in self.servers.iter() {
            let upstream = upstream.clone();
            let timeout = self.options.connect_timeout;
            let connected = self.connected.clone();
            let first_attempts = self.first_attempts.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let attempted =
                    || first_attempts.send_modify(|left| *left = left.saturating_sub(1));
                tokio::select! {
                    _ = stop.cancelled() => {}
                    // A permit is kept when nobody waits, so the watcher never misses one.
                    _ = connect_until_up(&upstream, timeout, attempted) => connected.notify_one(),
                }
            });
        }
    }

    /// Waits until every server has finished its first attempt to connect (connected or
    /// failed), at most the connect timeout. A call naming a tool nobody offers yet waits
    /// here, so a client that knows a server's tool from an earlier session can call it
    /// right after start-up.
    pub(crate) async fn first_attempts_done(&self) {
        let mut left = self.first_attempts.subscribe();
        let done = left.wait_for(|left| *left == 0);
        let _ = tokio::time::timeout(self.options.connect_timeout, done).await;
    }

    /// Resolves the next time a server connects.
    pub(crate) async fn next_connected(&self) {
        self.connected.notified().await;
    }

    /// The connected servers, in order.
    pub(crate) fn connected(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.servers.iter().filter(|s| s.is_connected())
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// Tries to connect `upstream` until it works, logging every failure; `attempted` runs once,
/// when the first attempt is over.
async fn connect_until_up(upstream: &Upstream, timeout: Duration, attempted: impl FnOnce()) {
    let mut delay = RETRY_FIRST;
    let mut attempt = 1;
    let mut attempted = Some(attempted);
    loop {
        upstream.set_status(UpstreamStatus::Connecting { attempt });
        let ctx = ToolContext::new();
        let error = match tokio::time::timeout(timeout, upstream.set.init(&ctx)).await {
            Ok(Ok(())) => {
                upstream.set_status(UpstreamStatus::Connected);
                tracing::info!(server = %upstream.name, attempt, "aggregated MCP server connected");
                if let Some(attempted) = attempted.take() {
                    attempted();
                }
                return;
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!(
                "MCP server {:?}: did not connect, initialize and list its tools within {:?}",
                upstream.name, timeout
            ),
        };
        tracing::warn!(
            server = %upstream.name,
            attempt,
            "aggregated MCP server not available: {error}; trying again in {delay:?}"
        );
        upstream.set_status(UpstreamStatus::Failed {
            error,
            since: unix_seconds(),
            retry_in_ms: Some(delay.as_millis().try_into().unwrap_or(u64::MAX)),
        });
        if let Some(attempted) = attempted.take() {
            attempted();
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RETRY_LONGEST);
        attempt += 1;
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An aggregated server as a tool set: no tools until the server is connected.
struct BackgroundSet {
    upstream: Arc<Upstream>,
    /// The last listing: each server tool and the tracked tool offered for it, kept so that
    /// an unchanged tool is offered as the same value (the executor compiles a tool's
    /// validator once per value).
    tracked: Mutex<Vec<(DynTool, DynTool)>>,
}

impl BackgroundSet {
    /// The server's tools, each recording its calls in the server's calls in flight.
    fn track(&self, tools: Vec<DynTool>) -> Vec<DynTool> {
        let mut tracked = self.tracked.lock().unwrap_or_else(|e| e.into_inner());
        let listing: Vec<(DynTool, DynTool)> = tools
            .into_iter()
            .map(|tool| {
                // Both are held, so an address compared here cannot have been reused.
                let known = tracked
                    .iter()
                    .find(|(inner, _)| Arc::ptr_eq(inner, &tool))
                    .map(|(_, offered)| offered.clone());
                let offered = known.unwrap_or_else(|| {
                    Arc::new(TrackedTool {
                        inner: tool.clone(),
                        calls: self.upstream.calls.clone(),
                    }) as DynTool
                });
                (tool, offered)
            })
            .collect();
        let offered = listing.iter().map(|(_, offered)| offered.clone()).collect();
        *tracked = listing;
        offered
    }
}

/// A server's tool whose calls are recorded, with the client that made them, while they run.
struct TrackedTool {
    inner: DynTool,
    calls: Arc<CallsInFlight>,
}

#[async_trait]
impl Tool for TrackedTool {
    fn declaration(&self) -> &Declaration {
        self.inner.declaration()
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        let _in_flight = ctx
            .get::<CallingClient>()
            .map(|client| self.calls.enter(client.clone()));
        self.inner.call(ctx, args).await
    }
}

#[async_trait]
impl ToolSet for BackgroundSet {
    fn name(&self) -> &str {
        &self.upstream.name
    }

    async fn tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        match self.upstream.status() {
            UpstreamStatus::Connected => {}
            UpstreamStatus::Failed {
                retry_in_ms: None, ..
            } => {}
            // Not up yet: the background task is on it.
            _ => return Ok(Vec::new()),
        }
        match self.upstream.set.tools(ctx).await {
            Ok(tools) => {
                self.upstream.set_status(UpstreamStatus::Connected);
                Ok(self.track(tools))
            }
            Err(err) => {
                // The server went away after connecting: the set reconnects on next use.
                if !ctx.is_cancelled() {
                    self.upstream.set_status(UpstreamStatus::Failed {
                        error: err.to_string(),
                        since: unix_seconds(),
                        retry_in_ms: None,
                    });
                }
                Err(err)
            }
        }
    }

    async fn close(&self) -> Result<(), ToolError> {
        self.upstream.set.close().await
    }
}
