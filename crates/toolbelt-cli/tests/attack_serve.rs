//! Attacks on `toolbelt serve` and `toolbelt mcp` (issue 13, items 5 to 9 for MCP): the
//! network defaults, session exhaustion, malformed JSON-RPC, a call run twice after its
//! server died, servers' helpers that outlive them, and secrets that leak into servers.
//!
//! Everything is real: the `toolbelt` binary, the Python SDK fixture server, raw HTTP on
//! 127.0.0.1 (a non-loopback address is only ever bound to check the refusal; no traffic is
//! sent to one).

use crate::serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use serve_support::*;

/// The Python SDK fixture server.
fn fixture() -> String {
    workspace()
        .join("crates/toolbelt-mcp/tests/fixtures/py_server.py")
        .display()
        .to_string()
}

/// Writes an `mcpServers` file in `dir` naming the fixture as `py` over stdio, with `env`
/// set and `env_vars` passed from the parent; `wrapped` starts it behind a shell that stays.
fn mcp_config(dir: &Path, env: Value, env_vars: &[&str], wrapped: bool) -> PathBuf {
    let server = if wrapped {
        json!({"command": "sh", "args": ["-c", format!("'{}' '{}' stdio; echo wrapper done >&2", toolbelt_testkit::python(), fixture())]})
    } else {
        json!({"command": toolbelt_testkit::python(), "args": [fixture(), "stdio"]})
    };
    let mut server = server;
    server["env"] = env;
    server["env_vars"] = json!(env_vars);
    let path = dir.join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": {"py": server}}).to_string()).unwrap();
    path
}

/// Runs `toolbelt ARGS` to completion (bounded), without TOOLBELT_SERVE_TOKEN unless `env`
/// sets it.
fn toolbelt_run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(toolbelt());
    command
        .args(args)
        .env_remove("TOOLBELT_SERVE_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("toolbelt starts");
    wait_output(child, Duration::from_secs(120))
}

fn wait_output(mut child: std::process::Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while matches!(child.try_wait(), Ok(None)) {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("toolbelt did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect the output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------------------
// Safe by default over the network.

#[test]
fn a_non_loopback_bind_without_a_token_refuses_to_start_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let helper_pid = dir.path().join("helper.pid");
    let config = mcp_config(
        dir.path(),
        json!({"TOOLBELT_HELPER_PID_FILE": helper_pid.display().to_string()}),
        &[],
        false,
    );
    let dir_arg = dir.path().display().to_string();
    let config_arg = config.display().to_string();
    for extra in [&[][..], &["--no-auth"][..]] {
        for addr in ["0.0.0.0:0", "[::]:0"] {
            let mut args = vec!["serve", "--http", addr, "--dir", &dir_arg];
            args.extend(["--mcp-config", &config_arg]);
            args.extend(extra);
            let out = toolbelt_run(&args, &[]);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{addr} {extra:?}: {stderr}");
            assert!(
                stderr.contains("token") && stderr.contains("0.0.0.0") | stderr.contains("[::]"),
                "{stderr}"
            );
            assert!(!stderr.contains("serving MCP on"), "{stderr}");
        }
    }
    assert!(
        !helper_pid.exists(),
        "a refused start must not have started the aggregated servers"
    );
}

#[test]
fn loopback_without_a_token_prints_a_generated_one_and_refuses_requests_without_it() {
    let served = Served::new();
    let server = HttpServe::start(&["serve".into(), "--dir".into(), served.dir_arg()]);
    let token = server
        .token
        .clone()
        .expect("the generated token is printed");
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    let at = server.authority();
    assert_eq!(post_initialize(&at, &[]), 401);
    assert_eq!(
        post_initialize(&at, &[("Authorization", "Bearer not-the-token")]),
        401
    );
    let bearer = format!("Bearer {token}");
    assert_eq!(post_initialize(&at, &[("Authorization", &bearer)]), 200);
    // A second server gets a token of its own.
    let other = HttpServe::start(&["serve".into(), "--dir".into(), served.dir_arg()]);
    assert_ne!(other.token, server.token);
    assert_eq!(
        post_initialize(&other.authority(), &[("Authorization", &bearer)]),
        401
    );
}

#[test]
fn no_auth_serves_loopback_without_a_token() {
    let served = Served::new();
    let server = HttpServe::no_auth(&served);
    assert!(server.token.is_none());
    assert_eq!(post_initialize(&server.authority(), &[]), 200);
}

// ---------------------------------------------------------------------------------------
// Sessions: idle ones expire, their number is capped.

/// A raw HTTP/1.1 request to `toolbelt serve`; returns the status and the whole body (the
/// server closes the connection after the response).
fn request(authority: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut text = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    let mut stream = TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(text.as_bytes()).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const PING: &str = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;

/// Opens a session (initialize, then initialized); returns its id.
fn open_session(authority: &str) -> String {
    let (status, head) = post_initialize_head(authority, &[]);
    assert_eq!(status, 200, "{head}");
    let id = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"));
    let (status, _) = request(authority, "POST", &[("Mcp-Session-Id", &id)], INITIALIZED);
    assert_eq!(status, 202);
    id
}

/// The status of a ping on session `id`.
fn ping(authority: &str, id: &str) -> u16 {
    request(authority, "POST", &[("Mcp-Session-Id", id)], PING).0
}

/// A `GET` event stream held open on session `id` (as a client waiting for notifications).
fn listen(authority: &str, id: &str) -> TcpStream {
    let mut stream = TcpStream::connect(authority).expect("connect");
    let text = format!(
        "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {id}\r\n\r\n"
    );
    stream.write_all(text.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head[9..12], b"200", "the event stream opened");
    stream
}

#[test]
fn an_idle_session_expires() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.dir_arg(),
        "--no-auth".into(),
        "--session-idle-timeout".into(),
        "0.5".into(),
    ]);
    let at = server.authority();
    let idle = open_session(&at);
    let listening = open_session(&at);
    let _stream = listen(&at, &listening);
    // Each ping is use, so wait longer than the timeout between them (longer each time, in
    // case the machine is slow).
    let mut wait = Duration::from_secs(1);
    loop {
        std::thread::sleep(wait);
        if ping(&at, &idle) == 404 {
            break;
        }
        assert!(
            wait < Duration::from_secs(16),
            "the idle session never expired"
        );
        wait *= 2;
    }
    // A client holding its event stream open is connected, not idle.
    assert_eq!(ping(&at, &listening), 200);
}

#[test]
fn the_session_cap_holds_replacing_the_longest_idle_and_refusing_when_all_are_busy() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.dir_arg(),
        "--no-auth".into(),
        "--max-sessions".into(),
        "2".into(),
    ]);
    let at = server.authority();
    let first = open_session(&at);
    let second = open_session(&at);
    let third = open_session(&at);
    assert_eq!(ping(&at, &first), 404, "the longest idle session made room");
    assert_eq!(ping(&at, &second), 200);
    assert_eq!(ping(&at, &third), 200);

    // Both sessions busy: a new one is refused with 503 and a JSON-RPC error.
    let streams = [listen(&at, &second), listen(&at, &third)];
    let (status, body) = request(&at, "POST", &[], INITIALIZE);
    assert_eq!(status, 503, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(error["jsonrpc"], "2.0");
    assert_eq!(error["error"]["code"], -32000, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessions"),
        "{error}"
    );
    assert_eq!(ping(&at, &second), 200, "the busy sessions were kept");
    drop(streams);
}

// ---------------------------------------------------------------------------------------
// Malformed JSON-RPC.

#[test]
fn malformed_bodies_get_400_with_json_rpc_error_codes() {
    let served = Served::new();
    let server = HttpServe::start(&["serve".into(), "--dir".into(), served.dir_arg()]);
    let at = server.authority();
    let bearer = format!("Bearer {}", server.token.clone().unwrap());
    let auth = [("Authorization", bearer.as_str())];

    // The token is checked before the body is looked at.
    assert_eq!(request(&at, "POST", &[], "not json at all").0, 401);

    let cases = [
        ("not json at all", -32700, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":"#,
            -32700,
            Value::Null,
        ),
        ("", -32700, Value::Null),
        (r#"{"hello":"world"}"#, -32600, Value::Null),
        (
            r#"{"jsonrpc":"1.0","id":"x","method":"ping"}"#,
            -32600,
            json!("x"),
        ),
        ("[1, 2, 3]", -32600, Value::Null),
        ("42", -32600, Value::Null),
    ];
    for (body, code, id) in cases {
        let (status, answer) = request(&at, "POST", &auth, body);
        assert_eq!(status, 400, "{body:?}: {answer}");
        let error: Value =
            serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{body:?}: {e}: {answer}"));
        assert_eq!(error["error"]["code"], code, "{body:?}: {error}");
        assert_eq!(error["id"], id, "{body:?}: {error}");
    }
    // A well-formed request is still served.
    assert_eq!(post_initialize(&at, &auth), 200);
}

#[test]
fn garbage_lines_over_stdio_do_not_end_the_session() {
    let served = Served::new();
    let mut child = Command::new(toolbelt())
        .args(["serve", "--stdio", "--dir", &served.dir_arg()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        INITIALIZE,
        INITIALIZED,
        "this is not json",
        r#"{"hello":"world"}"#,
        PING,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = wait_output(child, Duration::from_secs(60));
    let answers: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Not JSON: -32700 with id null (see the server module docs). JSON that is not
    // JSON-RPC: -32600. The ping after both is answered.
    assert!(
        answers
            .iter()
            .any(|a| a["error"]["code"] == -32700 && a["id"].is_null()),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|a| a["error"]["code"] == -32600),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 2 && a.get("result").is_some()),
        "{answers:?}"
    );
}

// ---------------------------------------------------------------------------------------
// A call that may have run is never run again.

fn lines_in(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn mcp_call_to_a_server_that_dies_mid_call_runs_it_once_and_says_the_outcome_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.log");
    let args = json!({"path": file.display().to_string()}).to_string();
    let stdio = format!("'{}' '{}' stdio", toolbelt_testkit::python(), fixture());
    let out = toolbelt_run(
        &["mcp", "call", "append_then_exit", &args, "--stdio", &stdio],
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("may or may not have run"),
        "the caller is told the outcome is unknown: {stderr}"
    );
    assert_eq!(
        lines_in(&file),
        1,
        "the call reached the server exactly once"
    );

    // Declared idempotent, the same call is sent again to a new server and succeeds.
    let twice = dir.path().join("idempotent.log");
    let args = json!({"path": twice.display().to_string()}).to_string();
    let out = toolbelt_run(
        &[
            "mcp",
            "call",
            "append_then_exit_idempotent",
            &args,
            "--stdio",
            &stdio,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "appended");
    assert_eq!(lines_in(&twice), 2);
}

/// An MCP client (the Python SDK) that runs `toolbelt serve --stdio` with `serve_args`, calls
/// each tool of `calls` (`[[name, arguments], ...]`) and prints the results as JSON. The serve
/// process inherits this client's whole environment.
const CALLS_CLIENT: &str = r#"
import json, os, sys, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    command, serve_args, calls = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    params = StdioServerParameters(command=command, args=serve_args, env=dict(os.environ))
    results = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                text = "\n".join(c.text for c in result.content if c.type == "text")
                results.append({"is_error": bool(result.isError), "text": text})
    print(json.dumps({"results": results}))

anyio.run(main)
"#;

/// Runs [`CALLS_CLIENT`] against `toolbelt serve --stdio --dir DIR --mcp-config CONFIG`.
fn serve_calls(dir: &Path, config: &Path, calls: Value, env: &[(&str, &str)]) -> Vec<Value> {
    let serve_args = json!([
        "serve",
        "--stdio",
        "--dir",
        dir.display().to_string(),
        "--mcp-config",
        config.display().to_string()
    ]);
    let mut command = Command::new(toolbelt_testkit::python());
    command
        .arg("-c")
        .arg(CALLS_CLIENT)
        .arg(toolbelt())
        .arg(serve_args.to_string())
        .arg(calls.to_string())
        .envs(env.iter().copied());
    let report = run_client(command);
    report["results"].as_array().cloned().unwrap_or_default()
}

#[test]
fn serve_aggregating_a_server_that_dies_mid_call_runs_it_once_and_says_the_outcome_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let config = mcp_config(dir.path(), json!({}), &[], false);
    let file = dir.path().join("runs.log");
    let results = serve_calls(
        dir.path(),
        &config,
        json!([
            ["append_then_exit", {"path": file.display().to_string()}],
            ["echo", {"message": "still serving"}],
        ]),
        &[],
    );
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap()
            .contains("may or may not have run"),
        "{results:?}"
    );
    assert_eq!(
        lines_in(&file),
        1,
        "the call reached the aggregated server once"
    );
    // The aggregated server is started again for the next call.
    assert_eq!(results[1]["text"], "still serving", "{results:?}");
}

// ---------------------------------------------------------------------------------------
// No orphans.

/// The pid the fixture's helper wrote, waiting (bounded) for the file.
fn helper_pid(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "no helper pid in {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn helpers_of_a_wrapped_server_do_not_outlive_mcp_tools_or_serve() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("helper.pid");
    let config = mcp_config(
        dir.path(),
        json!({"TOOLBELT_HELPER_PID_FILE": pid_file.display().to_string()}),
        &[],
        true,
    );
    let config_arg = config.display().to_string();
    let out = toolbelt_run(&["mcp", "tools", "--config", &config_arg], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let helper = helper_pid(&pid_file);
    assert!(
        wait_gone(helper),
        "the helper {helper} outlived `toolbelt mcp tools`"
    );

    std::fs::remove_file(&pid_file).unwrap();
    let results = serve_calls(
        dir.path(),
        &config,
        json!([["echo", {"message": "hi"}]]),
        &[],
    );
    assert_eq!(results[0]["text"], "hi", "{results:?}");
    let helper = helper_pid(&pid_file);
    assert!(
        wait_gone(helper),
        "the helper {helper} outlived `toolbelt serve`"
    );
}

// ---------------------------------------------------------------------------------------
// No secrets in servers' environments.

const SECRETS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "sk-should-not-leak"),
    ("TOOLBELT_SERVE_TOKEN", "serve-token-should-not-leak"),
    ("MY_DB_PASSWORD", "hunter2"),
    ("AWS_SECRET_ACCESS_KEY", "aws-should-not-leak"),
    ("GITHUB_TOKEN", "gh-named-in-env-vars"),
    ("EDITOR", "not-core-so-not-passed"),
];

fn assert_scrubbed(names: &str) {
    let names: Vec<&str> = names.lines().collect();
    for leaked in [
        "OPENAI_API_KEY",
        "TOOLBELT_SERVE_TOKEN",
        "MY_DB_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "EDITOR",
    ] {
        assert!(
            !names.contains(&leaked),
            "{leaked} reached the server: {names:?}"
        );
    }
    for passed in ["PATH", "HOME", "GITHUB_TOKEN", "SERVER_MODE"] {
        assert!(names.contains(&passed), "{passed} missing: {names:?}");
    }
}

#[test]
fn a_stdio_server_sees_no_secrets_of_the_parent_through_mcp_or_serve() {
    let dir = tempfile::tempdir().unwrap();
    let config = mcp_config(
        dir.path(),
        json!({"SERVER_MODE": "test"}),
        &["GITHUB_TOKEN"],
        false,
    );
    let config_arg = config.display().to_string();
    let out = toolbelt_run(
        &["mcp", "call", "env_names", "{}", "--config", &config_arg],
        SECRETS,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_scrubbed(&text(&out.stdout));

    let results = serve_calls(
        dir.path(),
        &config,
        json!([["env_names", {}], ["env_value", {"name": "GITHUB_TOKEN"}]]),
        SECRETS,
    );
    assert_scrubbed(results[0]["text"].as_str().unwrap());
    assert_eq!(results[1]["text"], "gh-named-in-env-vars", "{results:?}");

    // A server given no configuration at all (`--stdio`) gets the core variables only.
    let stdio = format!("'{}' '{}' stdio", toolbelt_testkit::python(), fixture());
    let out = toolbelt_run(
        &["mcp", "call", "env_names", "{}", "--stdio", &stdio],
        SECRETS,
    );
    let names = text(&out.stdout);
    assert!(names.lines().any(|n| n == "PATH"), "{names}");
    for (secret, _) in SECRETS {
        assert!(!names.lines().any(|n| n == *secret), "{secret}: {names}");
    }
}
