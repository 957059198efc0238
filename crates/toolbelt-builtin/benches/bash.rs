//! The Bash tool's overhead: `Bash {"command": "true"}` against spawning `bash -c true`
//! directly with `tokio::process` (stdin closed, stdout and stderr piped, in the same
//! directory), on a two-worker tokio runtime.
//!
//! Rerun: `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-builtin --bench bash`

use std::process::Stdio;

use criterion::{Criterion, criterion_group, criterion_main};
use toolbelt_builtin::shell::{ShellConfig, ShellTools};
use toolbelt_core::ToolContext;

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

    let mut group = c.benchmark_group("bash_true");
    group.bench_function("tokio_process_bash_c_true", |b| {
        b.to_async(&runtime).iter(|| async {
            let output = tokio::process::Command::new("bash")
                .arg("-c")
                .arg("true")
                .current_dir(&base)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .await
                .expect("bash runs");
            assert!(output.status.success());
        })
    });
    group.bench_function("bash_tool_true", |b| {
        b.to_async(&runtime).iter(|| async {
            let out = bash
                .call(ToolContext::new(), r#"{"command":"true"}"#)
                .await
                .expect("Bash runs");
            assert!(!out.is_error);
        })
    });
    group.finish();
    runtime.block_on(shell.close());
}

criterion_group!(benches, bash_overhead);
criterion_main!(benches);
