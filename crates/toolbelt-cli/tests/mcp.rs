//! `toolbelt mcp tools` and `toolbelt mcp call`, run as a user runs them: the built binary
//! against `@modelcontextprotocol/server-everything` (stdio, SSE) and a server written with
//! the Python `mcp` SDK (stdio, streamable HTTP), with exit codes and stderr checked.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `node <entry> stdio` for the npm everything server, as one `--stdio` command line.
fn everything_stdio() -> String {
    format!("node {} stdio", everything_entry().display())
}

fn everything_entry() -> PathBuf {
    let entry = workspace()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "the npm peer is missing at {}; install it with `cd tests/peers && npm ci`",
        entry.display()
    );
    entry
}

fn python_fixture() -> PathBuf {
    workspace().join("crates/toolbelt-mcp/tests/fixtures/py_server.py")
}

/// `python3 <fixture> stdio`, as one `--stdio` command line.
fn python_stdio() -> String {
    format!(
        "{} {} stdio",
        toolbelt_testkit::python(),
        python_fixture().display()
    )
}

fn toolbelt(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command.args(args).stdin(Stdio::null());
    command
}

fn run(args: &[&str]) -> Output {
    toolbelt(args).output().expect("run toolbelt")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// An HTTP MCP server child, killed and reaped when dropped.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    /// Starts the server `command(port)` builds on a free port. A port picked free can be
    /// taken by another test's server before ours binds it; ours then exits, and it is
    /// started again on another port (a connect alone would reach the other server).
    fn start(command: impl Fn(u16) -> Command) -> Self {
        for _ in 0..3 {
            let port = free_port();
            let mut child = command(port)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the server");
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
                    && toolbelt_testkit::pid_listens_on(child.id(), port)
                {
                    return Self { child, port };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // most likely the port was taken: try another
                }
                assert!(Instant::now() < deadline, "the server did not start");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("the server exited early three times (see its output by running it by hand)");
    }

    /// The Python fixture over `transport` with extra environment variables.
    fn python(transport: &str, env: &[(&str, &Path)]) -> Self {
        Self::start(|port| {
            let mut command = Command::new(toolbelt_testkit::python());
            command
                .arg(python_fixture())
                .arg(transport)
                .arg(port.to_string());
            for (name, value) in env {
                command.env(name, value);
            }
            command
        })
    }

    fn everything(transport: &str) -> Self {
        Self::start(|port| {
            let mut command = Command::new("node");
            command
                .arg(everything_entry())
                .arg(transport)
                .env("PORT", port.to_string());
            command
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn tools_lists_the_everything_server_over_stdio_as_text_and_json() {
    let stdio = everything_stdio();
    let out = run(&["mcp", "tools", "--stdio", &stdio]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for tool in ["echo", "get-sum", "get-tiny-image"] {
        assert!(names.contains(&tool), "{tool} missing from:\n{text}");
    }

    let out = run(&["mcp", "tools", "--json", "--stdio", &stdio]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let echo = listing
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .expect("echo listed");
    assert_eq!(
        echo["input_schema"]["properties"]["message"]["type"],
        "string"
    );
}

#[test]
fn call_passes_arguments_to_a_stdio_server_and_prints_its_text() {
    let out = run(&[
        "mcp",
        "call",
        "echo",
        r#"{"message":"hello from the CLI"}"#,
        "--stdio",
        &everything_stdio(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Echo: hello from the CLI");
}

#[test]
fn call_json_shows_structured_content_and_image_blocks() {
    let stdio = everything_stdio();
    let out = run(&[
        "mcp",
        "call",
        "get-structured-content",
        r#"{"location":"New York"}"#,
        "--json",
        "--stdio",
        &stdio,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let record: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(record["is_error"], false);
    assert!(record["structured"]["temperature"].is_number(), "{record}");

    let out = run(&["mcp", "call", "get-tiny-image", "--json", "--stdio", &stdio]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    let image = record["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "image")
        .expect("an image block");
    assert_eq!(image["mime_type"], "image/png");
}

#[test]
fn a_stdio_server_is_gone_when_the_command_returns() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    // The child does not inherit the CLI's environment (only the core variables), so the
    // command line sets the variable that makes the fixture log its pid.
    let command = format!(
        "env 'TOOLBELT_SESSION_LOG={}' {}",
        log.display(),
        python_stdio()
    );
    let out = toolbelt(&[
        "mcp",
        "call",
        "add",
        r#"{"a":2,"b":3}"#,
        "--stdio",
        &command,
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "5");
    let logged = std::fs::read_to_string(&log).expect("the server logged its start");
    let pid: u32 = logged
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("a pid in the log");
    assert!(
        !process_exists(pid),
        "the server {pid} outlived the command"
    );
}

#[test]
fn result_level_failures_exit_1_with_the_message_on_stderr() {
    let server = HttpServer::python("streamable-http", &[]);
    let url = server.url("/mcp");
    let out = run(&[
        "mcp",
        "call",
        "fail",
        r#"{"reason":"disk on fire"}"#,
        "--http",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("disk on fire"), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());

    // With --json the failure is in the record and the exit code still says so.
    let out = run(&[
        "mcp",
        "call",
        "fail",
        r#"{"reason":"x"}"#,
        "--json",
        "--http",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record["is_error"], true);
}

#[test]
fn unknown_tools_and_invalid_arguments_exit_2() {
    let server = HttpServer::python("streamable-http", &[]);
    let url = server.url("/mcp");
    let out = run(&["mcp", "call", "ecko", r#"{"message":"x"}"#, "--http", &url]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("unknown tool") && err.contains("echo"),
        "{err}"
    );

    // The executor checks the arguments against the tool's schema before calling.
    let out = run(&["mcp", "call", "add", r#"{"a":"two","b":1}"#, "--http", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(&["mcp", "call", "add", "{not json", "--http", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn headers_given_with_the_flag_reach_the_http_server() {
    let server = HttpServer::python("streamable-http", &[]);
    let out = run(&[
        "mcp",
        "call",
        "header",
        r#"{"name":"x-team"}"#,
        "--http",
        &server.url("/mcp"),
        "--header",
        "X-Team: blue",
        "--header",
        "X-Other:1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "blue");
}

#[test]
fn a_call_past_its_timeout_exits_1_and_the_server_sees_the_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled");
    let server = HttpServer::python("streamable-http", &[("TOOLBELT_CANCEL_MARKER", &marker)]);
    let out = run(&[
        "mcp",
        "call",
        "sleep",
        r#"{"seconds":60}"#,
        "--timeout",
        "1",
        "--http",
        &server.url("/mcp"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
    toolbelt_testkit::eventually(
        "the server seeing notifications/cancelled",
        Duration::from_secs(10),
        || (std::fs::read_to_string(&marker).ok().as_deref() == Some("cancelled")).then_some(()),
    );
}

#[test]
fn the_legacy_sse_transport_works_from_the_command_line() {
    let server = HttpServer::everything("sse");
    let out = run(&[
        "mcp",
        "call",
        "get-sum",
        r#"{"a":40,"b":2}"#,
        "--sse",
        &server.url("/sse"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("42"), "{}", stdout(&out));
}

#[test]
fn a_server_from_a_config_file_is_chosen_by_name() {
    let server = HttpServer::python("streamable-http", &[]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    let file = serde_json::json!({
        "mcpServers": {
            "py": {"type": "http", "url": server.url("/mcp"), "headers": {"X-Team": "${TEAM}"}},
            "everything": {"command": "node", "args": [everything_entry(), "stdio"]},
        }
    });
    std::fs::write(&config, file.to_string()).unwrap();
    let config = config.to_str().unwrap();

    let out = toolbelt(&[
        "mcp",
        "call",
        "header",
        r#"{"name":"x-team"}"#,
        "--config",
        config,
        "--server",
        "py",
    ])
    .env("TEAM", "green")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "green");

    let out = toolbelt(&["mcp", "tools", "--config", config, "--server", "everything"])
        .env("TEAM", "green")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("get-tiny-image"));

    // Two servers and no --server: the choice is the user's.
    let out = toolbelt(&["mcp", "tools", "--config", config])
        .env("TEAM", "green")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--server"), "{}", stderr(&out));

    // A variable the file needs but the environment lacks is named.
    let out = toolbelt(&["mcp", "tools", "--config", config, "--server", "py"])
        .env_remove("TEAM")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("TEAM"), "{}", stderr(&out));

    let out = run(&["mcp", "tools", "--config", config, "--server", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
}

#[test]
fn servers_that_cannot_be_reached_exit_2_naming_them() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = run(&["mcp", "tools", "--http", &url]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains(&url) && err.contains("refused"), "{err}");

    let out = run(&["mcp", "call", "x", "--stdio", "no-such-mcp-server --flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
}

#[test]
fn the_server_must_be_named_exactly_once() {
    let out = run(&["mcp", "tools"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&[
        "mcp",
        "tools",
        "--http",
        "http://127.0.0.1:9/mcp",
        "--sse",
        "http://127.0.0.1:9/sse",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["mcp", "tools", "--stdio", "python3 'unbalanced"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("quotes"), "{}", stderr(&out));
    let out = run(&[
        "mcp",
        "tools",
        "--stdio",
        &python_stdio(),
        "--header",
        "A: b",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
