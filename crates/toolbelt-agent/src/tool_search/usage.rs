//! [`ToolSearchUsage`]: what the searches of a run cost, read from its invocation.

use std::sync::Mutex;

use toolbelt_model::Usage;

use crate::Invocation;

/// The tokens the tool searches of one run used (search model calls and query rewrites),
/// summed over every search and agent of the run (a child invocation keeps its own).
///
/// ```no_run
/// # fn f(inv: &toolbelt_agent::Invocation) {
/// use toolbelt_agent::tool_search::ToolSearchUsage;
/// if let Some(usage) = ToolSearchUsage::from_invocation(inv) {
///     println!("tool search: {} calls, {} tokens", usage.calls, usage.total_tokens);
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolSearchUsage {
    /// Model calls the searches made.
    pub calls: u64,
    /// Tokens of their requests.
    pub prompt_tokens: u64,
    /// Tokens they generated.
    pub completion_tokens: u64,
    /// The sum.
    pub total_tokens: u64,
}

impl ToolSearchUsage {
    /// The usage of the run `inv` belongs to so far; `None` before its first search call.
    /// Readable in any callback or tool of the run (a tool gets the invocation with
    /// [`Invocation::from_context`]).
    pub fn from_invocation(inv: &Invocation) -> Option<ToolSearchUsage> {
        let cell = inv.run_value::<UsageCell>()?;
        Some(*cell.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Adds one search model call (its usage, when the server reported one).
    pub(crate) fn record(inv: &Invocation, usage: Option<Usage>) {
        let cell = inv.run_value_or_default::<UsageCell>();
        let mut total = cell.0.lock().unwrap_or_else(|p| p.into_inner());
        total.calls += 1;
        if let Some(usage) = usage {
            total.prompt_tokens += usage.prompt_tokens;
            total.completion_tokens += usage.completion_tokens;
            total.total_tokens += usage.total_tokens;
        }
    }
}

/// The run value holding the usage.
#[derive(Default)]
struct UsageCell(Mutex<ToolSearchUsage>);
