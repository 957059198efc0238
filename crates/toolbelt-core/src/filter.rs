//! Filters decide which tools are visible (to a model, an agent, a run) or executed.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::{DynTool, Tool, ToolContext, ToolError, ToolSet};

type Predicate = dyn Fn(&ToolContext, &dyn Tool) -> bool + Send + Sync;

/// A predicate over (context, tool), composable with [`and`](ToolFilter::and),
/// [`or`](ToolFilter::or) and [`not`](ToolFilter::not).
///
/// Filters are a soft constraint for cost and focus: a model may still ask for a hidden tool by
/// name. Tools that must not run need a check where they run (an execution filter, a hook, or
/// the tool itself).
///
/// ```
/// use toolbelt_core::ToolFilter;
/// let filter = ToolFilter::include_names(["Read", "Grep", "Bash"])
///     .and(ToolFilter::exclude_names(["Bash"]));
/// # let _ = filter;
/// ```
#[derive(Clone)]
pub struct ToolFilter {
    predicate: Arc<Predicate>,
}

impl fmt::Debug for ToolFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ToolFilter(..)")
    }
}

impl ToolFilter {
    /// A filter from any predicate.
    pub fn new(
        predicate: impl Fn(&ToolContext, &dyn Tool) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            predicate: Arc::new(predicate),
        }
    }

    /// Lets every tool through.
    pub fn allow_all() -> Self {
        Self::new(|_, _| true)
    }

    /// Lets through only tools with one of these names.
    pub fn include_names<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let names: HashSet<String> = names.into_iter().map(Into::into).collect();
        Self::new(move |_, tool| names.contains(tool.name()))
    }

    /// Lets through every tool except those with one of these names.
    pub fn exclude_names<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::include_names(names).not()
    }

    /// Both filters must allow the tool.
    pub fn and(self, other: ToolFilter) -> Self {
        Self::new(move |ctx, tool| self.allows(ctx, tool) && other.allows(ctx, tool))
    }

    /// Either filter may allow the tool.
    pub fn or(self, other: ToolFilter) -> Self {
        Self::new(move |ctx, tool| self.allows(ctx, tool) || other.allows(ctx, tool))
    }

    /// Allows what this filter refuses, and the other way round.
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        Self::new(move |ctx, tool| !self.allows(ctx, tool))
    }

    /// Whether the tool passes.
    pub fn allows(&self, ctx: &ToolContext, tool: &dyn Tool) -> bool {
        (self.predicate)(ctx, tool)
    }

    /// Keeps the tools that pass, in order.
    pub fn apply(&self, ctx: &ToolContext, tools: Vec<DynTool>) -> Vec<DynTool> {
        tools
            .into_iter()
            .filter(|tool| self.allows(ctx, tool.as_ref()))
            .collect()
    }
}

/// A view of a tool set that shows only the tools a filter allows; itself a [`ToolSet`].
///
/// The view owns the set it wraps: closing the view closes the set.
pub struct FilteredToolSet<S> {
    inner: S,
    filter: ToolFilter,
}

impl<S: ToolSet> FilteredToolSet<S> {
    /// Wraps `inner`, showing only what `filter` allows.
    pub fn new(inner: S, filter: ToolFilter) -> Self {
        Self { inner, filter }
    }

    /// The wrapped set.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

#[async_trait]
impl<S: ToolSet> ToolSet for FilteredToolSet<S> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        let tools = self.inner.tools(ctx).await?;
        Ok(self.filter.apply(ctx, tools))
    }

    async fn close(&self) -> Result<(), ToolError> {
        self.inner.close().await
    }
}

/// Adds [`filtered`](ToolSetExt::filtered) to every tool set.
pub trait ToolSetExt: ToolSet + Sized {
    /// A view of this set showing only what `filter` allows.
    fn filtered(self, filter: ToolFilter) -> FilteredToolSet<Self> {
        FilteredToolSet::new(self, filter)
    }
}

impl<S: ToolSet> ToolSetExt for S {}
