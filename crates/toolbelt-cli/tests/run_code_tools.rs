//! `--code-tools` (issue 32 item 5): in a scripted run the model writes one program that calls
//! Grep for it, and only what the program prints reaches the model; `tools call` the same.

use crate::run_support;

use run_support::{output, text, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// A project of 20 source files, every fourth with a TODO.
fn sources() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        let todo = if i % 4 == 0 { "// TODO: tidy\n" } else { "" };
        std::fs::write(
            dir.path().join(format!("m{i:02}.py")),
            format!("x = {i}\n{todo}"),
        )
        .unwrap();
    }
    dir
}

const PROGRAM: &str = "hits = tools.Grep(pattern='TODO', output_mode='files_with_matches')\n\
                       print(len(hits.split()), 'files with a TODO')";

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_program_calls_grep_returns_only_what_it_printed() {
    let dir = sources();
    let args = serde_json::json!({"language": "python", "code": PROGRAM}).to_string();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "execute_code", &args),
        Reply::text("Five files have a TODO."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args([
            "run",
            "How many files have a TODO?",
            "--yes",
            "--code-tools",
            "Grep",
            "--dir",
        ])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    let requests = server.requests();
    let results = run_support::tool_contents(&requests[1]);
    assert_eq!(results, ["5 files with a TODO\nExit code: 0"], "{stderr}");
    // The model was told which tools its programs may call, with their signatures.
    let declared = requests[0].body["tools"].to_string();
    assert!(declared.contains("tools.Grep(pattern: str"), "{declared}");
}

#[test]
fn tools_call_gives_programs_the_tools_named_and_no_others() {
    let dir = sources();
    let call = |extra: &[&str], code: &str| {
        let args = serde_json::json!({"language": "python", "code": code}).to_string();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolbelt"))
            .args(["tools", "call", "--dir"])
            .arg(dir.path())
            .args(extra)
            .args(["execute_code", &args])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        call(&["--code-tools", "Grep"], PROGRAM),
        "5 files with a TODO\nExit code: 0\n"
    );
    let refused = call(
        &["--code-tools", "Grep"],
        "try:\n    tools.Read(file_path='m00.py')\nexcept ToolError as e:\n    print(e)",
    );
    assert!(
        refused.contains("Read is not one of the tools this code may call (Grep)"),
        "{refused}"
    );
    let off = call(&[], PROGRAM);
    assert!(
        off.contains("NameError: name 'tools' is not defined"),
        "{off}"
    );
}
