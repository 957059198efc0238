//! The executor's settings.

use std::time::Duration;

use crate::ExecutionMode;

/// Settings of an [`Executor`](crate::Executor); build one with
/// [`ExecutorBuilder`](crate::ExecutorBuilder) or set the fields directly.
///
/// A batch's [`BatchOptions`](crate::BatchOptions) may set `validate_arguments`,
/// `repair_json`, `mode` and `concurrency_limit` for that batch; what they leave unset comes
/// from here.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorConfig {
    /// Check arguments against each tool's input schema before running it. Default: on.
    ///
    /// A valid shape does not make an operation allowed: paths, hosts and deletions still
    /// need their own permission checks (a hook is the place).
    pub validate_arguments: bool,
    /// Repair almost-JSON arguments (unquoted keys, single quotes, trailing commas, a
    /// truncated object) when strict parsing fails. Default: off.
    pub repair_json: bool,
    /// How batches are scheduled when the batch options do not say. Default:
    /// [`ExecutionMode::Serial`].
    pub mode: ExecutionMode,
    /// The most calls of one batch that run at once; 0 means no limit. Default: 0.
    pub concurrency_limit: usize,
    /// After a call's token is cancelled (by the caller, a batch cancellation or the
    /// timeout middleware), how long the tool may take to wind down before it is dropped.
    /// Default: 250 ms.
    pub cancel_grace: Duration,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            validate_arguments: true,
            repair_json: false,
            mode: ExecutionMode::Serial,
            concurrency_limit: 0,
            cancel_grace: Duration::from_millis(250),
        }
    }
}
