//! Shared helpers for the integration tests: locating the real peers, free loopback ports,
//! HTTP servers that are stopped when dropped, process checks, and looking up listed tools.

#![allow(dead_code)]

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolbelt_core::{Tool, ToolContext, ToolSet};
use toolbelt_mcp::{ConnectionConfig, McpToolSet, TransportConfig};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The entry point of `@modelcontextprotocol/server-everything`; fails the test with the
/// install command when the peer is missing.
pub fn everything_entry() -> PathBuf {
    let entry = workspace()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "the npm peer @modelcontextprotocol/server-everything is missing at {}; \
         install it with `cd tests/peers && npm ci`",
        entry.display()
    );
    entry
}

/// The Python fixture server; fails the test with the install command when the `mcp` SDK
/// is missing.
pub fn python_fixture() -> PathBuf {
    toolbelt_testkit::require_python_mcp_sdk();
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/py_server.py")
}

/// A loopback port that was free a moment ago and that no other test in this process has
/// been given (the kernel may hand a just-released port out again).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind a loopback port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// An HTTP MCP server child, killed and reaped when dropped.
pub struct HttpServer {
    child: Child,
    pub port: u16,
}

impl HttpServer {
    /// Starts `command` and waits (bounded) until it accepts connections on `port` (the
    /// child itself listening, not another server that holds the port).
    pub fn start(mut command: Command, port: u16) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("start the HTTP MCP server");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err()
            || !toolbelt_testkit::pid_listens_on(child.id(), port)
        {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the HTTP MCP server exited early with {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the HTTP MCP server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }

    /// The npm everything server over `transport` (`sse` or `streamableHttp`).
    pub fn everything(transport: &str) -> Self {
        Self::everything_on(transport, free_port())
    }

    /// The npm everything server over `transport` on `port`.
    pub fn everything_on(transport: &str, port: u16) -> Self {
        let mut command = Command::new("node");
        command
            .arg(everything_entry())
            .arg(transport)
            .env("PORT", port.to_string());
        Self::start(command, port)
    }

    /// The Python fixture over `transport` (`sse` or `streamable-http`).
    pub fn python(transport: &str) -> Self {
        Self::python_on(transport, free_port(), None)
    }

    /// The Python fixture over `transport` on `port`, with a cancellation marker file.
    pub fn python_on(transport: &str, port: u16, marker: Option<&Path>) -> Self {
        let env: Vec<(&str, String)> = marker
            .map(|m| ("TOOLBELT_CANCEL_MARKER", m.display().to_string()))
            .into_iter()
            .collect();
        Self::python_with_env(transport, port, &env)
    }

    /// The Python fixture over `transport` on `port` with extra environment variables
    /// (`TOOLBELT_SESSION_LOG`, `TOOLBELT_REQUIRE_HEADER`, ...; see the fixture's docstring).
    pub fn python_with_env(transport: &str, port: u16, env: &[(&str, String)]) -> Self {
        let mut command = Command::new(toolbelt_testkit::python());
        command
            .arg(python_fixture())
            .arg(transport)
            .arg(port.to_string());
        for (name, value) in env {
            command.env(name, value);
        }
        Self::start(command, port)
    }

    /// Stops the server and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `pid` is still in the process table (running, or a zombie nobody reaped).
pub fn process_exists(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie (exited, not reaped) counts as left behind too.
        Ok(stat) => !stat.is_empty(),
        Err(_) => false,
    }
}

#[allow(unused_imports)] // not every test binary that includes this module uses it
pub use toolbelt_testkit::is_running;

/// Waits (bounded, 15 s) until `pid` is no longer running; true if it stopped.
pub async fn stops_running(pid: u32) -> bool {
    eventually(Duration::from_secs(15), || !is_running(pid)).await
}

/// Reads a pid a fixture wrote to `file`, waiting (bounded) for it to appear.
pub async fn pid_from(file: &Path) -> u32 {
    let mut pid = None;
    let found = eventually(Duration::from_secs(20), || {
        pid = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse().ok());
        pid.is_some()
    })
    .await;
    assert!(found, "no pid was written to {}", file.display());
    pid.unwrap_or_default()
}

/// Config for the npm everything server over stdio.
pub fn everything_stdio() -> ConnectionConfig {
    ConnectionConfig::new(TransportConfig::stdio(
        "node",
        [
            everything_entry().display().to_string(),
            "stdio".to_string(),
        ],
    ))
    .with_timeout(Duration::from_secs(20))
}

/// Config for the Python fixture over stdio.
pub fn python_stdio(marker: Option<&Path>) -> ConnectionConfig {
    let mut config = ConnectionConfig::new(TransportConfig::stdio(
        toolbelt_testkit::python(),
        [python_fixture().display().to_string(), "stdio".to_string()],
    ))
    .with_timeout(Duration::from_secs(20));
    if let Some(marker) = marker {
        config = config.with_env("TOOLBELT_CANCEL_MARKER", marker.display().to_string());
    }
    config
}

/// Config for an HTTP server on `port` and `path`.
pub fn remote(transport: &str, port: u16, path: &str) -> ConnectionConfig {
    let url = format!("http://127.0.0.1:{port}{path}");
    let transport = match transport {
        "sse" => TransportConfig::sse(url),
        _ => TransportConfig::streamable_http(url),
    };
    ConnectionConfig::new(transport).with_timeout(Duration::from_secs(20))
}

/// Polls `cond` for up to `limit` without blocking the runtime; returns whether it became
/// true.
pub async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// How many sessions the Python fixture has logged to `log` (`TOOLBELT_SESSION_LOG`).
pub fn sessions_logged(log: &Path) -> usize {
    log_lines(log, &["start", "session"])
}

/// How many streamable HTTP sessions the Python fixture saw deleted (`TOOLBELT_SESSION_LOG`).
pub fn session_ends_logged(log: &Path) -> usize {
    log_lines(log, &["end"])
}

fn log_lines(log: &Path, kinds: &[&str]) -> usize {
    std::fs::read_to_string(log)
        .map(|text| {
            text.lines()
                .filter(|line| kinds.contains(&line.split(' ').next().unwrap_or_default()))
                .count()
        })
        .unwrap_or(0)
}

/// The tool `name` of `set`; fails the test when the server lists no such tool.
pub async fn tool(set: &McpToolSet, name: &str) -> Arc<dyn Tool> {
    set.tools(&ToolContext::new())
        .await
        .expect("list tools")
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("the server has no tool {name}"))
}

/// The names of the tools `set` lists.
pub async fn tool_names(set: &McpToolSet) -> Vec<String> {
    set.tools(&ToolContext::new())
        .await
        .expect("list tools")
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}
