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
    /// The most calls one batch (one model turn) may make; the calls past it are not run and
    /// each gets an error result saying why, so the model still sees an answer to every call.
    /// 0 means no limit. Default: [`DEFAULT_MAX_BATCH_CALLS`] (a model once asked for 100,000
    /// parallel Reads in one turn: 69 s and 1.09 GB).
    pub max_batch_calls: usize,
}

/// The default of [`ExecutorConfig::max_batch_calls`]: far above what a model asks for in a
/// real turn (tens), far below what costs a process its memory.
pub const DEFAULT_MAX_BATCH_CALLS: usize = 256;

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            validate_arguments: true,
            repair_json: false,
            mode: ExecutionMode::Serial,
            concurrency_limit: 0,
            cancel_grace: Duration::from_millis(250),
            max_batch_calls: DEFAULT_MAX_BATCH_CALLS,
        }
    }
}
