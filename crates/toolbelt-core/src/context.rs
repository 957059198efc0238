//! The context every tool call carries: its call id, a cancellation token, an optional
//! deadline, and typed extensions through which outer layers pass state down.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::progress::{DynProgressSink, ProgressSink, ProgressUpdate};

/// A typed map: at most one value per type, cheap to clone (values are shared).
///
/// The agent layer stores its invocation here; an application may store the current user.
/// Inserting copies the map's index (not the values), so a clone given to a child call never
/// changes its parent's.
#[derive(Clone, Default)]
pub struct Extensions {
    map: Option<Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl Extensions {
    /// Stores `value`, replacing any earlier value of the same type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        let map = Arc::make_mut(self.map.get_or_insert_with(Default::default));
        map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, if one was stored.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.map
            .as_ref()?
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
    }

    /// The value of type `T` as a shared pointer, if one was stored.
    pub fn get_arc<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let value = self.map.as_ref()?.get(&TypeId::of::<T>())?.clone();
        value.downcast::<T>().ok()
    }

    /// Whether no value is stored.
    pub fn is_empty(&self) -> bool {
        self.map.as_ref().is_none_or(|m| m.is_empty())
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.map.as_ref().map_or(0, |m| m.len());
        write!(f, "Extensions({len} values)")
    }
}

/// The context of one tool call (or of listing a tool set's tools).
///
/// Cloning is cheap. A tool that spawns work should pass [`ToolContext::cancellation`] to it,
/// or `select!` on [`ToolContext::cancelled`], so that a timeout or a user's stop reaches it.
///
/// ```
/// use toolbelt_core::ToolContext;
/// let ctx = ToolContext::for_call("call_1").with_tool_name("calculator");
/// assert_eq!(ctx.call_id(), Some("call_1"));
/// assert!(!ctx.is_cancelled());
/// ```
#[derive(Clone, Debug, Default)]
pub struct ToolContext {
    call_id: Option<Arc<str>>,
    tool_name: Option<Arc<str>>,
    cancel: CancellationToken,
    deadline: Option<Instant>,
    extensions: Extensions,
    progress: Option<DynProgressSink>,
}

impl ToolContext {
    /// A context with no call id, for listing tools or for programmatic use.
    pub fn new() -> Self {
        Self::default()
    }

    /// A context for the call with this `tool_call_id`.
    pub fn for_call(call_id: impl Into<Arc<str>>) -> Self {
        Self::new().with_call_id(call_id)
    }

    /// Sets the tool_call_id.
    pub fn with_call_id(mut self, call_id: impl Into<Arc<str>>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// Sets the name of the tool being called.
    pub fn with_tool_name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.tool_name = Some(name.into());
        self
    }

    /// Uses `token` for cancellation.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// Sets an absolute deadline; an earlier existing deadline is kept.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(match self.deadline {
            Some(existing) => existing.min(deadline),
            None => deadline,
        });
        self
    }

    /// Sends this call's progress reports to `sink` (an MCP server forwards them to a client
    /// that asked for progress).
    pub fn with_progress(mut self, sink: Arc<dyn ProgressSink>) -> Self {
        self.progress = Some(DynProgressSink(sink));
        self
    }

    /// Reports progress to whoever watches this call; does nothing when nobody does.
    pub fn report_progress(&self, update: ProgressUpdate) {
        if let Some(sink) = &self.progress {
            sink.0.report(update);
        }
    }

    /// Whether anybody watches this call's progress (so a tool can skip building reports).
    pub fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }

    /// Adds a typed extension value.
    pub fn with_extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// A context for work nested inside this call: the same ids, deadline and extensions, and
    /// a child token, so cancelling this call cancels the child but not the other way round.
    pub fn child(&self) -> Self {
        Self {
            cancel: self.cancel.child_token(),
            ..self.clone()
        }
    }

    /// The tool_call_id the model gave this call, if any.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// The name of the tool being called, once the executor has resolved it.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool_name.as_deref()
    }

    /// The cancellation token; clone it into spawned work.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the call is cancelled.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// The absolute deadline, if one was set.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left until the deadline (zero once passed), if one was set.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The typed extensions.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// The typed extensions, for adding values.
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    /// Shorthand for `self.extensions().get::<T>()`.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct User(&'static str);

    #[test]
    fn extensions_are_typed_and_copy_on_write() {
        let parent = ToolContext::new().with_extension(User("ada"));
        let child = parent
            .child()
            .with_extension(User("bob"))
            .with_extension(7u32);
        assert_eq!(parent.get::<User>(), Some(&User("ada")));
        assert_eq!(child.get::<User>(), Some(&User("bob")));
        assert_eq!(parent.get::<u32>(), None);
        assert_eq!(child.get::<u32>(), Some(&7));
    }

    #[test]
    fn cancelling_a_call_cancels_its_children_only_downwards() {
        let parent = ToolContext::for_call("c1");
        let child = parent.child();
        assert_eq!(child.call_id(), Some("c1"));
        child.cancellation().cancel();
        assert!(!parent.is_cancelled());
        let other = parent.child();
        parent.cancellation().cancel();
        assert!(other.is_cancelled());
    }

    #[test]
    fn the_earliest_deadline_wins() {
        let now = Instant::now();
        let ctx = ToolContext::new()
            .with_deadline(now + Duration::from_secs(1))
            .with_deadline(now + Duration::from_secs(10));
        assert_eq!(ctx.deadline(), Some(now + Duration::from_secs(1)));
    }
}
