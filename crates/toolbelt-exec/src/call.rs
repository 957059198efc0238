//! What the executor hands back for a model's tool call ([`ToolCall`], defined in
//! `toolbelt-core` and shared with the model clients and the agent).

use std::time::Duration;

use toolbelt_core::{ToolCall, ToolError, ToolOutput};

use crate::artifact::ArtifactRef;

/// What happened to one call that the executor ran (or refused to run).
///
/// `result` is `Ok` when the tool ran (its output may still be a result-level failure, see
/// [`ToolOutput::is_error`]) or a before hook answered in its place; it is `Err` for every
/// failure: unknown tool, bad arguments, schema violations, rejections, timeouts,
/// cancellation, panics and the tool's own errors. Match on the [`ToolError`] variant to tell
/// them apart.
#[derive(Debug)]
pub struct CallResult {
    /// The call's `tool_call_id` (empty for programmatic calls that gave none).
    pub call_id: String,
    /// The tool name the call asked for.
    pub tool_name: String,
    /// The output, or why there is none.
    pub result: Result<ToolOutput, ToolError>,
    /// The repaired argument text, when JSON repair changed the arguments. `None` means the
    /// arguments were used as given.
    pub repaired_arguments: Option<String>,
    /// Where the full result went, when it was offloaded to an artifact store. The output's
    /// `for_llm` then holds a preview and the `artifact://` reference, and `for_user` the
    /// full result.
    pub artifact: Option<ArtifactRef>,
    /// How long the call took through the whole pipeline.
    pub duration: Duration,
}

impl CallResult {
    /// Whether the call produced an output that is not a result-level failure.
    pub fn is_success(&self) -> bool {
        matches!(&self.result, Ok(output) if !output.is_error)
    }

    /// Whether JSON repair changed the arguments.
    pub fn was_repaired(&self) -> bool {
        self.repaired_arguments.is_some()
    }

    /// The text to send back to the model as the tool message: the output's `for_llm` text,
    /// or the error as short actionable text (`Error: ...`; a cancelled call reads
    /// `Error: tool execution was interrupted`).
    pub fn model_text(&self) -> String {
        match &self.result {
            Ok(output) => output.llm_text(),
            Err(err) => err.for_model(),
        }
    }

    /// The text to show a user: the output's `for_user` text (the full result even when the
    /// model saw an offloaded preview), or the error message.
    pub fn user_text(&self) -> String {
        match &self.result {
            Ok(output) => output.user_text(),
            Err(err) => err.for_model(),
        }
    }
}

/// The fate of one call of a batch, in the model's call order.
// Nearly every item is `Done`; boxing it would cost an allocation per call for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum BatchItem {
    /// The executor handled the call: it ran, or failed (unknown tool, rejected, ...).
    Done(CallResult),
    /// The execution filter marked the call "not executed here": the caller (for example a
    /// client that runs some tools itself) must execute it and supply the result. This is
    /// not a failure and not a rejection.
    Pending(ToolCall),
}

impl BatchItem {
    /// The call's `tool_call_id`.
    pub fn call_id(&self) -> &str {
        match self {
            BatchItem::Done(result) => &result.call_id,
            BatchItem::Pending(call) => &call.id,
        }
    }

    /// The result, when the executor handled the call.
    pub fn as_done(&self) -> Option<&CallResult> {
        match self {
            BatchItem::Done(result) => Some(result),
            BatchItem::Pending(_) => None,
        }
    }

    /// The call, when it was handed back as pending.
    pub fn as_pending(&self) -> Option<&ToolCall> {
        match self {
            BatchItem::Pending(call) => Some(call),
            BatchItem::Done(_) => None,
        }
    }

    /// Whether the call was handed back as pending.
    pub fn is_pending(&self) -> bool {
        matches!(self, BatchItem::Pending(_))
    }
}
