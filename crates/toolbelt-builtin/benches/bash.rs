//! The Bash tool's overhead: `Bash {"command": "true"}` against spawning `bash -c true`
//! directly with `tokio::process` (stdin closed, stdout and stderr piped, in the same
//! directory), on a two-worker tokio runtime.
//!
//! - `tokio_process_bash_c_true`: the direct spawn.
//! - `process_backend_true`: the tool's process backend alone (process group, one pipe for
//!   both streams read to the end, wait, check for leftovers in the group).
//! - `bash_tool_true`: the whole tool call (argument decoding, environment, policy check,
//!   output capture and cap, result formatting).
//! - `paired_overhead`: each iteration runs the direct spawn and the tool call back to back
//!   (alternating which goes first) and counts only the tool's extra time, so load from other
//!   processes on the machine hits both sides alike and mostly cancels out.
//!
//! Rerun: `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-builtin --bench bash`

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use tokio::io::AsyncReadExt;
use toolbelt_builtin::shell::{
    LocalProcessBackend, OutputTarget, ProcessBackend, ProcessRequest, ShellConfig, ShellTools,
};
use toolbelt_core::{DynTool, ToolContext};

async fn direct_spawn(base: &Path) {
    let output = tokio::process::Command::new("bash")
        .arg("-c")
        .arg("true")
        .current_dir(base)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("bash runs");
    assert!(output.status.success());
}

async fn backend_run(backend: &LocalProcessBackend, base: &Path) {
    let request = ProcessRequest {
        command: "true".to_string(),
        cwd: base.to_path_buf(),
        env: std::env::vars_os().collect(),
        output: OutputTarget::Pipe,
        writable_roots: Vec::new(),
    };
    let mut process = backend.spawn(request).await.expect("bash starts");
    let mut output = process.take_output().expect("a pipe");
    let mut sink = Vec::new();
    output.read_to_end(&mut sink).await.expect("output");
    let outcome = process.wait().await.expect("bash ends");
    process.kill_leftovers(Duration::from_secs(2)).await;
    assert_eq!(outcome.code, Some(0));
}

async fn tool_call(bash: &DynTool) {
    let out = bash
        .call(ToolContext::new(), r#"{"command":"true"}"#)
        .await
        .expect("Bash runs");
    assert!(!out.is_error);
}

async fn paired(bash: &DynTool, base: &Path, iters: u64) -> Duration {
    let (mut tool, mut direct) = (Duration::ZERO, Duration::ZERO);
    for i in 0..iters {
        let timed_direct = async {
            let start = Instant::now();
            direct_spawn(base).await;
            start.elapsed()
        };
        let timed_tool = async {
            let start = Instant::now();
            tool_call(bash).await;
            start.elapsed()
        };
        if i % 2 == 0 {
            direct += timed_direct.await;
            tool += timed_tool.await;
        } else {
            tool += timed_tool.await;
            direct += timed_direct.await;
        }
    }
    tool.saturating_sub(direct)
}

fn bash_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let shell = ShellTools::new(ShellConfig::new(dir.path())).expect("shell tools");
    let bash = shell
        .tools()
        .into_iter()
        .find(|t| t.name() == "Bash")
        .expect("the Bash tool");
    let base = shell.base_dir().to_path_buf();
    let backend = LocalProcessBackend::new();

    let mut group = c.benchmark_group("bash_true");
    group.bench_function("tokio_process_bash_c_true", |b| {
        b.to_async(&runtime).iter(|| direct_spawn(&base))
    });
    group.bench_function("process_backend_true", |b| {
        b.to_async(&runtime).iter(|| backend_run(&backend, &base))
    });
    group.bench_function("bash_tool_true", |b| {
        b.to_async(&runtime).iter(|| tool_call(&bash))
    });
    group.bench_function("paired_overhead", |b| {
        b.to_async(&runtime)
            .iter_custom(|iters| paired(&bash, &base, iters))
    });
    group.finish();
    runtime.block_on(shell.close());
}

criterion_group!(benches, bash_overhead);
criterion_main!(benches);
