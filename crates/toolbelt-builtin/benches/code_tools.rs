//! Code that calls tools against direct tool calls, on one task over 50 source files: "for
//! each file count its functions and TODOs; report the totals and the five longest files".
//!
//! - direct: the model calls Glob, then Read on each of the 50 files, and every result
//!   reaches it (what it would need to answer);
//! - code: the model sends one `execute_code` program that makes the same 51 calls through
//!   the executor and prints the answer; only the program's output reaches the model.
//!
//! Prints the bytes that reach the model each way (tool results, and the calls the model
//! writes: arguments or the program), the number of model round trips, and the wall time of
//! the tool work (median of 10). Rerun:
//! `cargo bench -p toolbelt-builtin --bench code_tools`

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use toolbelt_builtin::code::CodeToolAccess;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::ToolContext;
use toolbelt_exec::{Executor, Registry, ToolSetRefresh};

const PROGRAM: &str = "\
files = tools.Glob(pattern='**/*.rs').split('\\n')
stats = []
for f in files:
    text = tools.Read(file_path=f)
    stats.append((text.count('\\n'), text.count('fn '), text.count('TODO'), f))
print(len(files), 'files,', sum(s[1] for s in stats), 'functions,', sum(s[2] for s in stats), 'TODOs')
for lines, fns, todos, f in sorted(stats, reverse=True)[:5]:
    print(f, lines, 'lines')
";

/// 50 files of 40 to 89 lines each, a function every 5 lines, a TODO in every seventh file.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    for i in 0..50 {
        let mut text = String::new();
        for line in 0..40 + i {
            if line % 5 == 0 {
                text.push_str(&format!(
                    "pub fn item_{i}_{line}(input: &str) -> usize {{\n"
                ));
            } else if line % 5 == 4 {
                text.push_str("}\n");
            } else {
                text.push_str(&format!("    let value = input.len() * {line} + {i};\n"));
            }
        }
        if i % 7 == 0 {
            text.push_str("// TODO: handle empty input\n");
        }
        std::fs::write(dir.path().join(format!("src/module_{i:02}.rs")), text).unwrap();
    }
    dir
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = project();
    let set = BuiltinToolSet::new(
        BuiltinOptions::new(dir.path())
            .with_code_tools(CodeToolAccess::Only(vec!["Glob".into(), "Read".into()])),
    )
    .unwrap();
    let registry = Arc::new(Registry::new());
    registry
        .add_tool_set(Arc::new(set.clone()), ToolSetRefresh::Cached)
        .unwrap();
    let executor = Executor::new(registry);
    set.bind_tool_caller(Arc::new(executor.downgrade()));
    let call = |name: &str, args: String| {
        let executor = executor.clone();
        let name = name.to_string();
        runtime.block_on(async move {
            executor
                .invoke_tool(ToolContext::for_call("bench"), &name, &args)
                .await
                .unwrap()
                .llm_text()
        })
    };
    runtime.block_on(executor.registry().snapshot(&ToolContext::new()));

    let direct = || {
        let glob_args = json!({"pattern": "**/*.rs"}).to_string();
        let listing = call("Glob", glob_args.clone());
        let mut sent = glob_args.len();
        let mut received = listing.len();
        for file in listing.lines() {
            let args = json!({"file_path": file}).to_string();
            sent += args.len();
            received += call("Read", args).len();
        }
        (sent, received)
    };
    let code = || {
        let args = json!({"language": "python", "code": PROGRAM}).to_string();
        let out = call("execute_code", args.clone());
        (args.len(), out.len(), out)
    };

    let (direct_sent, direct_received) = direct();
    let (code_sent, code_received, answer) = code();
    let time = |f: &dyn Fn()| {
        median(
            (0..10)
                .map(|_| {
                    let start = Instant::now();
                    f();
                    start.elapsed().as_secs_f64() * 1000.0
                })
                .collect(),
        )
    };
    let direct_ms = time(&|| {
        direct();
    });
    let code_ms = time(&|| {
        code();
    });
    println!("the program's answer:\n{answer}\n");
    println!(
        "| way | model round trips | bytes the model writes | bytes of results it reads | total | tool time (median of 10) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| direct calls (Glob + 50 Read) | 51 | {direct_sent} | {direct_received} | {} | {direct_ms:.1} ms |",
        direct_sent + direct_received
    );
    println!(
        "| one execute_code program | 1 | {code_sent} | {code_received} | {} | {code_ms:.1} ms |",
        code_sent + code_received
    );
    println!(
        "\nthe model reads {:.0}× fewer result bytes, {:.0}× fewer bytes in all",
        direct_received as f64 / code_received as f64,
        (direct_sent + direct_received) as f64 / (code_sent + code_received) as f64
    );
}
