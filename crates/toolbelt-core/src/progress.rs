//! Progress reports from a running call to whoever is watching it (an MCP client that sent a
//! progress token, a terminal spinner).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One progress report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressUpdate {
    /// How far along, increasing with every report (a count, bytes, percent).
    pub progress: f64,
    /// The total, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A short human-readable note (the latest chunk of a stream, "compiling…").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ProgressUpdate {
    /// A report of `progress` with no total and no message.
    pub fn new(progress: f64) -> Self {
        Self {
            progress,
            total: None,
            message: None,
        }
    }

    /// Adds a message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Adds a total.
    pub fn with_total(mut self, total: f64) -> Self {
        self.total = Some(total);
        self
    }
}

/// Receives progress reports. Must be cheap and must not block: it is called from inside the
/// tool's own task.
pub trait ProgressSink: Send + Sync {
    /// Takes one report.
    fn report(&self, update: ProgressUpdate);
}

impl<F: Fn(ProgressUpdate) + Send + Sync> ProgressSink for F {
    fn report(&self, update: ProgressUpdate) {
        self(update)
    }
}

/// A shared progress sink, as stored in a [`ToolContext`](crate::ToolContext).
#[derive(Clone)]
pub struct DynProgressSink(pub Arc<dyn ProgressSink>);

impl fmt::Debug for DynProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressSink(..)")
    }
}
