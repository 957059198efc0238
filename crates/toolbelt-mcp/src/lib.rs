//! # toolbelt-mcp: MCP servers as tool sets
//!
//! Any [MCP](https://modelcontextprotocol.io) server becomes a [`ToolSet`] whose tools run
//! through Toolbelt's executor like any other tool.
//!
//! - [`ConnectionConfig`] / [`TransportConfig`]: stdio (command, args, env, env_vars, cwd), the legacy
//!   HTTP+SSE transport, or streamable HTTP; a timeout, a description, client info.
//! - [`McpToolSet`]: one session with one server: lazy or eager ([`McpToolSet::init`])
//!   connection, cached tool list (re-listed on `notifications/tools/list_changed` and on
//!   [`McpToolSet::refresh`]), optional `{set}_{tool}` prefixes, an include/exclude filter,
//!   per-call timeouts that send `notifications/cancelled`, session reconnect, per-request
//!   header injection, and [`ToolSet::close`] that ends the session and reaps a child.
//! - [`McpServersFile`]: the `mcpServers` JSON of Claude Desktop, Cursor and Claude Code,
//!   with `${VAR}` expansion.
//! - [`McpBroker`]: four tools (`mcp_list_servers`, `mcp_list_tools`, `mcp_inspect_tools`,
//!   `mcp_call`) through which a model discovers servers and tools on demand instead of
//!   seeing every tool up front (see [`broker`]).
//! - [`auth`]: OAuth 2.1 for streamable HTTP servers ([`OAuthConfig`] in a server's
//!   configuration, [`auth::login`] ahead of time): discovery, dynamic or pre-registered
//!   clients, PKCE, refresh, step-up; tokens per server in a 0600 file.
//! - [`McpError`]: every failure names the server and the step ([`Step`]), and is classified
//!   ([`FailureKind`]) so that only connection failures are retried.
//!
//! Results map onto [`toolbelt_core::ToolOutput`]: text, image, audio, resource links and
//! embedded resources become content blocks (a block of a type this crate does not know is
//! kept as its raw JSON in a text block); `structuredContent` is the structured result
//! (and the model's text when no content came); `isError` is a result-level failure;
//! `_meta` is [`ToolOutput::meta`](toolbelt_core::ToolOutput::meta). MCP annotations become
//! [`ToolMeta`](toolbelt_core::ToolMeta) hint for hint, an absent hint staying undeclared
//! (see [`map_annotations`]).
//!
//! ## Example
//!
//! ```
//! use std::time::Duration;
//! use toolbelt_core::{ToolFilter, ToolSet};
//! use toolbelt_mcp::{McpServersFile, McpToolSet};
//!
//! let file = McpServersFile::parse_with(
//!     r#"{"mcpServers": {
//!         "everything": {"command": "node", "args": ["${PEERS}/server-everything/dist/index.js"]},
//!         "remote": {"type": "http", "url": "http://127.0.0.1:3001/mcp",
//!                    "headers": {"Authorization": "Bearer ${TOKEN}"}}
//!     }}"#,
//!     |name| match name {
//!         "PEERS" => Some("/opt/peers".into()),
//!         "TOKEN" => Some("secret".into()),
//!         _ => None,
//!     },
//! )?;
//! let config = file.server("remote")?.with_timeout(Duration::from_secs(10));
//! let set = McpToolSet::builder("remote", config)
//!     .filter(ToolFilter::exclude_names(["dangerous_tool"]))
//!     .session_reconnect(3)
//!     .build()?;
//! assert_eq!(set.name(), "remote");
//! // set.init(&ctx).await? connects; set.tools(&ctx).await? lists; set.close().await? ends it.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Lifecycle and ownership
//!
//! Whoever creates a set closes it. `close()` ends the session (a `DELETE` for streamable
//! HTTP); for stdio it closes the child's stdin, waits briefly, then sends SIGTERM and
//! finally SIGKILL to the child's whole process group (the server behind an `npx` or `uvx`
//! wrapper and the helpers it started end too), and reaps the child. The child's stderr is
//! always drained into `tracing` (target `toolbelt_mcp::stderr`, level debug) and never
//! inherited.
//!
//! ## Safety
//!
//! - A stdio server's environment is scrubbed: the core variables of
//!   [`toolbelt_core::EnvPolicy`] (`PATH`, `HOME`, the locale, …) and what its configuration
//!   sets (`env`) or names (`env_vars`); never the parent's secrets (`OPENAI_API_KEY`,
//!   `TOOLBELT_SERVE_TOKEN`, …) unless named.
//! - A call is never run twice by accident: when the connection is lost after the request
//!   may have reached the server, the call fails with [`FailureKind::UnknownOutcome`] and is
//!   not sent again (unless the tool declares `idempotentHint: true`).

#![warn(missing_docs)]

mod abandon;
pub mod auth;
pub mod broker;
mod client;
mod config;
mod config_file;
mod error;
pub mod ssh;
mod transport;

#[cfg(feature = "server")]
pub mod server;

pub use auth::{AuthorizeMode, OAuthConfig};
pub use broker::{BrokerError, McpBroker, McpBrokerBuilder};
pub use client::{
    ElicitationField, ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse,
    FieldKind, HeaderInjector, MAX_SESSION_RECONNECT, McpTool, McpToolSet, McpToolSetBuilder, Root,
    SamplingError, SamplingHandler, SamplingMessage, SamplingRequest, SamplingResponse,
    SamplingRole, SamplingTool, SamplingToolChoice, SamplingToolResult, SamplingToolUse,
    exposed_name, map_annotations, map_call_result,
};
pub use config::{ClientInfo, ConnectionConfig, DEFAULT_TIMEOUT, TransportConfig};
pub use config_file::{ConfigFileError, McpServersFile};
pub use error::{FailureKind, McpError, Step};
pub use transport::stdio::{EXIT_GRACE, TERM_GRACE};

#[doc(no_inline)]
pub use toolbelt_core::ToolSet;
