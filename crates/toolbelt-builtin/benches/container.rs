//! The container sandbox's cost next to the Landlock one, in one run: `Bash {"command":
//! "true"}` through a whole tool set in `workspace-write` (Landlock + seccomp) and in
//! `container` (bubblewrap), in alternating pairs so machine load hits both sides alike, and
//! the cost of creating each tool set (the container's includes its trial container).
//! Printed medians, not criterion: the difference within a pair is what matters.
//!
//! Rerun: `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-builtin --bench container`
//! (needs bubblewrap: `apt-get install bubblewrap`).

use std::path::Path;
use std::time::Instant;

use toolbelt_builtin::shell::SandboxMode;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{DynTool, ToolContext};

const PAIRS: usize = 200;
const CREATIONS: usize = 20;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn open(base: &Path, mode: SandboxMode) -> BuiltinToolSet {
    BuiltinToolSet::new(BuiltinOptions::new(base).with_sandbox(mode))
        .unwrap_or_else(|e| panic!("the {mode} sandbox must work here: {e}"))
}

fn bash(set: &BuiltinToolSet) -> DynTool {
    set.tool_list()
        .iter()
        .find(|t| t.name() == "Bash")
        .expect("Bash is offered")
        .clone()
}

async fn call_ms(bash: &DynTool) -> f64 {
    let start = Instant::now();
    let out = bash
        .call(ToolContext::new(), r#"{"command":"true"}"#)
        .await
        .expect("Bash runs");
    assert!(!out.is_error, "{}", out.llm_text());
    assert!(!out.llm_text().contains("Killed"), "{}", out.llm_text());
    start.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let base = tempfile::tempdir().expect("a temp dir");
    let modes = [SandboxMode::WorkspaceWrite, SandboxMode::Container];

    let mut creation = [Vec::new(), Vec::new()];
    for i in 0..CREATIONS {
        for turn in 0..modes.len() {
            // Alternate which mode goes first.
            let slot = if i % 2 == 0 { turn } else { 1 - turn };
            let start = Instant::now();
            drop(open(base.path(), modes[slot]));
            creation[slot].push(start.elapsed().as_secs_f64() * 1e3);
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (landlock, container, differences) = runtime.block_on(async {
        let landlock_set = open(base.path(), SandboxMode::WorkspaceWrite);
        let container_set = open(base.path(), SandboxMode::Container);
        let (landlock_bash, container_bash) = (bash(&landlock_set), bash(&container_set));
        for _ in 0..10 {
            call_ms(&landlock_bash).await;
            call_ms(&container_bash).await;
        }
        let (mut landlock, mut container, mut differences) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..PAIRS {
            let (l, c) = if i % 2 == 0 {
                let l = call_ms(&landlock_bash).await;
                (l, call_ms(&container_bash).await)
            } else {
                let c = call_ms(&container_bash).await;
                (call_ms(&landlock_bash).await, c)
            };
            landlock.push(l);
            container.push(c);
            differences.push(c - l);
        }
        (landlock, container, differences)
    });
    let (mut landlock, mut container, mut differences) = (landlock, container, differences);
    println!(
        "container/create ({CREATIONS} each): workspace-write median {:.3} ms, container median \
         {:.3} ms",
        median(&mut creation[0]),
        median(&mut creation[1])
    );
    println!(
        "container/bash_true ({PAIRS} pairs): workspace-write median {:.3} ms, container \
         median {:.3} ms, median per-pair extra {:.3} ms",
        median(&mut landlock),
        median(&mut container),
        median(&mut differences)
    );
}
