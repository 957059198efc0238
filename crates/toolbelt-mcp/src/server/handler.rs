//! The MCP server handler: lists the executor's visible tools and runs every call through the
//! executor's pipeline (validation, hooks, middleware).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData as RpcError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestMethod, CompleteRequestParams,
    CompleteResult, CustomRequest, CustomResult, ErrorCode, GetPromptRequestMethod,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsRequestMethod,
    ListPromptsResult, ListResourceTemplatesRequestMethod, ListResourceTemplatesResult,
    ListResourcesRequestMethod, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestMethod, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, ServerNotification,
    SetLevelRequestMethod, SubscribeRequestMethod, SubscribeRequestParams,
    ToolListChangedNotification, UnsubscribeRequestMethod, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolbelt_core::{ProgressUpdate, ToolContext, ToolError, ToolFilter};
use toolbelt_exec::{Executor, ToolCall, ToolSnapshot};

use super::bus::SessionBus;
use super::convert::{call_result, error_result, mcp_tool};
use super::deferred::{self, Deferral, Loaded, ToolRanker};
use super::relay::{Peers, Relay};
use super::requests::CallingClient;
use super::upstream::Upstreams;
use crate::client::tool::json_kind;

/// How often a long call without reports of its own tells a watching client it is alive.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);

/// How long `tools/list_changed` waits for one client to take it.
const NOTIFY_WAIT: Duration = Duration::from_secs(5);

/// Serves an [`Executor`]'s tools to MCP clients.
///
/// Clone it freely: clones share the executor and the list of connected clients, so one value
/// can back every session of an HTTP server.
#[derive(Clone)]
pub struct ToolServer {
    executor: Arc<Executor>,
    filter: Option<ToolFilter>,
    info: Implementation,
    instructions: Option<String>,
    heartbeat: Duration,
    peers: Peers,
    /// The aggregated servers' resources, prompts, completions and logging.
    relay: Option<Arc<Relay>>,
    /// Deferred tools, offered through `tool_search` ([`ToolServer::with_deferred_tools`]).
    deferral: Option<Deferral>,
    /// The deferred tools this client session loaded (fresh per session: [`ToolServer::for_session`]).
    loaded: Loaded,
    /// Adds what a call needs to know of its HTTP session to its context.
    session_context: Option<SessionContext>,
    /// Replicas sharing sessions: loaded tools and notifications go through the store.
    bus: Option<Arc<SessionBus>>,
    /// Told the id of every HTTP session this process closes.
    session_closed: Option<SessionClosed>,
}

/// Adds to a call's context what it needs to know of its HTTP session (given the session id).
type SessionContext = Arc<dyn Fn(ToolContext, &str) -> ToolContext + Send + Sync>;

/// Told the id of an HTTP session this process closed ([`ToolServer::on_session_closed`]).
pub(crate) type SessionClosed = Arc<dyn Fn(&str) + Send + Sync>;

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field("info", &self.info)
            .field("heartbeat", &self.heartbeat)
            .finish_non_exhaustive()
    }
}

impl ToolServer {
    /// A server for `executor`'s registry, named `toolbelt` with this crate's version.
    pub fn new(executor: Arc<Executor>) -> Self {
        Self {
            executor,
            filter: None,
            info: Implementation::new("toolbelt", env!("CARGO_PKG_VERSION")),
            instructions: None,
            heartbeat: DEFAULT_HEARTBEAT,
            peers: Arc::default(),
            relay: None,
            deferral: None,
            loaded: Loaded::default(),
            session_context: None,
            bus: None,
            session_closed: None,
        }
    }

    /// Lets `extend` add to the context of every call made over streamable HTTP what the
    /// call needs to know of its session, given the `Mcp-Session-Id` (for example a key
    /// under which the built-in file tools keep the session's reads, so that they follow
    /// the session from one replica to another). Calls over stdio are not extended.
    pub fn with_session_context(
        mut self,
        extend: impl Fn(ToolContext, &str) -> ToolContext + Send + Sync + 'static,
    ) -> Self {
        self.session_context = Some(Arc::new(extend));
        self
    }

    /// Calls `closed` with the `Mcp-Session-Id` of every streamable HTTP session this process
    /// closes (the client's `DELETE`, the idle timeout, the cap making room, or, with shared
    /// sessions, its record gone; the other replicas may still run theirs), so that what was
    /// kept for the session ([`with_session_context`](Self::with_session_context)) can go.
    pub fn on_session_closed(mut self, closed: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.session_closed = Some(Arc::new(closed));
        self
    }

    /// What [`on_session_closed`](Self::on_session_closed) set.
    pub(crate) fn session_closed(&self) -> Option<SessionClosed> {
        self.session_closed.clone()
    }

    /// Lists the tools `deferred` allows only after a client found them: each client is
    /// offered a `tool_search(query, limit?)` tool instead, ranked by `ranker`; the tools a
    /// search finds join that client session's `tools/list`, and the session gets
    /// `notifications/tools/list_changed`. A deferred tool stays callable by name.
    pub fn with_deferred_tools(
        mut self,
        deferred: ToolFilter,
        ranker: Arc<dyn ToolRanker>,
    ) -> Self {
        self.deferral = Some(Deferral::new(deferred, ranker));
        self
    }

    /// Shares sessions with the other replicas through `bus` (set by the HTTP server given a
    /// shared store): the deferred tools a session loaded are listed by every replica, and a
    /// session's notifications reach its `GET` stream wherever it is open.
    pub(crate) fn with_bus(mut self, bus: Arc<SessionBus>) -> Self {
        if let Some(relay) = &self.relay {
            relay.use_bus(bus.clone());
        }
        self.bus = Some(bus);
        self
    }

    /// A copy for one more client session: shares everything but the deferred tools loaded.
    pub(crate) fn for_session(&self) -> Self {
        Self {
            loaded: Loaded::default(),
            ..self.clone()
        }
    }

    /// Relays the resources, prompts, completions and log messages of the aggregated
    /// `upstreams` (whose tool sets are in the executor's registry), serves the status
    /// resource `toolbelt://status`, and declares the `logging`, `resources` (with
    /// subscriptions), `prompts` and `completions` capabilities. See [`Upstreams`] for the
    /// background connection and the [module docs](super) for how names are kept apart.
    pub fn with_upstreams(mut self, upstreams: Upstreams) -> Self {
        self.relay = Some(Relay::new(upstreams, self.peers.clone()));
        self
    }

    /// Shows (and allows calls to) only the tools `filter` allows.
    pub fn with_filter(mut self, filter: ToolFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Sets the name and version the server reports to clients.
    pub fn with_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.info = Implementation::new(name, version);
        self
    }

    /// Sets the instructions the server gives clients at initialization.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// How often a long call with no reports of its own sends a progress heartbeat to a client
    /// that asked for progress (default 5 s).
    pub fn with_heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every.max(Duration::from_millis(10));
        self
    }

    /// The executor behind the server.
    pub fn executor(&self) -> &Arc<Executor> {
        &self.executor
    }

    /// Tells every connected client that the tool list changed (`notifications/tools/list_changed`).
    /// Clients that went away are forgotten.
    pub async fn notify_tools_changed(&self) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.lock_peers();
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        // Side by side, each bounded: a client that does not read cannot hold up the others.
        futures::future::join_all(peers.iter().map(|peer| async move {
            match tokio::time::timeout(NOTIFY_WAIT, peer.notify_tool_list_changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::debug!("could not send tools/list_changed: {err}"),
                Err(_) => {
                    tracing::debug!("a client did not take tools/list_changed in {NOTIFY_WAIT:?}")
                }
            }
        }))
        .await;
        self.lock_peers().retain(|peer| !peer.is_transport_closed());
    }

    /// The visible tools' declarations, listing the registry's tool sets as a snapshot does.
    async fn visible_declarations(&self, ctx: &ToolContext) -> Vec<toolbelt_core::Declaration> {
        self.visible_tools(ctx).await.declarations()
    }

    /// The visible tools, listing the registry's tool sets as a snapshot does.
    async fn visible_tools(&self, ctx: &ToolContext) -> ToolSnapshot {
        let snapshot = self.executor.registry().snapshot(ctx).await;
        if !ctx.is_cancelled() {
            for (set, err) in snapshot.errors() {
                tracing::warn!(tool_set = %set, "could not list a tool set: {err}");
            }
        }
        match &self.filter {
            Some(filter) => snapshot.filtered(ctx, filter),
            None => snapshot,
        }
    }

    /// This session's `tool_search` call: loads the matches and, when any, tells the client
    /// its tool list changed.
    async fn run_tool_search(
        &self,
        deferral: &Deferral,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let ctx = request_context(context);
        let visible = self.visible_tools(&ctx).await;
        self.load_shared(context).await;
        let (_, hidden) = deferred::split(deferral, &self.loaded, &ctx, &visible);
        let (output, found) =
            deferred::search(deferral, &self.loaded, &hidden, request.arguments.as_ref()).await;
        if !found.is_empty() {
            self.announce_loaded(context, &found).await;
        }
        call_result(&output, false).into()
    }

    /// With replicas: adds the deferred tools this session loaded through the others.
    async fn load_shared(&self, context: &RequestContext<RoleServer>) {
        let (Some(bus), Some(session)) = (&self.bus, http_session_id(context)) else {
            return;
        };
        match bus.store().loaded_tools(session).await {
            Ok(names) => self
                .loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(names),
            Err(err) => tracing::warn!(
                session,
                "cannot read the tools this session loaded on other replicas: {err}"
            ),
        }
    }

    /// Tells the client its tool list changed after a search loaded `found`. With replicas,
    /// the loaded tools are kept in the store and the notification goes to the replica
    /// holding the client's `GET` stream.
    async fn announce_loaded(&self, context: &RequestContext<RoleServer>, found: &[String]) {
        let session = http_session_id(context);
        if let (Some(bus), Some(session)) = (&self.bus, session)
            && let Err(err) = bus.store().add_loaded_tools(session, found).await
        {
            tracing::warn!(session, "cannot share the tools this session loaded: {err}");
        }
        let changed =
            ServerNotification::ToolListChangedNotification(ToolListChangedNotification::default());
        SessionBus::notify_client(self.bus.as_deref(), session, &context.peer, changed).await;
    }

    /// Watches the registry and sends `notifications/tools/list_changed` to every client when
    /// the visible tools change (a tool registered or removed, an aggregated MCP server that
    /// reported a new list or came up), until `stop` is cancelled. With
    /// [`ToolServer::with_upstreams`], a server that comes up also gets the clients' log
    /// level, and the clients hear that the resources and prompts changed.
    ///
    /// Every `every` it takes a registry snapshot (which re-lists tool sets added with
    /// [`ToolSetRefresh::OnRun`](toolbelt_exec::ToolSetRefresh::OnRun); an MCP tool set answers
    /// from its cache unless its server reported a change) and compares the declarations with
    /// the last ones seen.
    pub fn watch_registry(
        &self,
        every: Duration,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let server = self.clone();
        let every = every.max(Duration::from_millis(10));
        tokio::spawn(async move {
            let ctx = ToolContext::new().with_cancellation(stop.child_token());
            let mut seen = fingerprint(&server.visible_declarations(&ctx).await);
            let relay = server.relay.clone();
            loop {
                let connected = async {
                    match &relay {
                        Some(relay) => relay.upstreams().next_connected().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                    _ = connected => {
                        if let Some(relay) = &relay {
                            relay.server_connected().await;
                        }
                    }
                }
                let now = fingerprint(&server.visible_declarations(&ctx).await);
                if let Some(relay) = &relay {
                    relay.restore_sessions().await;
                }
                if now != seen {
                    seen = now;
                    tracing::info!("the tool list changed; notifying clients");
                    server.notify_tools_changed().await;
                }
            }
        })
    }

    /// How many clients are connected (initialized and not yet found gone).
    pub fn connected_clients(&self) -> usize {
        self.lock_peers().len()
    }

    /// The relay, or "method not found" for `M` when the server aggregates nothing.
    fn relay<M: rmcp::model::ConstString>(&self) -> Result<&Arc<Relay>, RpcError> {
        self.relay
            .as_ref()
            .ok_or_else(RpcError::method_not_found::<M>)
    }

    fn lock_peers(&self) -> std::sync::MutexGuard<'_, Vec<Peer<RoleServer>>> {
        self.peers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn run_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, RpcError> {
        if let Some(deferral) = &self.deferral
            && request.name == deferred::TOOL_SEARCH
        {
            return Ok(self.run_tool_search(deferral, &request, &context).await);
        }
        let call_id = request_id_text(&context);
        // The request's token is cancelled by rmcp when the client sends
        // `notifications/cancelled` for this request (or the session ends); the tool's context
        // hangs off it, so a running Bash command is killed.
        let call_token = context.ct.child_token();
        // An aggregated server's elicitation or sampling request during the call comes back
        // to this client (`requests.rs`).
        let client = CallingClient {
            peer: context.peer.clone(),
            call: call_token.clone(),
            request: context.id.clone(),
        };
        let mut ctx = ToolContext::for_call(call_id.clone())
            .with_cancellation(call_token)
            .with_extension(client);
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| ProgressForwarder::start(context.peer.clone(), token));
        if let Some(forwarder) = &progress {
            ctx = ctx.with_progress(forwarder.sink());
        }
        if let (Some(extend), Some(session)) = (&self.session_context, http_session_id(&context)) {
            ctx = extend(ctx, session);
        }
        let mut tool = self.executor.registry().get(&request.name);
        if tool.is_none()
            && let Some(relay) = &self.relay
        {
            // Perhaps the tool of a server still starting: wait for its first attempt.
            relay.upstreams().first_attempts_done().await;
            self.executor.registry().snapshot(&ctx).await;
            tool = self.executor.registry().get(&request.name);
        }
        if let Some(filter) = &self.filter {
            // A hidden tool is unknown; and the executor's "did you mean" could name hidden
            // tools, so with a filter an unknown name gets no suggestions.
            let visible = tool
                .as_ref()
                .is_some_and(|t| filter.allows(&ctx, t.as_ref()));
            if !visible {
                return Err(RpcError::invalid_params(
                    format!("unknown tool {:?}", request.name),
                    None,
                ));
            }
        }
        let declares_output_schema = tool
            .as_ref()
            .is_some_and(|t| t.declaration().output_schema.is_some());
        let arguments = match &request.arguments {
            Some(arguments) => serde_json::Value::Object(arguments.clone()).to_string(),
            None => String::new(),
        };
        let call = ToolCall::new(call_id, request.name.to_string(), arguments);
        let run = self.executor.execute(ctx, &call);
        let result = match &progress {
            Some(forwarder) => forwarder.with_heartbeat(self.heartbeat, run).await,
            None => run.await,
        };
        if let Some(forwarder) = progress {
            // Progress must not arrive after the response: send what is queued first.
            forwarder.finish().await;
        }
        Ok(match result.result {
            Ok(output) => call_result(&output, declares_output_schema).into(),
            // MCP reports an unknown tool as a protocol error; the message keeps the
            // executor's "did you mean" so a person reading the log can fix the call.
            Err(err @ ToolError::UnknownTool { .. }) => {
                return Err(RpcError::invalid_params(err.to_string(), None));
            }
            // Everything else (invalid arguments, schema violations, rejections, timeouts,
            // cancellations, the tool's own errors) is a result the client's model reads.
            Err(err) => error_result(&err).into(),
        })
    }
}

/// The `Mcp-Session-Id` of a request that came over streamable HTTP.
fn http_session_id(context: &RequestContext<RoleServer>) -> Option<&str> {
    context
        .extensions
        .get::<axum::http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
}

/// The context of a relayed request: cancelled when the client cancels it.
fn request_context(context: &RequestContext<RoleServer>) -> ToolContext {
    ToolContext::new().with_cancellation(context.ct.child_token())
}

/// The error for a request rmcp could not read as a request it knows.
///
/// rmcp hands a request whose params do not fit its method (a `tools/call` without `name`,
/// or with `arguments` that are not an object) to the handler as a custom request; its
/// default answer, -32601 with the bare method name, tells the client the method does not
/// exist. A method this server serves gets -32602 (invalid params) saying what is wrong; any
/// other gets -32601 naming the method.
fn unreadable_request(method: &str, params: Option<&Value>) -> RpcError {
    let why = match method {
        "tools/call" => Some(call_params_problem(params)),
        "tools/list" => Some(params_problem::<PaginatedRequestParams>(params)),
        _ => None,
    };
    match why {
        Some(why) => RpcError::invalid_params(format!("invalid params for {method}: {why}"), None),
        None => RpcError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
            None,
        ),
    }
}

/// What is wrong with the params of a `tools/call`, in the client's terms.
fn call_params_problem(params: Option<&Value>) -> String {
    let Some(Value::Object(params)) = params else {
        return "params must be an object with the tool's \"name\"".into();
    };
    match (params.get("name"), params.get("arguments")) {
        (None, _) => "\"name\" (the tool to call) is missing".into(),
        (Some(name), _) if !name.is_string() => {
            format!("\"name\" must be a string, got {}", json_kind(name))
        }
        (_, Some(args)) if !args.is_object() && !args.is_null() => {
            format!(
                "\"arguments\" must be an object of named arguments, got {}",
                json_kind(args)
            )
        }
        _ => params_problem::<CallToolRequestParams>(Some(&Value::Object(params.clone()))),
    }
}

/// The deserializer's complaint about `params` as a `T` (or a generic one if it has none).
fn params_problem<T: serde::de::DeserializeOwned>(params: Option<&Value>) -> String {
    let params = params.cloned().unwrap_or(Value::Object(Default::default()));
    match serde_json::from_value::<T>(params) {
        Err(err) => err.to_string(),
        Ok(_) => "the params do not fit the method".into(),
    }
}

/// A digest of declarations, to tell whether the tool list changed.
fn fingerprint(declarations: &[toolbelt_core::Declaration]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for declaration in declarations {
        // Declarations hold JSON maps, which do not implement Hash; their text does.
        serde_json::to_string(declaration)
            .unwrap_or_default()
            .hash(&mut hasher);
    }
    hasher.finish()
}

/// The JSON-RPC id of a request, as text, used as the call's tool_call_id.
fn request_id_text(context: &RequestContext<RoleServer>) -> String {
    match serde_json::to_value(&context.id) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// Sends a call's progress reports to the client as `notifications/progress`, in order, from
/// a task of its own (tools report synchronously and must never wait on the network).
struct ProgressForwarder {
    /// `None` marks the end of the call: the task sends what came before it and stops.
    tx: mpsc::UnboundedSender<Option<ProgressUpdate>>,
    reported: Arc<Mutex<Instant>>,
    task: tokio::task::JoinHandle<()>,
}

/// How long the end of a call waits for queued progress notifications to go out.
const PROGRESS_FLUSH: Duration = Duration::from_secs(2);

impl ProgressForwarder {
    fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Option<ProgressUpdate>>();
        let task = tokio::spawn(async move {
            // MCP wants progress to increase with every notification, whoever reports it.
            let mut sent = 0.0_f64;
            while let Some(Some(update)) = rx.recv().await {
                sent = if update.progress > sent {
                    update.progress
                } else {
                    sent + 1.0
                };
                let mut param = ProgressNotificationParam::new(token.clone(), sent);
                if let Some(total) = update.total {
                    param = param.with_total(total.max(sent));
                }
                if let Some(message) = update.message {
                    param = param.with_message(message);
                }
                if let Err(err) = peer.notify_progress(param).await {
                    tracing::debug!("could not send a progress notification: {err}");
                    break;
                }
            }
        });
        Self {
            tx,
            reported: Arc::new(Mutex::new(Instant::now())),
            task,
        }
    }

    fn sink(&self) -> Arc<dyn toolbelt_core::ProgressSink> {
        let tx = self.tx.clone();
        let reported = self.reported.clone();
        Arc::new(move |update: ProgressUpdate| {
            *reported.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
            let _ = tx.send(Some(update));
        })
    }

    /// Runs `call`, sending a heartbeat whenever `every` passes without a report.
    async fn with_heartbeat<F: std::future::Future>(&self, every: Duration, call: F) -> F::Output {
        let started = Instant::now();
        tokio::pin!(call);
        let mut ticker = tokio::time::interval(every);
        ticker.tick().await;
        loop {
            tokio::select! {
                output = &mut call => return output,
                _ = ticker.tick() => {
                    let last = *self.reported.lock().unwrap_or_else(|p| p.into_inner());
                    if last.elapsed() >= every {
                        let message = format!("running for {}s", started.elapsed().as_secs());
                        let _ = self.tx.send(Some(ProgressUpdate::new(0.0).with_message(message)));
                    }
                }
            }
        }
    }

    /// Ends forwarding once everything reported so far has been sent (reports made later,
    /// by a producer that outlived the call, are dropped).
    async fn finish(self) {
        let _ = self.tx.send(None);
        let mut task = self.task;
        if tokio::time::timeout(PROGRESS_FLUSH, &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = match &self.relay {
            Some(_) => Relay::capabilities(),
            None => ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        };
        let mut config = ServerConfig::new(capabilities);
        config.server_info = self.info.clone();
        config.instructions = self.instructions.clone();
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, RpcError> {
        let ctx = ToolContext::new().with_cancellation(context.ct.child_token());
        let declarations = match &self.deferral {
            Some(deferral) => {
                let visible = self.visible_tools(&ctx).await;
                self.load_shared(&context).await;
                deferred::split(deferral, &self.loaded, &ctx, &visible).0
            }
            None => self.visible_declarations(&ctx).await,
        };
        let tools = declarations.iter().map(mcp_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, RpcError> {
        self.run_call(request, context).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, RpcError> {
        Err(unreadable_request(&request.method, request.params.as_ref()))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, RpcError> {
        let relay = self.relay::<ListResourcesRequestMethod>()?;
        let ctx = request_context(&context);
        Ok(ListResourcesResult::with_all_items(
            relay.list_resources(&ctx).await,
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, RpcError> {
        let relay = self.relay::<ListResourceTemplatesRequestMethod>()?;
        let ctx = request_context(&context);
        Ok(ListResourceTemplatesResult::with_all_items(
            relay.list_resource_templates(&ctx).await,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, RpcError> {
        let relay = self.relay::<ReadResourceRequestMethod>()?;
        let ctx = request_context(&context);
        Ok(relay.read_resource(&ctx, &request.uri).await?.into())
    }

    #[allow(deprecated)] // resources/subscribe: what clients of the versions in use send
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), RpcError> {
        let relay = self.relay::<SubscribeRequestMethod>()?;
        let ctx = request_context(&context);
        let session = http_session_id(&context);
        relay
            .subscribe(&ctx, context.peer.clone(), session, &request.uri)
            .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), RpcError> {
        let relay = self.relay::<UnsubscribeRequestMethod>()?;
        let ctx = request_context(&context);
        let session = http_session_id(&context);
        relay
            .unsubscribe(&ctx, &context.peer, session, &request.uri)
            .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, RpcError> {
        let relay = self.relay::<ListPromptsRequestMethod>()?;
        let ctx = request_context(&context);
        Ok(ListPromptsResult::with_all_items(
            relay.list_prompts(&ctx).await,
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, RpcError> {
        let relay = self.relay::<GetPromptRequestMethod>()?;
        let ctx = request_context(&context);
        Ok(relay
            .get_prompt(&ctx, &request.name, request.arguments)
            .await?
            .into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, RpcError> {
        let relay = self.relay::<CompleteRequestMethod>()?;
        let ctx = request_context(&context);
        relay.complete(&ctx, request).await
    }

    #[allow(deprecated)] // logging/setLevel: what clients of the versions in use send
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), RpcError> {
        let relay = self.relay::<SetLevelRequestMethod>()?;
        let ctx = request_context(&context);
        relay.set_level(&ctx, request.level).await;
        Ok(())
    }

    /// A client's roots changed: the aggregated servers list them again (their `roots/list`
    /// reaches a client that offers roots).
    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        if let Some(relay) = &self.relay {
            for upstream in relay.upstreams().connected() {
                upstream.set.notify_roots_changed().await;
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self.lock_peers();
        // Sessions that ended (closed, expired, evicted) are forgotten here too, so a server
        // that never announces a tool change does not keep every past session's peer.
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer);
    }
}
