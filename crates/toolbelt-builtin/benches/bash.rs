//! The Bash tool's overhead: `Bash {"command": "true"}` against spawning `bash -c true`
//! directly with `tokio::process` (stdin closed, stdout and stderr piped, in the same
//! directory), on a two-worker tokio runtime.
//!
//! - `tokio_process_bash_c_true`: the direct spawn.
//! - `process_backend_true`: the tool's process backend alone (process group, one pipe for
//!   both streams read to the end, wait, check for leftovers in the group).
//! - `process_backend_absolute_bash_true`: the same with the shell given as an absolute path
//!   (with `PATH` in a replaced environment and a bare program name, the standard library
//!   cannot use `posix_spawn` and falls back to fork and exec).
//! - `bash_tool_true`: the whole tool call (argument decoding, environment, policy check,
//!   output capture and cap, result formatting).
//! - After those, a paired report (for the default containment, then for each containment
//!   forced, and with the workspace-write sandbox) (printed, not a criterion measurement): 400 pairs of a
//!   direct spawn and a tool call back to back, alternating which goes first, and the median of
//!   the per-pair differences. Load from other processes hits both sides of a pair alike, so
//!   this number is steadier than the difference of the two criterion means on a busy
//!   machine. (The difference can be negative in a pair, which criterion cannot measure.)
//!
//! Rerun: `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-builtin --bench bash`

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use tokio::io::AsyncReadExt;
use toolbelt_builtin::shell::{
    Containment, LandlockSandbox, LocalProcessBackend, OutputTarget, ProcessBackend,
    ProcessRequest, SandboxMode, ShellConfig, ShellTools,
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
        workspace_roots: Vec::new(),
        temp_dir: None,
    };
    let mut process = backend.spawn(request).await.expect("bash starts");
    let mut output = process.take_output().expect("a pipe");
    let mut sink = Vec::new();
    output.read_to_end(&mut sink).await.expect("output");
    let outcome = process.wait().await.expect("bash ends");
    process
        .kill_leftovers(Duration::from_secs(2))
        .await
        .expect("nothing left");
    assert_eq!(outcome.code, Some(0));
}

/// The absolute path of `bash` on `PATH`.
fn which_bash() -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("bash"))
        .find(|candidate| candidate.is_file())
        .expect("bash on PATH")
}

async fn tool_call(bash: &DynTool) {
    let out = bash
        .call(ToolContext::new(), r#"{"command":"true"}"#)
        .await
        .expect("Bash runs");
    assert!(!out.is_error);
}

/// Runs `pairs` alternating pairs and prints the medians (see the module doc).
async fn paired_report(label: &str, bash: &DynTool, base: &Path, pairs: usize) {
    let (mut direct, mut tool, mut differences) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let time_direct = async {
            let start = Instant::now();
            direct_spawn(base).await;
            start.elapsed().as_secs_f64() * 1e3
        };
        let time_tool = async {
            let start = Instant::now();
            tool_call(bash).await;
            start.elapsed().as_secs_f64() * 1e3
        };
        let (d, t) = if i % 2 == 0 {
            let d = time_direct.await;
            (d, time_tool.await)
        } else {
            let t = time_tool.await;
            (time_direct.await, t)
        };
        direct.push(d);
        tool.push(t);
        differences.push(t - d);
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!(
        "bash_true/paired {label} ({pairs} pairs): direct median {:.3} ms, tool median \
         {:.3} ms, median per-pair overhead {:.3} ms",
        median(&mut direct),
        median(&mut tool),
        median(&mut differences)
    );
}

fn bash_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let shell = ShellTools::new(ShellConfig::new(dir.path())).expect("shell tools");
    let bash = bash_of(&shell);
    let base = shell.base_dir().to_path_buf();
    let backend = LocalProcessBackend::new();

    let mut group = c.benchmark_group("bash_true");
    group.bench_function("tokio_process_bash_c_true", |b| {
        b.to_async(&runtime).iter(|| direct_spawn(&base))
    });
    group.bench_function("process_backend_true", |b| {
        b.to_async(&runtime).iter(|| backend_run(&backend, &base))
    });
    let bash_path = which_bash();
    let absolute = LocalProcessBackend::new().with_shell(&bash_path);
    group.bench_function("process_backend_absolute_bash_true", |b| {
        b.to_async(&runtime).iter(|| backend_run(&absolute, &base))
    });
    group.bench_function("bash_tool_true", |b| {
        b.to_async(&runtime).iter(|| tool_call(&bash))
    });
    group.finish();
    println!(
        "containment in effect (auto): {:?}",
        backend.effective_containment()
    );
    runtime.block_on(paired_report("auto", &bash, &base, 400));
    runtime.block_on(shell.close());
    let configurations = [
        ("cgroup", Containment::Cgroup, None),
        ("subreaper", Containment::Subreaper, None),
        (
            "cgroup+workspace-write",
            Containment::Cgroup,
            Some(SandboxMode::WorkspaceWrite),
        ),
    ];
    for (label, containment, mode) in configurations {
        let mut config = ShellConfig::new(dir.path()).containment(containment);
        if let Some(mode) = mode {
            let sandbox = LandlockSandbox::new(mode).expect("a Landlock sandbox");
            config = config.sandbox(Arc::new(sandbox));
        }
        let shell = ShellTools::new(config).expect("shell tools");
        runtime.block_on(paired_report(label, &bash_of(&shell), &base, 400));
        runtime.block_on(shell.close());
    }
}

fn bash_of(shell: &ShellTools) -> DynTool {
    shell
        .tools()
        .into_iter()
        .find(|t| t.name() == "Bash")
        .expect("the Bash tool")
}

criterion_group!(benches, bash_overhead);
criterion_main!(benches);
