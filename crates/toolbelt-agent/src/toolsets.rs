//! An agent's tool sets, changeable while runs are in flight.
//!
//! The list is an immutable `Arc<Vec<_>>` swapped under a short lock: a run takes the
//! current list once and keeps it, so adding, removing or replacing sets never disturbs a
//! run in progress, and no lock is held across an `await`. Dropped sets are never closed
//! here: whoever created a set closes it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use toolbelt_core::{DynTool, DynToolSet, ToolContext, ToolError};

#[derive(Default)]
pub(crate) struct ToolSets {
    sets: RwLock<Arc<Vec<DynToolSet>>>,
    /// Last listing per set, for agents that do not refresh on every run. Keyed by name and
    /// checked against the set's identity, so a replaced set is listed afresh.
    listings: Mutex<HashMap<String, (usize, Vec<DynTool>)>>,
}

fn identity(set: &DynToolSet) -> usize {
    Arc::as_ptr(set) as *const () as usize
}

impl ToolSets {
    pub(crate) fn new(sets: Vec<DynToolSet>) -> Self {
        Self {
            sets: RwLock::new(Arc::new(sets)),
            listings: Mutex::default(),
        }
    }

    pub(crate) fn current(&self) -> Arc<Vec<DynToolSet>> {
        self.sets.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn update(&self, change: impl FnOnce(&mut Vec<DynToolSet>) -> bool) -> bool {
        let mut guard = self.sets.write().unwrap_or_else(|p| p.into_inner());
        let mut next = (**guard).clone();
        let changed = change(&mut next);
        *guard = Arc::new(next);
        changed
    }

    /// Adds `set`, replacing a set of the same name (without closing it).
    pub(crate) fn add(&self, set: DynToolSet) {
        self.update(|sets| {
            match sets.iter().position(|s| s.name() == set.name()) {
                Some(position) => sets[position] = set,
                None => sets.push(set),
            }
            true
        });
    }

    /// Removes every set named `name` (without closing them); whether one was there.
    pub(crate) fn remove(&self, name: &str) -> bool {
        let removed = self.update(|sets| {
            let before = sets.len();
            sets.retain(|s| s.name() != name);
            sets.len() != before
        });
        self.forget_listings_of_dropped_sets();
        removed
    }

    /// Replaces the whole list at once (without closing the old sets).
    pub(crate) fn set(&self, sets: Vec<DynToolSet>) {
        *self.sets.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(sets);
        self.forget_listings_of_dropped_sets();
    }

    /// Drops cached listings of sets no longer in the list, so their tools (which may hold
    /// a connection) are not kept alive by the agent after the caller let go of the set.
    fn forget_listings_of_dropped_sets(&self) {
        let current = self.current();
        self.listings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|name, (id, _)| {
                current
                    .iter()
                    .any(|s| s.name() == name && identity(s) == *id)
            });
    }

    /// The tools of every set: listed now when `refresh`, else from the last listing. A set
    /// that fails to list is left out with a warning, so one broken server does not stop the
    /// run; its error is returned for reporting.
    pub(crate) async fn tools(
        &self,
        ctx: &ToolContext,
        refresh: bool,
    ) -> (Vec<DynTool>, Vec<(String, ToolError)>) {
        let sets = self.current();
        let mut tools = Vec::new();
        let mut errors = Vec::new();
        for set in sets.iter() {
            let id = identity(set);
            if !refresh {
                let listings = self.listings.lock().unwrap_or_else(|p| p.into_inner());
                if let Some((cached_id, cached)) = listings.get(set.name())
                    && *cached_id == id
                {
                    tools.extend(cached.iter().cloned());
                    continue;
                }
            }
            match set.tools(ctx).await {
                Ok(listed) => {
                    tools.extend(listed.iter().cloned());
                    self.listings
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(set.name().to_string(), (id, listed));
                }
                Err(error) => {
                    tracing::warn!(tool_set = set.name(), %error, "a tool set failed to list");
                    errors.push((set.name().to_string(), error));
                }
            }
        }
        (tools, errors)
    }
}
