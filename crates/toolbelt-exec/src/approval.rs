//! The permission step: a [`PermissionCheck`](toolbelt_core::PermissionCheck) decides each
//! call after validation and before hooks; a call it asks about goes to the [`Approver`].
//!
//! Deny and unanswered asks fail the call with
//! [`ToolError::Rejected`](toolbelt_core::ToolError::Rejected) carrying the reason, so the
//! model reads why and the tool never runs. A run that can pause ([`RunApprovals`] in the
//! call's context) gets [`ToolError::AwaitingApproval`](toolbelt_core::ToolError::AwaitingApproval)
//! instead, and asks a person later; once decided, the call comes back with its id in
//! [`RunApprovals::approve`] and passes the ask.
//!
//! The order on `Ask`: a decision the run already has, then the [`Approver`], then the
//! pause, then refusal.

use std::collections::HashSet;
use std::sync::Arc;

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
    /// What to show a person (the diff, the command), when the permission check has one.
    pub preview: Option<&'a str>,
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

/// What a run knows about approvals, carried in a call's [`ToolContext`] as an extension: the
/// calls a person already approved (a resumed run's), and whether a call nobody can be asked
/// about now pauses the run instead of failing.
#[derive(Debug, Clone, Default)]
pub struct RunApprovals {
    approved: Arc<HashSet<String>>,
    pauses: bool,
}

impl RunApprovals {
    /// Approvals of a run that pauses on an ask nobody can answer now.
    pub fn pausing() -> Self {
        Self {
            approved: Arc::default(),
            pauses: true,
        }
    }

    /// Marks the call `call_id` approved: its ask passes (a deny rule still refuses it).
    pub fn approve(mut self, call_id: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.approved).insert(call_id.into());
        self
    }

    /// Whether the call `call_id` was approved.
    pub fn is_approved(&self, call_id: &str) -> bool {
        !call_id.is_empty() && self.approved.contains(call_id)
    }

    /// Whether an undecided ask pauses the run.
    pub fn pauses(&self) -> bool {
        self.pauses
    }
}

/// What the model reads when a call needs approval and the executor has no approver.
pub(crate) fn nobody_to_ask(reason: &str) -> String {
    format!("{reason}; this call needs the user's approval and nobody could be asked")
}
