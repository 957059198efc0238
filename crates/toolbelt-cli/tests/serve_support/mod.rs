//! What the `serve_*` tests share: a served directory, an `mcpServers` file aggregating real
//! servers (npm's everything server and a Python SDK server), the `toolbelt serve` binary
//! over HTTP, the independent clients, and process checks.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The `toolbelt` binary under test.
pub fn toolbelt() -> &'static str {
    env!("CARGO_BIN_EXE_toolbelt")
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/peers`, where `.ci/install-peers` put the npm peers.
pub fn peers() -> PathBuf {
    workspace().join("tests/peers")
}

/// A script of `crates/toolbelt-cli/tests/clients`.
pub fn client_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

fn require(path: &Path, what: &str) -> String {
    assert!(
        path.exists(),
        "{what} is missing at {}; run `bash .ci/install-peers`",
        path.display()
    );
    path.display().to_string()
}

/// A temp directory to serve, with `hello.txt` (one line holds "needle") and `mcp.json`
/// aggregating the npm everything server (`everything`) and the Python SDK fixture server
/// (`py`). Both offer `echo`, so the second one listed is offered as `py_echo`.
pub struct Served {
    pub dir: tempfile::TempDir,
}

impl Served {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("hello.txt"), "hello world\nneedle here\n").unwrap();
        let everything = require(
            &peers().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
            "the npm peer @modelcontextprotocol/server-everything",
        );
        let py = require(
            &workspace().join("crates/toolbelt-mcp/tests/fixtures/py_server.py"),
            "the Python SDK fixture server",
        );
        let config = serde_json::json!({"mcpServers": {
            "everything": {"command": "node", "args": [everything]},
            "py": {"command": toolbelt_testkit::python(), "args": [py, "stdio"], "env": {
                // The fixture writes this file when a call of its `sleep` is cancelled.
                "TOOLBELT_CANCEL_MARKER": dir.path().join("cancelled.marker").display().to_string(),
            }},
        }});
        std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The served directory as a command-line argument.
    pub fn dir_arg(&self) -> String {
        self.path().display().to_string()
    }

    /// `serve` flags for this directory and its `mcp.json`.
    pub fn serve_args(&self) -> Vec<String> {
        vec![
            "serve".into(),
            "--dir".into(),
            self.path().display().to_string(),
            "--mcp-config".into(),
            self.path().join("mcp.json").display().to_string(),
        ]
    }
}

/// Runs a client command, expecting one JSON object on its stdout.
pub fn run_client(command: Command) -> Value {
    run_client_with_stderr(command).0
}

/// Runs a client command, expecting one JSON object on its stdout; also what it logged on
/// stderr.
pub fn run_client_with_stderr(mut command: Command) -> (Value, String) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the client failed ({}); are the peers installed (`bash .ci/install-peers`)?\n\
         stdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    let value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!("the client printed no JSON ({e}):\n{stdout}\nstderr: {stderr}")
    });
    (value, stderr)
}

/// The Python `mcp` SDK client running `scenario` against `target` (`stdio CMD…` or `http URL`).
pub fn python_client(
    scenario: &str,
    target: &[String],
    served: &Served,
    token: Option<&str>,
) -> Value {
    let mut command = Command::new(toolbelt_testkit::python());
    command
        .arg(client_script("py_client.py"))
        .arg(scenario)
        .args(target)
        .env("TOOLBELT_TEST_DIR", served.path());
    if let Some(token) = token {
        command.env("TOOLBELT_TEST_TOKEN", token);
    }
    run_client(command)
}

/// `stdio toolbelt serve …` as client arguments.
pub fn stdio_target(args: &[String]) -> Vec<String> {
    let mut target = vec!["stdio".to_string(), toolbelt().to_string()];
    target.extend(args.iter().cloned());
    target
}

/// `toolbelt serve --http 127.0.0.1:0 …`, running until dropped (SIGTERM, then SIGKILL).
pub struct HttpServe {
    child: Child,
    pub url: String,
    /// The bearer token the server generated and printed (none when one was given, or with
    /// `--no-auth`).
    pub token: Option<String>,
    stderr: mpsc::Receiver<String>,
}

impl HttpServe {
    /// `serve --dir SERVED --no-auth` over streamable HTTP.
    pub fn no_auth(served: &Served) -> Self {
        Self::start(&[
            "serve".into(),
            "--dir".into(),
            served.dir_arg(),
            "--no-auth".into(),
        ])
    }

    pub fn start(args: &[String]) -> Self {
        let mut child = Command::new(toolbelt())
            .args(args)
            .args(["--http", "127.0.0.1:0"])
            // The token is the test's choice, never the environment's.
            .env_remove("TOOLBELT_SERVE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toolbelt serve starts");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        let mut token = None;
        let url = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(url) = line.strip_prefix("toolbelt: serving MCP on ") {
                        break url.trim().to_string();
                    }
                    if let Some(printed) = line.strip_prefix("toolbelt: bearer token: ") {
                        token = Some(printed.trim().to_string());
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "toolbelt serve never announced its URL; stderr:\n{}",
                        seen.join("\n")
                    );
                }
            }
        };
        Self {
            child,
            url,
            token,
            stderr: rx,
        }
    }

    /// `host:port` of the server.
    pub fn authority(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        signal(self.child.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("toolbelt serve did not exit after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The stderr lines printed so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            signal(self.child.id(), "TERM");
            toolbelt_testkit::wait_or_kill(&mut self.child, Duration::from_secs(10));
        }
    }
}

/// Sends a signal with kill(1).
pub fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

#[allow(unused_imports)] // not every test binary that includes this module uses it
pub use toolbelt_testkit::is_running;

/// Waits (bounded) until `pid` is gone; true if it went.
pub fn wait_gone(pid: u32) -> bool {
    toolbelt_testkit::wait_until_gone(pid, Duration::from_secs(15))
}

/// A raw HTTP/1.1 POST of an `initialize` request; returns the status code.
pub fn post_initialize(authority: &str, headers: &[(&str, &str)]) -> u16 {
    post_initialize_head(authority, headers).0
}

/// A raw HTTP/1.1 POST of an `initialize` request; returns the status code and the response
/// head (status line and headers).
pub fn post_initialize_head(authority: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let mut stream = send_post(authority, headers, body);
    // Read up to the end of the head; the body (an SSE stream) may stay open.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let status = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response head {head:?}"));
    (status, head)
}

/// Sends one raw HTTP/1.1 POST of `body` to `/mcp` (JSON, both reply kinds accepted, the
/// connection closed after the reply) and returns the stream to read the response from.
pub fn send_post(authority: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    stream
}

/// An MCP server over stdio spoken to in raw JSON-RPC lines; killed when dropped.
pub struct RawStdio {
    child: Child,
    /// `None` once [`RawStdio::finish`] closed it.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// The messages read while waiting for a response, not yet looked at.
    skipped: Vec<Value>,
}

impl RawStdio {
    /// Starts `program args…` (stderr discarded) and completes the `initialize` handshake.
    pub fn start(program: &str, args: &[String]) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut peer = Self {
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 1,
            skipped: Vec::new(),
        };
        let init = peer.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        peer
    }

    /// Writes one line as it is.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message the server writes.
    pub fn next_message(&mut self) -> Value {
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).expect("read a line");
            assert!(read > 0, "the server closed stdout");
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                return value;
            }
        }
    }

    /// The messages passed over while waiting for responses since the last call.
    pub fn skipped(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.skipped)
    }

    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and returns the response to it (skipping notifications).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let mut message = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method});
        if !params.is_null() {
            message["params"] = params;
        }
        self.request_raw(message)
    }

    /// Sends `message` (given an id here) and returns the response with that id.
    pub fn request_raw(&mut self, mut message: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        message["id"] = json!(id);
        self.send(&message);
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).expect("read a line");
            assert!(
                read > 0,
                "the server closed stdout before answering {message}"
            );
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if value.get("id") == Some(&json!(id)) {
                return value;
            }
            self.skipped.push(value);
        }
    }

    /// Reads `toolbelt://status` until every aggregated server has connected or failed once
    /// (serve connects them in the background); returns the servers' entries.
    pub fn wait_for_upstreams(&mut self) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let read = self.request("resources/read", json!({"uri": "toolbelt://status"}));
            let text = read["result"]["contents"][0]["text"]
                .as_str()
                .unwrap_or("{}");
            let status: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            let servers = status["servers"].as_array().cloned().unwrap_or_default();
            let settled = servers
                .iter()
                .all(|s| s["state"] != "connecting" || s["attempt"].as_u64() > Some(1));
            if settled {
                return servers;
            }
            assert!(
                Instant::now() < deadline,
                "the aggregated servers never came up: {servers:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Ends the session the polite way: closes stdin, so the server closes its tool sets
    /// and exits; fails the test if it has not within 30 s.
    pub fn finish(mut self) -> ExitStatus {
        drop(self.stdin.take());
        toolbelt_testkit::eventually(
            "serve exits after stdin closed",
            Duration::from_secs(30),
            || self.child.try_wait().ok().flatten(),
        )
    }

    /// The listed tools.
    pub fn tools(&mut self) -> Vec<Value> {
        let listed = self.request("tools/list", json!({}));
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {listed}"))
            .clone()
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
