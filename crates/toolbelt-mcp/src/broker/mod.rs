//! The MCP broker: on-demand discovery of MCP servers and tools through four tools.
//!
//! Instead of exposing every tool of every MCP server to the model, [`McpBroker`] is a
//! [`ToolSet`] of four tools, and the model discovers what it needs step by step:
//!
//! | tool | arguments | result |
//! |---|---|---|
//! | `mcp_list_servers` | none | `{servers: [{name, transport, description?}]}` |
//! | `mcp_list_tools` | `selector`, `transport?`, `headers?` | `{server, tools: [{name, selector, signature, description?}]}` sorted by name |
//! | `mcp_inspect_tools` | `selector`, `tools[]`, `include_output_schema?`, `transport?`, `headers?` | `{tools: [{name, selector, description, input_schema, output_schema?}]}` |
//! | `mcp_call` | `selector`, `arguments`, `transport?`, `headers?` | `{content?, structured_content?, is_error}` |
//!
//! Every argument object refuses unknown fields (`additionalProperties: false`) and every
//! tool declares its output schema. A signature is one line derived from the tool's schemas,
//! such as `add(a: number, b: number) -> {sum: number}` (see [`render_signature`]).
//! `transport` and `headers` apply to ad-hoc URLs only; named servers ignore them.
//! `mcp_call` needs `arguments` (`{}` for none) and checks them against the tool's required
//! properties before calling, naming each one missing. `mcp_call` returns
//! `structured_content` when the tool sent one and `content` (its text) otherwise; images
//! and other blocks also travel in the output's content blocks.
//!
//! ## Selectors
//!
//! One string names a server or a tool (see [`selector`]): `local_code`, `local_code.add`
//! (the longest configured server name wins, so dotted names work), `https://h/mcp`,
//! `https://h/mcp.add` and `https://h/mcp#tool=add`. Listings print the `#tool=` form when
//! the dotted one would be ambiguous.
//!
//! ## Ad-hoc URLs
//!
//! Off by default: a URL selector then fails with a clear error. When on
//! ([`McpBrokerBuilder::allow_ad_hoc_http`]), URLs are reached over streamable HTTP or SSE
//! only; the allow-list ([`McpBrokerBuilder::url_allow_list`]) decides before any
//! connection; headers from the model are refused when they carry credentials
//! ([`DENIED_HEADERS`], compared case-insensitively, plus
//! [`McpBrokerBuilder::deny_header`]) or belong to the transport, and so are URLs that carry
//! a user name or password.
//!
//! ## Hooks
//!
//! The header injector ([`McpBrokerBuilder::header_injector`]) is asked per operation on an
//! HTTP server, with the selector, the server's name or URL, whether it is ad-hoc, the phase
//! and the tool, so tokens come from the host application and never from the model. The
//! error interceptor ([`McpBrokerBuilder::error_interceptor`]) sees failures of HTTP servers
//! and may wrap them ("authorise in the host application first") or turn them into a
//! result-level error.
//!
//! ## Connections
//!
//! One [`McpToolSet`] per target (a named server, or an ad-hoc URL over one transport),
//! reused across operations, closed after [`McpBrokerBuilder::idle_timeout`], at most
//! [`McpBrokerBuilder::max_connections`] at once (the least recently used is closed to make
//! room, once no operation is using it). [`McpBrokerBuilder::operation_timeout`] bounds each
//! whole operation, connecting included. Closing the broker ([`ToolSet::close`]) closes them
//! all.
//!
//! ```
//! use std::time::Duration;
//! use toolbelt_mcp::broker::McpBroker;
//! use toolbelt_mcp::{ConnectionConfig, TransportConfig};
//!
//! let broker = McpBroker::builder()
//!     .server(
//!         "local_code",
//!         ConnectionConfig::new(TransportConfig::stdio("node", ["server.js"]))
//!             .with_description("Project management and calendar tools"),
//!     )
//!     .allow_ad_hoc_http(true)
//!     .url_allow_list(|url| url.host_str() == Some("127.0.0.1"))
//!     .operation_timeout(Duration::from_secs(30))
//!     .build()?;
//! let names: Vec<String> = broker.declarations().into_iter().map(|d| d.name.to_string()).collect();
//! assert_eq!(names, ["mcp_list_servers", "mcp_list_tools", "mcp_inspect_tools", "mcp_call"]);
//! # Ok::<(), toolbelt_mcp::broker::BrokerError>(())
//! ```

mod error;
mod hooks;
mod operations;
mod policy;
mod pool;
pub mod selector;
pub mod signature;
mod tools;
mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use toolbelt_core::{Declaration, DynTool, ToolContext, ToolError, ToolSet};

pub use error::BrokerError;
pub use hooks::{
    BrokerErrorRequest, BrokerHeaderInjector, ErrorDecision, ErrorInterceptor, HeaderInjectRequest,
    Phase,
};
pub use policy::{DENIED_HEADERS, UrlAllowList};
pub use pool::{ConnectionInfo, PoolStats};
pub use selector::{SelectorError, Target, ToolSelector};
pub use signature::render_signature;
pub use url::Url;
pub use wire::{
    AdHocTransport, CallArgs, CallResult, InspectToolsArgs, ListServersArgs, ListToolsArgs,
    ServerList, ServerSummary, ToolDetail, ToolDetails, ToolList, ToolSummary,
};

use crate::client::McpToolSet;
use crate::config::ConnectionConfig;
use crate::config_file::{ConfigFileError, McpServersFile};
use policy::AdHocPolicy;
use pool::{Pool, PoolLimits};

/// The default bound on one whole operation, connecting included.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(60);
/// The default time an unused connection stays open.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The default number of connections open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// Options for an [`McpBroker`]; made by [`McpBroker::builder`].
pub struct McpBrokerBuilder {
    name: String,
    servers: BTreeMap<String, ConnectionConfig>,
    policy: AdHocPolicy,
    ad_hoc_timeout: Duration,
    injector: Option<BrokerHeaderInjector>,
    interceptor: Option<ErrorInterceptor>,
    operation_timeout: Duration,
    idle_timeout: Duration,
    max_connections: usize,
}

impl McpBrokerBuilder {
    /// The tool set's name (default `mcp_broker`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a named server (its description, when set, is shown by `mcp_list_servers`).
    pub fn server(mut self, name: impl Into<String>, config: ConnectionConfig) -> Self {
        self.servers.insert(name.into(), config);
        self
    }

    /// Adds every server of an `mcpServers` file; fails on the first unusable entry.
    pub fn servers_from_file(mut self, file: &McpServersFile) -> Result<Self, ConfigFileError> {
        for (name, config) in file.servers() {
            self.servers.insert(name, config?);
        }
        Ok(self)
    }

    /// Lets the model use MCP servers by URL (off by default). Only streamable HTTP and SSE
    /// are reachable that way. Pair it with [`McpBrokerBuilder::url_allow_list`]: without
    /// one, every URL is allowed.
    pub fn allow_ad_hoc_http(mut self, allow: bool) -> Self {
        self.policy.enabled = allow;
        self
    }

    /// Decides, before any connection, whether an ad-hoc URL may be used.
    pub fn url_allow_list(mut self, allow: impl Fn(&Url) -> bool + Send + Sync + 'static) -> Self {
        self.policy.allow = Some(Arc::new(allow));
        self
    }

    /// Adds a header name the model may not set (compared case-insensitively), on top of
    /// [`DENIED_HEADERS`].
    pub fn deny_header(mut self, name: impl Into<String>) -> Self {
        self.policy
            .extra_denied
            .push(name.into().trim().to_ascii_lowercase());
        self
    }

    /// The per-step timeout of ad-hoc connections (default: the operation timeout).
    pub fn ad_hoc_timeout(mut self, timeout: Duration) -> Self {
        self.ad_hoc_timeout = timeout;
        self
    }

    /// Chooses headers per operation on HTTP servers (see [`BrokerHeaderInjector`]).
    pub fn header_injector<F>(mut self, injector: F) -> Self
    where
        F: Fn(
                &ToolContext,
                &HeaderInjectRequest,
            ) -> BoxFuture<'static, Result<Vec<(String, String)>, ToolError>>
            + Send
            + Sync
            + 'static,
    {
        self.injector = Some(Arc::new(injector));
        self
    }

    /// Decides what the model sees when an operation on an HTTP server fails.
    pub fn error_interceptor<F>(mut self, interceptor: F) -> Self
    where
        F: Fn(&ToolContext, &BrokerErrorRequest<'_>) -> ErrorDecision + Send + Sync + 'static,
    {
        self.interceptor = Some(Arc::new(interceptor));
        self
    }

    /// Bounds each whole operation, connecting included (default 60 s).
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Closes a connection unused for this long (default 5 min).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Keeps at most this many connections open (default 16, at least 1); the least
    /// recently used is closed to make room.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// Builds the broker; nothing connects until an operation needs a server.
    ///
    /// Fails when a server name is empty, contains whitespace, or looks like a URL (it could
    /// never be selected).
    pub fn build(self) -> Result<McpBroker, BrokerError> {
        for name in self.servers.keys() {
            let problem = if name.is_empty() {
                Some("it is empty")
            } else if name.chars().any(char::is_whitespace) {
                Some("it contains whitespace")
            } else if name.contains("://") {
                Some("it looks like a URL")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(BrokerError::InvalidServerName {
                    name: name.clone(),
                    problem,
                });
            }
        }
        let inner = Arc::new(Inner {
            server_names: self.servers.keys().cloned().collect(),
            servers: self.servers,
            policy: self.policy,
            ad_hoc_timeout: self.ad_hoc_timeout.min(self.operation_timeout),
            injector: self.injector,
            interceptor: self.interceptor,
            operation_timeout: self.operation_timeout,
            pool: Pool::new(PoolLimits {
                max_connections: self.max_connections.max(1),
                idle_timeout: self.idle_timeout,
            }),
        });
        let tools = tools::broker_tools(&inner)?;
        Ok(McpBroker {
            name: self.name,
            inner,
            tools: Arc::new(tools),
        })
    }
}

/// A [`ToolSet`] of four tools through which a model discovers and calls MCP tools on
/// demand. See the [module documentation](self).
///
/// Cheap to clone (clones share the connections). Whoever creates the broker closes it.
#[derive(Clone)]
pub struct McpBroker {
    name: String,
    inner: Arc<Inner>,
    tools: Arc<Vec<DynTool>>,
}

pub(crate) struct Inner {
    servers: BTreeMap<String, ConnectionConfig>,
    /// Sorted, for the selector parser and error messages.
    server_names: Vec<String>,
    policy: AdHocPolicy,
    ad_hoc_timeout: Duration,
    injector: Option<BrokerHeaderInjector>,
    interceptor: Option<ErrorInterceptor>,
    operation_timeout: Duration,
    pool: Arc<Pool>,
}

impl std::fmt::Debug for McpBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpBroker")
            .field("name", &self.name)
            .field("servers", &self.inner.server_names)
            .field("ad_hoc_http", &self.inner.policy.enabled)
            .finish_non_exhaustive()
    }
}

impl McpBroker {
    /// A builder with no servers, ad-hoc HTTP off and default limits.
    pub fn builder() -> McpBrokerBuilder {
        McpBrokerBuilder {
            name: "mcp_broker".to_string(),
            servers: BTreeMap::new(),
            policy: AdHocPolicy::default(),
            ad_hoc_timeout: DEFAULT_OPERATION_TIMEOUT,
            injector: None,
            interceptor: None,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// The four tools' declarations, as a model sees them.
    pub fn declarations(&self) -> Vec<Declaration> {
        self.tools.iter().map(|t| t.declaration().clone()).collect()
    }

    /// The four tools, without going through [`ToolSet::tools`].
    pub fn broker_tools(&self) -> Vec<DynTool> {
        self.tools.as_ref().clone()
    }

    /// `mcp_list_servers`: the configured servers, sorted by name.
    pub fn list_servers(&self) -> ServerList {
        self.inner.list_servers()
    }

    /// `mcp_list_tools`: a server's tools with one-line signatures.
    pub async fn list_tools(
        &self,
        ctx: &ToolContext,
        args: ListToolsArgs,
    ) -> Result<ToolList, BrokerError> {
        self.inner.list_tools(ctx, args).await
    }

    /// `mcp_inspect_tools`: the full schemas of some tools.
    pub async fn inspect_tools(
        &self,
        ctx: &ToolContext,
        args: InspectToolsArgs,
    ) -> Result<ToolDetails, BrokerError> {
        self.inner.inspect_tools(ctx, args).await
    }

    /// `mcp_call`: calls a tool. The output's `structured` value is the [`CallResult`]; its
    /// content blocks are the tool's own.
    pub async fn call(
        &self,
        ctx: &ToolContext,
        args: CallArgs,
    ) -> Result<toolbelt_core::ToolOutput, BrokerError> {
        self.inner.call(ctx, args).await
    }

    /// The connections open now, sorted by target.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.inner.pool.connections()
    }

    /// Counters of opened, evicted and idle-closed connections.
    pub fn pool_stats(&self) -> PoolStats {
        self.inner.pool.stats()
    }
}

#[async_trait]
impl ToolSet for McpBroker {
    fn name(&self) -> &str {
        &self.name
    }

    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Ok(self.broker_tools())
    }

    /// Closes every connection; later operations fail with [`BrokerError::Closed`].
    async fn close(&self) -> Result<(), ToolError> {
        self.inner.pool.close().await;
        Ok(())
    }
}

/// Builds the tool set for a pooled target (its headers are in `config`).
fn pooled_set(name: &str, config: ConnectionConfig) -> Result<McpToolSet, BrokerError> {
    McpToolSet::builder(name, config)
        // A session that died between operations is re-established once.
        .session_reconnect(1)
        .build()
        .map_err(|err| BrokerError::Remote(err.into()))
}
