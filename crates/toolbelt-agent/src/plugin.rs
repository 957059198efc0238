//! [`Plugin`]: callbacks and tools applied to every agent of a run.

use toolbelt_core::{DynTool, Tool};

use crate::Callbacks;

/// A named bundle of [`Callbacks`] and framework tools, added to a runner with
/// [`Runner::with_plugin`](crate::Runner::with_plugin).
///
/// Its callbacks run for every agent of every run of that runner: the root, the agents it
/// transfers to, and child invocations started by tools ([`Invocation::child`](crate::Invocation::child)).
/// Plugins run in the order they were added, before the agent's own callbacks (see
/// [`callbacks`](crate::callbacks) for the stages). Its tools are offered to every such agent and are
/// never removed by tool filters (like `transfer_to_agent`); an agent tool of the same name
/// is shadowed by the plugin's.
///
/// ```
/// use toolbelt_agent::{Callbacks, Plugin};
///
/// let plugin = Plugin::new("no-tools-on-sundays").callbacks(
///     Callbacks::new().before_model(|_inv: &toolbelt_agent::Invocation, request: &mut toolbelt_model::Request| {
///         request.tools.clear();
///         Ok(None)
///     }),
/// );
/// assert_eq!(plugin.name(), "no-tools-on-sundays");
/// ```
#[derive(Clone)]
pub struct Plugin {
    name: String,
    pub(crate) callbacks: Callbacks,
    pub(crate) tools: Vec<DynTool>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("callbacks", &self.callbacks)
            .field("tools", &tools)
            .finish()
    }
}

impl Plugin {
    /// A plugin named `name` with no callbacks and no tools.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            callbacks: Callbacks::new(),
            tools: Vec::new(),
        }
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the plugin's callbacks.
    pub fn callbacks(mut self, callbacks: Callbacks) -> Self {
        self.callbacks = callbacks;
        self
    }

    /// Adds a framework tool, offered to every agent of the run.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(std::sync::Arc::new(tool));
        self
    }
}
