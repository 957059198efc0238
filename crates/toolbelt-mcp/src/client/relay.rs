//! What relaying a server needs beyond its tools: its resources, prompts, completions and
//! logging level, and the notifications it sends on its own (progress of a call, log
//! messages, resource updates, list changes).
//!
//! `toolbelt serve` aggregating servers is the user: it forwards a client's requests to the
//! server that owns the resource or prompt and the server's notifications back to its
//! clients. Progress needs no relay code of its own: a call whose context watches progress
//! carries a progress token upstream (`progress.rs`), so the MCP server that made the context
//! forwards the reports under its client's token.

// Logging, subscriptions and `resources/subscribe` are deprecated in rmcp's newest protocol
// version (SEP-2577) but are what servers and clients of the versions in use speak.
#![allow(deprecated)]
// Its one user is the `server` feature's relay: without it, this is unused.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::future::Future;
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult, LoggingLevel,
    LoggingMessageNotificationParam, Prompt, ReadResourceRequestParams, ReadResourceResult,
    Resource, ResourceTemplate, ResourceUpdatedNotificationParam, ServerCapabilities,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::{Peer, RoleClient};
use toolbelt_core::{JsonObject, ToolContext};

use super::pages::all_pages;
use super::session::Session;
use super::{Inner, McpToolSet};
use crate::error::{FailureKind, McpError, Step};

/// Hears what a server sends on its own, other than progress (which goes to the call's
/// context) and `tools/list_changed` (which the tool set handles itself).
pub(crate) trait UpstreamListener: Send + Sync {
    /// A `notifications/message` (a log message).
    fn logging_message(&self, server: &str, message: LoggingMessageNotificationParam);
    /// A `notifications/resources/updated` for a resource a client subscribed to.
    fn resource_updated(&self, server: &str, update: ResourceUpdatedNotificationParam);
    /// `notifications/resources/list_changed`.
    fn resources_changed(&self, server: &str);
    /// `notifications/prompts/list_changed`.
    fn prompts_changed(&self, server: &str);
}

/// Where a tool set's sessions (every reconnect shares it) send the notifications a relay
/// listens for.
#[derive(Default)]
pub(crate) struct UpstreamEvents {
    listener: RwLock<Option<Arc<dyn UpstreamListener>>>,
}

impl UpstreamEvents {
    pub(crate) fn logging_message(&self, server: &str, message: LoggingMessageNotificationParam) {
        if let Some(listener) = self.listener() {
            listener.logging_message(server, message);
        }
    }

    pub(crate) fn resource_updated(&self, server: &str, update: ResourceUpdatedNotificationParam) {
        if let Some(listener) = self.listener() {
            listener.resource_updated(server, update);
        }
    }

    pub(crate) fn resources_changed(&self, server: &str) {
        if let Some(listener) = self.listener() {
            listener.resources_changed(server);
        }
    }

    pub(crate) fn prompts_changed(&self, server: &str) {
        if let Some(listener) = self.listener() {
            listener.prompts_changed(server);
        }
    }

    fn listener(&self) -> Option<Arc<dyn UpstreamListener>> {
        self.listener
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Requests a relay sends on a client's behalf. Each connects first when there is no session,
/// reconnects as the set's policy allows (none of them changes anything a retry could repeat
/// harmfully: reads, lists, subscriptions, a log level), and is bounded by the context's
/// deadline or the server's timeout.
impl McpToolSet {
    /// Sends the server's notifications (log messages, resource updates, list changes) to
    /// `listener` from now on, replacing any listener set before.
    pub(crate) fn listen(&self, listener: Arc<dyn UpstreamListener>) {
        *self
            .inner
            .features
            .upstream
            .listener
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(listener);
    }

    /// What the server declared it offers, once a session is open.
    pub(crate) fn server_capabilities(&self) -> Option<ServerCapabilities> {
        let session = self.inner.current_session()?;
        session
            .peer()
            .peer_info()
            .map(|info| info.capabilities.clone())
    }

    /// Every resource the server lists (all pages).
    pub(crate) async fn list_resources(
        &self,
        ctx: &ToolContext,
    ) -> Result<Vec<Resource>, McpError> {
        self.inner
            .relay(ctx, |peer| async move {
                peer.clear_response_cache().await;
                all_pages(|params| {
                    let peer = &peer;
                    async move {
                        let page = peer.list_resources(Some(params)).await?;
                        Ok((page.resources, page.next_cursor))
                    }
                })
                .await
            })
            .await
    }

    /// Every resource template the server lists (all pages).
    pub(crate) async fn list_resource_templates(
        &self,
        ctx: &ToolContext,
    ) -> Result<Vec<ResourceTemplate>, McpError> {
        self.inner
            .relay(ctx, |peer| async move {
                peer.clear_response_cache().await;
                all_pages(|params| {
                    let peer = &peer;
                    async move {
                        let page = peer.list_resource_templates(Some(params)).await?;
                        Ok((page.resource_templates, page.next_cursor))
                    }
                })
                .await
            })
            .await
    }

    /// Reads the resource at `uri` (the server's own URI).
    pub(crate) async fn read_resource(
        &self,
        ctx: &ToolContext,
        uri: &str,
    ) -> Result<ReadResourceResult, McpError> {
        self.inner
            .relay(ctx, |peer| {
                let params = ReadResourceRequestParams::new(uri);
                async move {
                    peer.clear_response_cache().await;
                    peer.read_resource(params).await
                }
            })
            .await
    }

    /// Subscribes to updates of the resource at `uri` (`subscribe`) or ends the subscription.
    pub(crate) async fn subscribe_resource(
        &self,
        ctx: &ToolContext,
        uri: &str,
        subscribe: bool,
    ) -> Result<(), McpError> {
        self.inner
            .relay(ctx, |peer| {
                let uri = uri.to_string();
                async move {
                    if subscribe {
                        peer.subscribe(SubscribeRequestParams::new(uri)).await
                    } else {
                        peer.unsubscribe(UnsubscribeRequestParams::new(uri)).await
                    }
                }
            })
            .await
    }

    /// Every prompt the server lists (all pages).
    pub(crate) async fn list_prompts(&self, ctx: &ToolContext) -> Result<Vec<Prompt>, McpError> {
        self.inner
            .relay(ctx, |peer| async move {
                peer.clear_response_cache().await;
                all_pages(|params| {
                    let peer = &peer;
                    async move {
                        let page = peer.list_prompts(Some(params)).await?;
                        Ok((page.prompts, page.next_cursor))
                    }
                })
                .await
            })
            .await
    }

    /// The prompt `name` (the server's own name) filled with `arguments`.
    pub(crate) async fn get_prompt(
        &self,
        ctx: &ToolContext,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, McpError> {
        self.inner
            .relay(ctx, |peer| {
                let mut params = GetPromptRequestParams::new(name);
                params.arguments = arguments.clone();
                async move { peer.get_prompt(params).await }
            })
            .await
    }

    /// `completion/complete`, with the reference already in the server's own names.
    pub(crate) async fn complete(
        &self,
        ctx: &ToolContext,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, McpError> {
        self.inner
            .relay(ctx, |peer| {
                let params = params.clone();
                async move { peer.complete(params).await }
            })
            .await
    }

    /// `logging/setLevel`.
    pub(crate) async fn set_log_level(
        &self,
        ctx: &ToolContext,
        level: LoggingLevel,
    ) -> Result<(), McpError> {
        self.inner
            .relay(ctx, |peer| async move {
                peer.set_level(SetLevelRequestParams::new(level)).await
            })
            .await
    }
}

impl Inner {
    /// Runs one relayed request on the session (see the impl block above).
    async fn relay<'a, T, F, Fut>(&'a self, ctx: &'a ToolContext, request: F) -> Result<T, McpError>
    where
        T: Send + 'a,
        F: Fn(Peer<RoleClient>) -> Fut + Send + Sync + 'a,
        Fut: Future<Output = Result<T, ServiceError>> + Send + 'a,
    {
        self.with_reconnect(ctx, move |session: Arc<Session>| -> BoxFuture<'a, _> {
            let sent = request(session.peer().clone());
            Box::pin(async move {
                let limit = ctx.remaining().unwrap_or(self.config.timeout);
                let result = tokio::select! {
                    biased;
                    _ = ctx.cancelled() => {
                        return Err(McpError::new(&self.name, Step::Request, FailureKind::Cancelled, "cancelled"));
                    }
                    result = tokio::time::timeout(limit, sent) => result,
                };
                match result {
                    Err(_) => Err(McpError::timeout(&self.name, Step::Request, limit)),
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err(err)) => Err(self.service_error(&session, Step::Request, err)),
                }
            })
        })
        .await
    }
}

/// The private `_meta` key under which a result read from a server keeps what a
/// [`ToolOutput`](toolbelt_core::ToolOutput) has no place for, so that serving it again
/// (`toolbelt serve` relaying an aggregated server) passes it on unchanged: each content
/// block's `annotations` (audience, priority) and `_meta`, and that `structuredContent` came
/// from the server. The server takes the key out before answering.
pub(crate) const RELAYED_META_KEY: &str = "toolbelt/relayed";

/// A content block's `annotations` and `_meta`, as an object (empty when it has neither).
pub(crate) fn block_extras(block: &rmcp::model::ContentBlock) -> serde_json::Value {
    let mut extras = JsonObject::new();
    if let Ok(serde_json::Value::Object(mut raw)) = serde_json::to_value(block) {
        for key in ["annotations", "_meta"] {
            if let Some(value) = raw.remove(key) {
                extras.insert(key.into(), value);
            }
        }
    }
    serde_json::Value::Object(extras)
}

/// `meta` with the relay record added when there is something to keep: the blocks' extras
/// (one per block kept, in order) and whether the server sent structured content.
pub(crate) fn mark_relayed(
    meta: Option<JsonObject>,
    extras: Vec<serde_json::Value>,
    structured: bool,
) -> Option<JsonObject> {
    let any_extras = extras
        .iter()
        .any(|e| e.as_object().is_some_and(|e| !e.is_empty()));
    if !any_extras && !structured {
        return meta;
    }
    let mut meta = meta.unwrap_or_default();
    meta.insert(
        RELAYED_META_KEY.into(),
        serde_json::json!({"blocks": extras, "structured": structured}),
    );
    Some(meta)
}

/// What [`mark_relayed`] kept, taken out of `meta` (which becomes `None` when nothing else
/// was in it).
pub(crate) struct Relayed {
    /// Each block's `annotations` and `_meta`, in the order of the output's blocks.
    pub blocks: Vec<JsonObject>,
    /// The server sent `structuredContent`.
    pub structured: bool,
}

pub(crate) fn take_relayed(meta: &mut Option<JsonObject>) -> Option<Relayed> {
    let record = meta.as_mut()?.remove(RELAYED_META_KEY)?;
    if meta.as_ref().is_some_and(JsonObject::is_empty) {
        *meta = None;
    }
    let blocks = record["blocks"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .map(|b| b.as_object().cloned().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    Some(Relayed {
        blocks,
        structured: record["structured"].as_bool().unwrap_or(false),
    })
}
