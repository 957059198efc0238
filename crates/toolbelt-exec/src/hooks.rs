//! Before and after hooks: checks and rewrites around a tool call.
//!
//! Order for one call (see the crate docs): tool-specific before hooks → global before
//! hooks → middleware → the tool → global after hooks → tool-specific after hooks. Hooks of
//! one kind run in the order they were added.

use async_trait::async_trait;
use toolbelt_core::{Declaration, ToolContext, ToolError, ToolOutput};

/// What a before hook sees of the call about to run.
#[derive(Debug, Clone, Copy)]
pub struct HookCall<'a> {
    /// The tool's declaration (its name, schema and hints).
    pub declaration: &'a Declaration,
    /// The name of the tool set that offers the tool (an MCP server's name for its tools),
    /// `None` for a tool registered on its own.
    pub set: Option<&'a str>,
    /// The call's `tool_call_id` (empty for programmatic calls that gave none).
    pub call_id: &'a str,
    /// The arguments as they stand now: repaired, validated, and as replaced by earlier
    /// hooks.
    pub arguments: &'a str,
}

impl HookCall<'_> {
    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.declaration.name
    }
}

/// A before hook's decision.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeAction {
    /// Go on with the call unchanged.
    Continue,
    /// Go on with these arguments instead (later hooks and the tool see them). They are not
    /// validated again: a hook is trusted code.
    ReplaceArguments(String),
    /// Do not run the tool (nor later before hooks or the middleware); use this output as
    /// the call's result. After hooks still run.
    Respond(ToolOutput),
    /// Refuse the call: it fails with [`ToolError::Rejected`] carrying this reason and the
    /// tool never runs. After hooks still see the rejection.
    Reject(String),
}

/// A check or rewrite that runs before a tool.
///
/// Closures `Fn(&ToolContext, &HookCall) -> BeforeAction` are before hooks; implement the
/// trait for hooks that need to await (asking a user, checking a policy service).
#[async_trait]
pub trait BeforeHook: Send + Sync {
    /// Decides what happens to the call.
    async fn before(&self, ctx: &ToolContext, call: &HookCall<'_>) -> BeforeAction;
}

#[async_trait]
impl<F> BeforeHook for F
where
    F: Fn(&ToolContext, &HookCall<'_>) -> BeforeAction + Send + Sync,
{
    async fn before(&self, ctx: &ToolContext, call: &HookCall<'_>) -> BeforeAction {
        self(ctx, call)
    }
}

/// An after hook's decision.
#[derive(Debug)]
pub enum AfterAction {
    /// Keep the result as it is.
    Keep,
    /// Use this result (an output or an error) instead.
    Replace(Result<ToolOutput, ToolError>),
}

/// A hook that sees a call's result (or error) and may replace it.
///
/// Closures `Fn(&ToolContext, &HookCall, &Result<ToolOutput, ToolError>) -> AfterAction` are
/// after hooks.
#[async_trait]
pub trait AfterHook: Send + Sync {
    /// Inspects the result; returns [`AfterAction::Replace`] to change it.
    async fn after(
        &self,
        ctx: &ToolContext,
        call: &HookCall<'_>,
        result: &Result<ToolOutput, ToolError>,
    ) -> AfterAction;
}

#[async_trait]
impl<F> AfterHook for F
where
    F: Fn(&ToolContext, &HookCall<'_>, &Result<ToolOutput, ToolError>) -> AfterAction + Send + Sync,
{
    async fn after(
        &self,
        ctx: &ToolContext,
        call: &HookCall<'_>,
        result: &Result<ToolOutput, ToolError>,
    ) -> AfterAction {
        self(ctx, call, result)
    }
}
