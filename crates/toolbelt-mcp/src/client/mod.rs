//! The client half: an MCP server as a [`ToolSet`].
//!
//! [`McpToolSet`] owns one session with one server. It connects lazily (or eagerly with
//! [`McpToolSet::init`]), lists the server's tools (following pagination) and caches them,
//! re-lists after `notifications/tools/list_changed` or [`McpToolSet::refresh`], and runs
//! calls with a timeout that sends `notifications/cancelled` when it fires. With
//! [`McpToolSetBuilder::session_reconnect`] a lost session is re-established, one reconnect
//! at a time, and the call retried.
//!
//! What the set offers servers is chosen on the builder: an elicitation handler
//! ([`McpToolSetBuilder::on_elicitation`]), a sampling handler
//! ([`McpToolSetBuilder::on_sampling`]) and roots ([`McpToolSetBuilder::roots`]); each
//! capability is declared only when set. A call whose context watches progress
//! ([`ToolContext::with_progress`]) is sent with a progress token, and the server's progress
//! notifications reach the context's sink in the order sent, all before the call returns.

mod call;
mod elicitation;
pub(crate) mod handler;
mod mapping;
mod pages;
mod progress;
pub(crate) mod relay;
mod roots;
mod sampling;
mod session;
pub(crate) mod tool;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use serde_json::Value;
use toolbelt_core::{DynTool, JsonObject, ToolContext, ToolError, ToolFilter, ToolOutput, ToolSet};

pub use elicitation::{
    ElicitationField, ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse,
    FieldKind,
};
pub use mapping::{exposed_name, map_annotations, map_call_result};
pub use roots::Root;
pub use sampling::{
    SamplingError, SamplingHandler, SamplingMessage, SamplingRequest, SamplingResponse,
    SamplingRole, SamplingTool, SamplingToolChoice, SamplingToolResult, SamplingToolUse,
};
pub use tool::McpTool;

use crate::config::{ConnectionConfig, TransportConfig};
use crate::error::{FailureKind, McpError, Step};
use crate::transport::delivery::Ticket;
use crate::transport::{HEADERS_META_KEY, describe_transport_error};
use handler::{ClientFeatures, Handler};
use session::Session;

/// The most reconnect attempts [`McpToolSetBuilder::session_reconnect`] accepts.
pub const MAX_SESSION_RECONNECT: u8 = 10;

/// Chooses extra HTTP headers for a request from the caller's context, for tokens that
/// depend on the current user (see [`McpToolSetBuilder::header_injector`]).
pub type HeaderInjector = Arc<
    dyn Fn(&ToolContext) -> BoxFuture<'static, Result<Vec<(String, String)>, ToolError>>
        + Send
        + Sync,
>;

/// Options for an [`McpToolSet`]; made by [`McpToolSet::builder`].
pub struct McpToolSetBuilder {
    name: String,
    config: ConnectionConfig,
    filter: Option<ToolFilter>,
    prefix: bool,
    reconnect: u8,
    injector: Option<HeaderInjector>,
    relist_every_time: bool,
    features: ClientFeatures,
}

impl McpToolSetBuilder {
    /// Shows only the tools `filter` allows (for example [`ToolFilter::include_names`] with
    /// the server's tool names, or the prefixed names when prefixing is on).
    pub fn filter(mut self, filter: ToolFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Exposes tools as `{set}_{tool}` so that two servers with a tool of the same name can
    /// be used together. Off by default: names are the server's own. Characters a tool name
    /// may not contain become `_`, and names are cut to 64 characters.
    pub fn prefix_tool_names(mut self, prefix: bool) -> Self {
        self.prefix = prefix;
        self
    }

    /// Re-establishes a lost session up to `attempts` times per call (1 to 10; 0 turns it
    /// off, the default), retrying the call once after each reconnect.
    ///
    /// Only connection and session failures trigger it: a dead child, a closed transport,
    /// HTTP 404 for an expired session, a refused or reset connection. Configuration errors
    /// (a command that does not exist, DNS failure, 401/403) fail at once. Each call counts
    /// its own attempts; parallel calls share one reconnect.
    ///
    /// A call is never run twice by accident: one whose request may have reached the server
    /// before the connection was lost fails with [`FailureKind::UnknownOutcome`] instead of
    /// being sent again, unless the tool declares `idempotentHint: true`. Only requests that
    /// provably never reached the server (never written, a refused connection, a 404 for the
    /// session) are re-sent. Listing tools is always retried.
    pub fn session_reconnect(mut self, attempts: u8) -> Self {
        self.reconnect = attempts;
        self
    }

    /// Adds headers chosen per request from the caller's context (remote transports only).
    ///
    /// The injector runs for every `tools/call` and `tools/list` with that request's
    /// context, and once when connecting, with the context that caused the connection;
    /// its headers override static ones of the same name.
    pub fn header_injector<F>(mut self, injector: F) -> Self
    where
        F: Fn(&ToolContext) -> BoxFuture<'static, Result<Vec<(String, String)>, ToolError>>
            + Send
            + Sync
            + 'static,
    {
        self.injector = Some(Arc::new(injector));
        self
    }

    /// Lists the server's tools on every [`ToolSet::tools`] call instead of caching them
    /// until the server reports a change (an agent's "refresh tool sets on run").
    pub fn relist_every_time(mut self, relist: bool) -> Self {
        self.relist_every_time = relist;
        self
    }

    /// Answers the server's requests for user input (`elicitation/create`) with `handler`,
    /// and declares the `elicitation` capability (form mode; URL mode too with
    /// [`url_elicitation`](Self::url_elicitation)). Without a handler the capability is not
    /// declared and any request is declined.
    ///
    /// The handler runs while the tool call that caused it waits, so the call's timeout
    /// includes the time the user takes.
    pub fn on_elicitation<F>(mut self, handler: F) -> Self
    where
        F: Fn(ElicitationRequest) -> BoxFuture<'static, ElicitationResponse>
            + Send
            + Sync
            + 'static,
    {
        self.features.elicitation = Some(Arc::new(handler));
        self
    }

    /// Also declares URL-mode elicitation, so servers may send the user to a page
    /// ([`ElicitationKind::Url`]); the handler must then show the URL. Off by default.
    pub fn url_elicitation(mut self, enabled: bool) -> Self {
        self.features.url_elicitation = enabled;
        self
    }

    /// Answers the server's requests for a completion (`sampling/createMessage`) with
    /// `handler`, and declares the `sampling` capability. Without a handler the capability
    /// is not declared and a request gets `-32601`.
    pub fn on_sampling<F>(mut self, handler: F) -> Self
    where
        F: Fn(SamplingRequest) -> BoxFuture<'static, Result<SamplingResponse, SamplingError>>
            + Send
            + Sync
            + 'static,
    {
        self.features.sampling = Some(Arc::new(handler));
        self
    }

    /// Also declares sampling with tools (`sampling.tools`, MCP 2025-11-25), so servers may
    /// send [`SamplingRequest::tools`]; the handler must then offer them to its model and
    /// answer with its calls ([`SamplingResponse::tool_uses`]). Off by default: a server
    /// that sends tools anyway gets `-32602` (invalid params).
    pub fn sampling_tools(mut self, enabled: bool) -> Self {
        self.features.sampling_tools = enabled;
        self
    }

    /// Offers `roots` to the server (`roots/list`, for example [`Root::directory`] of the
    /// directory the user works in) and declares the `roots` capability with `listChanged`;
    /// [`McpToolSet::set_roots`] replaces them later.
    pub fn roots(mut self, roots: Vec<Root>) -> Self {
        self.features.roots = Some(Arc::new(RwLock::new(roots)));
        self
    }

    /// Builds the set; nothing connects until [`McpToolSet::init`] or first use.
    pub fn build(self) -> Result<McpToolSet, McpError> {
        if self.reconnect > MAX_SESSION_RECONNECT {
            return Err(McpError::new(
                &self.name,
                Step::Connect,
                FailureKind::Configuration,
                format!(
                    "session_reconnect must be between 1 and {MAX_SESSION_RECONNECT} (or 0 for off), got {}",
                    self.reconnect
                ),
            ));
        }
        let remote = !matches!(self.config.transport, TransportConfig::Stdio { .. });
        Ok(McpToolSet {
            inner: Arc::new_cyclic(|self_ref| Inner {
                self_ref: self_ref.clone(),
                name: self.name,
                config: self.config,
                filter: self.filter,
                prefix: self.prefix,
                reconnect: self.reconnect,
                injector: if remote { self.injector } else { None },
                relist_every_time: self.relist_every_time,
                features: Arc::new(self.features),
                session: RwLock::new(None),
                connect_lock: tokio::sync::Mutex::new(()),
                generation: AtomicU64::new(0),
                tools_changed: Arc::new(AtomicBool::new(false)),
                tools: RwLock::new(None),
                idempotent_tools: RwLock::default(),
                closed: AtomicBool::new(false),
            }),
        })
    }
}

/// An MCP server as a tool set.
///
/// Cheap to clone (clones share the session). Whoever creates the set closes it
/// ([`ToolSet::close`]); dropping it without closing still kills a stdio child.
///
/// ```no_run
/// use toolbelt_core::{ToolContext, ToolSet};
/// use toolbelt_mcp::{ConnectionConfig, McpToolSet, TransportConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = ConnectionConfig::new(TransportConfig::stdio("python3", ["server.py"]));
/// let set = McpToolSet::builder("notes", config).session_reconnect(3).build()?;
/// set.init(&ToolContext::new()).await?; // fail fast: connect, initialize, list tools
/// for tool in set.tools(&ToolContext::new()).await? {
///     println!("{}", tool.name());
/// }
/// set.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpToolSet {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Handed to the tools, which must not keep the set alive (the set caches them).
    self_ref: std::sync::Weak<Inner>,
    pub(crate) name: String,
    config: ConnectionConfig,
    filter: Option<ToolFilter>,
    prefix: bool,
    reconnect: u8,
    injector: Option<HeaderInjector>,
    relist_every_time: bool,
    /// Elicitation, sampling, roots and progress, shared by every session of the set.
    features: Arc<ClientFeatures>,
    session: RwLock<Option<Arc<Session>>>,
    /// Held while connecting or reconnecting, so there is one at a time.
    connect_lock: tokio::sync::Mutex<()>,
    generation: AtomicU64,
    tools_changed: Arc<AtomicBool>,
    tools: RwLock<Option<Vec<DynTool>>>,
    /// The server names of the tools the last listing declared idempotent.
    idempotent_tools: RwLock<std::collections::HashSet<String>>,
    closed: AtomicBool,
}

impl McpToolSet {
    /// A set with default options (no prefix, no filter, no reconnect).
    pub fn new(name: impl Into<String>, config: ConnectionConfig) -> Self {
        Self::builder(name, config)
            .build()
            .unwrap_or_else(|_| unreachable!("the default options are valid"))
    }

    /// A builder for a set named `name` (the name appears in errors and prefixes).
    pub fn builder(name: impl Into<String>, config: ConnectionConfig) -> McpToolSetBuilder {
        McpToolSetBuilder {
            name: name.into(),
            config,
            filter: None,
            prefix: false,
            reconnect: 0,
            injector: None,
            relist_every_time: false,
            features: ClientFeatures::default(),
        }
    }

    /// The connection configuration.
    pub fn config(&self) -> &ConnectionConfig {
        &self.inner.config
    }

    /// Connects, initializes and lists the tools now, so that a bad configuration fails at
    /// start-up with an error naming the server and the step, rather than at first use.
    pub async fn init(&self, ctx: &ToolContext) -> Result<(), McpError> {
        self.inner.session(ctx).await?;
        self.inner.list_tools(ctx).await?;
        Ok(())
    }

    /// Lists the tools again now, whatever the cache holds.
    pub async fn refresh(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, McpError> {
        self.inner.list_tools(ctx).await
    }

    /// Calls a tool by its name on the server, outside any executor. `arguments` is passed
    /// through as is. After a lost connection the call is sent again only if it never reached
    /// the server or the last listing declared the tool idempotent.
    pub async fn call(
        &self,
        ctx: &ToolContext,
        mcp_name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<ToolOutput, McpError> {
        let idempotent = self.inner.listed_as_idempotent(mcp_name);
        self.inner
            .call_tool(ctx, mcp_name, arguments, idempotent)
            .await
    }

    /// Replaces the roots offered to the server and, when a session is open, sends it
    /// `notifications/roots/list_changed` so that it lists them again. Fails with
    /// [`FailureKind::Configuration`] when the set was built without
    /// [`McpToolSetBuilder::roots`] (the capability is fixed when the session starts).
    pub async fn set_roots(&self, roots: Vec<Root>) -> Result<(), McpError> {
        let Some(shared) = &self.inner.features.roots else {
            return Err(McpError::new(
                &self.inner.name,
                Step::Connect,
                FailureKind::Configuration,
                "roots were not enabled on this tool set (McpToolSetBuilder::roots)",
            ));
        };
        *shared.write().unwrap_or_else(|e| e.into_inner()) = roots;
        if let Some(session) = self.inner.current_session()
            && let Err(err) = session.peer().notify_roots_list_changed().await
        {
            // The next session lists the new roots anyway.
            tracing::warn!(server = %self.inner.name, "could not send roots/list_changed: {err}");
        }
        Ok(())
    }

    /// The stdio server's process id, while a session is open.
    pub fn process_id(&self) -> Option<u32> {
        self.inner.current_session().and_then(|s| s.pid())
    }

    /// How many times the set has reconnected.
    pub fn reconnect_count(&self) -> u64 {
        self.inner
            .generation
            .load(Ordering::Acquire)
            .saturating_sub(1)
    }
}

#[async_trait]
impl ToolSet for McpToolSet {
    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        let inner = &self.inner;
        let stale = inner.relist_every_time || inner.tools_changed.load(Ordering::Acquire);
        if !stale && let Some(tools) = inner.cached_tools() {
            return Ok(tools);
        }
        Ok(inner.list_tools(ctx).await?)
    }

    async fn close(&self) -> Result<(), ToolError> {
        self.inner.closed.store(true, Ordering::Release);
        let _guard = self.inner.connect_lock.lock().await;
        let session = self
            .inner
            .session
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(session) = session {
            session.close().await;
        }
        Ok(())
    }
}

impl Inner {
    fn current_session(&self) -> Option<Arc<Session>> {
        self.session
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn cached_tools(&self) -> Option<Vec<DynTool>> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the last listing declared the tool of this server name idempotent.
    fn listed_as_idempotent(&self, mcp_name: &str) -> bool {
        self.idempotent_tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(mcp_name)
    }

    fn closed_error(&self, step: Step) -> McpError {
        McpError::new(
            &self.name,
            step,
            FailureKind::Configuration,
            "the tool set has been closed",
        )
    }

    /// The open session, connecting first when there is none.
    async fn session(&self, ctx: &ToolContext) -> Result<Arc<Session>, McpError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.closed_error(Step::Connect));
        }
        if let Some(session) = self.current_session() {
            return Ok(session);
        }
        let _guard = self.connect_lock.lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Err(self.closed_error(Step::Connect));
        }
        if let Some(session) = self.current_session() {
            return Ok(session);
        }
        let headers = self.injected_headers(ctx, Step::Connect).await?;
        let generation = self.generation.fetch_add(1, Ordering::AcqRel);
        let handler = Handler::new(
            &self.name,
            &self.config,
            self.tools_changed.clone(),
            self.features.clone(),
        );
        let session = tokio::select! {
            biased;
            _ = ctx.cancelled() => {
                return Err(McpError::new(&self.name, Step::Connect, FailureKind::Cancelled, "cancelled"));
            }
            session = Session::connect(&self.name, &self.config, handler, &headers, generation) => session?,
        };
        let session = Arc::new(session);
        *self.session.write().unwrap_or_else(|e| e.into_inner()) = Some(session.clone());
        if generation > 0 {
            // The new server may offer other tools than the one that went away.
            self.tools_changed.store(true, Ordering::Release);
            tracing::info!(server = %self.name, generation, "MCP session re-established");
        }
        Ok(session)
    }

    /// Closes the session of `generation` if it is still the current one; a parallel call
    /// that already replaced it is left alone.
    async fn drop_session(&self, generation: u64) {
        let _guard = self.connect_lock.lock().await;
        let stale = {
            let mut slot = self.session.write().unwrap_or_else(|e| e.into_inner());
            match slot.as_ref() {
                Some(s) if s.generation == generation => slot.take(),
                _ => None,
            }
        };
        if let Some(session) = stale {
            session.close().await;
        }
    }

    async fn injected_headers(
        &self,
        ctx: &ToolContext,
        step: Step,
    ) -> Result<Vec<(String, String)>, McpError> {
        let Some(injector) = &self.injector else {
            return Ok(Vec::new());
        };
        injector(ctx).await.map_err(|err| {
            McpError::new(
                &self.name,
                step,
                FailureKind::Configuration,
                format!("the header injector failed: {err}"),
            )
        })
    }

    async fn request_meta(
        &self,
        ctx: &ToolContext,
        step: Step,
    ) -> Result<Option<RequestMetaObject>, McpError> {
        let headers = self.injected_headers(ctx, step).await?;
        if headers.is_empty() {
            return Ok(None);
        }
        let headers: JsonObject = headers
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let mut meta = JsonObject::new();
        meta.insert(HEADERS_META_KEY.into(), Value::Object(headers));
        Ok(Some(RequestMetaObject::from(meta)))
    }

    /// Runs `op` against the session, reconnecting and retrying on connection failures as
    /// the reconnect policy allows.
    async fn with_reconnect<'a, T>(
        &'a self,
        ctx: &'a ToolContext,
        op: impl Fn(Arc<Session>) -> BoxFuture<'a, Result<T, McpError>> + Send + Sync + 'a,
    ) -> Result<T, McpError> {
        let mut attempts_left = self.reconnect;
        loop {
            let (result, generation) = match self.session(ctx).await {
                Ok(session) => {
                    let generation = session.generation;
                    (op(session).await, Some(generation))
                }
                Err(err) => (Err(err), None),
            };
            match result {
                Err(err) if err.is_connection_error() && attempts_left > 0 => {
                    attempts_left -= 1;
                    tracing::warn!(server = %self.name, "{err}; reconnecting");
                    if let Some(generation) = generation {
                        self.drop_session(generation).await;
                    }
                }
                other => return other,
            }
        }
    }

    async fn list_tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, McpError> {
        let listed = self
            .with_reconnect(ctx, |session: Arc<Session>| {
                Box::pin(async move { self.list_once(&session, ctx).await })
            })
            .await?;
        let tools = self.build_tools(ctx, listed);
        *self.tools.write().unwrap_or_else(|e| e.into_inner()) = Some(tools.clone());
        Ok(tools)
    }

    async fn list_once(
        &self,
        session: &Session,
        ctx: &ToolContext,
    ) -> Result<Vec<rmcp::model::Tool>, McpError> {
        // Clear the flag first: a change reported while we list is seen next time.
        self.tools_changed.store(false, Ordering::Release);
        let limit = ctx.remaining().unwrap_or(self.config.timeout);
        let peer = session.peer().clone();
        peer.clear_response_cache().await;
        let meta = self.request_meta(ctx, Step::ListTools).await?;
        let list_all = pages::all_pages(|mut params| {
            params.meta = meta.clone();
            let peer = &peer;
            async move {
                let page = peer.list_tools(Some(params)).await?;
                Ok((page.tools, page.next_cursor))
            }
        });
        let result = tokio::select! {
            biased;
            _ = ctx.cancelled() => {
                return Err(McpError::new(&self.name, Step::ListTools, FailureKind::Cancelled, "cancelled"));
            }
            result = tokio::time::timeout(limit, list_all) => result,
        };
        match result {
            Err(_) => Err(McpError::timeout(&self.name, Step::ListTools, limit)),
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(err)) => Err(self.service_error(session, Step::ListTools, err)),
        }
    }

    fn build_tools(&self, ctx: &ToolContext, listed: Vec<rmcp::model::Tool>) -> Vec<DynTool> {
        let prefix = self.prefix.then_some(self.name.as_str());
        let idempotent = listed
            .iter()
            .filter(|info| map_annotations(info.annotations.as_ref()).is_idempotent())
            .map(|info| info.name.to_string())
            .collect();
        *self
            .idempotent_tools
            .write()
            .unwrap_or_else(|e| e.into_inner()) = idempotent;
        let mut seen = std::collections::HashSet::new();
        let mut tools: Vec<DynTool> = Vec::with_capacity(listed.len());
        for info in listed {
            let name = exposed_name(prefix, &info.name);
            if !seen.insert(name.clone()) {
                tracing::warn!(server = %self.name, tool = %info.name, "skipping a tool whose name repeats {name:?}");
                continue;
            }
            let Some(declaration) = mapping::declaration(&info, &name) else {
                tracing::warn!(server = %self.name, tool = %info.name, "skipping a tool with an unusable name");
                continue;
            };
            let weak = self.self_ref.clone();
            tools.push(Arc::new(McpTool::new(
                declaration,
                info.name.to_string(),
                weak,
            )));
        }
        match &self.filter {
            Some(filter) => filter.apply(ctx, tools),
            None => tools,
        }
    }

    /// Calls `mcp_name`, re-sending it after a lost connection only when it never reached
    /// the server or is `idempotent` (see [`McpToolSetBuilder::session_reconnect`]).
    pub(crate) async fn call_tool(
        &self,
        ctx: &ToolContext,
        mcp_name: &str,
        arguments: Option<JsonObject>,
        idempotent: bool,
    ) -> Result<ToolOutput, McpError> {
        let arguments = &arguments;
        self.with_reconnect(ctx, |session: Arc<Session>| {
            Box::pin(async move {
                let ticket = session.ticket();
                let result = self
                    .call_once(&session, ctx, mcp_name, arguments.clone(), &ticket)
                    .await;
                match result {
                    Err(err)
                        if err.is_connection_error()
                            && !idempotent
                            && ticket.may_have_reached_server() =>
                    {
                        tracing::warn!(server = %self.name, tool = mcp_name, "{err}; not sending the call again: it may have run");
                        Err(err.into_unknown_outcome())
                    }
                    other => other,
                }
            })
        })
        .await
    }

    async fn call_once(
        &self,
        session: &Session,
        ctx: &ToolContext,
        mcp_name: &str,
        arguments: Option<JsonObject>,
        ticket: &Ticket,
    ) -> Result<ToolOutput, McpError> {
        let limit = ctx.remaining().unwrap_or(self.config.timeout);
        let mut params = CallToolRequestParams::new(mcp_name.to_string());
        params.arguments = arguments;
        let mut meta = self
            .request_meta(ctx, Step::CallTool)
            .await?
            .unwrap_or_default();
        let (key, value) = ticket.meta();
        meta.0.insert(key, value);
        // Open before sending: the server may report as soon as it has the request. The
        // route closes when this call returns.
        let progress = self.features.progress.open(ctx);
        if let Some(route) = &progress {
            let (key, value) = route.meta();
            meta.0.insert(key, value);
        }
        params.meta = Some(meta);
        let peer = session.peer().clone();
        // Dropping the request future (on timeout or cancellation) sends
        // `notifications/cancelled` for it.
        let call = call::call_tool(peer, params);
        let result = tokio::select! {
            biased;
            _ = ctx.cancelled() => {
                return Err(McpError::new(&self.name, Step::CallTool, FailureKind::Cancelled, "cancelled"));
            }
            result = tokio::time::timeout(limit, call) => result,
        };
        match result {
            Err(_) => Err(McpError::timeout(&self.name, Step::CallTool, limit)),
            Ok(Ok(result)) => Ok(map_call_result(result)),
            Ok(Err(err)) => Err(self.service_error(session, Step::CallTool, err)),
        }
    }

    fn service_error(&self, session: &Session, step: Step, err: ServiceError) -> McpError {
        if let Some(message) = session.protocol_error() {
            return McpError::new(&self.name, step, FailureKind::Protocol, message);
        }
        let (kind, message) = match &err {
            ServiceError::TransportClosed => (
                FailureKind::Connection,
                "the connection to the server is closed (did the server exit?)".to_string(),
            ),
            ServiceError::TransportSend(send) => describe_transport_error(send),
            ServiceError::McpError(data) => (FailureKind::Server, data.message.to_string()),
            ServiceError::Timeout { timeout } => {
                return McpError::timeout(&self.name, step, *timeout);
            }
            ServiceError::Cancelled { .. } => (FailureKind::Cancelled, err.to_string()),
            other => (FailureKind::Protocol, other.to_string()),
        };
        let mut error = McpError::new(&self.name, step, kind, message).with_source(err);
        if kind == FailureKind::Connection {
            session.annotate(&mut error);
        }
        error
    }
}
