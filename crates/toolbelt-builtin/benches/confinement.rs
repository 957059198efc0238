//! The cost of confinement on the tools that touch files most: Read and Grep (and Glob,
//! which shares Grep's walk), on a two-worker tokio runtime.
//!
//! - `read_10k/file_ops`: `LocalFileOps::resolve` then `read` of a 10 KB file two
//!   directories below the base (`src/module/file.rs`): the confinement path alone.
//! - `read_10k/tool`: the whole Read tool call on that file (decoding, line numbering).
//! - `grep_tree/content` and `grep_tree/files`: Grep over a source tree (content mode with
//!   the default head limit, and files_with_matches with no limit).
//! - `glob_tree/all_rs`: Glob `**/*.rs` over the same tree.
//! - `*_user_space`: the same on the user-space resolver alone (what kernels without
//!   `openat2` get): the cost of the fallback.
//!
//! The tree is `TOOLBELT_BENCH_TREE` when set, else this repository's `crates/` folder. For
//! a before/after comparison use a frozen copy so both runs search the same bytes, e.g.
//! `git archive HEAD crates | tar -x -C /tmp/corpus` and `TOOLBELT_BENCH_TREE=/tmp/corpus/crates`.
//!
//! Rerun: `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-builtin --bench confinement`

use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolbelt_builtin::confine::{Confinement, Resolver};
use toolbelt_builtin::fs::{FileOps, LocalFileOps};
use toolbelt_builtin::search::LocalSearch;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{DynTool, ToolContext};

fn tool(set: &BuiltinToolSet, name: &str) -> DynTool {
    set.tool_list()
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
        .clone()
}

/// About 10 KB of source-like text, 200 lines.
fn ten_kb_text() -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 10 * 1024 {
        text.push_str(&format!(
            "    let value_{n} = compute(\"line {n}\", {n}) + offset; // comment {n}\n"
        ));
        n += 1;
    }
    text
}

fn tree() -> PathBuf {
    match std::env::var_os("TOOLBELT_BENCH_TREE") {
        Some(tree) => PathBuf::from(tree),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    }
}

/// A read-only set on `base` whose file tools and search use only the user-space resolver.
fn user_space_set(base: &Path) -> BuiltinToolSet {
    let confinement = Confinement::with_resolver(base, Resolver::UserSpace).expect("base");
    let options = BuiltinOptions::new(base)
        .with_read_only(true)
        .with_file_ops(Arc::new(LocalFileOps::with_confinement(
            confinement.clone(),
        )))
        .with_search_backend(Arc::new(LocalSearch::with_confinement(confinement)));
    BuiltinToolSet::new(options).expect("set")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn read(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("src/module")).expect("dirs");
    std::fs::write(dir.path().join("src/module/file.rs"), ten_kb_text()).expect("file");
    let ops = LocalFileOps::new(dir.path()).expect("ops");
    let user_space_ops = LocalFileOps::with_confinement(
        Confinement::with_resolver(dir.path(), Resolver::UserSpace).expect("base"),
    );
    let set = BuiltinToolSet::new(BuiltinOptions::new(dir.path())).expect("set");
    let read_tool = tool(&set, "Read");
    let args = json!({"file_path": "src/module/file.rs"}).to_string();

    let mut group = c.benchmark_group("read_10k");
    for (name, ops) in [("file_ops", &ops), ("file_ops_user_space", &user_space_ops)] {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let path = ops.resolve("src/module/file.rs").expect("resolves");
                let contents = ops.read(&path, None).await.expect("reads");
                assert!(contents.bytes.len() >= 10 * 1024);
            })
        });
    }
    group.bench_function("tool", |b| {
        b.to_async(&rt).iter(|| async {
            let out = read_tool
                .call(ToolContext::for_call("bench"), &args)
                .await
                .expect("output");
            assert!(!out.is_error);
        })
    });
    group.finish();
}

fn search(c: &mut Criterion) {
    let rt = runtime();
    let tree = tree();
    let set = BuiltinToolSet::new(BuiltinOptions::new(&tree).with_read_only(true)).expect("set");
    let grep_tool = tool(&set, "Grep");
    let user_space_grep = tool(&user_space_set(&tree), "Grep");
    let glob_tool = tool(&set, "Glob");
    let content = json!({"pattern": "fn [a-z_]+\\(", "output_mode": "content"}).to_string();
    let files = json!({"pattern": "Result<", "head_limit": 0}).to_string();
    let glob = json!({"pattern": "**/*.rs"}).to_string();

    let mut group = c.benchmark_group("grep_tree");
    for (name, grep_tool, args) in [
        ("content", &grep_tool, &content),
        ("files", &grep_tool, &files),
        ("content_user_space", &user_space_grep, &content),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let out = grep_tool
                    .call(ToolContext::for_call("bench"), args)
                    .await
                    .expect("output");
                assert!(!out.is_error, "{}", out.llm_text());
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("glob_tree");
    group.bench_function("all_rs", |b| {
        b.to_async(&rt).iter(|| async {
            let out = glob_tool
                .call(ToolContext::for_call("bench"), &glob)
                .await
                .expect("output");
            assert!(!out.is_error, "{}", out.llm_text());
        })
    });
    group.finish();
}

criterion_group!(benches, read, search);
criterion_main!(benches);
