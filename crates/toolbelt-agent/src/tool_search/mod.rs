//! Tool search: offer the model only the few tools a turn needs, out of hundreds.
//!
//! Every tool declaration sent to the model costs prompt tokens and attention. A
//! [`ToolSearch`] runs before each model call (a before-model callback) and rewrites the
//! request's tools in one or both of two ways:
//!
//! - **Selection**: keep at most [`max_tools`](ToolSearchBuilder::max_tools) of the tools,
//!   chosen for the user's latest question, either by a model that reads the tools' names
//!   and descriptions ([`ToolSearchBuilder::llm`]) or by an index
//!   ([`ToolSearchBuilder::index`]: BM25 needs no model; embeddings and hybrid ranking need an
//!   [`EmbeddingIndex`](toolbelt_search::embed::EmbeddingIndex); an optional model rewrites
//!   the question into a search query first).
//! - **Deferred tools** ([`ToolSearchBuilder::defer`] and friends): the tools marked deferred
//!   are not sent at all; the model gets a framework tool [`TOOL_SEARCH`]`(query, limit?)`
//!   that returns the best matches and loads their declarations into the next request of the
//!   same run (and later ones of that run; a new run starts with none loaded).
//!
//! Tool filters apply first: the search only sees the tools the agent's and the run's filters
//! let through (it works on the request as built). Framework tools (`transfer_to_agent`,
//! `await_user_reply`, the plugins' tools, `tool_search` itself) are always kept and never
//! counted against `max_tools`.
//!
//! Use it as a [`Runner`](crate::Runner) plugin ([`ToolSearch::plugin`], every agent of the
//! run) or on one agent ([`ToolSearch::callbacks`], plus [`ToolSearch::search_tool`] among the
//! agent's tools when tools are deferred).
//!
//! # Failures
//!
//! When the search fails (the search model errs or answers something that is not a list of
//! tools, the embedder fails), [`fail_open`](ToolSearchBuilder::fail_open) keeps every tool
//! for that call and emits a [`Warning`](crate::EventKind::Warning) event saying why; without
//! it (the default) the run ends with an [`ErrorKind::Callback`](crate::ErrorKind::Callback)
//! error naming the failure.
//!
//! # Cost and reuse
//!
//! A search's token usage is added to the run's [`ToolSearchUsage`], read with
//! [`ToolSearchUsage::from_invocation`]. Within one run the selection is reused while the
//! question and the candidate tools stay the same, so the tool rounds of one answer cost one
//! search, not one each. The index is kept across runs and updated incrementally
//! ([`ToolIndex::sync`]): a tool whose declaration changed (a tool set's `list_changed`, a
//! refresh) is re-indexed, an unchanged one never is; [`ToolSearch::index_stats`] counts it.
//!
//! # Deferred tools called before they were loaded
//!
//! Deferring is about prompt size, not permission: a deferred tool stays callable. When the
//! model calls one it was never shown (it guessed the name, or remembers it from an earlier
//! run), the call runs like any other, through the executor's validation, hooks, approval and
//! filters, and the tool's declaration is loaded from the next request on so the model sees
//! its schema. Forbid a tool with a tool filter or an execution filter, not by deferring it.
//!
//! ```
//! use std::sync::Arc;
//! use toolbelt_agent::tool_search::ToolSearch;
//! use toolbelt_agent::{LlmAgent, Runner};
//! use toolbelt_agent::tool_search::Method;
//! # use toolbelt_model::{OpenAiConfig, OpenAiModel};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let model = OpenAiModel::new(OpenAiConfig::new("http://127.0.0.1:9/v1", "any"))?;
//! // BM25 keeps the 5 best tools of each turn; tools whose names start with "github_" are
//! // only loaded when the model searches for them.
//! let search = ToolSearch::builder()
//!     .index(Method::Bm25)
//!     .max_tools(5)
//!     .fail_open(true)
//!     .defer(toolbelt_core::ToolFilter::new(|_, tool| tool.name().starts_with("github_")))
//!     .build()?;
//! let agent = LlmAgent::builder("assistant").model(model).build()?;
//! let runner = Runner::new("app", Arc::new(agent)).with_plugin(search.plugin());
//! # let _ = runner;
//! # Ok(()) }
//! ```

mod deferred;
mod llm;
mod select;
mod usage;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use toolbelt_core::{Declaration, DynTool, DynToolSet, ToolFilter};
use toolbelt_model::{DynModel, Message, Model, Request, Role};
use toolbelt_search::embed::EmbeddingIndex;
use toolbelt_search::{ToolDoc, ToolIndex};

pub use toolbelt_search::Method;

use crate::callbacks::BeforeModel;
use crate::framework::FRAMEWORK_TOOLS;
use crate::{AgentError, CallbackError, Callbacks, EventKind, Invocation, Plugin};

pub use deferred::{DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, TOOL_SEARCH};
pub use usage::ToolSearchUsage;

/// The default of [`ToolSearchBuilder::max_tools`].
pub const DEFAULT_MAX_TOOLS: usize = 10;

/// How the tools of a turn are selected.
#[derive(Clone)]
enum Strategy {
    /// A model reads the tools' names and descriptions and names the ones to keep.
    Llm { model: DynModel },
    /// An index ranks the tools for the question (optionally rewritten by a model first).
    Index {
        method: Method,
        rewrite: Option<DynModel>,
    },
}

/// Which tools are deferred (offered through `tool_search` only).
#[derive(Clone)]
enum DeferRule {
    /// The tools a filter allows (it sees each tool through its declaration).
    Filter(ToolFilter),
    /// Every tool of this tool set (as the registry names it: `{set}_{tool}` on a clash).
    Set(DynToolSet),
}

/// Counts of the index's incremental updates, summed over the search's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Times the index was brought up to date with a request's tools.
    pub syncs: usize,
    /// Tools added to the index.
    pub added: usize,
    /// Tools re-indexed because their declaration changed.
    pub changed: usize,
    /// Tools removed because they were no longer offered.
    pub removed: usize,
    /// Tools embedded (0 without embeddings).
    pub embedded: usize,
    /// Tools whose cached embedding was reused.
    pub reused: usize,
}

/// Tool search for an agent or a runner; see the [module docs](self). Cheap to clone: clones
/// share the index and its statistics.
#[derive(Clone)]
pub struct ToolSearch {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ToolSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let strategy = match &self.inner.strategy {
            None => "none".to_string(),
            Some(Strategy::Llm { model }) => format!("llm({})", model.name()),
            Some(Strategy::Index { method, .. }) => format!("index({method:?})"),
        };
        f.debug_struct("ToolSearch")
            .field("strategy", &strategy)
            .field("max_tools", &self.inner.max_tools)
            .field("fail_open", &self.inner.fail_open)
            .field("deferred", &!self.inner.defer.is_empty())
            .finish()
    }
}

struct Inner {
    /// Tells this search's per-run state apart from another search's in the same run.
    id: u64,
    strategy: Option<Strategy>,
    max_tools: usize,
    fail_open: bool,
    defer: Vec<DeferRule>,
    /// The method `tool_search` ranks deferred tools with.
    deferred_method: Method,
    /// Every non-framework tool of the latest request (selected or deferred alike).
    index: tokio::sync::Mutex<ToolIndex>,
    /// How many tools the index holds (what a search asks for, to filter afterwards).
    indexed: AtomicUsize,
    stats: Mutex<IndexStats>,
}

/// Builds a [`ToolSearch`]: choose a selection ([`llm`](Self::llm) or [`index`](Self::index)),
/// deferred tools, or both.
pub struct ToolSearchBuilder {
    strategy: Option<Strategy>,
    max_tools: usize,
    fail_open: bool,
    defer: Vec<DeferRule>,
    embeddings: Option<EmbeddingIndex>,
}

impl ToolSearch {
    /// A builder with nothing chosen yet.
    pub fn builder() -> ToolSearchBuilder {
        ToolSearchBuilder {
            strategy: None,
            max_tools: DEFAULT_MAX_TOOLS,
            fail_open: false,
            defer: Vec::new(),
            embeddings: None,
        }
    }

    /// A plugin named `tool_search` that runs the search before every model call of every
    /// agent of the run and, when tools are deferred, offers the [`TOOL_SEARCH`] tool.
    pub fn plugin(&self) -> Plugin {
        let mut plugin = Plugin::new(TOOL_SEARCH).callbacks(self.callbacks());
        if let Some(tool) = self.search_tool() {
            plugin.tools.push(tool);
        }
        plugin
    }

    /// The search as one agent's before-model callback
    /// ([`LlmAgentBuilder::callbacks`](crate::LlmAgentBuilder::callbacks)). With deferred
    /// tools, add [`ToolSearch::search_tool`] to the agent's tools too.
    pub fn callbacks(&self) -> Callbacks {
        Callbacks::new().before_model(self.clone())
    }

    /// The [`TOOL_SEARCH`] tool that finds and loads deferred tools; `None` when no tool is
    /// deferred.
    pub fn search_tool(&self) -> Option<DynTool> {
        (!self.inner.defer.is_empty())
            .then(|| Arc::new(deferred::SearchTool::new(self.inner.clone())) as DynTool)
    }

    /// How the index was updated so far.
    pub fn index_stats(&self) -> IndexStats {
        *self.inner.stats.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ToolSearchBuilder {
    /// Selects tools with `model`: it is sent the candidate tools (name and the first line of
    /// the description) and the user's latest question, and names the tools to keep.
    pub fn llm(self, model: impl Model + 'static) -> Self {
        self.llm_arc(Arc::new(model))
    }

    /// [`ToolSearchBuilder::llm`] with a shared model (the agent's own, for example).
    pub fn llm_arc(mut self, model: DynModel) -> Self {
        self.strategy = Some(Strategy::Llm { model });
        self
    }

    /// Selects tools with the index: [`Method::Bm25`] (no model needed), or
    /// [`Method::Embed`] / [`Method::Hybrid`] with [`ToolSearchBuilder::embeddings`].
    pub fn index(mut self, method: Method) -> Self {
        let rewrite = match self.strategy.take() {
            Some(Strategy::Index { rewrite, .. }) => rewrite,
            _ => None,
        };
        self.strategy = Some(Strategy::Index { method, rewrite });
        self
    }

    /// With [`ToolSearchBuilder::index`]: `model` first rewrites the user's question into a
    /// search query (its usage counts in [`ToolSearchUsage`]).
    pub fn rewrite_query(mut self, model: DynModel) -> Self {
        let method = match self.strategy.take() {
            Some(Strategy::Index { method, .. }) => method,
            _ => Method::Bm25,
        };
        self.strategy = Some(Strategy::Index {
            method,
            rewrite: Some(model),
        });
        self
    }

    /// The embeddings the index uses for [`Method::Embed`] and [`Method::Hybrid`] (and
    /// `tool_search` then ranks deferred tools by hybrid ranking). Tool vectors are cached by
    /// declaration hash in its vector store, so an unchanged tool is never embedded twice.
    pub fn embeddings(mut self, embeddings: EmbeddingIndex) -> Self {
        self.embeddings = Some(embeddings);
        self
    }

    /// The most tools a selection keeps, framework tools and loaded deferred tools not
    /// counted (default [`DEFAULT_MAX_TOOLS`]; at least 1).
    pub fn max_tools(mut self, max: usize) -> Self {
        self.max_tools = max.max(1);
        self
    }

    /// On a failed search keep every tool (and emit a warning event) instead of ending the
    /// run with an error (default: off).
    pub fn fail_open(mut self, on: bool) -> Self {
        self.fail_open = on;
        self
    }

    /// Defers the tools `filter` allows. The filter sees each tool through its declaration
    /// (name, description, schema, hints); calling it is an error.
    pub fn defer(mut self, filter: ToolFilter) -> Self {
        self.defer.push(DeferRule::Filter(filter));
        self
    }

    /// Defers the tools with these names.
    pub fn defer_names<I, S>(self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.defer(ToolFilter::include_names(names))
    }

    /// Defers every tool of this tool set (the same set the agent or registry lists; a tool
    /// renamed `{set}_{tool}` on a clash is recognised too).
    pub fn defer_tool_set(mut self, set: DynToolSet) -> Self {
        self.defer.push(DeferRule::Set(set));
        self
    }

    /// The search. Fails when nothing was chosen, or when embeddings are asked for without
    /// [`ToolSearchBuilder::embeddings`].
    pub fn build(self) -> Result<ToolSearch, AgentError> {
        if self.strategy.is_none() && self.defer.is_empty() {
            return Err(AgentError::Config(
                "tool search: choose a selection (llm or index) or deferred tools".into(),
            ));
        }
        let has_embeddings = self.embeddings.is_some();
        if let Some(Strategy::Index { method, .. }) = &self.strategy
            && *method != Method::Bm25
            && !has_embeddings
        {
            return Err(AgentError::Config(format!(
                "tool search: the {method:?} method needs embeddings (ToolSearchBuilder::embeddings)"
            )));
        }
        let deferred_method = match &self.strategy {
            Some(Strategy::Index { method, .. }) => *method,
            _ if has_embeddings => Method::Hybrid,
            _ => Method::Bm25,
        };
        let mut index = ToolIndex::new();
        if let Some(embeddings) = self.embeddings {
            index = index.with_embeddings(embeddings);
        }
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Ok(ToolSearch {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                strategy: self.strategy,
                max_tools: self.max_tools,
                fail_open: self.fail_open,
                defer: self.defer,
                deferred_method,
                index: tokio::sync::Mutex::new(index),
                indexed: AtomicUsize::new(0),
                stats: Mutex::default(),
            }),
        })
    }
}

/// The LLM selection outside a run (`toolbelt tools search --method llm`): asks `model`
/// which of `tools` (name, description) the question needs, as the search before a model
/// call does. At most `max` names of `tools`, best first; a failure or an answer that is not
/// a list of names is an error saying so.
pub async fn choose_with_model(
    model: &DynModel,
    question: &str,
    tools: &[(&str, &str)],
    max: usize,
) -> Result<Vec<String>, String> {
    llm::choose(model, None, question, tools, max.max(1)).await
}

/// What one search remembers during a run (a [`RunStates`] entry).
#[derive(Default)]
pub(crate) struct RunState {
    /// Deferred tools loaded by `tool_search` (or called) in this run.
    pub(crate) loaded: BTreeSet<String>,
    /// The deferred tools the latest request left out, with the first line of their
    /// descriptions: what `tool_search` searches.
    pub(crate) hidden: Vec<(String, String)>,
    /// The latest selection and the key of its inputs (question and candidates).
    last_selection: Option<(u64, Vec<String>)>,
}

/// Every tool search's state in one run, by search id (a run value of the invocation).
#[derive(Default)]
pub(crate) struct RunStates(Mutex<HashMap<u64, RunState>>);

impl RunStates {
    pub(crate) fn with<R>(inv: &Invocation, id: u64, f: impl FnOnce(&mut RunState) -> R) -> R {
        let states = inv.run_value_or_default::<RunStates>();
        let mut map = states.0.lock().unwrap_or_else(|p| p.into_inner());
        f(map.entry(id).or_default())
    }
}

#[async_trait]
impl BeforeModel for ToolSearch {
    async fn call(
        &self,
        inv: &Invocation,
        request: &mut Request,
    ) -> Result<Option<Message>, CallbackError> {
        self.inner.rewrite(inv, request).await?;
        Ok(None)
    }
}

impl Inner {
    /// Rewrites the request's tools: framework tools, the selection among the others, and
    /// the deferred tools loaded in this run. A failure leaves every tool (fail open) or
    /// ends the run.
    async fn rewrite(&self, inv: &Invocation, request: &mut Request) -> Result<(), CallbackError> {
        match self.kept(inv, request).await {
            Ok(kept) => {
                request.tools.retain(|d| kept.contains(d.name.as_str()));
                Ok(())
            }
            Err(error) if self.fail_open => {
                let message =
                    format!("tool search failed, every tool is offered this turn: {error}");
                tracing::warn!("{message}");
                inv.emit(inv.new_event(EventKind::Warning { message }))
                    .await
                    .map_err(|e| CallbackError::new(e.to_string()))?;
                Ok(())
            }
            Err(error) => Err(CallbackError::new(format!("tool search failed: {error}"))),
        }
    }

    /// The names of the request's tools to keep.
    async fn kept(&self, inv: &Invocation, request: &Request) -> Result<HashSet<String>, String> {
        let framework: HashSet<&str> = FRAMEWORK_TOOLS
            .iter()
            .copied()
            .chain(
                inv.plugins
                    .iter()
                    .flat_map(|p| p.tools.iter().map(|t| t.name())),
            )
            .chain([TOOL_SEARCH])
            .collect();
        let deferred = self.deferred_names(inv, &request.tools, &framework).await;
        let called = called_this_run(&request.messages);
        let (loaded, previous) = RunStates::with(inv, self.id, |state| {
            for name in called.iter().filter(|n| deferred.contains(n.as_str())) {
                state.loaded.insert(name.clone());
            }
            state.hidden = request
                .tools
                .iter()
                .filter(|d| {
                    deferred.contains(d.name.as_str()) && !state.loaded.contains(d.name.as_str())
                })
                .map(|d| {
                    let line = d.description.lines().next().unwrap_or("").trim();
                    (d.name.to_string(), line.to_string())
                })
                .collect();
            (state.loaded.clone(), state.last_selection.clone())
        });

        let searchable: Vec<&Declaration> = request
            .tools
            .iter()
            .filter(|d| !framework.contains(d.name.as_str()))
            .collect();
        if self.needs_index() && !searchable.is_empty() {
            let docs: Vec<ToolDoc> = searchable
                .iter()
                .map(|d| ToolDoc::from_declaration(d))
                .collect();
            self.sync(&docs)
                .await
                .map_err(|error| format!("the tool index could not be updated: {error}"))?;
        }

        let candidates: Vec<&Declaration> = searchable
            .into_iter()
            .filter(|d| !deferred.contains(d.name.as_str()))
            .collect();
        let mut kept: HashSet<String> = framework.iter().map(|n| n.to_string()).collect();
        kept.extend(loaded);
        match &self.strategy {
            Some(strategy) if candidates.len() > self.max_tools => {
                let (key, names) = select::select(
                    self,
                    strategy,
                    inv,
                    &request.messages,
                    &candidates,
                    previous,
                )
                .await?;
                RunStates::with(inv, self.id, |state| {
                    state.last_selection = Some((key, names.clone()));
                });
                kept.extend(names);
            }
            _ => kept.extend(candidates.iter().map(|d| d.name.to_string())),
        }
        Ok(kept)
    }

    fn needs_index(&self) -> bool {
        !self.defer.is_empty() || matches!(self.strategy, Some(Strategy::Index { .. }))
    }

    async fn sync(&self, docs: &[ToolDoc]) -> Result<(), String> {
        let mut index = self.index.lock().await;
        let stats = index.sync(docs).await.map_err(|e| e.to_string())?;
        self.indexed.store(docs.len(), Ordering::Relaxed);
        if stats != toolbelt_search::SyncStats::default() {
            tracing::debug!(
                added = stats.added,
                changed = stats.changed,
                removed = stats.removed,
                embedded = stats.embedded,
                reused = stats.reused,
                "tool search index updated"
            );
        }
        let mut total = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        total.syncs += 1;
        total.added += stats.added;
        total.changed += stats.changed;
        total.removed += stats.removed;
        total.embedded += stats.embedded;
        total.reused += stats.reused;
        Ok(())
    }

    /// The names of the request's tools that are deferred.
    async fn deferred_names(
        &self,
        inv: &Invocation,
        tools: &[Declaration],
        framework: &HashSet<&str>,
    ) -> HashSet<String> {
        if self.defer.is_empty() {
            return HashSet::new();
        }
        let mut names = HashSet::new();
        let ctx = toolbelt_core::ToolContext::new().with_extension(inv.clone());
        for rule in &self.defer {
            match rule {
                DeferRule::Filter(filter) => {
                    for declaration in tools {
                        if filter.allows(&ctx, &deferred::DeclarationView(declaration)) {
                            names.insert(declaration.name.to_string());
                        }
                    }
                }
                DeferRule::Set(set) => match set.tools(&ctx).await {
                    Ok(listed) => {
                        for declaration in tools {
                            if deferred::from_set(declaration, set.name(), &listed) {
                                names.insert(declaration.name.to_string());
                            }
                        }
                    }
                    Err(error) => {
                        tracing::warn!("tool search: cannot list tool set {}: {error}", set.name())
                    }
                },
            }
        }
        names.retain(|n| !framework.contains(n.as_str()));
        names
    }
}

/// The tools called since the latest user message (this run's part of the conversation).
fn called_this_run(messages: &[Message]) -> Vec<String> {
    let start = latest_question(messages).map_or(0, |(index, _)| index);
    messages[start..]
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_calls.iter().map(|c| c.name.clone()))
        .collect()
}

/// The user's latest question and its index: the last user message that is not the image
/// message following a turn's tool results.
pub(crate) fn latest_question(messages: &[Message]) -> Option<(usize, &str)> {
    messages.iter().enumerate().rev().find_map(|(index, m)| {
        let after_tools = index > 0 && messages[index - 1].role == Role::Tool;
        (m.role == Role::User && !after_tools && !m.content.trim().is_empty())
            .then_some((index, m.content.as_str()))
    })
}
