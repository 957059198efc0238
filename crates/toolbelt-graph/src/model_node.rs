//! [`ModelNode`]: one model call with the state's conversation and the tools it declares.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use toolbelt_agent::history::sanitize;
use toolbelt_agent::{AgentError, EventKind};
use toolbelt_core::{Declaration, ToolContext};
use toolbelt_exec::record_calls;
use toolbelt_model::{DynModel, GenerationConfig, Message, Model, Request, Response};

use crate::tools_node::Offered;
use crate::{Node, NodeContext, NodeError, State, ToolsNode};

/// A node that calls a model once: the instruction, the state's conversation (made valid
/// for any provider, as the agent loop does) and the declared tools go in; the assistant
/// message comes out as a `model_response` event and is appended to the conversation, its
/// tool calls recorded with unique ids and JSON-object arguments (repaired when possible),
/// so a [`ToolsNode`] after it runs them. The before/after model callbacks of the run's
/// plugins and of the graph run around the call.
pub struct ModelNode {
    model: DynModel,
    instruction: String,
    declarations: Vec<Declaration>,
    offered: Vec<Offered>,
    config: GenerationConfig,
}

impl std::fmt::Debug for ModelNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelNode")
            .field("model", &self.model.name())
            .field("declarations", &self.declarations.len())
            .finish_non_exhaustive()
    }
}

impl ModelNode {
    /// A node calling `model`.
    pub fn new(model: impl Model + 'static) -> Self {
        Self::shared(Arc::new(model))
    }

    /// A node calling a shared model.
    pub fn shared(model: DynModel) -> Self {
        Self {
            model,
            instruction: String::new(),
            declarations: Vec::new(),
            offered: Vec::new(),
            config: GenerationConfig::default(),
        }
    }

    /// The system instruction, sent before the conversation.
    pub fn instruction(mut self, instruction: impl Into<String>) -> Self {
        self.instruction = instruction.into();
        self
    }

    /// Declares the tools `tools` runs (listed at each call, so tool sets' changes show;
    /// through its filter, if it has one).
    pub fn tools_from(mut self, tools: &ToolsNode) -> Self {
        self.offered.push(tools.offered());
        self
    }

    /// Declares these tools as well.
    pub fn declarations(mut self, declarations: impl IntoIterator<Item = Declaration>) -> Self {
        self.declarations.extend(declarations);
        self
    }

    /// How to generate (streaming, sampling, limits).
    pub fn generation_config(mut self, config: GenerationConfig) -> Self {
        self.config = config;
        self
    }

    /// The complete message of one model call, emitting its deltas.
    async fn generate<S: State>(
        &self,
        ctx: &NodeContext<S>,
        request: Request,
    ) -> Result<Response, NodeError> {
        let inv = ctx.invocation();
        let failed = |e: toolbelt_model::ModelError| {
            NodeError::failed(format!("the model call failed: {e}"))
        };
        let started = tokio::select! {
            biased;
            () = inv.cancellation().cancelled() => return Err(AgentError::Cancelled.into()),
            started = self.model.generate(request) => started.map_err(failed)?,
        };
        let mut stream = started;
        let mut last = None;
        loop {
            let item = tokio::select! {
                biased;
                () = inv.cancellation().cancelled() => return Err(AgentError::Cancelled.into()),
                item = stream.next() => item,
            };
            match item {
                None => break,
                Some(response) => {
                    let response = response.map_err(failed)?;
                    if !response.partial {
                        last = Some(response);
                    } else if !response.delta.is_empty() {
                        let delta = response.delta;
                        inv.emit(inv.new_event(EventKind::ModelDelta { delta }))
                            .await?;
                    }
                }
            }
        }
        last.filter(|r| r.message.is_some())
            .ok_or_else(|| NodeError::failed("the model's response ended without a message"))
    }
}

#[async_trait]
impl<S: State> Node<S> for ModelNode {
    async fn run(&self, ctx: NodeContext<S>) -> Result<S::Update, NodeError> {
        let inv = ctx.invocation();
        let mut messages = Vec::new();
        if !self.instruction.is_empty() {
            messages.push(Message::system(&self.instruction));
        }
        messages.extend(sanitize(
            ctx.state().messages().unwrap_or_default().to_vec(),
        ));
        let mut declarations = self.declarations.clone();
        for offered in &self.offered {
            declarations.extend(offered.snapshot(&ToolContext::new()).await.declarations());
        }
        let mut request = Request::new(messages)
            .with_tools(declarations)
            .with_config(self.config.clone());
        let (mut message, finish_reason, usage) =
            match ctx.callbacks().before_model(inv, &mut request).await? {
                Some(message) => (message, None, None),
                None => {
                    let response = self.generate(&ctx, request).await?;
                    let message = response.message.unwrap_or_else(|| Message::assistant(""));
                    (message, response.finish_reason, response.usage)
                }
            };
        ctx.callbacks().after_model(inv, &mut message).await?;
        record_calls(&mut message.tool_calls, true);
        inv.emit(inv.new_event(EventKind::ModelResponse {
            message: message.clone(),
            finish_reason,
            usage,
        }))
        .await?;
        Ok(S::append_messages(vec![message]).unwrap_or_default())
    }

    fn kind(&self) -> &'static str {
        "model"
    }

    fn needs_messages(&self) -> bool {
        true
    }
}

/// Routes after a model node: to `tools` when the last message calls tools, else to END
/// (the condition of the agent loop as a graph).
///
/// ```
/// use toolbelt_graph::{END, tools_condition};
/// # toolbelt_graph::state! { struct Chat => ChatUpdate { messages: Vec<toolbelt_model::Message> => Messages } }
/// let route = tools_condition::<Chat>("tools");
/// assert_eq!(route(&Chat::default()), END.into());
/// ```
pub fn tools_condition<S: State>(
    tools: &str,
) -> impl Fn(&S) -> crate::Route + Send + Sync + 'static {
    let tools = tools.to_string();
    move |state: &S| {
        let calls = state
            .messages()
            .and_then(<[Message]>::last)
            .is_some_and(Message::has_tool_calls);
        if calls {
            tools.as_str().into()
        } else {
            crate::END.into()
        }
    }
}
