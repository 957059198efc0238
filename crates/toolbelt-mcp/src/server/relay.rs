//! Relaying the aggregated servers' resources, prompts, completions and logging to clients.
//!
//! Names follow the tools' rule: in configuration order, the first connected server that
//! offers a prompt name keeps it, a later one's prompt of the same name is offered as
//! `{server}_{name}` (and dropped, with a warning, if even that is taken). A resource URI or
//! template that an earlier server (or the status resource) already offers is offered as
//! `toolbelt://servers/{server}/{uri}` (the server's name with `%` and `/` percent-encoded,
//! the server's own URI after it, unchanged). With
//! [`UpstreamOptions::always_prefix`](super::UpstreamOptions::always_prefix) every prompt
//! and resource of an aggregated server is prefixed so. A request is routed by the name or
//! URI the client saw; a URI the listings do not name (one made from a template) goes to the
//! first connected server with a template it fits, or to the only server offering resources.
//!
//! The relayed items are rmcp's types end to end, so titles, descriptions, annotations,
//! icons and `_meta` reach the client as the server sent them; only a name or URI that had
//! to be prefixed changes (in a read's contents too, where a content's URI is the one read).
//!
//! Logging: the last `logging/setLevel` of any client is forwarded to every connected server
//! that declares logging (and to servers that connect later); every server's
//! `notifications/message` goes to every client. Subscriptions are forwarded upstream and
//! `notifications/resources/updated` goes to the clients that subscribed, under the URI they
//! used; list changes of resources and prompts go to every client. When a server's session
//! is re-established (it died and its tool set reconnected), the level and the subscriptions
//! are given to the new session. Every client has its own bounded queue of these
//! notifications, emptied by a task of its own (`outbox.rs`): a client that does not read
//! lags alone, its log messages dropped (and counted to it) once its queue is full.

// Logging and `resources/subscribe` are deprecated in rmcp's newest protocol version
// (SEP-2577) but are what clients and servers of the versions in use speak.
#![allow(deprecated)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rmcp::ErrorData as RpcError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptResult, LoggingLevel,
    LoggingMessageNotificationParam, Prompt, ReadResourceResult, Reference, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, ServerCapabilities,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use toolbelt_core::{JsonObject, ToolContext};

use super::bus::SessionBus;
use super::outbox::{Outbox, SharedLog};
use super::requests::ClientRequests;
use super::upstream::{Upstream, Upstreams};
use crate::McpError;
use crate::client::handler::RequestRelay;
use crate::client::relay::UpstreamListener;

/// The status resource: every aggregated server and its state, as JSON.
pub(crate) const STATUS_URI: &str = "toolbelt://status";
/// Where a prefixed resource URI starts.
const SERVERS_PREFIX: &str = "toolbelt://servers/";

/// The connected clients, shared with the [`ToolServer`](super::ToolServer).
pub(crate) type Peers = Arc<Mutex<Vec<Peer<RoleServer>>>>;

/// The relay of one [`ToolServer`](super::ToolServer) (shared by its clones).
pub(crate) struct Relay {
    upstreams: Upstreams,
    peers: Peers,
    /// The level the clients asked for last, applied to servers that connect later.
    level: Mutex<Option<LoggingLevel>>,
    subscriptions: Mutex<Vec<Subscription>>,
    /// Which server a client-facing prompt name belongs to (from the last listing).
    prompts: Mutex<HashMap<String, Owner>>,
    /// Which server a client-facing resource URI or template belongs to.
    resources: Mutex<HashMap<String, Owner>>,
    templates: Mutex<HashMap<String, Owner>>,
    /// Each server's reconnect count when its session state (level, subscriptions) was
    /// last given to it.
    sessions_seen: Mutex<HashMap<String, u64>>,
    /// Each client's queue of notifications, by the client's identity (see `outbox.rs`).
    outboxes: Mutex<Outboxes>,
    /// Replicas sharing sessions: a subscriber's updates go to whichever holds its stream.
    bus: OnceLock<Arc<SessionBus>>,
    self_ref: Weak<Relay>,
}

/// A server and its own name for something.
#[derive(Clone)]
struct Owner {
    server: String,
    original: String,
}

struct Subscription {
    peer: Peer<RoleServer>,
    /// The client's HTTP session, when it has one.
    session: Option<String>,
    client_uri: String,
    server: String,
    uri: String,
}

/// Each client's outbox by the client's identity (the address of its peer info), with the
/// peer, to forget the clients gone.
type Outboxes = HashMap<usize, (Peer<RoleServer>, Arc<Outbox>)>;

impl Relay {
    pub(crate) fn new(upstreams: Upstreams, peers: Peers) -> Arc<Self> {
        let relay = Arc::new_cyclic(|self_ref| Self {
            upstreams,
            peers,
            level: Mutex::default(),
            subscriptions: Mutex::default(),
            prompts: Mutex::default(),
            resources: Mutex::default(),
            templates: Mutex::default(),
            sessions_seen: Mutex::default(),
            outboxes: Mutex::default(),
            bus: OnceLock::new(),
            self_ref: self_ref.clone(),
        });
        let listener: Arc<dyn UpstreamListener> = Arc::new(Listener(Arc::downgrade(&relay)));
        let requests: Arc<dyn RequestRelay> = Arc::new(ClientRequests(Arc::downgrade(&relay)));
        for upstream in relay.upstreams.servers.iter() {
            upstream.set.listen(listener.clone());
            upstream.set.relay_requests(requests.clone());
        }
        relay
    }

    pub(crate) fn upstreams(&self) -> &Upstreams {
        &self.upstreams
    }

    /// Sends subscribers' updates through `bus` (the server is one of several replicas).
    pub(crate) fn use_bus(self: &Arc<Self>, bus: Arc<SessionBus>) {
        bus.serve_relay(self);
        let _ = self.bus.set(bus);
    }

    /// What the server offers on top of tools when it aggregates servers.
    pub(crate) fn capabilities() -> ServerCapabilities {
        ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_tools()
            .enable_tool_list_changed()
            .build()
    }

    fn always_prefix(&self) -> bool {
        self.upstreams.options.always_prefix
    }

    /// The connected servers that declared `capability`, in order.
    fn offering(&self, capability: fn(&ServerCapabilities) -> bool) -> Vec<Arc<Upstream>> {
        self.upstreams
            .connected()
            .filter(|u| u.set.server_capabilities().is_some_and(|c| capability(&c)))
            .cloned()
            .collect()
    }

    /// Runs `list` on every server that offers `capability`, concurrently, each bounded by
    /// the connect timeout; the results come back in configuration order. A server that
    /// fails is logged and left out, so one broken server does not hide the others.
    async fn list_each<T, F, Fut>(
        &self,
        capability: fn(&ServerCapabilities) -> bool,
        list: F,
    ) -> Vec<(Arc<Upstream>, Vec<T>)>
    where
        F: Fn(Arc<Upstream>) -> Fut,
        Fut: Future<Output = Result<Vec<T>, McpError>>,
    {
        let limit = self.upstreams.options.connect_timeout;
        let servers = self.offering(capability);
        let listings = futures::future::join_all(servers.iter().map(|upstream| {
            let listing = list(upstream.clone());
            async move { tokio::time::timeout(limit, listing).await }
        }))
        .await;
        servers
            .into_iter()
            .zip(listings)
            .filter_map(|(upstream, listing)| match listing {
                Ok(Ok(items)) => Some((upstream, items)),
                Ok(Err(err)) => {
                    tracing::warn!(server = %upstream.name, "relaying a listing failed: {err}");
                    None
                }
                Err(_) => {
                    tracing::warn!(server = %upstream.name, "relaying a listing timed out after {limit:?}");
                    None
                }
            })
            .collect()
    }

    pub(crate) async fn list_resources(&self, ctx: &ToolContext) -> Vec<Resource> {
        let listed = self
            .list_each(
                has_resources,
                |u| async move { u.set.list_resources(ctx).await },
            )
            .await;
        let mut taken: HashSet<String> = HashSet::from([STATUS_URI.to_string()]);
        let mut owners = HashMap::new();
        let mut resources = vec![status_resource()];
        for (upstream, items) in listed {
            for mut resource in items {
                let client_uri = self.client_uri(&upstream.name, &resource.uri, &taken);
                if !taken.insert(client_uri.clone()) {
                    continue; // the server listed the same URI twice
                }
                owners.insert(client_uri.clone(), owner(&upstream, &resource.uri));
                resource.uri = client_uri;
                resources.push(resource);
            }
        }
        *lock(&self.resources) = owners;
        resources
    }

    pub(crate) async fn list_resource_templates(&self, ctx: &ToolContext) -> Vec<ResourceTemplate> {
        let listed = self
            .list_each(has_resources, |u| async move {
                u.set.list_resource_templates(ctx).await
            })
            .await;
        let mut taken = HashSet::new();
        let mut owners = HashMap::new();
        let mut templates = Vec::new();
        for (upstream, items) in listed {
            for mut template in items {
                let client = self.client_uri(&upstream.name, &template.uri_template, &taken);
                if !taken.insert(client.clone()) {
                    continue;
                }
                owners.insert(client.clone(), owner(&upstream, &template.uri_template));
                template.uri_template = client;
                templates.push(template);
            }
        }
        *lock(&self.templates) = owners;
        templates
    }

    /// The URI a client sees for `uri` of `server`, given the URIs already offered.
    fn client_uri(&self, server: &str, uri: &str, taken: &HashSet<String>) -> String {
        if self.always_prefix() || taken.contains(uri) || uri.starts_with(SERVERS_PREFIX) {
            format!("{SERVERS_PREFIX}{}/{uri}", encode_server(server))
        } else {
            uri.to_string()
        }
    }

    /// The server and its own URI behind a URI a client sent.
    async fn route_uri(
        &self,
        ctx: &ToolContext,
        uri: &str,
    ) -> Result<(Arc<Upstream>, String), RpcError> {
        if let Some(rest) = uri.strip_prefix(SERVERS_PREFIX)
            && let Some((server, original)) = rest.split_once('/')
        {
            let server = decode_server(server);
            return match self.upstreams.get(&server) {
                Some(upstream) if upstream.is_connected() => {
                    Ok((upstream.clone(), original.to_string()))
                }
                Some(_) => Err(unavailable(&server)),
                None => Err(RpcError::resource_not_found(
                    format!("no aggregated server is named {server:?} (in {uri:?})"),
                    None,
                )),
            };
        }
        if let Some(found) = self.known_owner(&self.resources, uri) {
            return Ok(found);
        }
        self.list_resources(ctx).await;
        if let Some(found) = self.known_owner(&self.resources, uri) {
            return Ok(found);
        }
        // A URI made from a template: the first server with a template it fits.
        self.list_resource_templates(ctx).await;
        let by_template = lock(&self.templates)
            .iter()
            .filter(|(client, _)| !client.starts_with(SERVERS_PREFIX))
            .filter(|(template, _)| template_fits(template, uri))
            .map(|(_, owner)| owner.server.clone())
            .collect::<Vec<_>>();
        let candidates = if by_template.is_empty() {
            self.offering(has_resources)
        } else {
            self.upstreams
                .connected()
                .filter(|u| by_template.contains(&u.name))
                .cloned()
                .collect()
        };
        match candidates.as_slice() {
            [only] => Ok((only.clone(), uri.to_string())),
            [first, ..] if !by_template.is_empty() => Ok((first.clone(), uri.to_string())),
            _ => Err(RpcError::resource_not_found(
                format!("no aggregated server offers the resource {uri:?}"),
                None,
            )),
        }
    }

    /// The owner recorded for `key` in `map`, while its server is connected.
    fn known_owner(
        &self,
        map: &Mutex<HashMap<String, Owner>>,
        key: &str,
    ) -> Option<(Arc<Upstream>, String)> {
        let owner = lock(map).get(key).cloned()?;
        let upstream = self.upstreams.get(&owner.server)?;
        upstream
            .is_connected()
            .then(|| (upstream.clone(), owner.original))
    }

    pub(crate) async fn read_resource(
        &self,
        ctx: &ToolContext,
        uri: &str,
    ) -> Result<ReadResourceResult, RpcError> {
        if uri == STATUS_URI {
            return Ok(self.status_contents());
        }
        let (upstream, original) = self.route_uri(ctx, uri).await?;
        let mut result = upstream
            .set
            .read_resource(ctx, &original)
            .await
            .map_err(relayed_error)?;
        if original != uri {
            for contents in &mut result.contents {
                let content_uri = match contents {
                    ResourceContents::TextResourceContents { uri, .. }
                    | ResourceContents::BlobResourceContents { uri, .. } => uri,
                    _ => continue,
                };
                if *content_uri == original {
                    *content_uri = uri.to_string();
                }
            }
        }
        Ok(result)
    }

    /// Subscribes `peer` (of HTTP session `session`, if any) to `uri` upstream.
    pub(crate) async fn subscribe(
        &self,
        ctx: &ToolContext,
        peer: Peer<RoleServer>,
        session: Option<&str>,
        uri: &str,
    ) -> Result<(), RpcError> {
        if uri == STATUS_URI {
            return Ok(()); // nothing to forward; its changes are not announced
        }
        let (upstream, original) = self.route_uri(ctx, uri).await?;
        upstream
            .set
            .subscribe_resource(ctx, &original, true)
            .await
            .map_err(relayed_error)?;
        lock(&self.subscriptions).push(Subscription {
            peer,
            session: session.map(str::to_string),
            client_uri: uri.to_string(),
            server: upstream.name.clone(),
            uri: original,
        });
        Ok(())
    }

    /// Ends the subscription of `peer` (of HTTP session `session`, if any) to `uri`. With
    /// replicas, a subscription another replica holds is ended there (through the bus).
    pub(crate) async fn unsubscribe(
        &self,
        ctx: &ToolContext,
        peer: &Peer<RoleServer>,
        session: Option<&str>,
        uri: &str,
    ) -> Result<(), RpcError> {
        let ended = self
            .end_subscription(ctx, uri, |s| {
                same_peer(&s.peer, peer) || (session.is_some() && s.session.as_deref() == session)
            })
            .await?;
        if let (false, Some(bus), Some(session)) = (ended, self.bus.get(), session)
            && let Err(err) = bus.unsubscribe(session, uri).await
        {
            tracing::warn!(
                session,
                uri,
                "could not pass an unsubscribe to the other replicas: {err}"
            );
        }
        Ok(())
    }

    /// Ends session `session`'s subscription to `uri` held here, if any (an unsubscribe that
    /// reached another replica).
    pub(crate) async fn unsubscribe_session(
        &self,
        ctx: &ToolContext,
        session: &str,
        uri: &str,
    ) -> Result<(), RpcError> {
        self.end_subscription(ctx, uri, |s| s.session.as_deref() == Some(session))
            .await
            .map(|_| ())
    }

    /// Removes the subscription to client URI `uri` that `mine` picks, unsubscribing
    /// upstream when no other client wants the resource; whether there was one.
    async fn end_subscription(
        &self,
        ctx: &ToolContext,
        uri: &str,
        mine: impl Fn(&Subscription) -> bool,
    ) -> Result<bool, RpcError> {
        let (gone, still_wanted) = {
            let mut subscriptions = lock(&self.subscriptions);
            let mut gone = None;
            subscriptions.retain(|s| {
                let ends = s.client_uri == uri && mine(s);
                if ends {
                    gone = Some((s.server.clone(), s.uri.clone()));
                }
                !ends && !s.peer.is_transport_closed()
            });
            let still = gone.as_ref().is_some_and(|(server, original)| {
                subscriptions
                    .iter()
                    .any(|s| &s.server == server && &s.uri == original)
            });
            (gone, still)
        };
        let Some((server, original)) = gone else {
            return Ok(false);
        };
        if still_wanted {
            return Ok(true);
        }
        if let Some(upstream) = self.upstreams.get(&server).filter(|u| u.is_connected()) {
            upstream
                .set
                .subscribe_resource(ctx, &original, false)
                .await
                .map_err(relayed_error)?;
        }
        Ok(true)
    }

    pub(crate) async fn list_prompts(&self, ctx: &ToolContext) -> Vec<Prompt> {
        let listed = self
            .list_each(
                has_prompts,
                |u| async move { u.set.list_prompts(ctx).await },
            )
            .await;
        let mut owners: HashMap<String, Owner> = HashMap::new();
        let mut prompts = Vec::new();
        for (upstream, items) in listed {
            for mut prompt in items {
                let bare = !self.always_prefix() && !owners.contains_key(&prompt.name);
                let name = if bare {
                    prompt.name.clone()
                } else {
                    crate::client::exposed_name(Some(&upstream.name), &prompt.name)
                };
                if owners.contains_key(&name) {
                    tracing::warn!(server = %upstream.name, prompt = %prompt.name, "dropping a prompt whose name {name:?} is taken");
                    continue;
                }
                owners.insert(name.clone(), owner(&upstream, &prompt.name));
                prompt.name = name;
                prompts.push(prompt);
            }
        }
        *lock(&self.prompts) = owners;
        prompts
    }

    async fn route_prompt(
        &self,
        ctx: &ToolContext,
        name: &str,
    ) -> Result<(Arc<Upstream>, String), RpcError> {
        if let Some(found) = self.known_owner(&self.prompts, name) {
            return Ok(found);
        }
        self.list_prompts(ctx).await;
        self.known_owner(&self.prompts, name)
            .ok_or_else(|| RpcError::invalid_params(format!("unknown prompt {name:?}"), None))
    }

    pub(crate) async fn get_prompt(
        &self,
        ctx: &ToolContext,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, RpcError> {
        let (upstream, original) = self.route_prompt(ctx, name).await?;
        upstream
            .set
            .get_prompt(ctx, &original, arguments)
            .await
            .map_err(relayed_error)
    }

    pub(crate) async fn complete(
        &self,
        ctx: &ToolContext,
        mut params: CompleteRequestParams,
    ) -> Result<CompleteResult, RpcError> {
        let upstream = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let (upstream, original) = self.route_prompt(ctx, &prompt.name).await?;
                prompt.name = original;
                upstream
            }
            Reference::Resource(template) => {
                let found = match self.known_owner(&self.templates, &template.uri) {
                    Some(found) => Some(found),
                    None => {
                        self.list_resource_templates(ctx).await;
                        self.known_owner(&self.templates, &template.uri)
                    }
                };
                let (upstream, original) = match found {
                    Some(found) => found,
                    None => self.route_uri(ctx, &template.uri).await?,
                };
                template.uri = original;
                upstream
            }
            _ => {
                return Err(RpcError::invalid_params(
                    "completion/complete: unknown kind of reference",
                    None,
                ));
            }
        };
        let completes = upstream
            .set
            .server_capabilities()
            .is_some_and(|c| c.completions.is_some());
        if !completes {
            // The server offers no completions: nothing to suggest, as MCP allows.
            return Ok(CompleteResult::default());
        }
        upstream
            .set
            .complete(ctx, params)
            .await
            .map_err(relayed_error)
    }

    /// Remembers `level` and forwards it to every connected server that logs.
    pub(crate) async fn set_level(&self, ctx: &ToolContext, level: LoggingLevel) {
        *lock(&self.level) = Some(level);
        let servers = self.offering(has_logging);
        let limit = self.upstreams.options.connect_timeout;
        futures::future::join_all(servers.iter().map(|upstream| async move {
            match tokio::time::timeout(limit, upstream.set.set_log_level(ctx, level)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(server = %upstream.name, "forwarding logging/setLevel failed: {err}"),
                Err(_) => tracing::warn!(server = %upstream.name, "forwarding logging/setLevel timed out"),
            }
        }))
        .await;
    }

    /// A server connected: it gets the clients' log level, and the clients hear that the
    /// resources and prompts changed.
    pub(crate) async fn server_connected(&self) {
        let level = *lock(&self.level);
        if let Some(level) = level {
            self.set_level(&ToolContext::new(), level).await;
        }
        self.each_outbox(|outbox| {
            outbox.resources_changed();
            outbox.prompts_changed();
        });
    }

    /// Gives a server whose session was re-established (it died and the tool set reconnected)
    /// what the old session had: the clients' log level and their subscriptions.
    pub(crate) async fn restore_sessions(&self) {
        let level = *lock(&self.level);
        let ctx = ToolContext::new();
        for upstream in self.upstreams.connected() {
            // While the set reconnects there is no session yet (and its count has already
            // moved on): the next round looks again.
            let Some(capabilities) = upstream.set.server_capabilities() else {
                continue;
            };
            let now = upstream.set.reconnect_count();
            let before = lock(&self.sessions_seen).insert(upstream.name.clone(), now);
            if before.is_none_or(|before| before == now) {
                continue; // the first session, or the same one
            }
            tracing::info!(server = %upstream.name, "restoring the log level and subscriptions on a new session");
            if let Some(level) = level
                && has_logging(&capabilities)
                && let Err(err) = upstream.set.set_log_level(&ctx, level).await
            {
                tracing::warn!(server = %upstream.name, "restoring the log level failed: {err}");
            }
            let uris: HashSet<String> = lock(&self.subscriptions)
                .iter()
                .filter(|s| s.server == upstream.name)
                .map(|s| s.uri.clone())
                .collect();
            for uri in uris {
                if let Err(err) = upstream.set.subscribe_resource(&ctx, &uri, true).await {
                    tracing::warn!(server = %upstream.name, %uri, "restoring a subscription failed: {err}");
                }
            }
        }
    }

    fn status_contents(&self) -> ReadResourceResult {
        let servers: Vec<Value> = self
            .upstreams
            .status()
            .into_iter()
            .map(|(name, status)| {
                let mut entry = serde_json::json!({ "name": name });
                if let (Value::Object(entry), Ok(Value::Object(status))) =
                    (&mut entry, serde_json::to_value(status))
                {
                    entry.extend(status);
                }
                entry
            })
            .collect();
        let text = serde_json::json!({ "servers": servers }).to_string();
        ReadResourceResult::new(vec![
            ResourceContents::text(text, STATUS_URI).with_mime_type("application/json"),
        ])
    }

    /// The bus the replicas share, when the server is one of several.
    pub(crate) fn bus(&self) -> Option<&SessionBus> {
        self.bus.get().map(Arc::as_ref)
    }

    /// The outbox of `peer`, started on first use (notifications arrive from inside the
    /// runtime, where its task can be spawned); `None` for a client not initialized.
    fn outbox(&self, peer: &Peer<RoleServer>) -> Option<Arc<Outbox>> {
        let key = Arc::as_ptr(&peer.peer_info()?) as usize;
        let mut outboxes = lock(&self.outboxes);
        if let Some((_, outbox)) = outboxes.get(&key) {
            return Some(outbox.clone());
        }
        // The clients gone are forgotten (a reused address is then free too).
        outboxes.retain(|_, (peer, _)| !peer.is_transport_closed());
        let outbox = Outbox::start(peer.clone(), self.self_ref.clone());
        outboxes.insert(key, (peer.clone(), outbox.clone()));
        Some(outbox)
    }

    /// Runs `queue` on the outbox of every client still connected.
    fn each_outbox(&self, queue: impl Fn(&Outbox)) {
        for peer in self.live_peers() {
            if let Some(outbox) = self.outbox(&peer) {
                queue(&outbox);
            }
        }
    }

    /// Queues a server's log message for every client.
    fn log(&self, message: LoggingMessageNotificationParam) {
        let log = SharedLog::new(message);
        self.each_outbox(|outbox| outbox.log(&log));
    }

    /// Queues a resource update of `server` for the clients subscribed to it, under the URI
    /// each used.
    fn updated(&self, server: &str, update: ResourceUpdatedNotificationParam) {
        for (peer, session, client_uri) in self.subscribers(server, &update.uri) {
            if let Some(outbox) = self.outbox(&peer) {
                let mut update = update.clone();
                update.uri = client_uri;
                outbox.updated(session, update);
            }
        }
    }

    /// The clients still connected, oldest first.
    pub(crate) fn live_peers(&self) -> Vec<Peer<RoleServer>> {
        let mut peers = lock(&self.peers);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.clone()
    }

    /// The clients subscribed to `uri` of `server`, each with its HTTP session (if any) and
    /// the URI it subscribed to.
    fn subscribers(
        &self,
        server: &str,
        uri: &str,
    ) -> Vec<(Peer<RoleServer>, Option<String>, String)> {
        let mut subscriptions = lock(&self.subscriptions);
        subscriptions.retain(|s| !s.peer.is_transport_closed());
        subscriptions
            .iter()
            .filter(|s| s.server == server && s.uri == uri)
            .map(|s| (s.peer.clone(), s.session.clone(), s.client_uri.clone()))
            .collect()
    }
}

fn has_resources(c: &ServerCapabilities) -> bool {
    c.resources.is_some()
}

fn has_prompts(c: &ServerCapabilities) -> bool {
    c.prompts.is_some()
}

fn has_logging(c: &ServerCapabilities) -> bool {
    c.logging.is_some()
}

fn owner(upstream: &Upstream, original: &str) -> Owner {
    Owner {
        server: upstream.name.clone(),
        original: original.to_string(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether two handles reach the same client: every handle of one session shares the
/// session's record of the client's `initialize` (both are alive here, so the comparison
/// cannot be fooled by a reused address).
fn same_peer(a: &Peer<RoleServer>, b: &Peer<RoleServer>) -> bool {
    match (a.peer_info(), b.peer_info()) {
        (Some(a), Some(b)) => Arc::ptr_eq(&a, &b),
        _ => false,
    }
}

/// The status resource's listing entry.
fn status_resource() -> Resource {
    Resource::new(STATUS_URI, "toolbelt-status")
        .with_title("Aggregated MCP servers")
        .with_description(
            "Each aggregated MCP server and its state: connecting, connected, or failed with \
             the error (a failed server is tried again in the background).",
        )
        .with_mime_type("application/json")
}

/// Whether `uri` could come from `template` (its text up to the first variable is a prefix
/// of `uri`, and that text is more than a bare scheme).
fn template_fits(template: &str, uri: &str) -> bool {
    let literal = template.split('{').next().unwrap_or("");
    literal.len() > literal.find("://").map_or(0, |i| i + 3) && uri.starts_with(literal)
}

fn encode_server(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

fn decode_server(text: &str) -> String {
    text.replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%25", "%")
}

fn unavailable(server: &str) -> RpcError {
    RpcError::internal_error(
        format!("the aggregated MCP server {server:?} is not available now (see {STATUS_URI})"),
        None,
    )
}

/// A relayed request's failure as the client sees it: the server's own JSON-RPC error when
/// it answered with one, else an internal error naming the server and what went wrong.
fn relayed_error(err: McpError) -> RpcError {
    if let Some(data) = err
        .source
        .as_ref()
        .and_then(|s| s.downcast_ref::<rmcp::ServiceError>())
        .and_then(|s| match s {
            rmcp::ServiceError::McpError(data) => Some(data.clone()),
            _ => None,
        })
    {
        return data;
    }
    RpcError::internal_error(err.to_string(), None)
}

/// Hears the servers' notifications for the relay (holding it weakly: the relay owns the
/// servers, which own the listener).
struct Listener(Weak<Relay>);

impl UpstreamListener for Listener {
    fn logging_message(&self, server: &str, mut message: LoggingMessageNotificationParam) {
        if let Some(relay) = self.0.upgrade() {
            // Which server spoke, when it did not say.
            message.logger.get_or_insert_with(|| server.to_string());
            relay.log(message);
        }
    }

    fn resource_updated(&self, server: &str, update: ResourceUpdatedNotificationParam) {
        if let Some(relay) = self.0.upgrade() {
            relay.updated(server, update);
        }
    }

    fn resources_changed(&self, _server: &str) {
        if let Some(relay) = self.0.upgrade() {
            relay.each_outbox(Outbox::resources_changed);
        }
    }

    fn prompts_changed(&self, _server: &str) {
        if let Some(relay) = self.0.upgrade() {
            relay.each_outbox(Outbox::prompts_changed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_fits_a_template_by_its_text_before_the_first_variable() {
        assert!(template_fits("memo://notes/{name}", "memo://notes/abc"));
        assert!(!template_fits("memo://notes/{name}", "memo://other/abc"));
        // A template that is only a scheme fits nothing: it would claim every URI.
        assert!(!template_fits("file://{path}", "file:///etc/passwd"));
        assert!(!template_fits("{uri}", "memo://notes/abc"));
    }

    #[test]
    fn server_names_round_trip_through_a_prefixed_uri() {
        for name in ["py", "a/b", "100%", "x%2Fy"] {
            let encoded = encode_server(name);
            assert!(!encoded.contains('/'), "{encoded}");
            assert_eq!(decode_server(&encoded), name);
        }
    }
}
