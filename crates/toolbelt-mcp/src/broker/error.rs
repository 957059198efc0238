//! Why a broker operation failed, each message telling the model what to do next.

use std::time::Duration;

use toolbelt_core::ToolError;

use super::hooks::Phase;
use super::selector::SelectorError;

/// A failed broker operation.
///
/// As a [`ToolError`] (what the model sees): mistakes the model can fix (a bad selector,
/// unknown tools, missing arguments, a malformed header) are
/// [`ToolError::InvalidArguments`]; policy refusals (ad-hoc HTTP off, a URL the allow-list
/// refuses, a forbidden header) are [`ToolError::Rejected`]; the operation timeout is
/// [`ToolError::Timeout`]; failures of the server keep the kind the MCP client gave them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The selector could not be parsed or names no configured server.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// An ad-hoc URL was used while ad-hoc HTTP is off.
    #[error(
        "ad-hoc MCP URLs are disabled in this application ({url:?} was given); use a server name from mcp_list_servers{}",
        known_servers(servers)
    )]
    AdHocDisabled {
        /// The URL that was given.
        url: String,
        /// The configured server names.
        servers: Vec<String>,
    },
    /// The allow-list hook refused an ad-hoc URL (no connection was made).
    #[error("the MCP URL {url:?} is not allowed by this application")]
    UrlNotAllowed {
        /// The refused URL.
        url: String,
    },
    /// An ad-hoc URL carried a user name or password (credentials come from the host).
    #[error(
        "the MCP URL {url:?} carries credentials; they come from the host application, not from the model"
    )]
    CredentialsInUrl {
        /// The refused URL.
        url: String,
    },
    /// The model supplied a header it may not set.
    #[error("header {name:?} may not be set by the model: {reason}")]
    ForbiddenHeader {
        /// The header as given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The model supplied a header that is not valid HTTP.
    #[error("invalid header: {0}")]
    InvalidHeader(String),
    /// `mcp_inspect_tools` was given no tool names.
    #[error("tools is empty; name at least one tool from mcp_list_tools")]
    NoToolsNamed,
    /// Tool names the server does not offer (all of them, in one error).
    #[error(
        "{target} has no tool{} named {}; its tools are: {}",
        if unknown.len() == 1 { "" } else { "s" },
        quoted(unknown),
        list_or_none(available)
    )]
    UnknownTools {
        /// The server name or URL.
        target: String,
        /// The names that were not found, in the order given.
        unknown: Vec<String>,
        /// The server's tools, sorted.
        available: Vec<String>,
    },
    /// `mcp_call` arguments lack properties the tool requires.
    #[error(
        "missing required argument{} for {selector}: {}; see its schema with mcp_inspect_tools",
        if missing.len() == 1 { "" } else { "s" },
        missing.join(", ")
    )]
    MissingArguments {
        /// The tool's selector.
        selector: String,
        /// Each missing property, in the schema's order.
        missing: Vec<String>,
    },
    /// The whole operation ran out of time.
    #[error("{phase} on {target} timed out after {limit:?}")]
    Timeout {
        /// The server name or URL.
        target: String,
        /// The operation.
        phase: Phase,
        /// The broker's operation timeout.
        limit: Duration,
    },
    /// A configured server name could never be selected.
    #[error("invalid MCP server name {name:?}: {problem}")]
    InvalidServerName {
        /// The name.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The broker's own tools could not be declared (a bug, reported rather than a panic).
    #[error("could not declare the broker's tools: {0}")]
    Declaration(#[source] ToolError),
    /// The broker has been closed.
    #[error("the MCP broker has been closed")]
    Closed,
    /// The host application's header injector failed.
    #[error("the header injector failed for {target}: {source}")]
    HeaderInjector {
        /// The server name or URL.
        target: String,
        /// Its error.
        #[source]
        source: ToolError,
    },
    /// The server (or the connection to it) failed.
    #[error(transparent)]
    Remote(ToolError),
    /// The error interceptor replaced a server's error with the host application's message.
    #[error("{message}")]
    Intercepted {
        /// The message the model sees.
        message: String,
        /// The original error.
        #[source]
        source: ToolError,
    },
    /// The error interceptor handled a server's error: the model gets `message` as a
    /// result-level error (a tool output with `is_error`), not as a failed call.
    #[error("{message}")]
    Handled {
        /// The message the model sees.
        message: String,
    },
}

fn known_servers(servers: &[String]) -> String {
    if servers.is_empty() {
        " (none are configured)".to_string()
    } else {
        format!(" ({})", servers.join(", "))
    }
}

fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    quoted.join(", ")
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

impl From<BrokerError> for ToolError {
    fn from(err: BrokerError) -> Self {
        match err {
            BrokerError::Selector(_)
            | BrokerError::InvalidHeader(_)
            | BrokerError::NoToolsNamed
            | BrokerError::UnknownTools { .. }
            | BrokerError::MissingArguments { .. } => ToolError::invalid_arguments(err.to_string()),
            BrokerError::AdHocDisabled { .. }
            | BrokerError::UrlNotAllowed { .. }
            | BrokerError::CredentialsInUrl { .. }
            | BrokerError::ForbiddenHeader { .. } => ToolError::rejected(err.to_string()),
            BrokerError::Timeout { limit, .. } => ToolError::Timeout { limit },
            BrokerError::Remote(inner) => inner,
            other => ToolError::Failed(Box::new(other)),
        }
    }
}
