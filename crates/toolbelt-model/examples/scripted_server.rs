//! A scripted OpenAI-compatible server on 127.0.0.1 serving, over and over, one two-turn
//! conversation: the model calls the tool `multiply` with `{"a":25,"b":4}`, then answers
//! with text once the request carries the tool's result. It answers at once, streaming or
//! not as each request asks, so a client framework's own cost per turn is what a benchmark
//! against it measures.
//!
//! ```text
//! cargo run -p toolbelt-model --features test-server --example scripted_server -- --port 0
//! ```
//!
//! prints its base URL (`http://127.0.0.1:PORT/v1`) on the first line of stdout and serves
//! until it is killed.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};

use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};

fn main() {
    if let Err(message) = run() {
        eprintln!("scripted_server: {message}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let port = port(std::env::args().skip(1))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let server = ScriptedServer::start_with_at(addr, conversation)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "{}", server.base_url())
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("cannot print the base URL: {e}"))?;
        // Serves until the process is killed.
        std::future::pending::<()>().await;
        Ok(())
    })
}

/// `--port N` (0 or absent: any free port).
fn port(mut args: impl Iterator<Item = String>) -> Result<u16, String> {
    let mut port = 0;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                let value = args.next().ok_or("--port needs a value")?;
                port = value
                    .parse()
                    .map_err(|_| format!("--port: {value:?} is not a port number"))?;
            }
            other => return Err(format!("unknown argument {other:?} (usage: --port N)")),
        }
    }
    Ok(port)
}

/// The tool call first; the answer once the last message is the tool's result.
fn conversation(request: &RecordedRequest) -> Reply {
    let last = request.messages().last();
    match last.filter(|m| m["role"] == "tool") {
        Some(result) => {
            let product = result["content"].as_str().unwrap_or("?");
            Reply::text(format!("25 times 4 is {product}."))
        }
        None => Reply::tool_call("call_multiply", "multiply", r#"{"a":25,"b":4}"#),
    }
}
