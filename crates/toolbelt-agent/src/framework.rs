//! Framework tools: the ones an agent gets from its configuration (sub-agents,
//! await_user_reply), not from its tool list, and which filters never remove.

use async_trait::async_trait;
use serde_json::json;
use toolbelt_core::{Declaration, Tool, ToolContext, ToolError, ToolOutput};

use crate::Invocation;

/// The name of the tool that hands the conversation to a sub-agent.
pub const TRANSFER_TO_AGENT: &str = "transfer_to_agent";
/// The name of the tool that routes the user's next message back to the asking agent.
pub const AWAIT_USER_REPLY: &str = "await_user_reply";
/// The session state key holding the one-shot await_user_reply route.
pub const AWAIT_USER_REPLY_STATE_KEY: &str = "toolbelt.await_user_reply.agent";

/// The names of every framework tool (kept by every tool filter).
pub const FRAMEWORK_TOOLS: &[&str] = &[
    TRANSFER_TO_AGENT,
    AWAIT_USER_REPLY,
    "knowledge_search",
    "agentic_knowledge_search",
];

/// Whether `name` is a framework tool.
pub fn is_framework_tool(name: &str) -> bool {
    FRAMEWORK_TOOLS.contains(&name)
}

fn invocation(ctx: &ToolContext) -> Result<&Invocation, ToolError> {
    Invocation::from_context(ctx)
        .ok_or_else(|| ToolError::failed("this tool only works inside an agent run"))
}

/// `transfer_to_agent`: hands the conversation to one of the agent's sub-agents.
pub(crate) struct TransferTool {
    declaration: Declaration,
    targets: Vec<String>,
}

impl TransferTool {
    pub(crate) fn new(targets: &[(String, String)]) -> Result<Self, ToolError> {
        let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
        let list: Vec<String> = targets
            .iter()
            .map(|(name, description)| format!("- {name}: {description}"))
            .collect();
        let declaration = Declaration::new(
            TRANSFER_TO_AGENT,
            format!(
                "Hands the conversation to another agent better suited to the request. \
                 The agents:\n{}",
                list.join("\n")
            ),
        )?
        .with_input_schema(json!({
            "type": "object",
            "properties": {
                "agent_name": {
                    "type": "string",
                    "enum": names,
                    "description": "The agent to hand the conversation to."
                }
            },
            "required": ["agent_name"]
        }))?;
        Ok(Self {
            declaration,
            targets: targets.iter().map(|(n, _)| n.clone()).collect(),
        })
    }
}

#[async_trait]
impl Tool for TransferTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        #[derive(serde::Deserialize)]
        struct Args {
            agent_name: String,
        }
        let args: Args = toolbelt_core::decode_args(args, &self.declaration)?;
        if !self.targets.contains(&args.agent_name) {
            return Err(ToolError::InvalidArguments {
                message: format!(
                    "there is no agent {:?}; choose one of: {}",
                    args.agent_name,
                    self.targets.join(", ")
                ),
            });
        }
        let inv = invocation(&ctx)?;
        inv.actions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .transfer_to = Some(args.agent_name.clone());
        Ok(ToolOutput::text(format!(
            "Transferred to agent {}.",
            args.agent_name
        )))
    }
}

/// `await_user_reply`: the next user message goes back to this agent, once.
pub(crate) struct AwaitUserReplyTool {
    declaration: Declaration,
}

impl AwaitUserReplyTool {
    pub(crate) fn new() -> Result<Self, ToolError> {
        Ok(Self {
            declaration: Declaration::new(
                AWAIT_USER_REPLY,
                "Call this before asking the user a question you need answered: the user's \
                 next message will come back to you. Then ask the question.",
            )?,
        })
    }
}

#[async_trait]
impl Tool for AwaitUserReplyTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, _args: &str) -> Result<ToolOutput, ToolError> {
        let inv = invocation(&ctx)?;
        inv.actions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .await_user_reply = true;
        Ok(ToolOutput::text(
            "The user's next message will be routed back to you. Ask your question now.",
        ))
    }
}
