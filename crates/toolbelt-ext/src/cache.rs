//! [`CacheExtension`]: the executor's [`ResultCache`] as an extension.

use toolbelt_agent::Extension;
use toolbelt_exec::{DynMiddleware, ResultCache};

/// Memoises the results of read-only tools that supply a fingerprint (the built-in Read,
/// Grep and Glob do), through [`ResultCache`] added as the outermost middleware of the
/// extensions' (see [`toolbelt_agent::extension`] for where extension middleware goes).
/// Named `result-cache`.
pub struct CacheExtension {
    cache: ResultCache,
}

impl CacheExtension {
    /// This cache (share it to read its [`ResultCache::stats`]).
    pub fn new(cache: ResultCache) -> Self {
        Self { cache }
    }

    /// The cache.
    pub fn cache(&self) -> &ResultCache {
        &self.cache
    }
}

impl Extension for CacheExtension {
    fn name(&self) -> &str {
        "result-cache"
    }

    fn middleware(&self) -> Vec<DynMiddleware> {
        vec![std::sync::Arc::new(self.cache.clone())]
    }
}
