//! The client side of the protocol: what the client tells a server it can do, and its
//! answers to the server's requests and notifications (elicitation, sampling, roots,
//! `tools/list_changed`; progress is taken off the transport, see `progress.rs`).
//!
//! Capabilities follow the handlers a set was built with: `elicitation` only with an
//! elicitation handler, `sampling` only with a sampling handler (`sampling.tools` only when
//! it offers tools), `roots` only with roots. A server that asks anyway gets `-32601`
//! (method not found) for sampling, `-32602` for sampling with tools, a decline for
//! elicitation and an empty root list, as rmcp answers by default.
//!
//! A set whose server is aggregated by `toolbelt serve` has a [`RequestRelay`] instead: it
//! declares elicitation (form and URL), sampling (with tools) and roots, and passes each such
//! request to the relay, which hands it to a client of `serve` (or answers with an error
//! saying none offers it; roots fall back to the set's own).

// Sampling and roots are deprecated in rmcp's newest protocol (SEP-2577) but are what
// servers on 2025-06-18 and 2025-11-25 use.
#![allow(deprecated)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, ErrorCode,
    ErrorData, FormElicitationCapability, Implementation, ListRootsResult, Role, RootsCapabilities,
    SamplingCapability, SamplingMessage, SamplingMessageContentBlock, ToolChoiceMode,
    UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;

use super::elicitation::{
    ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse,
};
use super::progress::ProgressRoutes;
use super::roots::{self, SharedRoots};
use super::sampling::{
    self as sampling_types, SamplingHandler, SamplingRole, SamplingTool, SamplingToolChoice,
    SamplingToolResult, SamplingToolUse,
};
use crate::config::ConnectionConfig;

/// The JSON-RPC code of a refused sampling request (the spec's example: "User rejected
/// sampling request").
const SAMPLING_DECLINED: ErrorCode = ErrorCode(-1);

/// What a tool set offers servers, shared by all its sessions.
#[derive(Default)]
pub(crate) struct ClientFeatures {
    pub elicitation: Option<ElicitationHandler>,
    pub url_elicitation: bool,
    pub sampling: Option<SamplingHandler>,
    /// Whether the sampling handler offers a request's tools to its model.
    pub sampling_tools: bool,
    pub roots: Option<SharedRoots>,
    pub progress: Arc<ProgressRoutes>,
    /// Log messages, resource updates and list changes, for a relay (`relay.rs`).
    pub upstream: Arc<super::relay::UpstreamEvents>,
    /// Where the server's elicitation, sampling and roots requests go when the set is relayed.
    pub requests: RwLock<Option<Arc<dyn RequestRelay>>>,
}

/// Answers a server's requests on someone else's behalf: `toolbelt serve` passes an
/// aggregated server's requests on to its own clients. Each answer is the client's own
/// (or a JSON-RPC error saying why there is none); dropping the future abandons the request.
pub(crate) trait RequestRelay: Send + Sync {
    /// An `elicitation/create` of `server`.
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, Result<ElicitResult, ErrorData>>;
    /// A `sampling/createMessage` of `server`.
    fn create_message(
        &self,
        server: &str,
        request: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, ErrorData>>;
    /// A `roots/list` of `server`; `None` when no client offers roots (the set's own roots
    /// answer then).
    fn list_roots(
        &self,
        server: &str,
    ) -> BoxFuture<'static, Option<Result<ListRootsResult, ErrorData>>>;
}

// Only `toolbelt-mcp::server` relays requests.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
impl super::McpToolSet {
    /// Passes the server's elicitation, sampling and roots requests to `relay` in sessions
    /// opened from now on (the capabilities are declared when a session starts).
    pub(crate) fn relay_requests(&self, relay: Arc<dyn RequestRelay>) {
        *self
            .inner
            .features
            .requests
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(relay);
    }

    /// Tells the server the roots changed (`notifications/roots/list_changed`), when a
    /// session is open: a relayed client's roots did.
    pub(crate) async fn notify_roots_changed(&self) {
        if let Some(session) = self.inner.current_session()
            && let Err(err) = session.peer().notify_roots_list_changed().await
        {
            tracing::debug!(server = %self.inner.name, "could not send roots/list_changed: {err}");
        }
    }
}

impl ClientFeatures {
    /// The capabilities to declare in `initialize`: only what a handler answers.
    fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        // A relay may find a client for any of them; the relay refuses what none offers.
        let relayed = self.request_relay().is_some();
        if self.elicitation.is_some() || relayed {
            let mut elicitation =
                ElicitationCapability::new().with_form(FormElicitationCapability::new());
            if self.url_elicitation || relayed {
                elicitation = elicitation.with_url(UrlElicitationCapability::new());
            }
            capabilities.elicitation = Some(elicitation);
        }
        if self.sampling.is_some() || relayed {
            let mut sampling = SamplingCapability::default();
            // A relay passes tools on only to a client that declared them (`requests.rs`).
            if self.sampling_tools || relayed {
                sampling.tools = Some(Default::default());
            }
            capabilities.sampling = Some(sampling);
        }
        if self.roots.is_some() || relayed {
            let mut roots = RootsCapabilities::default();
            roots.list_changed = Some(true);
            capabilities.roots = Some(roots);
        }
        capabilities
    }

    fn request_relay(&self) -> Option<Arc<dyn RequestRelay>> {
        self.requests
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The rmcp client handler of one session.
#[derive(Clone)]
pub(crate) struct Handler {
    server: String,
    info: ClientConfig,
    tools_changed: Arc<AtomicBool>,
    features: Arc<ClientFeatures>,
}

impl Handler {
    /// The routes of the set's calls that watch progress, for the session's
    /// [`super::progress::ProgressTap`].
    pub fn progress_routes(&self) -> Arc<ProgressRoutes> {
        self.features.progress.clone()
    }

    pub fn new(
        server: &str,
        config: &ConnectionConfig,
        tools_changed: Arc<AtomicBool>,
        features: Arc<ClientFeatures>,
    ) -> Self {
        let implementation =
            Implementation::new(&config.client_info.name, &config.client_info.version);
        Self {
            server: server.to_string(),
            info: ClientConfig::new(features.capabilities(), implementation),
            tools_changed,
            features,
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "server reported tools/list_changed");
        self.tools_changed.store(true, Ordering::Release);
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.features.upstream.logging_message(&self.server, params);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.features
            .upstream
            .resource_updated(&self.server, params);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.features.upstream.resources_changed(&self.server);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.features.upstream.prompts_changed(&self.server);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let Some(relay) = self.features.request_relay() {
            return until_cancelled(&context, relay.elicit(&self.server, request)).await;
        }
        let Some(handler) = &self.features.elicitation else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let request = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = match serde_json::to_value(requested_schema) {
                    Ok(Value::Object(schema)) => schema,
                    _ => {
                        return Err(ErrorData::invalid_params(
                            "the requested schema is not a JSON object",
                            None,
                        ));
                    }
                };
                ElicitationRequest {
                    server: self.server.clone(),
                    message,
                    kind: ElicitationKind::Form { schema },
                }
            }
            ElicitRequestParams::UrlElicitationParams {
                message,
                url,
                elicitation_id,
                ..
            } => {
                if !self.features.url_elicitation {
                    // Not declared: a server that asks anyway is told no.
                    return Ok(ElicitResult::new(ElicitationAction::Decline));
                }
                ElicitationRequest {
                    server: self.server.clone(),
                    message,
                    kind: ElicitationKind::Url {
                        url,
                        elicitation_id,
                    },
                }
            }
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        let is_url = matches!(request.kind, ElicitationKind::Url { .. });
        Ok(match handler(request).await {
            // A URL elicitation's data goes to the server's page, never in the answer.
            ElicitationResponse::Accept(_) if is_url => {
                ElicitResult::new(ElicitationAction::Accept)
            }
            ElicitationResponse::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            ElicitationResponse::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationResponse::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        if let Some(relay) = self.features.request_relay() {
            return until_cancelled(&context, relay.create_message(&self.server, params)).await;
        }
        let Some(handler) = &self.features.sampling else {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "this client does not offer sampling",
                None,
            ));
        };
        let with_tools = params.tools.is_some() || params.tool_choice.is_some();
        if with_tools && !self.features.sampling_tools {
            return Err(ErrorData::invalid_params(
                "this client does not offer tools in sampling (it did not declare sampling.tools)",
                None,
            ));
        }
        let offered = params.tools.as_ref().is_some_and(|tools| !tools.is_empty());
        let request = sampling_request(&self.server, params);
        match handler(request).await {
            Ok(response) if !response.tool_uses.is_empty() && !offered => {
                Err(ErrorData::internal_error(
                    "the model called a tool, but the request offered none",
                    None,
                ))
            }
            Ok(response) => Ok(sampling_result(response)),
            Err(err) if err.is_declined() => {
                Err(ErrorData::new(SAMPLING_DECLINED, err.message, None))
            }
            Err(err) => Err(ErrorData::internal_error(err.message, None)),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        if let Some(relay) = self.features.request_relay() {
            let relayed = relay.list_roots(&self.server);
            if let Some(answer) = until_cancelled(&context, async { Ok(relayed.await) }).await? {
                return answer;
            }
        }
        match &self.features.roots {
            Some(shared) => Ok(roots::list_result(shared)),
            None => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "this client does not offer roots",
                None,
            )),
        }
    }
}

/// Waits for a relayed answer until the server cancels its request (dropping the relay's
/// future abandons the request it forwarded).
async fn until_cancelled<T>(
    context: &RequestContext<RoleClient>,
    answer: impl std::future::Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    tokio::select! {
        answer = answer => answer,
        _ = context.ct.cancelled() => Err(ErrorData::internal_error(
            "the server cancelled the request",
            None,
        )),
    }
}

/// The request as the handler sees it: the conversation as text, tool uses and tool
/// results.
fn sampling_request(
    server: &str,
    params: CreateMessageRequestParams,
) -> sampling_types::SamplingRequest {
    let messages = params.messages.into_iter().map(sampling_message).collect();
    let model_hints = params
        .model_preferences
        .and_then(|preferences| preferences.hints)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|hint| hint.name)
        .collect();
    let tools = params
        .tools
        .unwrap_or_default()
        .into_iter()
        .map(|tool| SamplingTool {
            name: tool.name.into_owned(),
            description: tool.description.map(|d| d.into_owned()),
            input_schema: (*tool.input_schema).clone(),
        })
        .collect();
    let tool_choice = match params.tool_choice.and_then(|choice| choice.mode) {
        Some(ToolChoiceMode::Required) => SamplingToolChoice::Required,
        Some(ToolChoiceMode::None) => SamplingToolChoice::None,
        _ => SamplingToolChoice::Auto,
    };
    sampling_types::SamplingRequest {
        server: server.to_string(),
        messages,
        system_prompt: params.system_prompt,
        max_tokens: params.max_tokens,
        temperature: params.temperature,
        stop_sequences: params.stop_sequences.unwrap_or_default(),
        model_hints,
        tools,
        tool_choice,
    }
}

/// One message of the conversation: its text blocks joined, its tool uses and results apart.
fn sampling_message(message: SamplingMessage) -> sampling_types::SamplingMessage {
    let role = match message.role {
        Role::User => SamplingRole::User,
        Role::Assistant => SamplingRole::Assistant,
    };
    let mut converted = sampling_types::SamplingMessage::text(role, String::new());
    let mut texts = Vec::new();
    for block in message.content.into_vec() {
        match block {
            SamplingMessageContentBlock::ToolUse(tool_use) => {
                converted.tool_uses.push(SamplingToolUse {
                    id: tool_use.id,
                    name: tool_use.name,
                    input: tool_use.input,
                })
            }
            SamplingMessageContentBlock::ToolResult(result) => {
                let text = result
                    .content
                    .iter()
                    .map(|block| block_text(&serde_json::to_value(block).unwrap_or(Value::Null)))
                    .collect::<Vec<_>>()
                    .join("\n");
                converted.tool_results.push(SamplingToolResult {
                    tool_use_id: result.tool_use_id,
                    text,
                    is_error: result.is_error.unwrap_or(false),
                })
            }
            other => {
                texts.push(block_text(
                    &serde_json::to_value(&other).unwrap_or(Value::Null),
                ));
            }
        }
    }
    converted.text = texts.join("\n");
    converted
}

/// The handler's answer as the protocol says: one text block, or for an answer that calls
/// tools an array of the text, when there is any, and a `tool_use` block per call.
fn sampling_result(response: sampling_types::SamplingResponse) -> CreateMessageResult {
    let message = if response.tool_uses.is_empty() {
        SamplingMessage::assistant_text(response.text)
    } else {
        let mut blocks = Vec::with_capacity(response.tool_uses.len() + 1);
        if !response.text.is_empty() {
            blocks.push(SamplingMessageContentBlock::text(response.text));
        }
        blocks.extend(
            response
                .tool_uses
                .into_iter()
                .map(|call| SamplingMessageContentBlock::tool_use(call.id, call.name, call.input)),
        );
        SamplingMessage::new_multiple(Role::Assistant, blocks)
    };
    let mut result = CreateMessageResult::new(message, response.model);
    result.stop_reason = response.stop_reason;
    result
}

/// A content block's text, or a bracketed note naming what was left out.
fn block_text(block: &Value) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str);
    match field("type") {
        Some("text") => field("text").unwrap_or_default().to_string(),
        Some(kind) => match field("mimeType") {
            Some(mime) => format!("[{mime} omitted]"),
            None => format!("[{kind} omitted]"),
        },
        None => "[content omitted]".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_declared_only_for_what_a_handler_answers() {
        let none = ClientFeatures::default().capabilities();
        assert!(none.elicitation.is_none() && none.sampling.is_none() && none.roots.is_none());
        let features = ClientFeatures {
            elicitation: Some(Arc::new(|_| {
                Box::pin(async { ElicitationResponse::Decline })
            })),
            roots: Some(SharedRoots::default()),
            ..ClientFeatures::default()
        };
        let declared = serde_json::to_value(features.capabilities()).unwrap();
        assert_eq!(
            declared,
            serde_json::json!({"elicitation": {"form": {}}, "roots": {"listChanged": true}})
        );
    }

    #[test]
    fn blocks_that_are_not_text_become_a_note() {
        let image = serde_json::json!({"type": "image", "data": "AAAA", "mimeType": "image/png"});
        assert_eq!(block_text(&image), "[image/png omitted]");
        let text = serde_json::json!({"type": "text", "text": "hi"});
        assert_eq!(block_text(&text), "hi");
    }
}
