//! The registry: the tools and tool sets an executor can call, changed at run time, read
//! without ever waiting on a running call. The one owner of tool-set listing: when sets are
//! listed, how names that clash are resolved, and what failed.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use toolbelt_core::{
    Declaration, DynTool, DynToolSet, Tool, ToolContext, ToolError, ToolFilter, ToolOutput,
    ToolStream,
};

use crate::lane::Lane;

/// How long [`Registry::snapshot`] waits for one tool set's listing by default.
pub const DEFAULT_LISTING_TIMEOUT: Duration = Duration::from_secs(10);

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

/// How a tool set is added to a [`Registry`]. A [`ToolSetRefresh`] converts into options
/// with that refresh and no prefix.
///
/// ```
/// use toolbelt_exec::{ToolSetOptions, ToolSetRefresh};
///
/// let options = ToolSetOptions::new().refresh(ToolSetRefresh::OnRun).always_prefix(true);
/// assert!(options.always_prefix);
/// assert_eq!(ToolSetOptions::from(ToolSetRefresh::Cached), ToolSetOptions::default());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolSetOptions {
    /// When the set is listed. Default [`ToolSetRefresh::Cached`].
    pub refresh: ToolSetRefresh,
    /// Offer every tool of the set as `{set}_{tool}`, clash or not (two servers that both
    /// have a `search` tool, and a model that should always see which one it calls).
    /// Default off: only a tool whose name is taken gets the prefix.
    pub always_prefix: bool,
}

impl ToolSetOptions {
    /// Cached, no prefix.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists the set as `refresh` says.
    pub fn refresh(mut self, refresh: ToolSetRefresh) -> Self {
        self.refresh = refresh;
        self
    }

    /// Offers every tool of the set as `{set}_{tool}` (`true`), or only those whose name is
    /// taken (`false`, the default).
    pub fn always_prefix(mut self, on: bool) -> Self {
        self.always_prefix = on;
        self
    }
}

impl From<ToolSetRefresh> for ToolSetOptions {
    fn from(refresh: ToolSetRefresh) -> Self {
        Self::new().refresh(refresh)
    }
}

/// A registration error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A tool of that name is already registered; use [`Registry::replace`] to swap it.
    #[error("a tool named {0:?} is already registered (use replace to swap it)")]
    DuplicateTool(String),
    /// A tool set of that name is already registered; use [`Registry::replace_tool_set`] to
    /// swap it.
    #[error("a tool set named {0:?} is already registered (use replace_tool_set to swap it)")]
    DuplicateToolSet(String),
}

impl From<RegistryError> for ToolError {
    fn from(err: RegistryError) -> Self {
        ToolError::failed(err)
    }
}

/// A listing problem: the set's name and what went wrong.
type ListingError = (String, Arc<ToolError>);

/// The outcome of listing the set registered with this id.
type Listing = (u64, Result<Vec<DynTool>, Arc<ToolError>>);

#[derive(Clone)]
struct SetEntry {
    /// Tells this registration apart from a later one of the same name (a listing that
    /// finishes after its set was replaced is not stored). Never reused.
    id: u64,
    set: DynToolSet,
    options: ToolSetOptions,
    /// The set's last successful listing, as the set gave it (names are resolved in
    /// [`State::rebuild`]).
    listed: Option<Arc<Vec<DynTool>>>,
    /// Why the last listing failed, until one succeeds.
    error: Option<Arc<ToolError>>,
    /// Where the set's calls not declared concurrency-safe take turns.
    lane: Arc<Lane>,
}

impl SetEntry {
    fn new(set: DynToolSet, options: ToolSetOptions) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            set,
            options,
            listed: None,
            error: None,
            lane: Lane::new(),
        }
    }

    fn is_due(&self) -> bool {
        self.options.refresh == ToolSetRefresh::OnRun || self.listed.is_none()
    }
}

/// A callable tool and the lane its calls not declared concurrency-safe take (see
/// [`crate::lane`]). `None` in a snapshot that knows no sets: the executor's lane is used.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) tool: DynTool,
    pub(crate) lane: Option<Arc<Lane>>,
    /// The name of the tool set that listed it; `None` for a tool registered directly.
    pub(crate) set: Option<Arc<str>>,
}

type Tools = BTreeMap<String, Entry>;

/// One immutable version of one layer's contents.
#[derive(Clone)]
struct State {
    tools: BTreeMap<String, DynTool>,
    sets: Vec<SetEntry>,
    /// The lane of the tools registered directly.
    lane: Arc<Lane>,
    /// Everything callable: direct tools plus the sets' last listings, names resolved.
    /// Rebuilt on change.
    merged: Arc<Tools>,
    /// The failed listings and the tools left out, as [`ToolSnapshot::errors`] reports them.
    errors: Arc<Vec<ListingError>>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            tools: BTreeMap::new(),
            sets: Vec::new(),
            lane: Lane::new(),
            merged: Arc::default(),
            errors: Arc::default(),
        }
    }
}

impl State {
    /// Resolves every name, in registration order: direct tools first, then each set in the
    /// order it was added, its tools in the order it listed them. A set tool takes its own
    /// name if free (its `{set}_{tool}` name when the set is always prefixed), else
    /// `{set}_{tool}` if that is free, else it is left out with an error entry. The result
    /// depends only on what was registered and listed, not on which listing finished first.
    fn rebuild(&mut self) {
        let mut merged: Tools = self
            .tools
            .iter()
            .map(|(name, tool)| {
                let entry = Entry {
                    tool: tool.clone(),
                    lane: Some(self.lane.clone()),
                    set: None,
                };
                (name.clone(), entry)
            })
            .collect();
        let mut errors = Vec::new();
        for set in &self.sets {
            if let Some(error) = &set.error {
                errors.push((set.set.name().to_string(), error.clone()));
            }
            let mut seen = HashSet::new();
            let set_name: Arc<str> = Arc::from(set.set.name());
            for tool in set.listed.iter().flat_map(|tools| tools.iter()) {
                let name = tool.name();
                let left_out = |why: String| {
                    let message = format!("tool {name:?} is not offered: {why}");
                    (
                        set.set.name().to_string(),
                        Arc::new(ToolError::failed(message)),
                    )
                };
                if !seen.insert(name) {
                    errors.push(left_out("the set lists that name twice".into()));
                    continue;
                }
                let entry = |tool: DynTool| Entry {
                    tool,
                    lane: Some(set.lane.clone()),
                    set: Some(set_name.clone()),
                };
                if !set.options.always_prefix && !merged.contains_key(name) {
                    merged.insert(name.to_string(), entry(tool.clone()));
                    continue;
                }
                let prefixed = format!("{}_{}", set.set.name(), name);
                if merged.contains_key(&prefixed) {
                    errors.push(left_out(format!("{prefixed:?} is taken too")));
                    continue;
                }
                match RenamedTool::new(tool.clone(), &prefixed) {
                    Some(renamed) => {
                        merged.insert(prefixed, entry(Arc::new(renamed)));
                    }
                    None => errors.push(left_out(format!("{prefixed:?} is not a valid name"))),
                }
            }
        }
        self.merged = Arc::new(merged);
        self.errors = Arc::new(errors);
    }
}

/// The tools and tool sets an [`Executor`](crate::Executor) can call.
///
/// Read-mostly: every read takes a short lock to clone an `Arc` of the current contents, and
/// every change builds a new version and swaps it in. No lock is held across an `await`, so a
/// long tool call never blocks a reader or a writer, and a running call keeps the tool it
/// started with even if that tool is unregistered meanwhile.
///
/// # Names
///
/// Names are unique and resolved in registration order, so the same registrations and
/// listings always give the same names, whichever set answered first:
///
/// 1. tools registered directly take their names;
/// 2. then each tool set, in the order the sets were added, its tools in the order the set
///    listed them: a tool takes its own name if it is free, else `{set}_{tool}` (always
///    `{set}_{tool}` for a set added with [`ToolSetOptions::always_prefix`]); a tool whose
///    names are all taken is left out and reported in [`ToolSnapshot::errors`];
/// 3. in a [layered](Registry::layered) registry, all of the above for its own tools and
///    sets, and then the parent's tools (named by the parent's own rules) under every name
///    the own layer does not use: an own tool *shadows* a parent tool of the same name.
///
/// # Listing
///
/// [`Registry::snapshot`] lists the sets that are due (every [`ToolSetRefresh::OnRun`] set,
/// and cached sets not listed yet) concurrently, each for at most the listing timeout
/// ([`DEFAULT_LISTING_TIMEOUT`] unless [`Registry::with_listing_timeout`] says otherwise). A
/// set that fails or takes longer keeps its last listing and is reported in
/// [`ToolSnapshot::errors`] until it lists again.
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
pub struct Registry {
    state: RwLock<Arc<State>>,
    /// Serializes writers so two concurrent changes never lose one another.
    write: Mutex<()>,
    /// The layer below, in a layered registry.
    parent: Option<Arc<Registry>>,
    listing_timeout: Duration,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            state: RwLock::default(),
            write: Mutex::new(()),
            parent: None,
            listing_timeout: DEFAULT_LISTING_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.tool_names())
            .field("tool_sets", &self.tool_set_names())
            .field("parent", &self.parent)
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry layered over `parent`: its own tools and sets come first, the
    /// parent's below ("an agent's tools over the shared tools"). Lookups, snapshots and
    /// listings see both layers, an own tool shadowing a parent tool of the same name
    /// (see [Names](Registry#names)); registering, replacing and removing change this layer
    /// only, and the parent's changes show at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolbelt_core::{FunctionTool, ToolContext, ToolError};
    /// use toolbelt_exec::Registry;
    ///
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct NoArgs {}
    /// async fn shared(_: ToolContext, _: NoArgs) -> Result<String, ToolError> { Ok("shared".into()) }
    /// async fn own(_: ToolContext, _: NoArgs) -> Result<String, ToolError> { Ok("own".into()) }
    ///
    /// let parent = Arc::new(Registry::new());
    /// parent.register(FunctionTool::new("search", "Shared search", shared)?)?;
    /// parent.register(FunctionTool::new("read", "Shared read", shared)?)?;
    /// let agent = Registry::layered(parent.clone());
    /// agent.register(FunctionTool::new("search", "The agent's search", own)?)?;
    ///
    /// assert_eq!(agent.tool_names(), vec!["read", "search"]);
    /// assert_eq!(agent.get("search").unwrap().declaration().description, "The agent's search");
    /// assert_eq!(parent.get("search").unwrap().declaration().description, "Shared search");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn layered(parent: Arc<Registry>) -> Self {
        Self {
            listing_timeout: parent.listing_timeout,
            parent: Some(parent),
            ..Self::default()
        }
    }

    /// Waits at most `timeout` for one set's listing in [`Registry::snapshot`] and
    /// [`Registry::refresh_tool_set`] (default [`DEFAULT_LISTING_TIMEOUT`]). A layered
    /// registry starts with its parent's.
    pub fn with_listing_timeout(mut self, timeout: Duration) -> Self {
        self.listing_timeout = timeout;
        self
    }

    /// The layer below, in a layered registry.
    pub fn parent(&self) -> Option<&Arc<Registry>> {
        self.parent.as_ref()
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

    /// Adds a tool set after the sets already added; `options` is a [`ToolSetOptions`] or
    /// just a [`ToolSetRefresh`]. Its tools are listed on the next [`Registry::snapshot`]
    /// (or [`Registry::refresh_tool_set`]). A set of the same name is
    /// [`RegistryError::DuplicateToolSet`]; use [`Registry::replace_tool_set`] to swap it.
    /// The registry never closes the set: its creator does.
    pub fn add_tool_set(
        &self,
        set: DynToolSet,
        options: impl Into<ToolSetOptions>,
    ) -> Result<(), RegistryError> {
        let entry = SetEntry::new(set, options.into());
        self.update(|state| {
            if state.sets.iter().any(|e| e.set.name() == entry.set.name()) {
                return Err(RegistryError::DuplicateToolSet(
                    entry.set.name().to_string(),
                ));
            }
            state.sets.push(entry);
            Ok(())
        })
    }

    /// Adds `set`, or puts it in the place of the set of the same name (which keeps that
    /// place in the naming order); returns the set replaced. The new set is listed on the
    /// next snapshot and has a lane of its own; calls already running finish with the old
    /// one, which is not closed.
    pub fn replace_tool_set(
        &self,
        set: DynToolSet,
        options: impl Into<ToolSetOptions>,
    ) -> Option<DynToolSet> {
        let entry = SetEntry::new(set, options.into());
        self.update(|state| {
            match state
                .sets
                .iter_mut()
                .find(|e| e.set.name() == entry.set.name())
            {
                Some(slot) => Some(std::mem::replace(slot, entry).set),
                None => {
                    state.sets.push(entry);
                    None
                }
            }
        })
    }

    /// Removes the tool set named `name` (without closing it); returns it if it was there.
    pub fn remove_tool_set(&self, name: &str) -> Option<DynToolSet> {
        self.update(|state| {
            let index = state.sets.iter().position(|e| e.set.name() == name)?;
            Some(state.sets.remove(index).set)
        })
    }

    /// The names of this layer's tool sets, in the order they were added (a layered
    /// registry's parent's sets are not included).
    pub fn tool_set_names(&self) -> Vec<String> {
        self.load()
            .sets
            .iter()
            .map(|e| e.set.name().to_string())
            .collect()
    }

    /// The names of every callable tool (direct tools and the sets' last listings, both
    /// layers of a layered registry), sorted.
    pub fn tool_names(&self) -> Vec<String> {
        self.current().names().map(str::to_string).collect()
    }

    /// The tool named `name`: a direct tool or one from a set's last listing (this layer's
    /// first, then the parent's).
    pub fn get(&self, name: &str) -> Option<DynTool> {
        self.entry(name).map(|entry| entry.tool)
    }

    /// The tool named `name` with its lane.
    pub(crate) fn entry(&self, name: &str) -> Option<Entry> {
        match self.load().merged.get(name) {
            Some(entry) => Some(entry.clone()),
            None => self.parent.as_ref()?.entry(name),
        }
    }

    /// Whether a tool of that name is callable.
    pub fn contains(&self, name: &str) -> bool {
        self.load().merged.contains_key(name)
            || self.parent.as_ref().is_some_and(|p| p.contains(name))
    }

    /// Lists this layer's set named `name` now (for at most the listing timeout) and keeps
    /// the listing. Returns how many tools it listed.
    pub async fn refresh_tool_set(
        &self,
        ctx: &ToolContext,
        name: &str,
    ) -> Result<usize, ToolError> {
        let state = self.load();
        let entry = state
            .sets
            .iter()
            .find(|e| e.set.name() == name)
            .ok_or_else(|| {
                ToolError::failed(format!("no tool set named {name:?} is registered"))
            })?;
        match self.list(ctx, entry).await {
            Ok(tools) => {
                let count = tools.len();
                self.store(vec![(entry.id, Ok(tools))]);
                Ok(count)
            }
            Err(err) => {
                // The caller gets the error itself; the registry keeps its message.
                let kept = Arc::new(ToolError::failed(err.to_string()));
                self.store(vec![(entry.id, Err(kept))]);
                Err(err)
            }
        }
    }

    /// Lists one set, bounded by the listing timeout and the caller's cancellation.
    async fn list(&self, ctx: &ToolContext, entry: &SetEntry) -> Result<Vec<DynTool>, ToolError> {
        let limit = self.listing_timeout;
        tokio::select! {
            biased;
            () = ctx.cancelled() => Err(ToolError::Cancelled),
            listed = tokio::time::timeout(limit, entry.set.tools(ctx)) => match listed {
                Ok(listed) => listed,
                Err(_) => Err(ToolError::failed(format!(
                    "listing the tools of {:?} took longer than {limit:?}; its last listing is kept",
                    entry.set.name()
                ))),
            },
        }
    }

    /// Stores listings by set registration; a set replaced or removed meanwhile is skipped.
    fn store(&self, listings: Vec<Listing>) {
        if listings.is_empty() {
            return;
        }
        self.update(|state| {
            for (id, listing) in listings {
                let Some(entry) = state.sets.iter_mut().find(|e| e.id == id) else {
                    continue;
                };
                match listing {
                    Ok(tools) => {
                        entry.listed = Some(Arc::new(tools));
                        entry.error = None;
                    }
                    Err(err) => entry.error = Some(err),
                }
            }
        });
    }

    /// The tools visible for one run: direct tools plus every set's tools, the due sets
    /// listed now (see [Listing](Registry#listing)), both layers of a layered registry,
    /// sorted by name.
    ///
    /// Never fails: a set that fails or times out keeps its last listing, and what went
    /// wrong (failed listings, tools left out) is in [`ToolSnapshot::errors`], so one broken
    /// server does not stop a run. Narrow the result with [`ToolSnapshot::filtered`].
    pub async fn snapshot(&self, ctx: &ToolContext) -> ToolSnapshot {
        let own = async {
            let state = self.load();
            let due = state.sets.iter().filter(|e| e.is_due());
            let listings = join_all(due.map(|entry| async move {
                (entry.id, self.list(ctx, entry).await.map_err(Arc::new))
            }))
            .await;
            self.store(listings);
        };
        let parent = async {
            match &self.parent {
                // Boxed: an async fn cannot hold itself.
                Some(parent) => Some(Box::pin(parent.snapshot(ctx)).await),
                None => None,
            }
        };
        let ((), parent) = futures::join!(own, parent);
        self.compose(parent)
    }

    /// The tools callable right now without listing any set (direct tools and the sets' last
    /// listings, both layers), with the errors of the last listings. Cheap: one `Arc` clone
    /// for a registry without a parent.
    pub fn current(&self) -> ToolSnapshot {
        let parent = self.parent.as_ref().map(|parent| parent.current());
        self.compose(parent)
    }

    /// This layer's contents over `parent`'s.
    fn compose(&self, parent: Option<ToolSnapshot>) -> ToolSnapshot {
        let state = self.load();
        let own = ToolSnapshot {
            tools: state.merged.clone(),
            errors: (*state.errors).clone(),
        };
        let Some(parent) = parent else {
            return own;
        };
        let mut tools = (*parent.tools).clone();
        tools.extend(own.tools.iter().map(|(n, e)| (n.clone(), e.clone())));
        let mut errors = own.errors;
        errors.extend(parent.errors);
        ToolSnapshot {
            tools: Arc::new(tools),
            errors,
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
            map.entry(tool.name().to_string()).or_insert(Entry {
                tool,
                lane: None,
                set: None,
            });
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

    /// The name of the tool set that offers tool `name` (`None` for a tool registered
    /// directly, or one this snapshot does not hold).
    pub fn tool_set_of(&self, name: &str) -> Option<&str> {
        self.tools.get(name)?.set.as_deref()
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
    async fn cache_fingerprint(
        &self,
        ctx: &ToolContext,
        args: &serde_json::Value,
    ) -> Option<String> {
        self.inner.cache_fingerprint(ctx, args).await
    }
}
