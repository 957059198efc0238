//! The result cache middleware: hits, TTL, LRU bounds by entries and bytes, errors never
//! cached, the cache status in the result's metadata.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolbelt_core::{Declaration, DynTool, Tool, ToolContext, ToolError, ToolOutput, async_trait};
use toolbelt_exec::{CACHE_META_KEY, Executor, Registry, ResultCache};

/// A tool whose fingerprint the test sets, that counts its calls and answers
/// `"<args.text> #<call number>"`, padded to `args.pad` bytes. `args.fail` makes it fail
/// with an error, `args.soft` with an `is_error` output.
struct Probe {
    declaration: Declaration,
    calls: AtomicUsize,
    fingerprint: Mutex<Option<String>>,
    /// A fingerprint to switch to while the call runs (a file changing while it is read).
    during_call: Mutex<Option<String>>,
}

impl Probe {
    fn new(name: &str, read_only: bool) -> Arc<Self> {
        let mut declaration = Declaration::new(name, "test probe").unwrap();
        if read_only {
            declaration = declaration.read_only().idempotent();
        }
        Arc::new(Self {
            declaration,
            calls: AtomicUsize::new(0),
            fingerprint: Mutex::new(Some("v1".into())),
            during_call: Mutex::new(None),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn set_fingerprint(&self, value: Option<&str>) {
        *self.fingerprint.lock().unwrap() = value.map(str::to_string);
    }
}

#[async_trait]
impl Tool for Probe {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, _ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(next) = self.during_call.lock().unwrap().take() {
            *self.fingerprint.lock().unwrap() = Some(next);
        }
        let args: Value = serde_json::from_str(args).unwrap();
        if args["fail"] == json!(true) {
            return Err(ToolError::failed("it broke"));
        }
        if args["soft"] == json!(true) {
            return Ok(ToolOutput::error("soft failure"));
        }
        let mut text = format!("{} #{n}", args["text"].as_str().unwrap_or(""));
        if let Some(pad) = args["pad"].as_u64() {
            while text.len() < pad as usize {
                text.push('.');
            }
        }
        Ok(ToolOutput::text(text))
    }

    async fn cache_fingerprint(&self, _ctx: &ToolContext, _args: &Value) -> Option<String> {
        self.fingerprint.lock().unwrap().clone()
    }
}

fn executor(cache: &ResultCache, tools: &[Arc<Probe>]) -> Executor {
    let registry = Arc::new(Registry::new());
    for tool in tools {
        registry.register(tool.clone() as DynTool).unwrap();
    }
    Executor::builder(registry)
        .middleware(cache.clone())
        .build()
}

async fn call(executor: &Executor, name: &str, args: &str) -> Result<ToolOutput, ToolError> {
    executor.invoke_tool(ToolContext::new(), name, args).await
}

fn status(output: &ToolOutput) -> Option<&str> {
    output.meta.as_ref()?.get(CACHE_META_KEY)?.as_str()
}

#[tokio::test]
async fn a_repeated_call_is_a_hit_whatever_the_key_order() {
    let probe = Probe::new("lookup", true);
    let cache = ResultCache::new();
    let executor = executor(&cache, std::slice::from_ref(&probe));

    let first = call(&executor, "lookup", r#"{"text":"a","pad":1}"#)
        .await
        .unwrap();
    assert_eq!(status(&first), Some("miss"));
    let second = call(&executor, "lookup", r#"{"pad":1, "text":"a"}"#)
        .await
        .unwrap();
    assert_eq!(status(&second), Some("hit"));
    assert_eq!(
        second.llm_text(),
        "a #1",
        "the stored result, not a new call"
    );
    assert_eq!(probe.calls(), 1);

    let other = call(&executor, "lookup", r#"{"text":"b"}"#).await.unwrap();
    assert_eq!(
        status(&other),
        Some("miss"),
        "other arguments are another key"
    );
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (1, 2, 2));
}

#[tokio::test]
async fn a_changed_fingerprint_is_a_miss() {
    let probe = Probe::new("lookup", true);
    let cache = ResultCache::new();
    let executor = executor(&cache, std::slice::from_ref(&probe));

    call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    probe.set_fingerprint(Some("v2"));
    let after = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(status(&after), Some("miss"));
    assert_eq!(after.llm_text(), "a #2");

    probe.set_fingerprint(None);
    let uncacheable = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(
        status(&uncacheable),
        None,
        "no fingerprint: the cache stays out"
    );
    assert_eq!(probe.calls(), 3);
}

#[tokio::test]
async fn a_result_whose_fingerprint_changed_during_the_call_is_not_stored() {
    let probe = Probe::new("lookup", true);
    *probe.during_call.lock().unwrap() = Some("v2".into());
    let cache = ResultCache::new();
    let executor = executor(&cache, std::slice::from_ref(&probe));

    call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(cache.stats().entries, 0);
    let again = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(status(&again), Some("miss"));
    assert_eq!(probe.calls(), 2);
}

#[tokio::test]
async fn tools_not_declared_read_only_are_never_cached() {
    let probe = Probe::new("mutate", false);
    let cache = ResultCache::new();
    let executor = executor(&cache, std::slice::from_ref(&probe));

    for _ in 0..2 {
        let out = call(&executor, "mutate", r#"{"text":"a"}"#).await.unwrap();
        assert_eq!(status(&out), None);
    }
    assert_eq!(probe.calls(), 2);
    assert_eq!(cache.stats(), Default::default());
}

#[tokio::test]
async fn errors_and_error_results_are_never_cached() {
    let probe = Probe::new("lookup", true);
    let cache = ResultCache::new();
    let executor = executor(&cache, std::slice::from_ref(&probe));

    for _ in 0..2 {
        let err = call(&executor, "lookup", r#"{"fail":true}"#)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("it broke"), "{err}");
        let soft = call(&executor, "lookup", r#"{"soft":true}"#).await.unwrap();
        assert!(soft.is_error);
        assert_eq!(status(&soft), Some("miss"));
    }
    assert_eq!(probe.calls(), 4);
    assert_eq!(cache.stats().entries, 0);
}

#[tokio::test(start_paused = true)]
async fn an_entry_older_than_the_ttl_is_a_miss() {
    let probe = Probe::new("lookup", true);
    let cache = ResultCache::new().ttl(Duration::from_secs(10));
    let executor = executor(&cache, std::slice::from_ref(&probe));

    call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    tokio::time::advance(Duration::from_secs(9)).await;
    let young = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(status(&young), Some("hit"));
    tokio::time::advance(Duration::from_secs(2)).await;
    let old = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(status(&old), Some("miss"));
    assert_eq!(old.llm_text(), "a #2");
}

#[tokio::test]
async fn the_least_recently_used_entry_goes_when_entries_are_full() {
    let probe = Probe::new("lookup", true);
    let cache = ResultCache::new().max_entries(2);
    let executor = executor(&cache, std::slice::from_ref(&probe));

    call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    call(&executor, "lookup", r#"{"text":"b"}"#).await.unwrap();
    // Using "a" makes "b" the least recently used.
    let a = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(status(&a), Some("hit"));
    call(&executor, "lookup", r#"{"text":"c"}"#).await.unwrap();
    assert_eq!(cache.stats().entries, 2);

    let a = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(status(&a), Some("hit"), "a was used recently and stays");
    let b = call(&executor, "lookup", r#"{"text":"b"}"#).await.unwrap();
    assert_eq!(status(&b), Some("miss"), "b was evicted");
}

#[tokio::test]
async fn the_byte_bound_evicts_and_refuses_what_cannot_fit() {
    let probe = Probe::new("lookup", true);
    let cache = ResultCache::new().max_bytes(2_500);
    let executor = executor(&cache, std::slice::from_ref(&probe));

    for text in ["a", "b", "c"] {
        let args = format!(r#"{{"text":"{text}","pad":1000}}"#);
        call(&executor, "lookup", &args).await.unwrap();
    }
    let stats = cache.stats();
    assert_eq!(
        stats.entries, 2,
        "two 1000-byte results fit in 2500 bytes, three do not"
    );
    assert!(stats.bytes <= 2_500, "{stats:?}");
    let a = call(&executor, "lookup", r#"{"text":"a","pad":1000}"#)
        .await
        .unwrap();
    assert_eq!(status(&a), Some("miss"), "the oldest went");

    let huge = call(&executor, "lookup", r#"{"text":"h","pad":5000}"#)
        .await
        .unwrap();
    assert_eq!(status(&huge), Some("miss"));
    assert!(cache.stats().bytes <= 2_500);
    let huge = call(&executor, "lookup", r#"{"text":"h","pad":5000}"#)
        .await
        .unwrap();
    assert_eq!(
        status(&huge),
        Some("miss"),
        "larger than the bound: never stored"
    );
}

#[tokio::test]
async fn clear_drops_every_entry() {
    let probe = Probe::new("lookup", true);
    let cache = ResultCache::new();
    let executor = executor(&cache, std::slice::from_ref(&probe));
    call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    cache.clear();
    let again = call(&executor, "lookup", r#"{"text":"a"}"#).await.unwrap();
    assert_eq!(status(&again), Some("miss"));
}
