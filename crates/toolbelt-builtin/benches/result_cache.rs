//! The result cache on Read of a 1 MB text file, through the executor on a two-worker tokio
//! runtime:
//!
//! - `read_1mb/no_cache`: an executor without the cache (the baseline);
//! - `read_1mb/miss`: with the cache, emptied before each call (fingerprint, read, decode,
//!   number lines, fingerprint again, store);
//! - `read_1mb/hit`: with the cache, answered from it (the file's stat through the
//!   confinement, key lookup, clone of the stored output);
//! - `read_1mb/hit_young`: a hit on a file whose times count as young (its mtime is set an
//!   hour ahead, which the rule treats as young for as long as the bench runs), so its
//!   fingerprint hashes the content (BLAKE3 of 1 MB).
//!
//! Rerun: `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-builtin --bench result_cache`

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{ToolContext, ToolSet};
use toolbelt_exec::{Executor, Registry, ResultCache, ToolSetRefresh};

/// About 1 MB of source-like text, 16,000 lines.
fn one_mb_text() -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 1024 * 1024 {
        text.push_str(&format!(
            "    let value_{n} = compute(\"line {n}\", {n}) + offset;\n"
        ));
        n += 1;
    }
    text
}

fn executor(
    runtime: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    cache: Option<&ResultCache>,
) -> Executor {
    let set: Arc<dyn ToolSet> =
        Arc::new(BuiltinToolSet::new(BuiltinOptions::new(dir)).expect("tool set"));
    let registry = Arc::new(Registry::new());
    registry
        .add_tool_set(set, ToolSetRefresh::Cached)
        .expect("add");
    runtime
        .block_on(registry.refresh_tool_set(&ToolContext::new(), "builtin"))
        .expect("list");
    let builder = Executor::builder(registry);
    match cache {
        Some(cache) => builder.middleware(cache.clone()).build(),
        None => builder.build(),
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = one_mb_text();
    std::fs::write(dir.path().join("big.rs"), &text).unwrap();
    std::fs::write(dir.path().join("young.rs"), &text).unwrap();
    std::fs::File::options()
        .write(true)
        .open(dir.path().join("young.rs"))
        .and_then(|f| f.set_modified(std::time::SystemTime::now() + Duration::from_secs(3600)))
        .unwrap();
    let args = r#"{"file_path": "big.rs"}"#;
    let cache = ResultCache::new();
    let plain = executor(&runtime, dir.path(), None);
    let cached = executor(&runtime, dir.path(), Some(&cache));
    let call = |executor: &Executor, args: &str| {
        let out = runtime
            .block_on(executor.invoke_tool(ToolContext::new(), "Read", args))
            .expect("Read");
        assert!(!out.is_error, "{}", out.llm_text());
        out
    };

    let mut group = c.benchmark_group("read_1mb");
    group.bench_function("hit_young", |b| {
        let young = r#"{"file_path": "young.rs"}"#;
        call(&cached, young);
        b.iter(|| call(&cached, young))
    });
    // Let big.rs age past the two-second window, so its fingerprint is stat only.
    std::thread::sleep(Duration::from_millis(2_100));
    group.bench_function("no_cache", |b| b.iter(|| call(&plain, args)));
    group.bench_function("miss", |b| {
        b.iter(|| {
            cache.clear();
            call(&cached, args)
        })
    });
    group.bench_function("hit", |b| {
        call(&cached, args);
        b.iter(|| {
            let out = call(&cached, args);
            assert_eq!(out.meta.as_ref().unwrap()["toolbelt/cache"], "hit");
            out
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
