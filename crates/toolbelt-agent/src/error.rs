//! The errors of the agent layer.

use toolbelt_model::ModelError;

/// Why an agent operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model call failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The session store failed.
    #[error("session store: {0}")]
    Session(String),
    /// The agent or run is misconfigured.
    #[error("{0}")]
    Config(String),
    /// An agent or tool panicked (a bug); the run was ended cleanly.
    #[error("the agent panicked: {0}")]
    Panicked(String),
    /// A callback (of the agent or a plugin) ended the run.
    #[error("{0}")]
    Callback(String),
    /// The caller went away or cancelled the run.
    #[error("the run was cancelled")]
    Cancelled,
}
