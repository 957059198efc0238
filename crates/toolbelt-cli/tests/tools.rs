//! `toolbelt tools list` and `toolbelt tools call`, run as a user runs them: the built binary
//! on a real temp directory, with exit codes and stderr checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn toolbelt(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command.current_dir(dir);
    command
}

fn run(dir: &Path, args: &[&str]) -> Output {
    toolbelt(dir).args(args).output().expect("run toolbelt")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "fn beta() {}\n").unwrap();
    dir
}

#[test]
fn list_names_every_built_in_tool_with_a_one_line_description() {
    let dir = project();
    let out = run(dir.path(), &["tools", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    for tool in [
        "Bash",
        "Edit",
        "Glob",
        "Grep",
        "NotebookEdit",
        "Read",
        "Write",
    ] {
        assert!(names.contains(&tool), "{tool} missing from:\n{text}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "the listing is sorted by name");
}

#[test]
fn read_only_listing_leaves_out_the_tools_that_change_files() {
    let dir = project();
    // Without a sandbox (--sandbox off), read-only also leaves the shell tools out.
    let out = run(
        dir.path(),
        &["tools", "list", "--read-only", "--sandbox", "off", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"Read") && names.contains(&"Grep"));
    for hidden in [
        "Write",
        "Edit",
        "NotebookEdit",
        "Bash",
        "TaskOutput",
        "TaskStop",
    ] {
        assert!(
            !names.contains(&hidden),
            "{hidden} listed in read-only mode"
        );
    }
    let read = listing
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Read")
        .unwrap();
    assert_eq!(read["input_schema"]["type"], "object");
    assert!(read["input_schema"]["properties"]["file_path"]["description"].is_string());
    assert!(read["description"].as_str().unwrap().len() > 20);
}

#[test]
fn call_runs_a_tool_and_prints_what_the_model_reads() {
    let dir = project();
    let out = run(
        dir.path(),
        &["tools", "call", "Read", r#"{"file_path":"notes.txt"}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "     1\talpha\n     2\tbeta\n");
}

#[test]
fn call_takes_the_base_directory_from_dir() {
    let dir = project();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = run(
        elsewhere.path(),
        &[
            "tools",
            "call",
            "Grep",
            r#"{"pattern":"beta","output_mode":"content"}"#,
            "--dir",
            dir.path().to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "notes.txt:2:beta\nsrc/lib.rs:1:fn beta() {}\n"
    );
}

#[test]
fn an_unknown_tool_exits_2_with_suggestions_on_stderr() {
    let dir = project();
    let out = run(dir.path(), &["tools", "call", "Reed", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains(r#"did you mean "Read"?"#),
        "{}",
        stderr(&out)
    );
}

#[test]
fn arguments_that_break_the_schema_exit_2_naming_the_field() {
    let dir = project();
    let out = run(dir.path(), &["tools", "call", "Read", r#"{"file_path":7}"#]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/file_path"), "{}", stderr(&out));

    let out = run(
        dir.path(),
        &["tools", "call", "Read", "{file_path: 'notes.txt'"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "malformed JSON is refused by default"
    );
}

#[test]
fn repair_json_accepts_the_json_models_get_wrong() {
    let dir = project();
    let out = run(
        dir.path(),
        &[
            "tools",
            "call",
            "Read",
            "{file_path: 'notes.txt',}",
            "--repair-json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("alpha"));
}

#[test]
fn a_result_level_failure_exits_1_with_the_message_on_stderr() {
    let dir = project();
    let out = run(
        dir.path(),
        &["tools", "call", "Read", r#"{"file_path":"../outside.txt"}"#],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("path is outside the base directory"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_failing_command_is_a_result_not_a_failure() {
    let dir = project();
    let out = run(
        dir.path(),
        &["tools", "call", "Bash", r#"{"command":"echo out; exit 3"}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("out") && text.contains('3'), "{text}");
}

#[test]
fn each_call_is_a_fresh_session_unless_a_session_file_keeps_the_reads() {
    let dir = project();
    let edit = r#"{"file_path":"notes.txt","old_string":"beta","new_string":"gamma"}"#;

    let out = run(dir.path(), &["tools", "call", "Edit", edit]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an Edit without a Read is refused"
    );
    assert!(stderr(&out).contains("Read it first"), "{}", stderr(&out));
    // Separate calls are separate sessions: the message says how to share one.
    assert!(
        stderr(&out).contains("pass the same --session FILE to both calls"),
        "{}",
        stderr(&out)
    );

    let session = dir.path().join("session.json");
    let session = session.to_str().unwrap();
    let read = r#"{"file_path":"notes.txt"}"#;
    let out = run(
        dir.path(),
        &["tools", "call", "Read", read, "--session", session],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(
        dir.path(),
        &[
            "tools",
            "call",
            "Edit",
            edit,
            "--session",
            session,
            "--user-view",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("+gamma"), "the user view is the diff");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
}

#[test]
fn json_output_carries_the_error_flag_and_both_views() {
    let dir = project();
    let out = run(
        dir.path(),
        &[
            "tools",
            "call",
            "Read",
            r#"{"file_path":"notes.txt"}"#,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["is_error"], false);
    assert_eq!(record["content"], "     1\talpha\n     2\tbeta\n");
    assert!(record["user_content"].is_string());
}

#[test]
fn a_missing_base_directory_is_a_usage_error() {
    let dir = project();
    let out = run(dir.path(), &["tools", "list", "--dir", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such/dir"), "{}", stderr(&out));
}

/// The MCP servers of an `mcpServers` file join the built-in tools.
#[test]
fn tools_of_configured_mcp_servers_are_listed_and_called() {
    let dir = project();
    let entry = workspace()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "the npm peer is missing; run `bash .ci/install-peers`"
    );
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {"everything": {
            "command": "node", "args": [entry, "stdio"]}}})
        .to_string(),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let out = run(dir.path(), &["tools", "list", "--mcp-config", config]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Each line says where the tool comes from: the server's name or builtin.
    let column = |line: &str| line.split_whitespace().nth(1).map(str::to_string);
    let listing = stdout(&out);
    let echo = listing
        .lines()
        .find(|l| l.starts_with("echo "))
        .expect(&listing);
    assert_eq!(column(echo).as_deref(), Some("everything"), "{listing}");
    let read = listing
        .lines()
        .find(|l| l.starts_with("Read "))
        .expect(&listing);
    assert_eq!(column(read).as_deref(), Some("builtin"), "{listing}");
    let out = run(
        dir.path(),
        &["tools", "list", "--mcp-config", config, "--json"],
    );
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let source = |name: &str| {
        listing
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["source"].clone())
    };
    assert_eq!(source("echo"), Some(serde_json::json!("everything")));
    assert_eq!(source("Grep"), Some(serde_json::json!("builtin")));

    let out = run(
        dir.path(),
        &[
            "tools",
            "call",
            "echo",
            r#"{"message":"through the executor"}"#,
            "--mcp-config",
            config,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("through the executor"),
        "{}",
        stdout(&out)
    );
}

/// server-everything registers some tools only for a client that declares elicitation,
/// sampling or roots, which `tools list` does not: each is named on stderr with what it needs.
#[test]
fn tools_offered_only_to_clients_declaring_a_capability_are_noted_with_the_reason() {
    let dir = project();
    let entry = workspace()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "the npm peer is missing; run `bash .ci/install-peers`"
    );
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {"everything": {
            "command": "node", "args": [entry, "stdio"]}}})
        .to_string(),
    )
    .unwrap();
    let out = run(
        dir.path(),
        &["tools", "list", "--mcp-config", config.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing = stdout(&out);
    let listed = |name: &str| listing.lines().any(|l| l.starts_with(&format!("{name} ")));
    assert!(listed("echo"), "{listing}");
    let notes = stderr(&out);
    assert!(
        notes.contains("note: server \"everything\" offers these tools only to a client"),
        "{notes}"
    );
    for (tool, needs) in [
        ("trigger-elicitation-request", "elicitation"),
        ("trigger-url-elicitation", "elicitation"),
        ("trigger-sampling-request", "sampling"),
        ("get-roots-list", "roots"),
    ] {
        assert!(
            !listed(tool),
            "{tool} is not offered to this client:\n{listing}"
        );
        assert!(
            notes.contains(&format!("note:   {tool} (needs {needs})")),
            "{tool} noted as needing {needs}:\n{notes}"
        );
    }
    // A tool that is listed gets no note.
    assert!(!notes.contains("  echo ("), "{notes}");
}

/// SIGTERM to the command cancels the running Bash call: its whole process group is killed,
/// nothing it started is left running.
#[test]
fn terminating_a_call_kills_the_commands_it_started() {
    let dir = project();
    let pid_file = dir.path().join("sleeper.pid");
    let command = format!(
        r#"{{"command":"sleep 300 & echo $! > {}; wait"}}"#,
        pid_file.display()
    );
    let mut child = toolbelt(dir.path())
        .args(["tools", "call", "Bash", &command])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sleeper = wait_for_pid(&pid_file);
    assert!(alive(sleeper), "the grandchild started");

    // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(
        toolbelt_testkit::wait_until_gone(sleeper as u32, Duration::from_secs(10)),
        "sleep {sleeper} outlived the command"
    );
}

fn wait_for_pid(path: &Path) -> i32 {
    let pids =
        toolbelt_testkit::eventually("the command's pid file", Duration::from_secs(20), || {
            toolbelt_testkit::pids_in(path, 1)
        });
    pids[0] as i32
}

/// Whether `pid` is a live process (a zombie counts as gone: it no longer runs).
fn alive(pid: i32) -> bool {
    toolbelt_testkit::is_running(pid as u32)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn a_tool_left_out_by_read_only_says_so_instead_of_unknown() {
    let dir = project();
    let write = r#"{"file_path":"new.txt","content":"x"}"#;
    let out = run(
        dir.path(),
        &["tools", "call", "Write", write, "--read-only"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("Write is not offered with --read-only") && !err.contains("unknown tool"),
        "{err}"
    );
    assert!(!dir.path().join("new.txt").exists());
    // A name no mode offers is still unknown, with suggestions.
    let out = run(
        dir.path(),
        &["tools", "call", "Wirte", write, "--read-only"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown tool"), "{}", stderr(&out));
}
