//! `toolbelt serve`: the built-in tools (confined to `--dir`) and the tools of every MCP
//! server in `--mcp-config`, offered to any MCP client over stdio or streamable HTTP.
//!
//! Every call runs through the executor pipeline (validation, the per-call time limit). A
//! client's `notifications/cancelled` cancels the call (a running Bash command's process group
//! is killed); calls with a progress token get progress notifications and a heartbeat; the
//! clients hear `notifications/tools/list_changed` when an aggregated server's tools change.
//!
//! Over HTTP the server binds 127.0.0.1 unless told otherwise, checks `Host` and `Origin`
//! (DNS-rebinding protection) and, with `--token`, requires `Authorization: Bearer`. SIGINT
//! or SIGTERM ends the sessions, closes the aggregated servers (reaping their processes) and
//! exits 0. Logs go to stderr only: in stdio mode stdout carries the protocol.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Args;
use toolbelt::exec::{Executor, Timeout};
use toolbelt::mcp::server::{
    CancellationToken, HttpServeOptions, HttpServer, ToolServer, serve_stdio,
};
use toolbelt::{ToolContext, ToolFilter};

use crate::common::{CliError, EXIT_OK, Outcome, ToolSourceArgs, Toolbox, shutdown_signal};

/// The environment variable read for the bearer token when `--token` is not given (a token
/// on the command line is visible to other users in the process list).
pub const TOKEN_ENV: &str = "TOOLBELT_SERVE_TOKEN";

/// How often the registry is checked for tool-list changes to announce.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// Flags of `toolbelt serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Serve one client on stdin and stdout (the default).
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve streamable HTTP at ADDR (`PORT`, `HOST:PORT` or `IP:PORT`; a bare port binds
    /// 127.0.0.1). The endpoint is `/mcp`.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    #[command(flatten)]
    sources: ToolSourceArgs,
    /// Offer only these tools (comma-separated names, as `toolbelt tools list` prints them).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    tools: Vec<String>,
    /// Do not offer these tools (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    exclude_tools: Vec<String>,
    /// HTTP only: require `Authorization: Bearer TOKEN` on every request (else 401). Also
    /// read from TOOLBELT_SERVE_TOKEN.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// HTTP only: a browser origin allowed to call the server (`http://localhost:*` style,
    /// repeatable). Requests carrying any other `Origin` get 403; without this flag only
    /// loopback origins are allowed.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
    /// HTTP only: a `Host` value to accept besides the loopback names and the bound address
    /// (repeatable; needed behind a proxy or when binding another interface).
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// The time limit of one tool call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    /// How often a long call with nothing to report sends a progress heartbeat to a client
    /// that asked for progress, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    heartbeat: f64,
}

/// Runs `toolbelt serve` until the client leaves (stdio) or SIGINT/SIGTERM arrives.
pub async fn run(args: ServeArgs) -> Outcome {
    let http_addr = args.http.as_deref().map(parse_addr).transpose()?;
    if !args.heartbeat.is_finite() || args.heartbeat <= 0.0 {
        return Err(CliError::usage(format!(
            "--heartbeat must be a positive number of seconds, got {}",
            args.heartbeat
        )));
    }
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var(TOKEN_ENV).ok())
        .filter(|t| !t.is_empty());
    let http_only =
        args.token.is_some() || !args.allow_origins.is_empty() || !args.allow_hosts.is_empty();
    if http_addr.is_none() && http_only {
        return Err(CliError::usage(
            "--token, --allow-origin and --allow-host apply to --http only (stdio has one local client)",
        ));
    }

    let toolbox = Toolbox::open(&args.sources, None)?;
    toolbox.announce_sandbox();
    // Connect to the aggregated servers now, so a broken one is reported at start-up.
    let snapshot = toolbox.list(&ToolContext::new()).await;
    for name in &args.tools {
        if snapshot.get(name).is_none() {
            tracing::warn!("--tools names {name:?}, which no tool set offers");
            eprintln!("toolbelt: warning: --tools names {name:?}, which no tool set offers");
        }
    }
    let executor = Executor::builder(toolbox.registry.clone())
        .middleware(Timeout::new(Duration::from_secs(args.timeout)))
        .build();
    let mut server = ToolServer::new(std::sync::Arc::new(executor))
        .with_info("toolbelt", env!("CARGO_PKG_VERSION"))
        .with_heartbeat(Duration::from_secs_f64(args.heartbeat));
    if let Some(filter) = tool_filter(&args.tools, &args.exclude_tools) {
        server = server.with_filter(filter);
    }

    let shutdown = CancellationToken::new();
    let signal_token = shutdown.clone();
    let signals = tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        signal_token.cancel();
    });
    let watcher = server.watch_registry(WATCH_INTERVAL, shutdown.child_token());

    let served = match http_addr {
        None => serve_stdio(server, shutdown.clone())
            .await
            .map_err(|e| CliError::failed(format!("serving on stdio: {e}"))),
        Some(addr) => serve_http(server, addr, token, &args, shutdown.clone()).await,
    };

    shutdown.cancel();
    signals.abort();
    let _ = watcher.await;
    // The aggregated servers' sessions end and their processes are reaped; background
    // shell tasks are killed.
    toolbox.close().await;
    served.map(|()| EXIT_OK)
}

async fn serve_http(
    server: ToolServer,
    addr: SocketAddr,
    token: Option<String>,
    args: &ServeArgs,
    shutdown: CancellationToken,
) -> Result<(), CliError> {
    let options = HttpServeOptions {
        token,
        allowed_origins: args.allow_origins.clone(),
        allowed_hosts: args.allow_hosts.clone(),
    };
    let http = HttpServer::bind(addr, server, options)
        .await
        .map_err(|e| CliError::failed(format!("cannot listen on {addr}: {e}")))?;
    let url = http
        .url()
        .map_err(|e| CliError::failed(format!("cannot read the bound address: {e}")))?;
    // A machine-readable line a supervisor (or a test) can wait for: the real URL, also when
    // port 0 asked for any free port.
    eprintln!("toolbelt: serving MCP on {url}");
    http.run(shutdown)
        .await
        .map_err(|e| CliError::failed(format!("serving HTTP: {e}")))
}

/// `--tools` and `--exclude-tools` as one filter; `None` when neither is given.
fn tool_filter(include: &[String], exclude: &[String]) -> Option<ToolFilter> {
    let include = (!include.is_empty()).then(|| ToolFilter::include_names(include.to_vec()));
    let exclude = (!exclude.is_empty()).then(|| ToolFilter::exclude_names(exclude.to_vec()));
    match (include, exclude) {
        (Some(i), Some(e)) => Some(i.and(e)),
        (i, e) => i.or(e),
    }
}

/// `PORT` (on 127.0.0.1), `IP:PORT`, `[IPv6]:PORT` or `HOST:PORT` (resolved locally).
fn parse_addr(text: &str) -> Result<SocketAddr, CliError> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let mut resolved = text.to_socket_addrs().map_err(|e| {
        CliError::usage(format!(
            "--http {text:?}: expected PORT, IP:PORT or HOST:PORT ({e})"
        ))
    })?;
    resolved
        .next()
        .ok_or_else(|| CliError::usage(format!("--http {text:?}: the host has no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_binds_loopback() {
        assert_eq!(
            parse_addr("8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(parse_addr("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert!(parse_addr("not an address").is_err());
    }
}
