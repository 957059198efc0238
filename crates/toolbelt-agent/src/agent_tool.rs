//! [`AgentTool`]: any agent offered to another agent as a tool.
//!
//! The calling agent's model sees a tool named after the agent, described by the agent's
//! description, taking a `request` string (or the input schema given with
//! [`AgentTool::input_schema`]). A call runs the agent as a child invocation of the calling
//! one ([`Invocation::child`]): its own invocation id whose parent is the caller's, a copy of
//! the runtime state, a private conversation that is not stored in the session, and the
//! call's cancellation (so cancelling the run, or the call's timeout, stops the child and
//! the tools it is running). The tool's result is the child's final answer; a child that
//! fails gives an error result, so a tool message always follows the call, as models
//! require.
//!
//! Options:
//! - [`AgentTool::skip_summarization`]: after the tool's result the calling agent's turn
//!   ends, without another model call (the run still ends with
//!   [`EventKind::RunCompleted`], and the result is still a tool result, not an assistant
//!   answer).
//! - [`AgentTool::stream_inner`]: the child's events (model deltas and responses, tool
//!   chunks, progress and results, warnings) are forwarded into the caller's event stream
//!   as they happen, carrying the child's invocation id, the caller's as
//!   `parent_invocation_id` and the call's id as [`Event::tool_call_id`]. They are shown,
//!   not stored: the session keeps the call and its aggregated result. The child's input,
//!   its errors (the tool's error result reports them) and its `run_completed` are not
//!   forwarded, so the caller's stream still has exactly one `run_completed`, its own.
//! - [`AgentTool::inner_text_mode`]: [`InnerTextMode::Exclude`] keeps the forwarded
//!   progress (tool calls, chunks, results) but hides the child's assistant text (deltas are
//!   dropped, responses keep only their tool calls), for a coordinator that summarises
//!   anyway.
//! - [`AgentTool::history_scope`]: [`HistoryScope::Isolated`] (the default) gives the child
//!   only the request; [`HistoryScope::ParentBranch`] gives it the caller's conversation so
//!   far (no system messages; earlier tool calls and results as the assistant's text notes,
//!   so a child can work on a result), then the request.
//! - Agent tools are declared concurrency-safe: several in one turn run side by side in a
//!   parallel batch (the tools their children call take their own lanes).
//! - [`AgentTool::max_depth`]: how many agent tools may be nested (default
//!   [`DEFAULT_MAX_AGENT_DEPTH`], counted through the invocation chain with
//!   [`Invocation::depth`]); a call beyond it fails with a tool error instead of recursing.
//!
//! ## Completion of the tool's response
//!
//! The spec marks an agent tool's response event as "requiring completion": the runner
//! confirms that the event was processed before the calling agent goes on. Here that holds
//! for every event by construction: [`Invocation::emit`] stores an event in the session and
//! hands it to the caller's stream before the agent continues, and the calling agent asks
//! its model again only after the call's [`EventKind::ToolResult`] is stored. Forwarded
//! child events are sent with back-pressure ([`Invocation::forward`] waits while the
//! caller's stream is full), and each child tool result is stored in the child's own
//! conversation before it is forwarded. Nothing needs to be acknowledged by hand.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use toolbelt_core::{Declaration, Tool, ToolContext, ToolError, ToolOutput};
use toolbelt_model::{Message, Role};

use crate::{DynAgent, Event, EventKind, Invocation};

/// How many agent tools may be nested by default (an agent calling an agent tool is depth
/// 1; its child calling another is depth 2, and so on).
pub const DEFAULT_MAX_AGENT_DEPTH: usize = 5;

/// Whether the child's assistant text is forwarded with [`AgentTool::stream_inner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InnerTextMode {
    /// Forward the child's text (deltas and responses) along with its tool progress.
    #[default]
    Include,
    /// Forward only the child's tool progress: its deltas are dropped and its responses
    /// keep their tool calls but lose their text.
    Exclude,
}

/// What the child agent sees of the calling agent's conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryScope {
    /// Only the request.
    #[default]
    Isolated,
    /// The caller's conversation so far, then the request: user and assistant text, and
    /// the earlier tool rounds as the assistant's notes of each call and its result (cut to
    /// 2,000 characters each).
    ParentBranch,
}

/// An agent offered as a tool. See the [module documentation](self) for what a call does.
pub struct AgentTool {
    agent: DynAgent,
    declaration: Declaration,
    declared_input: bool,
    skip_summarization: bool,
    stream_inner: bool,
    inner_text: InnerTextMode,
    history: HistoryScope,
    max_depth: usize,
}

impl std::fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTool")
            .field("agent", &self.agent.name())
            .field("skip_summarization", &self.skip_summarization)
            .field("stream_inner", &self.stream_inner)
            .field("inner_text", &self.inner_text)
            .field("history", &self.history)
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

impl AgentTool {
    /// The agent as a tool: named after it, described by its description, taking a
    /// `request` string. Fails when the agent's name is not a valid tool name.
    pub fn new(agent: DynAgent) -> Result<Self, ToolError> {
        let description = if agent.description().is_empty() {
            format!("Asks the agent {} to handle a request.", agent.name())
        } else {
            agent.description().to_string()
        };
        // Concurrency-safe: the call itself touches nothing shared (the child's own tools
        // take their own lanes). Holding the caller's lane for the child's whole run would
        // serialise the agent tools of one batch, and deadlock an agent that calls itself:
        // the child runs on a task of its own, so its calls cannot see that their caller
        // holds the lane.
        let declaration = Declaration::new(agent.name(), description)?
            .concurrency_safe(true)
            .with_input_schema(json!({
                "type": "object",
                "properties": {
                    "request": {
                        "type": "string",
                        "description": "What to ask the agent, with everything it needs to know."
                    }
                },
                "required": ["request"]
            }))?;
        Ok(Self {
            agent,
            declaration,
            declared_input: false,
            skip_summarization: false,
            stream_inner: false,
            inner_text: InnerTextMode::Include,
            history: HistoryScope::Isolated,
            max_depth: DEFAULT_MAX_AGENT_DEPTH,
        })
    }

    /// Declares the agent's own input schema instead of a `request` string: the call's
    /// arguments (a JSON object, validated by the executor) are given to the child as its
    /// user message, as JSON text.
    pub fn input_schema(mut self, schema: Value) -> Result<Self, ToolError> {
        self.declaration = self.declaration.with_input_schema(schema)?;
        self.declared_input = true;
        Ok(self)
    }

    /// Ends the calling agent's turn after this tool's result, without another model call
    /// (default: off). A failed call does not end the turn: the model sees the error.
    pub fn skip_summarization(mut self, on: bool) -> Self {
        self.skip_summarization = on;
        self
    }

    /// Forwards the child's events into the caller's event stream (default: off).
    pub fn stream_inner(mut self, on: bool) -> Self {
        self.stream_inner = on;
        self
    }

    /// Whether forwarded events include the child's assistant text (default:
    /// [`InnerTextMode::Include`]).
    pub fn inner_text_mode(mut self, mode: InnerTextMode) -> Self {
        self.inner_text = mode;
        self
    }

    /// What the child sees of the caller's conversation (default:
    /// [`HistoryScope::Isolated`]).
    pub fn history_scope(mut self, scope: HistoryScope) -> Self {
        self.history = scope;
        self
    }

    /// How deep agent tools may nest before a call is refused (default
    /// [`DEFAULT_MAX_AGENT_DEPTH`]).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// The wrapped agent.
    pub fn agent(&self) -> &DynAgent {
        &self.agent
    }

    /// The child's user message for the call's arguments.
    fn request(&self, args: &str) -> Result<String, ToolError> {
        if self.declared_input {
            let value: Value = serde_json::from_str(args)
                .map_err(|e| ToolError::invalid_arguments(format!("not JSON: {e}")))?;
            return Ok(value.to_string());
        }
        #[derive(serde::Deserialize)]
        struct Args {
            request: String,
        }
        let args: Args = toolbelt_core::decode_args(args, &self.declaration)?;
        Ok(args.request)
    }

    /// The child's input: the request, after the caller's conversation for
    /// [`HistoryScope::ParentBranch`] (see [`parent_branch`]).
    async fn input(
        &self,
        inv: &Invocation,
        own_call: Option<&str>,
        request: String,
    ) -> Result<Vec<Message>, ToolError> {
        let mut input = Vec::new();
        if self.history == HistoryScope::ParentBranch {
            let events = inv
                .history()
                .await
                .map_err(|e| ToolError::failed(format!("reading the conversation: {e}")))?;
            input.extend(parent_branch(&events, own_call));
        }
        input.push(Message::user(request));
        Ok(input)
    }

    /// The event to forward for a child's `event`, if any.
    fn forwarded(&self, mut event: Event, call_id: Option<&str>) -> Option<Event> {
        let exclude_text = self.inner_text == InnerTextMode::Exclude;
        match &mut event.kind {
            EventKind::UserInput { .. }
            | EventKind::ToolInput { .. }
            | EventKind::Error { .. }
            | EventKind::RunCompleted => return None,
            EventKind::ModelDelta { .. } if exclude_text => return None,
            EventKind::ModelResponse { message, .. } if exclude_text => {
                if message.tool_calls.is_empty() {
                    return None;
                }
                message.content.clear();
                message.reasoning.clear();
            }
            _ => {}
        }
        // An event forwarded from deeper down keeps the call it came from.
        if event.tool_call_id.is_none() {
            event.tool_call_id = call_id.map(str::to_string);
        }
        Some(event)
    }
}

/// How much of each earlier tool result a child that sees the parent branch is shown.
const BRANCH_RESULT_CHARS: usize = 2_000;

/// The parent's conversation as a child with [`HistoryScope::ParentBranch`] sees it: user and
/// assistant text, and each earlier tool round as the assistant's own note of what it called
/// and what came back, so a child asked to "edit the last result" sees it. Tool rounds are
/// text, not tool messages: the child may not have those tools, and some providers refuse a
/// conversation with tool blocks for tools the request does not declare. The call that runs
/// the child (`own_call`) is left out; its result does not exist yet.
fn parent_branch(events: &[Event], own_call: Option<&str>) -> Vec<Message> {
    let mut out = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let flush = |notes: &mut Vec<String>, out: &mut Vec<Message>| {
        if !notes.is_empty() {
            out.push(Message::assistant(notes.join("\n")));
            notes.clear();
        }
    };
    for event in events {
        if let Some(result) = event.tool_result() {
            if Some(result.call_id.as_str()) != own_call {
                let verb = if result.is_error {
                    "failed"
                } else {
                    "returned"
                };
                let (content, _) =
                    toolbelt_core::text::cut_noted(&result.content, BRANCH_RESULT_CHARS);
                notes.push(format!("[{} {verb}: {content}]", result.name));
            }
            continue;
        }
        let Some(message) = event.message() else {
            continue;
        };
        match message.role {
            Role::User if !message.content.is_empty() => {
                flush(&mut notes, &mut out);
                out.push(Message::user(&message.content));
            }
            Role::Assistant => {
                if !message.content.is_empty() {
                    notes.push(message.content.clone());
                }
                for call in &message.tool_calls {
                    if Some(call.id.as_str()) != own_call {
                        notes.push(format!("[called {} with {}]", call.name, call.arguments));
                    }
                }
            }
            _ => {}
        }
    }
    flush(&mut notes, &mut out);
    out
}

#[async_trait]
impl Tool for AgentTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        let name = self.agent.name();
        let request = self.request(args)?;
        let inv = Invocation::from_context(&ctx).ok_or_else(|| {
            ToolError::failed(format!(
                "the agent tool {name} only works inside an agent run"
            ))
        })?;
        if inv.depth() >= self.max_depth {
            return Err(ToolError::failed(format!(
                "agent {name} was not run: agent tools are already nested {} deep (the \
                 limit is {}); answer without it",
                inv.depth(),
                self.max_depth
            )));
        }
        let input = self.input(inv, ctx.call_id(), request).await?;
        let child = inv
            .child(name)
            .with_cancellation(ctx.cancellation().child_token());
        let mut events = child.run_child(Arc::clone(&self.agent), input);
        let mut answer = String::new();
        let mut failure: Option<String> = None;
        while let Some(event) = events.next().await {
            match &event.kind {
                EventKind::ModelResponse { message, .. } => answer = message.content.clone(),
                EventKind::Error { message, .. } => {
                    failure.get_or_insert_with(|| message.clone());
                }
                EventKind::PendingToolCalls { .. } => {
                    failure.get_or_insert_with(|| {
                        "the run's execution filter handed back its tool calls, which an \
                         agent tool cannot resume"
                            .to_string()
                    });
                }
                _ => {}
            }
            if self.stream_inner
                && let Some(event) = self.forwarded(event, ctx.call_id())
                && inv.forward(event).await.is_err()
            {
                // The caller is gone: dropping the child's stream cancels it.
                return Err(ToolError::Cancelled);
            }
        }
        if ctx.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        if let Some(message) = failure {
            return Err(ToolError::failed(format!("agent {name} failed: {message}")));
        }
        if self.skip_summarization {
            inv.actions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .skip_summarization = true;
        }
        if answer.is_empty() {
            answer = format!("Agent {name} finished without an answer.");
        }
        Ok(ToolOutput::text(answer))
    }
}
