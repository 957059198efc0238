//! MCP client round trip: latency and calls per second of `tools/call` for a trivial tool
//! (`echo`), Toolbelt's client against the Python `mcp` SDK client and the TypeScript SDK
//! client (Node) driving the same server in the same run, over stdio and streamable HTTP.
//!
//! Servers: `@modelcontextprotocol/server-everything` (Node) and the Python SDK fixture
//! server (`tests/fixtures/py_server.py`). Each client makes its calls over one session after
//! a warm-up, once one after another (round-trip latency) and once with 16 calls in flight
//! (throughput). The SDK sides are `benches/py_client_roundtrip.py` and
//! `benches/ts_client_roundtrip.mjs` (the `@modelcontextprotocol/sdk` of `tests/peers`).
//! Besides calls per second and latency, each row shows the client process's own CPU time per
//! call (`cpu us`): on a machine with few cores the client's CPU is taken from the server.
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target/bench cargo bench --workspace --bench mcp_roundtrip
//! ```
//!
//! `TOOLBELT_BENCH_CALLS` sets the number of measured calls per row (default 2000).
//! `TOOLBELT_BENCH_ONLY` keeps the groups whose "server transport" label contains its value
//! (for example `Python SDK fixture stdio`), to rerun or profile one group;
//! `TOOLBELT_BENCH_SDKS=0` runs Toolbelt's client alone.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use toolbelt_core::{Tool, ToolContext, ToolSet};
use toolbelt_mcp::{ConnectionConfig, McpToolSet, TransportConfig};

/// Calls made before measuring, by both clients.
const WARMUP: usize = 50;

/// The figures of one client against one server over one transport.
struct Stats {
    calls_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    /// The client process's own CPU time (user and system) per measured call: on 2 shared
    /// cores a client's CPU is taken from the server it drives.
    cpu_us_per_call: f64,
}

/// One server program, runnable over stdio and streamable HTTP.
struct Server {
    label: &'static str,
    /// The stdio command line.
    stdio: Vec<String>,
    /// Starts the streamable HTTP server on a port; returns it and the MCP URL.
    http: fn(u16) -> (Command, String),
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn everything_entry() -> String {
    manifest_dir()
        .join(
            "../../tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        )
        .display()
        .to_string()
}

fn python_fixture() -> String {
    manifest_dir()
        .join("tests/fixtures/py_server.py")
        .display()
        .to_string()
}

fn everything_http(port: u16) -> (Command, String) {
    let mut command = Command::new("node");
    command
        .arg(everything_entry())
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    (command, format!("http://127.0.0.1:{port}/mcp"))
}

fn python_http(port: u16) -> (Command, String) {
    let mut command = Command::new("python3");
    command
        .arg(python_fixture())
        .arg("streamable-http")
        .arg(port.to_string());
    (command, format!("http://127.0.0.1:{port}/mcp"))
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// An HTTP server child that is killed and reaped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_http(server: &Server) -> (Running, String) {
    let port = free_port();
    let (mut command, url) = (server.http)(port);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = Running(command.spawn().expect("start the HTTP server"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the server exited early with {status}");
        }
        assert!(Instant::now() < deadline, "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, url)
}

/// The CPU time this process has used so far (user and system, all threads).
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn summarize(mut latencies: Vec<Duration>, total: Duration, cpu: Duration) -> Stats {
    latencies.sort();
    let at = |p: f64| {
        let index = ((latencies.len() as f64 * p) as usize).min(latencies.len() - 1);
        latencies[index].as_secs_f64() * 1e6
    };
    Stats {
        calls_per_sec: latencies.len() as f64 / total.as_secs_f64(),
        p50_us: at(0.50),
        p99_us: at(0.99),
        cpu_us_per_call: cpu.as_secs_f64() * 1e6 / latencies.len() as f64,
    }
}

/// Toolbelt's client: the `echo` tool of an [`McpToolSet`], called through the `Tool`
/// interface the executor uses (arguments as JSON text, mapped output), with `concurrency`
/// calls in flight at a time over the one session.
async fn ours(config: ConnectionConfig, calls: usize, concurrency: usize) -> Stats {
    let set = McpToolSet::new("bench", config.with_timeout(Duration::from_secs(30)));
    let ctx = ToolContext::new();
    set.init(&ctx).await.expect("connect");
    let echo = set
        .tools(&ctx)
        .await
        .expect("list")
        .into_iter()
        .find(|t| t.name() == "echo")
        .expect("an echo tool");
    for i in 0..WARMUP {
        let args = format!(r#"{{"message":"warm {i}"}}"#);
        echo.call(ToolContext::new(), &args)
            .await
            .expect("warm-up call");
    }
    let started = Instant::now();
    let cpu_started = process_cpu();
    let workers: Vec<_> = (0..concurrency)
        .map(|worker| {
            let echo = echo.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(calls / concurrency + 1);
                for i in (worker..calls).step_by(concurrency) {
                    let args = format!(r#"{{"message":"call {i}"}}"#);
                    let t0 = Instant::now();
                    let out = echo.call(ToolContext::new(), &args).await.expect("call");
                    latencies.push(t0.elapsed());
                    assert!(!out.is_error, "call {i} failed: {}", out.llm_text());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(calls);
    for worker in workers {
        latencies.extend(worker.await.expect("a worker finished"));
    }
    let total = started.elapsed();
    let cpu = process_cpu() - cpu_started;
    set.close().await.expect("close");
    summarize(latencies, total, cpu)
}

/// An SDK client the bench compares against, each run by a script of `benches/` that prints
/// one JSON line of figures.
#[derive(Clone, Copy)]
enum Sdk {
    Python,
    TypeScript,
}

impl Sdk {
    fn label(self) -> &'static str {
        match self {
            Sdk::Python => "Python mcp SDK",
            Sdk::TypeScript => "TypeScript SDK",
        }
    }

    /// The program, its script in `benches/`, and what installs the SDK.
    fn script(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Sdk::Python => (
                "python3",
                "py_client_roundtrip.py",
                "pip install -r tests/peers/requirements.txt",
            ),
            Sdk::TypeScript => ("node", "ts_client_roundtrip.mjs", "bash .ci/install-peers"),
        }
    }

    /// Runs the client: `mode` is `stdio` (target: the server's command line) or `http`
    /// (target: the URL).
    fn run(self, mode: &str, calls: usize, concurrency: usize, target: &[String]) -> Stats {
        let (program, script, install) = self.script();
        let out = Command::new(program)
            .arg(manifest_dir().join("benches").join(script))
            .arg(mode)
            .arg(calls.to_string())
            .arg(concurrency.to_string())
            .args(target)
            .stderr(Stdio::null())
            .output()
            .expect("run the SDK client");
        assert!(
            out.status.success(),
            "the {} client failed ({}); is `{install}` done?",
            self.label(),
            out.status
        );
        let line = String::from_utf8_lossy(&out.stdout);
        let value: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON line");
        let number = |key: &str| value[key].as_f64().expect("a number");
        Stats {
            calls_per_sec: number("calls_per_sec"),
            p50_us: number("p50_us"),
            p99_us: number("p99_us"),
            cpu_us_per_call: number("cpu_us_per_call"),
        }
    }
}

/// One table row; the toolbelt row carries its throughput relative to each SDK client.
fn row(
    server: &str,
    transport: &str,
    in_flight: usize,
    client: &str,
    stats: &Stats,
    sdks: &[Stats],
) {
    let ratio = |sdk: Option<&Stats>| {
        sdk.map(|s| format!("{:.1}x", stats.calls_per_sec / s.calls_per_sec))
            .unwrap_or_default()
    };
    println!(
        "| {server:<18} | {transport:<15} | {in_flight:>9} | {client:<14} | {:>8.0} | {:>8.0} | {:>8.0} | {:>6.0} | {:>5} | {:>5} |",
        stats.calls_per_sec,
        stats.p50_us,
        stats.p99_us,
        stats.cpu_us_per_call,
        ratio(sdks.first()),
        ratio(sdks.get(1)),
    );
}

/// What one group of rows measures.
struct Case<'a> {
    server: &'a str,
    transport: &'a str,
    in_flight: usize,
    calls: usize,
}

/// Runs both SDK clients and then Toolbelt's against one server and prints their rows.
fn compare(
    runtime: &tokio::runtime::Runtime,
    case: Case,
    mode: &str,
    target: &[String],
    config: ConnectionConfig,
) {
    let Case {
        server,
        transport,
        in_flight,
        calls,
    } = case;
    // Profiling Toolbelt's client alone (`perf record`) wants no SDK processes in the picture.
    let with_sdks = std::env::var("TOOLBELT_BENCH_SDKS").map_or(true, |v| v != "0");
    let sdks: Vec<Stats> = [Sdk::Python, Sdk::TypeScript]
        .iter()
        .filter(|_| with_sdks)
        .map(|sdk| sdk.run(mode, calls, in_flight, target))
        .collect();
    let toolbelt = runtime.block_on(ours(config, calls, in_flight));
    for (sdk, stats) in [Sdk::Python, Sdk::TypeScript].iter().zip(&sdks) {
        row(server, transport, in_flight, sdk.label(), stats, &[]);
    }
    row(server, transport, in_flight, "toolbelt", &toolbelt, &sdks);
}

/// Calls in flight at a time: one after another (latency), and many (throughput).
const IN_FLIGHT: [usize; 2] = [1, 16];

fn main() {
    let calls: usize = std::env::var("TOOLBELT_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let servers = [
        Server {
            label: "server-everything",
            stdio: vec!["node".into(), everything_entry(), "stdio".into()],
            http: everything_http,
        },
        Server {
            label: "Python SDK fixture",
            stdio: vec!["python3".into(), python_fixture(), "stdio".into()],
            http: python_http,
        },
    ];
    assert!(
        Path::new(&everything_entry()).is_file(),
        "install the npm peers first: cd tests/peers && npm ci"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");

    println!("MCP tools/call round trip of `echo`, {calls} calls per row over one session");
    println!();
    println!(
        "| server             | transport       | in flight | client         |  calls/s |   p50 us |   p99 us | cpu us | vs py | vs ts |"
    );
    println!(
        "|--------------------|-----------------|-----------|----------------|----------|----------|----------|--------|-------|-------|"
    );
    let only = std::env::var("TOOLBELT_BENCH_ONLY").unwrap_or_default();
    let wanted = |server: &Server, transport: &str| {
        format!("{} {transport}", server.label).contains(only.as_str())
    };
    for server in &servers {
        for in_flight in IN_FLIGHT {
            if !wanted(server, "stdio") {
                break;
            }
            let config = ConnectionConfig::new(TransportConfig::stdio(
                server.stdio[0].clone(),
                server.stdio[1..].to_vec(),
            ));
            let case = Case {
                server: server.label,
                transport: "stdio",
                in_flight,
                calls,
            };
            compare(&runtime, case, "stdio", &server.stdio, config);
        }
        for in_flight in IN_FLIGHT {
            if !wanted(server, "streamable HTTP") {
                break;
            }
            let (_running, url) = start_http(server);
            let config = ConnectionConfig::new(TransportConfig::streamable_http(url.clone()));
            let case = Case {
                server: server.label,
                transport: "streamable HTTP",
                in_flight,
                calls,
            };
            compare(&runtime, case, "http", std::slice::from_ref(&url), config);
        }
    }
}
