//! [`Extension`]: one bundle that adds instructions, tools, tool sets, tool hooks, middleware
//! and callbacks to an agent (or to every agent of a runner), with a lifecycle.
//!
//! An extension is started once with [`Extensions::init`] (in registration order; a failing
//! `init` is an [`ExtensionError`] naming the extension, and the ones already started are
//! closed), given to agents with [`LlmAgentBuilder::with_extensions`] or to a runner with
//! [`Runner::with_extensions`], and closed with [`Extensions::close`] (every started one, in
//! reverse order, even when one of them fails).
//!
//! # Order of contributions
//!
//! On an agent ([`LlmAgentBuilder::with_extensions`]):
//!
//! | part | where it goes |
//! |---|---|
//! | instructions | appended to the agent's own instruction, in registration order, each fragment separated by a blank line |
//! | tools | registered after the agent's own tools; a name already taken is a configuration error naming the extension |
//! | tool sets | added after the agent's own sets (a clashing tool is renamed `{set}_{tool}` by the registry, in that order) |
//! | middleware | added to the executor the agent builds after [`LlmAgentBuilder::configure_executor`]'s (so inside them: the first added is the outermost) |
//! | before/after tool hooks | run as tool callbacks: after the executor's own hooks and the plugins', before the agent's own tool callbacks |
//! | callbacks | after the runner's plugins', before the agent's own; extensions in registration order |
//!
//! Middleware and tool hooks need the executor the agent builds: with
//! [`LlmAgentBuilder::executor`] they are a configuration error naming the extension.
//!
//! On a runner ([`Runner::with_extensions`]) each extension becomes a [`Plugin`] of the same
//! name, added after the plugins already there: its instructions are appended to the system
//! message of every model request (a `before_model` callback that runs first among the
//! extension's), its tools are offered to every agent like a plugin's, its hooks and
//! callbacks run as the plugin's. Tool sets and middleware belong to one agent's registry
//! and executor, so an extension contributing them is refused there (register it on the
//! agent instead).
//!
//! ```
//! use std::sync::Arc;
//! use toolbelt_agent::{Extension, Extensions};
//!
//! struct House;
//! impl Extension for House {
//!     fn name(&self) -> &str { "house-style" }
//!     fn instructions(&self) -> Vec<String> { vec!["Answer in British English.".into()] }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let extensions = Extensions::init([Arc::new(House) as Arc<dyn Extension>]).await?;
//! assert_eq!(extensions.names(), ["house-style"]);
//! extensions.close().await?;
//! # Ok::<(), toolbelt_agent::ExtensionError>(()) }).unwrap();
//! ```
//!
//! [`LlmAgentBuilder::with_extensions`]: crate::LlmAgentBuilder::with_extensions
//! [`LlmAgentBuilder::configure_executor`]: crate::LlmAgentBuilder::configure_executor
//! [`LlmAgentBuilder::executor`]: crate::LlmAgentBuilder::executor
//! [`Runner::with_extensions`]: crate::Runner::with_extensions

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use toolbelt_core::{DynTool, DynToolSet};
use toolbelt_exec::{AfterHook, BeforeHook, DynMiddleware, Registry, ToolSetOptions};
use toolbelt_model::{Message, Request, Role};

use crate::callbacks::{BeforeModel, CallbackError};
use crate::framework::is_framework_tool;
use crate::{AgentError, Callbacks, Invocation, Plugin};

/// An error an extension returns from `init` or `close`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A bundle of optional contributions to an agent, with a lifecycle (see the
/// [module docs](self) for where each part goes and in which order).
///
/// Every part has an empty default: implement `name` and the parts you contribute. The
/// parts are read once, after `init`, when the extension is given to an agent or a runner.
#[async_trait]
pub trait Extension: Send + Sync {
    /// The extension's name: unique among the extensions started together, named in errors.
    fn name(&self) -> &str;

    /// Prepares the extension (opens connections, reads files). Runs once, before any part is
    /// read; an error stops [`Extensions::init`] with an error naming this extension.
    async fn init(&self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Releases what `init` opened. Runs once for every extension whose `init` succeeded.
    async fn close(&self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Instruction fragments, appended after the agent's own instruction.
    fn instructions(&self) -> Vec<String> {
        Vec::new()
    }

    /// Tools offered to the agent.
    fn tools(&self) -> Vec<DynTool> {
        Vec::new()
    }

    /// Tool sets offered to the agent (not closed by it: the extension's `close` does that).
    fn tool_sets(&self) -> Vec<DynToolSet> {
        Vec::new()
    }

    /// Executor before hooks for the agent's tool calls.
    fn before_hooks(&self) -> Vec<Arc<dyn BeforeHook>> {
        Vec::new()
    }

    /// Executor after hooks for the agent's tool calls.
    fn after_hooks(&self) -> Vec<Arc<dyn AfterHook>> {
        Vec::new()
    }

    /// Middleware for the agent's tool calls (first in the list is the outermost).
    fn middleware(&self) -> Vec<DynMiddleware> {
        Vec::new()
    }

    /// Agent, model and tool callbacks.
    fn callbacks(&self) -> Callbacks {
        Callbacks::new()
    }
}

/// Why extensions could not be started or closed.
#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    /// An extension's `init` failed (the ones started before it were closed).
    #[error("extension {name}: init failed: {source}")]
    Init {
        /// The extension's name.
        name: String,
        /// What it reported.
        source: BoxError,
    },
    /// Two extensions have the same name.
    #[error("extension {0} is registered twice")]
    Duplicate(String),
    /// One or more extensions failed to close (every one was still closed).
    #[error("{}", .0.iter().map(|(name, e)| format!("extension {name}: close failed: {e}")).collect::<Vec<_>>().join("; "))]
    Close(Vec<(String, BoxError)>),
}

/// Extensions that were started together: give them to agents and runners, then
/// [`close`](Extensions::close) them. Cheap to share by reference; agents keep what the
/// extensions contributed, not the extensions.
pub struct Extensions {
    started: Vec<Arc<dyn Extension>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("names", &self.names())
            .finish()
    }
}

impl Extensions {
    /// No extensions.
    pub fn empty() -> Self {
        Self {
            started: Vec::new(),
            closed: AtomicBool::new(false),
        }
    }

    /// Starts each extension in order. When one fails, those already started are closed (in
    /// reverse order; their close errors are logged) and the error names the one that failed.
    pub async fn init(
        extensions: impl IntoIterator<Item = Arc<dyn Extension>>,
    ) -> Result<Self, ExtensionError> {
        let extensions: Vec<Arc<dyn Extension>> = extensions.into_iter().collect();
        for (i, extension) in extensions.iter().enumerate() {
            if extensions[..i].iter().any(|e| e.name() == extension.name()) {
                return Err(ExtensionError::Duplicate(extension.name().to_string()));
            }
        }
        let mut started = Self::empty();
        for extension in extensions {
            if let Err(source) = extension.init().await {
                if let Err(error) = started.close().await {
                    tracing::warn!(%error, "closing the extensions started before a failed init");
                }
                return Err(ExtensionError::Init {
                    name: extension.name().to_string(),
                    source,
                });
            }
            started.started.push(extension);
        }
        Ok(started)
    }

    /// The started extensions' names, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.started.iter().map(|e| e.name()).collect()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.started.is_empty()
    }

    /// Closes every started extension, in reverse order, even when one fails; the error
    /// lists every failure. Closing again does nothing.
    pub async fn close(&self) -> Result<(), ExtensionError> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut failures = Vec::new();
        for extension in self.started.iter().rev() {
            if let Err(error) = extension.close().await {
                failures.push((extension.name().to_string(), error));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ExtensionError::Close(failures))
        }
    }

    /// What each extension contributes to an agent, in registration order.
    pub(crate) fn contributions(&self) -> Vec<Contribution> {
        self.started
            .iter()
            .map(|e| {
                let mut callbacks = e.callbacks();
                // The extension's hooks run before its own tool callbacks.
                let mut before = e.before_hooks();
                before.append(&mut callbacks.before_tool);
                callbacks.before_tool = before;
                let mut after = e.after_hooks();
                after.append(&mut callbacks.after_tool);
                callbacks.after_tool = after;
                Contribution {
                    name: e.name().to_string(),
                    instructions: e
                        .instructions()
                        .into_iter()
                        .filter(|s| !s.trim().is_empty())
                        .collect(),
                    tools: e.tools(),
                    tool_sets: e.tool_sets(),
                    middleware: e.middleware(),
                    callbacks,
                }
            })
            .collect()
    }

    /// Each extension as a plugin of the same name (see the [module docs](self)).
    pub(crate) fn plugins(&self) -> Result<Vec<Plugin>, AgentError> {
        self.contributions()
            .into_iter()
            .map(|c| {
                if !c.tool_sets.is_empty() || !c.middleware.is_empty() {
                    return Err(AgentError::Config(format!(
                        "extension {}: tool sets and middleware belong to one agent; register \
                         it with LlmAgentBuilder::with_extensions instead of on the runner",
                        c.name
                    )));
                }
                let mut callbacks = c.callbacks;
                if !c.instructions.is_empty() {
                    let append: Arc<dyn BeforeModel> =
                        Arc::new(AppendInstructions(c.instructions.join("\n\n")));
                    callbacks.before_model.insert(0, append);
                }
                let mut plugin = Plugin::new(c.name).callbacks(callbacks);
                plugin.tools = c.tools;
                Ok(plugin)
            })
            .collect()
    }
}

/// One extension's parts, read after its init.
pub(crate) struct Contribution {
    pub(crate) name: String,
    pub(crate) instructions: Vec<String>,
    pub(crate) tools: Vec<DynTool>,
    pub(crate) tool_sets: Vec<DynToolSet>,
    pub(crate) middleware: Vec<DynMiddleware>,
    /// The extension's callbacks, its hooks first among the tool callbacks.
    pub(crate) callbacks: Callbacks,
}

impl Contribution {
    /// Whether this part needs the executor the agent builds.
    pub(crate) fn needs_own_executor(&self) -> bool {
        !self.middleware.is_empty() || self.callbacks.has_tool_callbacks()
    }
}

/// The agent's instruction followed by the extensions' fragments, blank-line separated.
pub(crate) fn compose_instruction(own: String, contributions: &[Contribution]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !own.is_empty() {
        parts.push(&own);
    }
    parts.extend(
        contributions
            .iter()
            .flat_map(|c| c.instructions.iter().map(String::as_str)),
    );
    parts.join("\n\n")
}

/// Registers the extensions' tools and sets in the agent's registry, after the agent's own.
pub(crate) fn register(
    contributions: &[Contribution],
    registry: &Registry,
    set_options: ToolSetOptions,
) -> Result<(), AgentError> {
    for c in contributions {
        let error = |e: toolbelt_exec::RegistryError| {
            AgentError::Config(format!("extension {}: {e}", c.name))
        };
        for tool in &c.tools {
            if is_framework_tool(tool.name()) {
                return Err(AgentError::Config(format!(
                    "extension {}: the tool name {} is reserved for the framework",
                    c.name,
                    tool.name()
                )));
            }
            registry.register_arc(tool.clone()).map_err(error)?;
        }
        for set in &c.tool_sets {
            registry
                .add_tool_set(set.clone(), set_options)
                .map_err(error)?;
        }
    }
    Ok(())
}

/// A runner extension's instructions: appended to the request's system message (or a
/// system message of their own when the agent has none).
struct AppendInstructions(String);

#[async_trait]
impl BeforeModel for AppendInstructions {
    async fn call(
        &self,
        _inv: &Invocation,
        request: &mut Request,
    ) -> Result<Option<Message>, CallbackError> {
        match request.messages.first_mut() {
            Some(first) if first.role == Role::System => {
                if !first.content.is_empty() {
                    first.content.push_str("\n\n");
                }
                first.content.push_str(&self.0);
            }
            _ => request.messages.insert(0, Message::system(&self.0)),
        }
        Ok(None)
    }
}
