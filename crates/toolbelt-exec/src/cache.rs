//! The result cache: a middleware that memoises the results of read-only tools.
//!
//! A call is served from the cache only when all of these hold:
//! - the tool is declared read-only ([`ToolMeta::is_read_only`](toolbelt_core::ToolMeta));
//! - the tool supplies a fingerprint for the call
//!   ([`Tool::cache_fingerprint`](toolbelt_core::Tool::cache_fingerprint); `None`, the
//!   default, means never cached);
//! - an entry with the same tool name, the same canonical arguments (the repaired argument
//!   text parsed as JSON, object keys sorted, so `{"b":1,"a":2}` and `{"a":2,"b":1}` are one
//!   key) and the same fingerprint was stored less than the TTL ago.
//!
//! Only successful results are stored: an error, or an output with `is_error`, is never
//! cached. A result is stored only if the fingerprint taken again after the call equals the
//! one taken before it, so a file that changed while it was being read is not remembered
//! under its old state.
//!
//! The cache is bounded by entries and by bytes (an estimate of the output's size: its texts,
//! blocks and structured JSON, plus the key); the least recently used entries go first, and
//! an output larger than the byte bound is not stored. Every output that passed through the
//! cache carries `"toolbelt/cache": "hit"` or `"miss"` in its
//! [`meta`](toolbelt_core::ToolOutput::meta).
//!
//! How fresh a hit is depends on the tool's fingerprint: the built-in Read's names the file's
//! identity, size and times (and its content, while a same-tick rewrite could hide behind an
//! unchanged time); Grep's and Glob's name a counter of the tool set's own writes and the
//! searched directory, so a change made by another process below it shows after the TTL.
//! Add the cache first (outermost), so a hit skips the other middleware too:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use toolbelt_exec::{Executor, Registry, ResultCache, Timeout};
//!
//! let cache = ResultCache::new().max_entries(512).ttl(Duration::from_secs(30));
//! let executor = Executor::builder(Arc::new(Registry::new()))
//!     .middleware(cache.clone())
//!     .middleware(Timeout::new(Duration::from_secs(60)))
//!     .build();
//! # drop(executor);
//! assert_eq!(cache.stats().entries, 0);
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::time::Instant;
use toolbelt_core::{ContentBlock, ToolContext, ToolError, ToolOutput};

use crate::{Middleware, Next, ToolRequest};

/// The metadata key that says whether a result came from the cache.
pub const CACHE_META_KEY: &str = "toolbelt/cache";

/// The default most entries.
const DEFAULT_MAX_ENTRIES: usize = 256;
/// The default most bytes.
const DEFAULT_MAX_BYTES: usize = 16 * 1024 * 1024;
/// The default time an entry is served.
const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// A middleware that memoises the results of read-only tools (see the module docs).
///
/// Cloning is cheap and clones share one store, so a program can keep a clone to read
/// [`ResultCache::stats`] or [`ResultCache::clear`] it.
#[derive(Clone)]
pub struct ResultCache {
    limits: Limits,
    store: Arc<Mutex<Store>>,
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    max_entries: usize,
    max_bytes: usize,
    ttl: Duration,
}

/// Counters of a [`ResultCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Calls answered from the cache.
    pub hits: u64,
    /// Cacheable calls that ran the tool.
    pub misses: u64,
    /// Entries stored now.
    pub entries: usize,
    /// Their estimated size in bytes.
    pub bytes: usize,
}

#[derive(Default)]
struct Store {
    entries: HashMap<Arc<str>, Entry>,
    /// Least recently used first: use tick to key.
    order: BTreeMap<u64, Arc<str>>,
    tick: u64,
    bytes: usize,
    hits: u64,
    misses: u64,
}

struct Entry {
    output: ToolOutput,
    size: usize,
    stored_at: Instant,
    used: u64,
}

impl Store {
    fn remove(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.order.remove(&entry.used);
            self.bytes -= entry.size;
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
}

impl Default for ResultCache {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ResultCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultCache")
            .field("limits", &self.limits)
            .field("stats", &self.stats())
            .finish()
    }
}

impl ResultCache {
    /// A cache with the default bounds: 256 entries, 16 MiB, a TTL of one minute.
    pub fn new() -> Self {
        Self {
            limits: Limits {
                max_entries: DEFAULT_MAX_ENTRIES,
                max_bytes: DEFAULT_MAX_BYTES,
                ttl: DEFAULT_TTL,
            },
            store: Arc::default(),
        }
    }

    /// Keeps at most `entries` results.
    pub fn max_entries(mut self, entries: usize) -> Self {
        self.limits.max_entries = entries;
        self
    }

    /// Keeps at most `bytes` of results (estimated); a larger result is not stored.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_bytes = bytes;
        self
    }

    /// Serves an entry for at most `ttl` after it was stored.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.limits.ttl = ttl;
        self
    }

    /// Drops every entry (the counters stay).
    pub fn clear(&self) {
        let mut store = self.lock();
        store.entries.clear();
        store.order.clear();
        store.bytes = 0;
    }

    /// Hits, misses and what is stored now.
    pub fn stats(&self) -> CacheStats {
        let store = self.lock();
        CacheStats {
            hits: store.hits,
            misses: store.misses,
            entries: store.entries.len(),
            bytes: store.bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock leaves a consistent map (no step is half done
        // across an await), so a poisoned lock is still usable.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stored output for `key`, if fresh; an expired entry is dropped.
    fn get(&self, key: &str) -> Option<ToolOutput> {
        let mut store = self.lock();
        let (stored_at, used) = {
            let entry = store.entries.get(key)?;
            (entry.stored_at, entry.used)
        };
        if stored_at.elapsed() >= self.limits.ttl {
            store.remove(key);
            return None;
        }
        let tick = store.next_tick();
        let shared = store.order.remove(&used)?;
        store.order.insert(tick, shared);
        store.hits += 1;
        let entry = store.entries.get_mut(key)?;
        entry.used = tick;
        Some(entry.output.clone())
    }

    fn put(&self, key: Arc<str>, output: &ToolOutput) {
        let size = key.len() + output_size(output);
        if size > self.limits.max_bytes || self.limits.max_entries == 0 {
            return;
        }
        let mut store = self.lock();
        store.remove(&key);
        while store.entries.len() >= self.limits.max_entries
            || store.bytes + size > self.limits.max_bytes
        {
            let Some((_, oldest)) = store.order.pop_first() else {
                break;
            };
            if let Some(entry) = store.entries.remove(&oldest) {
                store.bytes -= entry.size;
            }
        }
        let tick = store.next_tick();
        store.order.insert(tick, key.clone());
        store.bytes += size;
        store.entries.insert(
            key,
            Entry {
                output: output.clone(),
                size,
                stored_at: Instant::now(),
                used: tick,
            },
        );
    }
}

#[async_trait]
impl Middleware for ResultCache {
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        if !req.tool.declaration().meta.is_read_only() {
            return next.run(ctx, req).await;
        }
        let args: Value = match req.arguments.trim() {
            "" => Value::Object(Default::default()),
            text => match serde_json::from_str(text) {
                Ok(args) => args,
                Err(_) => return next.run(ctx, req).await,
            },
        };
        let tool = req.tool.clone();
        let Some(before) = tool.cache_fingerprint(&ctx, &args).await else {
            return next.run(ctx, req).await;
        };
        let key = cache_key(tool.name(), &args, &before);
        if let Some(output) = self.get(&key) {
            return Ok(mark(output, "hit"));
        }
        self.lock().misses += 1;
        let output = next.run(ctx.clone(), req).await?;
        if !output.is_error && tool.cache_fingerprint(&ctx, &args).await.as_ref() == Some(&before) {
            self.put(key, &output);
        }
        Ok(mark(output, "miss"))
    }
}

/// The key of one call: name, canonical arguments and fingerprint, each length-prefixed so
/// no two different triples make the same text.
fn cache_key(name: &str, args: &Value, fingerprint: &str) -> Arc<str> {
    let mut canonical = String::new();
    toolbelt_core::write_canonical_json(&mut canonical, args);
    format!(
        "{}:{name}{}:{canonical}{}:{fingerprint}",
        name.len(),
        canonical.len(),
        fingerprint.len()
    )
    .into()
}

/// The estimated size of an output in memory: its texts, blocks and structured JSON.
fn output_size(output: &ToolOutput) -> usize {
    let blocks: usize = output
        .blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Image { data, mime_type } | ContentBlock::Audio { data, mime_type } => {
                data.len() + mime_type.len()
            }
            other => other.summary().len(),
        })
        .sum();
    let json_len = |v: &Value| serde_json::to_vec(v).map_or(0, |bytes| bytes.len());
    output.for_llm.text_len()
        + output.for_user.as_ref().map_or(0, |p| p.text_len())
        + blocks
        + output.structured.as_ref().map_or(0, json_len)
        + output
            .meta
            .as_ref()
            .map_or(0, |m| json_len(&Value::Object(m.clone())))
}

/// `output` with its cache status in its metadata.
fn mark(mut output: ToolOutput, status: &str) -> ToolOutput {
    output.meta.get_or_insert_with(Default::default).insert(
        CACHE_META_KEY.to_string(),
        Value::String(status.to_string()),
    );
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a: Value = serde_json::from_str(r#"{"b":[{"y":1,"x":2}],"a":"\"q\""}"#).unwrap();
        let mut out = String::new();
        toolbelt_core::write_canonical_json(&mut out, &a);
        assert_eq!(out, r#"{"a":"\"q\"","b":[{"x":2,"y":1}]}"#);
    }

    #[test]
    fn canonical_json_of_deep_nesting_does_not_overflow() {
        let mut value = Value::Null;
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let mut out = String::new();
        toolbelt_core::write_canonical_json(&mut out, &value);
        assert_eq!(out.len(), 100_000 * 2 + 4);
        // Dropping a deep Value recurses in serde_json; leak it instead of overflowing.
        std::mem::forget(value);
    }
}
