//! The permission step: a [`PermissionCheck`](toolbelt_core::PermissionCheck) decides each
//! call after validation and before hooks; a call it asks about goes to the [`Approver`].
//!
//! Deny and unanswered asks fail the call with
//! [`ToolError::Rejected`](toolbelt_core::ToolError::Rejected) carrying the reason, so the
//! model reads why and the tool never runs.

use async_trait::async_trait;
use toolbelt_core::{Declaration, ToolContext};

/// A call a person is asked about.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    /// The tool's declaration.
    pub declaration: &'a Declaration,
    /// The call's `tool_call_id` (empty for programmatic calls that gave none).
    pub call_id: &'a str,
    /// The arguments, repaired and validated.
    pub arguments: &'a str,
    /// Why the call needs approval (the rule that asked, or the default).
    pub reason: &'a str,
}

impl ApprovalRequest<'_> {
    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.declaration.name
    }
}

/// What a person decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Run the call as it is.
    Approve,
    /// Run the call with these arguments instead; they are validated against the tool's
    /// schema like the model's.
    ApproveWith(String),
    /// Do not run it; the text is what the model is told.
    Deny(String),
}

/// Asks a person about a call (a terminal prompt, a button in a page, an MCP elicitation).
#[async_trait]
pub trait Approver: Send + Sync {
    /// The decision for `request`.
    async fn decide(&self, ctx: &ToolContext, request: &ApprovalRequest<'_>) -> ApprovalDecision;
}

/// What the model reads when a call needs approval and the executor has no approver.
pub(crate) fn nobody_to_ask(reason: &str) -> String {
    format!("{reason}; this call needs the user's approval and nobody could be asked")
}
