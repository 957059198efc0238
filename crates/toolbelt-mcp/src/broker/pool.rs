//! The broker's connections: one [`McpToolSet`] per target, reused across operations,
//! closed after an idle timeout, bounded in number (the least recently used is closed to
//! make room), and all closed with the broker.
//!
//! Each operation holds a read lease on its connection; retiring a connection (eviction or
//! idleness) takes the write side, so a connection is never closed under an operation that
//! is using it. Closing the broker does not wait: operations under way fail with "closed".

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedRwLockReadGuard, RwLock};
use toolbelt_core::ToolSet;

use super::AdHocTransport;
use super::error::BrokerError;
use crate::client::McpToolSet;

/// What a connection is to: a configured server, or an ad-hoc URL over one transport; and
/// the fingerprint of the headers it sends (connections are never shared across headers).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum PoolKey {
    Named(String, u64),
    Url(String, AdHocTransport, u64),
}

/// One pooled connection.
pub(crate) struct Entry {
    pub key: PoolKey,
    pub set: McpToolSet,
    last_used: Mutex<Instant>,
    busy: Arc<RwLock<()>>,
    /// Set once the entry left the pool; a lease that sees it takes a fresh connection.
    retired: AtomicBool,
}

impl Entry {
    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }
}

/// An operation's hold on a connection.
pub(crate) struct Lease {
    pub entry: Arc<Entry>,
    _busy: OwnedRwLockReadGuard<()>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Idleness counts from the end of the last operation.
        self.entry.touch();
    }
}

/// A snapshot of one open connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The configured server's name, or the ad-hoc URL.
    pub target: String,
    /// Whether it is an ad-hoc URL.
    pub is_ad_hoc: bool,
    /// The stdio server's process id, while its session is open.
    pub pid: Option<u32>,
}

/// Counters of the pool's life, for tests and monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections opened (tool sets created) so far.
    pub opened: u64,
    /// Connections closed to make room for another (least recently used first).
    pub evicted: u64,
    /// Connections closed after the idle timeout.
    pub idle_closed: u64,
}

pub(crate) struct PoolLimits {
    pub max_connections: usize,
    pub idle_timeout: Duration,
}

#[derive(Default)]
struct State {
    entries: HashMap<PoolKey, Arc<Entry>>,
    /// Entries that left the pool but may still be closing.
    retiring: Vec<Arc<Entry>>,
    closed: bool,
    reaper_running: bool,
}

pub(crate) struct Pool {
    self_ref: Weak<Pool>,
    limits: PoolLimits,
    state: Mutex<State>,
    opened: AtomicU64,
    evicted: AtomicU64,
    idle_closed: AtomicU64,
}

impl Pool {
    pub fn new(limits: PoolLimits) -> Arc<Self> {
        Arc::new_cyclic(|self_ref| Self {
            self_ref: self_ref.clone(),
            limits,
            state: Mutex::new(State::default()),
            opened: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection for `key`, made by `make` when there is none.
    pub async fn lease(
        &self,
        key: &PoolKey,
        make: impl Fn() -> Result<McpToolSet, BrokerError>,
    ) -> Result<Lease, BrokerError> {
        loop {
            let entry = self.entry(key, &make)?;
            let busy = entry.busy.clone().read_owned().await;
            if entry.retired.load(Ordering::Acquire) {
                // It was retired while we waited; it is closed or closing.
                continue;
            }
            entry.touch();
            return Ok(Lease { entry, _busy: busy });
        }
    }

    fn entry(
        &self,
        key: &PoolKey,
        make: &impl Fn() -> Result<McpToolSet, BrokerError>,
    ) -> Result<Arc<Entry>, BrokerError> {
        let mut state = self.state();
        if state.closed {
            return Err(BrokerError::Closed);
        }
        if let Some(entry) = state.entries.get(key) {
            entry.touch();
            return Ok(entry.clone());
        }
        let entry = Arc::new(Entry {
            key: key.clone(),
            set: make()?,
            last_used: Mutex::new(Instant::now()),
            busy: Arc::new(RwLock::new(())),
            retired: AtomicBool::new(false),
        });
        state.entries.insert(key.clone(), entry.clone());
        self.opened.fetch_add(1, Ordering::Relaxed);
        while state.entries.len() > self.limits.max_connections.max(1) {
            let Some(oldest) = state
                .entries
                .values()
                .filter(|e| e.key != *key)
                .max_by_key(|e| e.idle_for())
                .map(|e| e.key.clone())
            else {
                break;
            };
            if let Some(evicted) = state.entries.remove(&oldest) {
                self.evicted.fetch_add(1, Ordering::Relaxed);
                self.retire(&mut state, evicted);
            }
        }
        if !state.reaper_running {
            state.reaper_running = true;
            tokio::spawn(reap(self.self_ref.clone(), self.limits.idle_timeout));
        }
        Ok(entry)
    }

    /// Takes `entry` out of service: once no operation uses it, it is closed.
    fn retire(&self, state: &mut State, entry: Arc<Entry>) {
        entry.retired.store(true, Ordering::Release);
        state.retiring.push(entry.clone());
        let pool = self.self_ref.clone();
        tokio::spawn(async move {
            let _idle = entry.busy.clone().write_owned().await;
            if let Err(err) = entry.set.close().await {
                tracing::warn!(server = %entry.set.name(), "closing an MCP connection failed: {err}");
            }
            if let Some(pool) = pool.upgrade() {
                pool.state().retiring.retain(|e| !Arc::ptr_eq(e, &entry));
            }
        });
    }

    /// Drops the connection for `key` if it is still `entry` (after a failed connect, so a
    /// dead target does not hold a slot).
    pub fn discard(&self, entry: &Arc<Entry>) {
        let mut state = self.state();
        if state
            .entries
            .get(&entry.key)
            .is_some_and(|current| Arc::ptr_eq(current, entry))
            && let Some(removed) = state.entries.remove(&entry.key)
        {
            self.retire(&mut state, removed);
        }
    }

    /// Closes the connections idle for longer than the idle timeout; returns whether the
    /// reaper should keep running.
    fn reap_idle(&self) -> bool {
        let mut state = self.state();
        if state.closed {
            state.reaper_running = false;
            return false;
        }
        let idle: Vec<PoolKey> = state
            .entries
            .values()
            .filter(|e| e.idle_for() >= self.limits.idle_timeout)
            // An entry in use is not idle, whatever its clock says.
            .filter(|e| e.busy.try_write().is_ok())
            .map(|e| e.key.clone())
            .collect();
        for key in idle {
            if let Some(entry) = state.entries.remove(&key) {
                self.idle_closed.fetch_add(1, Ordering::Relaxed);
                self.retire(&mut state, entry);
            }
        }
        if state.entries.is_empty() {
            state.reaper_running = false;
            return false;
        }
        true
    }

    /// Closes every connection now, including those being retired.
    pub async fn close(&self) {
        let sets: Vec<McpToolSet> = {
            let mut state = self.state();
            state.closed = true;
            let entries: Vec<Arc<Entry>> = state.entries.drain().map(|(_, e)| e).collect();
            let retiring = std::mem::take(&mut state.retiring);
            entries
                .into_iter()
                .chain(retiring)
                .map(|e| {
                    e.retired.store(true, Ordering::Release);
                    e.set.clone()
                })
                .collect()
        };
        let closing = sets.iter().map(|set| async move {
            if let Err(err) = set.close().await {
                tracing::warn!(server = %set.name(), "closing an MCP connection failed: {err}");
            }
        });
        futures::future::join_all(closing).await;
    }

    pub fn connections(&self) -> Vec<ConnectionInfo> {
        let state = self.state();
        let mut list: Vec<ConnectionInfo> = state
            .entries
            .values()
            .map(|e| ConnectionInfo {
                target: e.set.name().to_string(),
                is_ad_hoc: matches!(e.key, PoolKey::Url(..)),
                pid: e.set.process_id(),
            })
            .collect();
        list.sort_by(|a, b| a.target.cmp(&b.target));
        list
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            opened: self.opened.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            idle_closed: self.idle_closed.load(Ordering::Relaxed),
        }
    }
}

/// Closes idle connections until the pool is empty, closed or gone.
async fn reap(pool: Weak<Pool>, idle_timeout: Duration) {
    let tick = (idle_timeout / 4).clamp(Duration::from_millis(5), Duration::from_secs(30));
    loop {
        tokio::time::sleep(tick).await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        if !pool.reap_idle() {
            return;
        }
    }
}
