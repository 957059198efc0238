//! The registry: the tools and tool sets an executor can call, changed at run time, read
//! without ever waiting on a running call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use toolbelt_core::{
    Declaration, DynTool, DynToolSet, Tool, ToolContext, ToolError, ToolFilter, ToolOutput,
    ToolStream,
};

use crate::lane::Lane;

/// When the tools of a registered [`ToolSet`](toolbelt_core::ToolSet) are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSetRefresh {
    /// List once (on the first snapshot) and keep that list until
    /// [`Registry::refresh_tool_set`] is called. Right for sets whose tools do not change.
    #[default]
    Cached,
    /// List again on every [`Registry::snapshot`], so a run sees tools the set gained or
    /// lost since the last one (an MCP server whose tool list changes).
    OnRun,
}

/// A registration error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A tool of that name is already registered; use [`Registry::replace`] to swap it.
    #[error("a tool named {0:?} is already registered (use replace to swap it)")]
    DuplicateTool(String),
    /// A tool set of that name is already registered.
    #[error("a tool set named {0:?} is already registered")]
    DuplicateToolSet(String),
}

impl From<RegistryError> for ToolError {
    fn from(err: RegistryError) -> Self {
        ToolError::failed(err)
    }
}

#[derive(Clone)]
struct SetEntry {
    set: DynToolSet,
    refresh: ToolSetRefresh,
    /// The set's last listing, already renamed where it collided.
    listed: Option<Vec<DynTool>>,
    /// Where the set's calls not declared concurrency-safe take turns.
    lane: Arc<Lane>,
}

/// A callable tool and the lane its calls not declared concurrency-safe take (see
/// [`crate::lane`]). `None` in a snapshot that knows no sets: the executor's lane is used.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) tool: DynTool,
    pub(crate) lane: Option<Arc<Lane>>,
}

/// One immutable version of the registry's contents.
#[derive(Clone)]
struct State {
    tools: BTreeMap<String, DynTool>,
    sets: Vec<SetEntry>,
    /// The lane of the tools registered directly.
    lane: Arc<Lane>,
    /// Everything callable: direct tools plus the sets' last listings. Rebuilt on change.
    merged: Arc<BTreeMap<String, Entry>>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            tools: BTreeMap::new(),
            sets: Vec::new(),
            lane: Lane::new(),
            merged: Arc::default(),
        }
    }
}

impl State {
    fn rebuild(&mut self) {
        let mut merged: BTreeMap<String, Entry> = self
            .tools
            .iter()
            .map(|(name, tool)| {
                let entry = Entry {
                    tool: tool.clone(),
                    lane: Some(self.lane.clone()),
                };
                (name.clone(), entry)
            })
            .collect();
        for set in &self.sets {
            for tool in set.listed.iter().flatten() {
                merged
                    .entry(tool.name().to_string())
                    .or_insert_with(|| Entry {
                        tool: tool.clone(),
                        lane: Some(set.lane.clone()),
                    });
            }
        }
        self.merged = Arc::new(merged);
    }
}

/// The tools and tool sets an [`Executor`](crate::Executor) can call.
///
/// Read-mostly: every read takes a short lock to clone an `Arc` of the current contents, and
/// every change builds a new version and swaps it in. No lock is held across an `await`, so a
/// long tool call never blocks a reader or a writer, and a running call keeps the tool it
/// started with even if that tool is unregistered meanwhile.
///
/// Names are unique. Direct tools win over tool-set tools; a set tool whose name is taken is
/// offered as `{set}_{tool}` (and, if that is taken too, dropped from the listing).
///
/// Each added tool set has a lane of its own, and the direct tools share one: calls of tools
/// not declared concurrency-safe take turns on their lane (see the [crate docs](crate)).
///
/// ```
/// use toolbelt_core::{FunctionTool, ToolContext, ToolError};
/// use toolbelt_exec::Registry;
///
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct NoArgs {}
/// async fn ping(_: ToolContext, _: NoArgs) -> Result<String, ToolError> { Ok("pong".into()) }
///
/// let registry = Registry::new();
/// registry.register(FunctionTool::new("ping", "Answers pong", ping)?)?;
/// assert!(registry.register(FunctionTool::new("ping", "Again", ping)?).is_err());
/// assert_eq!(registry.tool_names(), vec!["ping"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct Registry {
    state: RwLock<Arc<State>>,
    /// Serializes writers so two concurrent changes never lose one another.
    write: Mutex<()>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.load();
        let sets: Vec<&str> = state.sets.iter().map(|e| e.set.name()).collect();
        f.debug_struct("Registry")
            .field("tools", &state.merged.keys().collect::<Vec<_>>())
            .field("tool_sets", &sets)
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn load(&self) -> Arc<State> {
        match self.state.read() {
            Ok(state) => state.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Applies `change` to a copy of the current state and swaps it in.
    fn update<R>(&self, change: impl FnOnce(&mut State) -> R) -> R {
        let _writer = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = (*self.load()).clone();
        let out = change(&mut next);
        next.rebuild();
        let next = Arc::new(next);
        match self.state.write() {
            Ok(mut state) => *state = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
        out
    }

    /// Registers a tool. A second tool with the same name is
    /// [`RegistryError::DuplicateTool`]; use [`Registry::replace`] to swap tools.
    pub fn register(&self, tool: impl Tool + 'static) -> Result<(), RegistryError> {
        self.register_arc(Arc::new(tool))
    }

    /// Registers a shared tool (see [`Registry::register`]).
    pub fn register_arc(&self, tool: DynTool) -> Result<(), RegistryError> {
        self.update(|state| {
            let name = tool.name().to_string();
            if state.tools.contains_key(&name) {
                return Err(RegistryError::DuplicateTool(name));
            }
            state.tools.insert(name, tool);
            Ok(())
        })
    }

    /// Registers several tools; if any name is taken, none is registered.
    pub fn register_all<I>(&self, tools: I) -> Result<(), RegistryError>
    where
        I: IntoIterator<Item = DynTool>,
    {
        let tools: Vec<DynTool> = tools.into_iter().collect();
        self.update(|state| {
            let mut added = BTreeMap::new();
            for tool in tools {
                let name = tool.name().to_string();
                if state.tools.contains_key(&name) || added.contains_key(&name) {
                    return Err(RegistryError::DuplicateTool(name));
                }
                added.insert(name, tool);
            }
            state.tools.extend(added);
            Ok(())
        })
    }

    /// Registers `tool`, replacing any tool of the same name; returns the one replaced.
    pub fn replace(&self, tool: DynTool) -> Option<DynTool> {
        self.update(|state| state.tools.insert(tool.name().to_string(), tool))
    }

    /// Removes the tool named `name`; returns it if it was registered. Calls already running
    /// finish with it.
    pub fn unregister(&self, name: &str) -> Option<DynTool> {
        self.update(|state| state.tools.remove(name))
    }

    /// Adds a tool set. Its tools are listed on the next [`Registry::snapshot`] (or
    /// [`Registry::refresh_tool_set`]). The registry never closes the set: its creator does.
    pub fn add_tool_set(
        &self,
        set: DynToolSet,
        refresh: ToolSetRefresh,
    ) -> Result<(), RegistryError> {
        self.update(|state| {
            if state.sets.iter().any(|e| e.set.name() == set.name()) {
                return Err(RegistryError::DuplicateToolSet(set.name().to_string()));
            }
            state.sets.push(SetEntry {
                set,
                refresh,
                listed: None,
                lane: Lane::new(),
            });
            Ok(())
        })
    }

    /// Removes the tool set named `name` (without closing it); returns it if it was there.
    pub fn remove_tool_set(&self, name: &str) -> Option<DynToolSet> {
        self.update(|state| {
            let index = state.sets.iter().position(|e| e.set.name() == name)?;
            Some(state.sets.remove(index).set)
        })
    }

    /// The names of the registered tool sets, in the order they were added.
    pub fn tool_set_names(&self) -> Vec<String> {
        self.load()
            .sets
            .iter()
            .map(|e| e.set.name().to_string())
            .collect()
    }

    /// The names of every callable tool (direct tools and the sets' last listings), sorted.
    pub fn tool_names(&self) -> Vec<String> {
        self.load().merged.keys().cloned().collect()
    }

    /// The tool named `name`: a direct tool or one from a set's last listing.
    pub fn get(&self, name: &str) -> Option<DynTool> {
        self.load().merged.get(name).map(|entry| entry.tool.clone())
    }

    /// The tool named `name` with its lane.
    pub(crate) fn entry(&self, name: &str) -> Option<Entry> {
        self.load().merged.get(name).cloned()
    }

    /// Whether a tool of that name is callable.
    pub fn contains(&self, name: &str) -> bool {
        self.load().merged.contains_key(name)
    }

    /// Lists the set named `name` now and keeps the listing. Returns how many tools it has.
    pub async fn refresh_tool_set(
        &self,
        ctx: &ToolContext,
        name: &str,
    ) -> Result<usize, ToolError> {
        let set = self
            .load()
            .sets
            .iter()
            .find(|e| e.set.name() == name)
            .map(|e| e.set.clone())
            .ok_or_else(|| {
                ToolError::failed(format!("no tool set named {name:?} is registered"))
            })?;
        let tools = set.tools(ctx).await?;
        let count = tools.len();
        self.store_listing(&set, tools);
        Ok(count)
    }

    /// Stores a set's listing, renaming tools whose names are taken.
    fn store_listing(&self, set: &DynToolSet, tools: Vec<DynTool>) {
        self.update(|state| {
            let taken = |name: &str, state: &State| {
                state.tools.contains_key(name)
                    || state
                        .sets
                        .iter()
                        .filter(|e| !Arc::ptr_eq(&e.set, set))
                        .flat_map(|e| e.listed.iter().flatten())
                        .any(|t| t.name() == name)
            };
            let mut listed: Vec<DynTool> = Vec::with_capacity(tools.len());
            for tool in tools {
                let final_tool = if !taken(tool.name(), state) {
                    Some(tool)
                } else {
                    let prefixed = format!("{}_{}", set.name(), tool.name());
                    match RenamedTool::new(tool, &prefixed) {
                        Some(renamed) if !taken(&prefixed, state) => {
                            Some(Arc::new(renamed) as DynTool)
                        }
                        _ => {
                            tracing::warn!(
                                tool_set = set.name(),
                                tool = prefixed,
                                "dropping a tool-set tool whose name is taken"
                            );
                            None
                        }
                    }
                };
                if let Some(tool) = final_tool
                    && !listed.iter().any(|t| t.name() == tool.name())
                {
                    listed.push(tool);
                }
            }
            if let Some(entry) = state.sets.iter_mut().find(|e| Arc::ptr_eq(&e.set, set)) {
                entry.listed = Some(listed);
            }
        });
    }

    /// The tools visible for one run: direct tools plus every set's tools (listed now for
    /// [`ToolSetRefresh::OnRun`] sets and for cached sets not listed yet), sorted by name.
    ///
    /// A set that fails to list is left out (with its last listing, if any) and its error is
    /// kept in [`ToolSnapshot::errors`], so one broken server does not stop a run. Narrow the
    /// result with [`ToolSnapshot::filtered`].
    pub async fn snapshot(&self, ctx: &ToolContext) -> ToolSnapshot {
        let state = self.load();
        let mut errors = Vec::new();
        let mut changed = false;
        for entry in &state.sets {
            if entry.refresh == ToolSetRefresh::OnRun || entry.listed.is_none() {
                match entry.set.tools(ctx).await {
                    Ok(tools) => {
                        self.store_listing(&entry.set, tools);
                        changed = true;
                    }
                    Err(err) => errors.push((entry.set.name().to_string(), Arc::new(err))),
                }
            }
        }
        let state = if changed { self.load() } else { state };
        ToolSnapshot {
            tools: state.merged.clone(),
            errors,
        }
    }

    /// The tools callable right now without listing any set (direct tools and the sets' last
    /// listings). Cheap: one `Arc` clone.
    pub fn current(&self) -> ToolSnapshot {
        ToolSnapshot {
            tools: self.load().merged.clone(),
            errors: Vec::new(),
        }
    }
}

/// An immutable, sorted view of the tools visible for one run. Cheap to clone.
///
/// A snapshot taken from a [`Registry`] keeps each tool's lane (its set's, or the registry's
/// for direct tools); one made with [`ToolSnapshot::from_tools`] knows no sets, and the calls
/// of its tools not declared concurrency-safe take turns on the executor's lane.
#[derive(Clone, Default)]
pub struct ToolSnapshot {
    tools: Arc<BTreeMap<String, Entry>>,
    errors: Vec<(String, Arc<ToolError>)>,
}

impl std::fmt::Debug for ToolSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSnapshot")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("errors", &self.errors)
            .finish()
    }
}

impl ToolSnapshot {
    /// A snapshot holding exactly these tools (later duplicates of a name are ignored).
    pub fn from_tools<I: IntoIterator<Item = DynTool>>(tools: I) -> Self {
        let mut map = BTreeMap::new();
        for tool in tools {
            map.entry(tool.name().to_string())
                .or_insert(Entry { tool, lane: None });
        }
        Self {
            tools: Arc::new(map),
            errors: Vec::new(),
        }
    }

    /// Keeps only the tools `filter` allows.
    pub fn filtered(&self, ctx: &ToolContext, filter: &ToolFilter) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|(_, entry)| filter.allows(ctx, entry.tool.as_ref()))
            .map(|(name, entry)| (name.clone(), entry.clone()))
            .collect();
        Self {
            tools: Arc::new(tools),
            errors: self.errors.clone(),
        }
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&DynTool> {
        self.tools.get(name).map(|entry| &entry.tool)
    }

    /// The tool named `name` with its lane.
    pub(crate) fn entry(&self, name: &str) -> Option<&Entry> {
        self.tools.get(name)
    }

    /// The tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The tools, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = &DynTool> {
        self.tools.values().map(|entry| &entry.tool)
    }

    /// The declarations to send to a model, sorted by name.
    pub fn declarations(&self) -> Vec<Declaration> {
        self.tools
            .values()
            .map(|entry| entry.tool.declaration().clone())
            .collect()
    }

    /// How many tools are visible.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is visible.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Tool sets that failed to list for this snapshot, with their errors.
    pub fn errors(&self) -> &[(String, Arc<ToolError>)] {
        &self.errors
    }
}

/// A tool offered under another name (a set tool whose own name was taken).
struct RenamedTool {
    inner: DynTool,
    declaration: Declaration,
}

impl RenamedTool {
    /// `None` when `name` is not a valid tool name (too long, for example).
    fn new(inner: DynTool, name: &str) -> Option<Self> {
        let mut declaration = inner.declaration().clone();
        declaration.name = toolbelt_core::ToolName::new(name).ok()?;
        Some(Self { inner, declaration })
    }
}

#[async_trait]
impl Tool for RenamedTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }
    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        self.inner.call(ctx, args).await
    }
    fn is_streaming(&self) -> bool {
        self.inner.is_streaming()
    }
    async fn call_stream(&self, ctx: ToolContext, args: &str) -> Result<ToolStream, ToolError> {
        self.inner.call_stream(ctx, args).await
    }
}
