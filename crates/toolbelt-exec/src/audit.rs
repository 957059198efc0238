//! The audit middleware: one `tracing` record per call, with secrets redacted.
//!
//! By default a record holds the tool name, the call id, the size of the arguments, the
//! duration and the outcome, not the arguments themselves. With
//! [`Audit::include_arguments`] the arguments are recorded too, after
//! [`redact_secrets`] has replaced the value of every key that names a secret.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use toolbelt_core::{ToolContext, ToolError, ToolOutput};

use crate::{Middleware, Next, ToolRequest};

/// What replaces a secret's value.
pub const REDACTED: &str = "[REDACTED]";

/// How an audited call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    /// The tool returned an output.
    Success,
    /// The tool returned an output marked as a result-level failure.
    ResultError,
    /// The call failed; the string names the kind (`timeout`, `cancelled`, `panicked`, ...).
    Error(&'static str),
}

impl AuditOutcome {
    /// The outcome of `result`.
    pub fn of(result: &Result<ToolOutput, ToolError>) -> Self {
        match result {
            Ok(output) if output.is_error => AuditOutcome::ResultError,
            Ok(_) => AuditOutcome::Success,
            Err(err) => AuditOutcome::Error(error_kind(err)),
        }
    }

    /// A short label: `success`, `result_error` or the error kind.
    pub fn label(&self) -> &'static str {
        match self {
            AuditOutcome::Success => "success",
            AuditOutcome::ResultError => "result_error",
            AuditOutcome::Error(kind) => kind,
        }
    }
}

/// A one-word name for an error's kind (also the `error.type` of the `execute_tool` span).
pub(crate) fn error_kind(err: &ToolError) -> &'static str {
    match err {
        ToolError::InvalidName { .. } => "invalid_name",
        ToolError::InvalidDeclaration { .. } => "invalid_declaration",
        ToolError::UnknownTool { .. } => "unknown_tool",
        ToolError::InvalidArguments { .. } => "invalid_arguments",
        ToolError::SchemaViolation { .. } => "schema_violation",
        ToolError::Rejected { .. } => "rejected",
        ToolError::AwaitingApproval { .. } => "awaiting_approval",
        ToolError::Cancelled => "cancelled",
        ToolError::Timeout { .. } => "timeout",
        ToolError::Transient(_) => "transient",
        ToolError::Panicked(_) => "panicked",
        ToolError::Failed(_) => "failed",
        _ => "error",
    }
}

/// One audited call.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// The tool's name.
    pub tool: String,
    /// The call's `tool_call_id`.
    pub call_id: String,
    /// The size of the argument text in bytes.
    pub argument_bytes: usize,
    /// The arguments with secrets redacted, when arguments are recorded. Arguments that are
    /// not JSON are not recorded (they could hold anything).
    pub arguments: Option<String>,
    /// How long the rest of the chain and the tool took.
    pub duration: Duration,
    /// How the call ended.
    pub outcome: AuditOutcome,
}

impl AuditRecord {
    /// The record for a call of `req` that took `duration` and ended in `result`.
    pub fn build(
        req: &ToolRequest,
        include_arguments: bool,
        duration: Duration,
        result: &Result<ToolOutput, ToolError>,
    ) -> Self {
        let arguments = include_arguments
            .then(|| serde_json::from_str::<Value>(&req.arguments).ok())
            .flatten()
            .map(|value| redact_secrets(&value).to_string());
        Self {
            tool: req.tool_name().to_string(),
            call_id: req.call_id.to_string(),
            argument_bytes: req.arguments.len(),
            arguments,
            duration,
            outcome: AuditOutcome::of(result),
        }
    }
}

/// Whether an object key names a secret: it contains `token`, `secret`, `password`,
/// `passwd`, `authorization`, `api_key`/`apikey`, `private_key` or `cookie`, ignoring case
/// and `-`/`_` (so `X-Api-Key`, `accessToken` and `client_secret` match).
pub fn is_secret_key(key: &str) -> bool {
    let normalized: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "authorization",
        "apikey",
        "privatekey",
        "cookie",
    ]
    .iter()
    .any(|needle| normalized.contains(needle))
}

/// A copy of `value` in which the value of every secret-named key ([`is_secret_key`]), at
/// any depth, is replaced by `"[REDACTED]"`.
pub fn redact_secrets(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = if is_secret_key(key) {
                        Value::String(REDACTED.to_string())
                    } else {
                        redact_secrets(value)
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact_secrets).collect()),
        other => other.clone(),
    }
}

type Sink = dyn Fn(&AuditRecord) + Send + Sync;

/// Records every call that reaches it through `tracing` (target `toolbelt::audit`, level
/// INFO), and optionally hands the record to a sink of your own.
///
/// Put it first (outermost) to see every attempt's total; calls refused by a before hook
/// never reach the middleware, so audit rejections in an after hook if you need them.
#[derive(Clone, Default)]
pub struct Audit {
    include_arguments: bool,
    sink: Option<Arc<Sink>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("include_arguments", &self.include_arguments)
            .field("sink", &self.sink.is_some())
            .finish()
    }
}

impl Audit {
    /// Records name, call id, argument size, duration and outcome.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the arguments too, with secrets redacted.
    pub fn include_arguments(mut self, include: bool) -> Self {
        self.include_arguments = include;
        self
    }

    /// Also hands every record to `sink` (to store it, or ship it elsewhere).
    pub fn with_sink(mut self, sink: impl Fn(&AuditRecord) + Send + Sync + 'static) -> Self {
        self.sink = Some(Arc::new(sink));
        self
    }
}

#[async_trait]
impl Middleware for Audit {
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        let result = next.run(ctx, req.clone()).await;
        let record = AuditRecord::build(&req, self.include_arguments, started.elapsed(), &result);
        tracing::info!(
            target: "toolbelt::audit",
            tool = %record.tool,
            call_id = %record.call_id,
            argument_bytes = record.argument_bytes,
            arguments = record.arguments.as_deref(),
            duration_us = record.duration.as_micros() as u64,
            outcome = record.outcome.label(),
            "tool call"
        );
        if let Some(sink) = &self.sink {
            sink(&record);
        }
        result
    }
}
