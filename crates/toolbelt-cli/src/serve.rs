//! `toolbelt serve`: the built-in tools (confined to `--dir`) and the tools of every MCP
//! server in `--mcp-config`, offered to any MCP client over stdio or streamable HTTP.
//!
//! Every call runs through the executor pipeline (validation, the per-call time limit). A
//! client's `notifications/cancelled` cancels the call (a running Bash command's process group
//! is killed, an aggregated server's call is cancelled there too); calls with a progress token
//! get progress notifications (an aggregated server's own included) and a heartbeat; the
//! clients hear `notifications/tools/list_changed` when an aggregated server's tools change.
//!
//! The aggregated servers connect in the background (`--connect-timeout` per attempt, retried
//! with a growing delay): `initialize` and `tools/list` are answered at once with whatever is
//! up, and a server's tools appear when it connects. The `toolbelt://status` resource and the
//! log say which servers are connected, connecting or failed (with the error). Their
//! resources, prompts, completions and log messages are relayed too; names and URIs are kept
//! apart as the library's `server` module docs say (`--always-prefix` prefixes all of them).
//! Their elicitation and sampling requests go to the client whose call made them (when it
//! declared the capability), and `roots/list` to a client offering roots, else `--dir` is the
//! one root.
//!
//! Over HTTP the server binds 127.0.0.1 unless told otherwise, checks `Host` and `Origin`
//! (DNS-rebinding protection) and requires `Authorization: Bearer TOKEN`, safe by default:
//!
//! - `--token` (or `TOOLBELT_SERVE_TOKEN`) sets the token;
//! - on a loopback address without one, a random token is generated and printed on stderr
//!   with the URL (as Jupyter does), unless `--no-auth` says to serve without one;
//! - an address other machines can reach (`0.0.0.0`, a LAN address) without a token is
//!   refused (exit 2), and `--no-auth` is refused there too: the tools include Bash.
//!
//! Idle sessions are closed after `--session-idle-timeout` and at most `--max-sessions` are
//! open (a new one replaces the session idle the longest, or gets 503 when all are busy).
//! Each session has its own Read-before-Edit record (`session_reads.rs`), dropped when the
//! session closes: a Read in one session lets that session change the file, not another.
//! Over stdio the one client's record is the tool set's.
//!
//! `--shared-state redis://…` (built with the `redis` feature) makes the process one of
//! several replicas behind a load balancer, all serving one `--dir`: a session opened on one
//! is accepted by every other (its record in Redis, expiring after the idle timeout), each
//! session's reads are kept in Redis so a Read through one replica lets the same session
//! Edit through another, and a change to a file holds an `flock` in `--lock-dir` (shared by
//! the replicas) from the freshness check to the write, so no update is lost between them.
//! What a replica has for a client whose `GET` stream another replica holds goes through
//! Redis pub/sub: the `notifications/tools/list_changed` after a `--defer-tools` search (the
//! tools it loaded are kept per session in Redis, so every replica lists them),
//! `notifications/resources/updated` of a subscription, an unsubscribe reaching a replica
//! that does not hold the subscription, and the client's answer to an aggregated server's
//! elicitation, sampling or `roots/list` request reaching a replica that did not ask.
//! Progress travels on the call's own response, and a list change of the aggregated servers
//! is announced by every replica to the streams it holds. Limits: those messages are
//! delivered at most once, and a subscription's upstream side ends with the replica that
//! took it.
//! SIGINT or SIGTERM ends the sessions, closes the aggregated servers (reaping their
//! processes) and exits 0. Logs go to stderr only: in stdio mode stdout carries the protocol.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use toolbelt::builtin::fs::{ReadScope, ReadState};
use toolbelt::exec::{Executor, Timeout};
use toolbelt::mcp::server::{
    CancellationToken, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT,
    HttpServeOptions, HttpServer, SharedSessionStore, ToolServer, UpstreamOptions, serve_stdio,
};
use toolbelt::{ToolContext, ToolFilter};

use crate::common::{CliError, EXIT_OK, Outcome, ToolSourceArgs, Toolbox};

mod session_reads;
#[cfg(feature = "redis")]
mod shared_state;

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
    /// read from TOOLBELT_SERVE_TOKEN. Without either, a loopback server generates one and
    /// prints it; any other address refuses to start.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// HTTP only: serve without a token. Allowed on a loopback address only (every local
    /// user and program can then call the tools).
    #[arg(long, conflicts_with = "token")]
    no_auth: bool,
    /// HTTP only: close a session after this many seconds without a request, a response or
    /// an open stream (its client then starts a new one).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_SESSION_IDLE_TIMEOUT.as_secs_f64())]
    session_idle_timeout: f64,
    /// HTTP only: the most sessions open at once; a new one replaces the session idle the
    /// longest, or is refused with HTTP 503 when every session is busy.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
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
    /// How long one attempt to connect to an aggregated server (start, initialize, list its
    /// tools) may take, in seconds. Servers connect in the background: clients are served at
    /// once, and a server that fails or times out is tried again (its tools appear when it
    /// is up; `toolbelt://status` says where each server stands).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CONNECT_TIMEOUT.as_secs_f64())]
    connect_timeout: f64,
    /// Offer every tool and prompt of an aggregated server as `{server}_{name}` (and its
    /// resources under `toolbelt://servers/{server}/`), not only the names an earlier server
    /// in the `--mcp-config` file already took.
    #[arg(long)]
    always_prefix: bool,
    /// Also serve a web page of the live list of tool calls at ADDR (`PORT` or `IP:PORT`;
    /// its token from TOOLBELT_UI_TOKEN, else generated and printed within the URL on
    /// loopback; another address needs the token).
    #[arg(long, value_name = "ADDR")]
    ui: Option<String>,
    /// Offer each client a `tool_search` tool instead of the aggregated servers' tools (the
    /// built-in tools are listed as usual); the tools a client's search finds join that
    /// client's tool list, with `notifications/tools/list_changed`.
    #[arg(long)]
    defer_tools: bool,
    /// HTTP only: share sessions and reads with the other replicas serving this `--dir`
    /// through Redis at URL (`redis://[:PASSWORD@]HOST:PORT[/DB]`), so any replica answers
    /// any request. Needs a toolbelt built with the `redis` feature.
    #[arg(long, value_name = "URL")]
    shared_state: Option<String>,
    /// The prefix of the Redis keys `--shared-state` writes (replicas of one deployment use
    /// the same one).
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "toolbelt",
        requires = "shared_state"
    )]
    shared_state_prefix: String,
    /// With `--shared-state`: the folder of the per-file locks the replicas share (on a file
    /// system they all see, when they run on several machines). Default: toolbelt-locks-UID
    /// in the temp folder.
    #[arg(long, value_name = "DIR", requires = "shared_state")]
    lock_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    search: crate::agent_cli::tool_search::ServeSearchArgs,
    #[command(flatten)]
    knowledge: crate::knowledge::KnowledgeArgs,
    /// Run the calls this permission rule matches (Claude Code's syntax, as for `run`);
    /// repeatable, added to the settings files' rules. What no rule decides runs.
    #[arg(long, value_name = "RULE")]
    allow: Vec<String>,
    /// Ask the calling client (an elicitation form) before the calls this rule matches; a
    /// client that does not offer elicitation gets the call refused, saying why.
    #[arg(long, value_name = "RULE")]
    ask: Vec<String>,
    /// Refuse the calls this rule matches; a Read rule also keeps Grep and Glob out of those
    /// paths. Deny beats ask beats allow.
    #[arg(long, value_name = "RULE")]
    deny: Vec<String>,
}

/// Runs `toolbelt serve` until the client leaves (stdio) or SIGINT/SIGTERM arrives.
pub async fn run(args: ServeArgs) -> Outcome {
    // The deferred tools' ranker first: a bad embedder is a usage error before anything opens.
    let ranker = args.defer_tools.then(|| args.search.ranker()).transpose()?;
    let http_addr = args.http.as_deref().map(parse_addr).transpose()?;
    if !args.heartbeat.is_finite() || args.heartbeat <= 0.0 {
        return Err(CliError::usage(format!(
            "--heartbeat must be a positive number of seconds, got {}",
            args.heartbeat
        )));
    }
    let http_only = args.token.is_some()
        || args.shared_state.is_some()
        || args.no_auth
        || !args.allow_origins.is_empty()
        || !args.allow_hosts.is_empty();
    if http_addr.is_none() && http_only {
        return Err(CliError::usage(
            "--token, --no-auth, --allow-origin, --allow-host and --shared-state apply to --http only (stdio has one local client)",
        ));
    }
    if !args.session_idle_timeout.is_finite() || args.session_idle_timeout <= 0.0 {
        return Err(CliError::usage(format!(
            "--session-idle-timeout must be a positive number of seconds, got {}",
            args.session_idle_timeout
        )));
    }
    if !args.connect_timeout.is_finite() || args.connect_timeout <= 0.0 {
        return Err(CliError::usage(format!(
            "--connect-timeout must be a positive number of seconds, got {}",
            args.connect_timeout
        )));
    }
    if args.max_sessions == 0 {
        return Err(CliError::usage("--max-sessions must be at least 1"));
    }
    // Decided before any aggregated server starts, so a refusal leaves nothing behind.
    let auth = match http_addr {
        Some(addr) => Some(http_auth(&args, addr, std::env::var(TOKEN_ENV).ok())?),
        None => None,
    };

    // Indexed before any aggregated server starts, so a failure leaves nothing behind.
    let progress = crate::progress::Progress::on_stderr(false);
    let knowledge = args.knowledge.tools(&args.sources.dir, &progress).await?;

    let upstream_options = UpstreamOptions {
        connect_timeout: Duration::from_secs_f64(args.connect_timeout),
        always_prefix: args.always_prefix,
    };
    let shared = match &args.shared_state {
        Some(url) => Some(connect_shared(url, &args).await?),
        None => None,
    };
    // Over HTTP each MCP session has reads of its own: in Redis with --shared-state, else
    // here. Over stdio the one client's reads are the tool set's.
    let local_reads = match (&shared, http_addr) {
        (None, Some(_)) => Some(session_reads::SessionReads::new()?),
        _ => None,
    };
    let reads = match (&shared, &local_reads) {
        (Some(shared), _) => Some(shared.reads.clone()),
        (None, Some(local)) => Some(local.state()),
        (None, None) => None,
    };
    let lists = crate::agent_cli::permissions::RuleLists {
        allow: &args.allow,
        ask: &args.ask,
        deny: &args.deny,
    };
    let rules = crate::agent_cli::permissions::serve_rules(
        &crate::common::canonical_dir(&args.sources.dir)?,
        lists,
    )?;
    let hidden = rules.hidden_paths();
    let (toolbox, upstreams) =
        Toolbox::open_aggregating(&args.sources, upstream_options, reads, hidden)?;
    let toolbox = toolbox.connect_remote().await?;
    toolbox.announce_sandbox();
    // Direct tools of the registry: an aggregated server's tool of the same name is renamed.
    if let Err(err) = toolbox.registry.register_all(knowledge) {
        toolbox.close().await;
        return Err(CliError::usage(err.to_string()));
    }
    if args.sources.mcp_config.is_none() {
        // Only the built-in tools: a name none of them has is a mistake worth saying. (An
        // aggregated server's tools are not known until it connects.)
        let snapshot = toolbox.list(&ToolContext::new()).await;
        for name in &args.tools {
            if snapshot.get(name).is_none() {
                tracing::warn!("--tools names {name:?}, which no tool set offers");
                eprintln!("toolbelt: warning: --tools names {name:?}, which no tool set offers");
            }
        }
    }
    let shutdown = CancellationToken::new();
    // The web UI's tap goes outermost, so it sees a timed-out call as one call that failed.
    let ui = match &args.ui {
        Some(addr) => match crate::ui::start_for_serve(addr, shutdown.child_token()).await {
            Ok(ui) => Some(ui),
            Err(err) => {
                toolbox.close().await;
                return Err(err);
            }
        },
        None => None,
    };
    let mut executor = Executor::builder(toolbox.registry.clone());
    if let Some((tap, _)) = &ui {
        executor = executor.middleware_arc(tap.clone());
    }
    let executor = executor
        .middleware(Timeout::new(Duration::from_secs(args.timeout)))
        .permissions(std::sync::Arc::new(rules))
        .approver(std::sync::Arc::new(
            toolbelt::mcp::server::ElicitingApprover,
        ))
        .build();
    toolbox.bind_executor(&executor);
    let mut server = ToolServer::new(std::sync::Arc::new(executor))
        .with_info("toolbelt", env!("CARGO_PKG_VERSION"))
        .with_heartbeat(Duration::from_secs_f64(args.heartbeat))
        .with_upstreams(upstreams.clone());
    if http_addr.is_some() {
        // Each session's reads are its own, wherever its calls land.
        server = server
            .with_session_context(|ctx, session| ctx.with_extension(ReadScope(session.into())));
    }
    if let Some(local) = &local_reads {
        server = server.on_session_closed(local.forget_on_close());
    }
    if let Some(filter) = tool_filter(&args.tools, &args.exclude_tools) {
        server = server.with_filter(filter);
    }
    if let Some(ranker) = ranker {
        use crate::agent_cli::tool_search::not_builtin;
        server = server.with_deferred_tools(not_builtin(&toolbox).await, ranker);
    }

    let signal_token = shutdown.clone();
    let signals = tokio::spawn(async move {
        crate::signal::stop_signal().await;
        tracing::info!("shutting down");
        signal_token.cancel();
    });
    let watcher = server.watch_registry(WATCH_INTERVAL, shutdown.child_token());
    upstreams.start(shutdown.child_token());

    let served = match http_addr {
        None => serve_stdio(server, shutdown.clone())
            .await
            .map_err(|e| CliError::failed(format!("serving on stdio: {e}"))),
        Some(addr) => {
            serve_http(
                server,
                addr,
                auth.unwrap_or(Auth::None),
                &args,
                shared.map(|s| s.sessions),
                shutdown.clone(),
            )
            .await
        }
    };

    shutdown.cancel();
    signals.abort();
    let _ = watcher.await;
    if let Some((_, page)) = ui {
        let _ = page.await;
    }
    // The aggregated servers' sessions end and their processes are reaped; background
    // shell tasks are killed.
    toolbox.close().await;
    served.map(|()| EXIT_OK)
}

/// How HTTP clients are authenticated.
#[derive(Debug, PartialEq, Eq)]
enum Auth {
    /// The token the user gave.
    Given(String),
    /// A random token made for this run (printed on stderr).
    Generated(String),
    /// `--no-auth` on loopback.
    None,
}

impl Auth {
    fn token(&self) -> Option<String> {
        match self {
            Auth::Given(token) | Auth::Generated(token) => Some(token.clone()),
            Auth::None => None,
        }
    }
}

/// The authentication for serving on `addr` (`env_token` is TOOLBELT_SERVE_TOKEN): a token
/// unless `--no-auth` on loopback; a usage error (exit 2) for an address other machines can
/// reach without a token.
fn http_auth(
    args: &ServeArgs,
    addr: SocketAddr,
    env_token: Option<String>,
) -> Result<Auth, CliError> {
    let from_env = env_token.filter(|t| !t.is_empty());
    let given = args.token.clone().filter(|t| !t.is_empty()).or(from_env);
    let loopback = addr.ip().to_canonical().is_loopback();
    match (given, args.no_auth) {
        (Some(_), true) => Err(CliError::usage(format!(
            "--no-auth contradicts the token in {TOKEN_ENV}; unset it or leave out --no-auth"
        ))),
        (Some(token), false) => Ok(Auth::Given(token)),
        (None, true) if loopback => Ok(Auth::None),
        (None, true) => Err(CliError::usage(format!(
            "--no-auth is allowed on a loopback address only, and {addr} is reachable from \
             other machines; give a token with --token or {TOKEN_ENV}"
        ))),
        (None, false) if loopback => Ok(Auth::Generated(random_token()?)),
        (None, false) => Err(CliError::usage(format!(
            "refusing to serve {addr} without a token: other machines could run the tools \
             (Bash included); give one with --token or {TOKEN_ENV}, or bind 127.0.0.1"
        ))),
    }
}

/// 32 random bytes from the operating system, in hex.
fn random_token() -> Result<String, CliError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| CliError::failed(format!("cannot generate a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

async fn serve_http(
    server: ToolServer,
    addr: SocketAddr,
    auth: Auth,
    args: &ServeArgs,
    shared_sessions: Option<Arc<dyn SharedSessionStore>>,
    shutdown: CancellationToken,
) -> Result<(), CliError> {
    let options = HttpServeOptions {
        token: auth.token(),
        allowed_origins: args.allow_origins.clone(),
        allowed_hosts: args.allow_hosts.clone(),
        session_idle_timeout: Duration::from_secs_f64(args.session_idle_timeout),
        max_sessions: args.max_sessions,
        shared_sessions,
    };
    let http = HttpServer::bind(addr, server, options)
        .await
        .map_err(|e| CliError::failed(format!("cannot listen on {addr}: {e}")))?;
    let url = http
        .url()
        .map_err(|e| CliError::failed(format!("cannot read the bound address: {e}")))?;
    match &auth {
        Auth::Generated(token) => {
            // As Jupyter does: the only place the token appears, so the user can connect.
            eprintln!(
                "toolbelt: no token given, so one was generated; clients send it as \
                 `Authorization: Bearer TOKEN` (choose one with --token or {TOKEN_ENV}; \
                 --no-auth serves loopback without one)"
            );
            eprintln!("toolbelt: bearer token: {token}");
        }
        Auth::None => eprintln!(
            "toolbelt: --no-auth: every local user and program can call the tools at {url}"
        ),
        Auth::Given(_) => {}
    }
    // A machine-readable line a supervisor (or a test) can wait for: the real URL, also when
    // port 0 asked for any free port. It comes last, after the token.
    eprintln!("toolbelt: serving MCP on {url}");
    http.run(shutdown)
        .await
        .map_err(|e| CliError::failed(format!("serving HTTP: {e}")))
}

/// What the replicas of a server share (`--shared-state`).
struct Shared {
    sessions: Arc<dyn SharedSessionStore>,
    reads: Arc<ReadState>,
}

/// Connects to the shared state at `url` and prepares the lock folder.
#[cfg(feature = "redis")]
async fn connect_shared(url: &str, args: &ServeArgs) -> Result<Shared, CliError> {
    let ttl = Duration::from_secs_f64(args.session_idle_timeout);
    let state = shared_state::RedisState::connect(url, &args.shared_state_prefix, ttl)
        .await
        .map_err(|e| CliError::failed(format!("--shared-state: {e}")))?;
    let locks = args
        .lock_dir
        .clone()
        .unwrap_or_else(ReadState::default_lock_dir);
    let reads = ReadState::shared(Arc::new(state.clone()), &locks)
        .map_err(|e| CliError::usage(format!("--lock-dir: {e}")))?;
    Ok(Shared {
        sessions: Arc::new(state),
        reads: Arc::new(reads),
    })
}

/// Without the `redis` feature there is nothing to connect to.
#[cfg(not(feature = "redis"))]
async fn connect_shared(_url: &str, _args: &ServeArgs) -> Result<Shared, CliError> {
    Err(CliError::usage(
        "--shared-state needs a toolbelt built with the redis feature \
         (cargo install toolbelt-cli --features redis)",
    ))
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
pub(crate) fn parse_addr(text: &str) -> Result<SocketAddr, CliError> {
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

    fn args(extra: &[&str]) -> ServeArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let mut argv = vec!["serve", "--http", "8808"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).serve
    }

    #[test]
    fn loopback_without_a_token_generates_one_and_other_addresses_refuse() {
        let loopback: SocketAddr = "127.0.0.1:8808".parse().unwrap();
        let anywhere: SocketAddr = "0.0.0.0:8808".parse().unwrap();
        let auth = |extra: &[&str], addr, env: Option<&str>| {
            http_auth(&args(extra), addr, env.map(String::from))
        };
        let Auth::Generated(token) = auth(&[], loopback, None).unwrap() else {
            panic!("loopback without a token generates one");
        };
        assert_eq!(token.len(), 64);
        assert_ne!(
            auth(&[], loopback, None).unwrap(),
            Auth::Generated(token),
            "each run gets its own token"
        );
        assert_eq!(auth(&["--no-auth"], loopback, None).unwrap(), Auth::None);
        assert_eq!(auth(&[], anywhere, None).unwrap_err().code, 2);
        assert_eq!(auth(&["--no-auth"], anywhere, None).unwrap_err().code, 2);
        assert_eq!(
            auth(&["--token", "t"], anywhere, None).unwrap(),
            Auth::Given("t".into())
        );
        assert_eq!(
            auth(&[], anywhere, Some("from-env")).unwrap(),
            Auth::Given("from-env".into())
        );
        assert_eq!(
            auth(&["--no-auth"], loopback, Some("x")).unwrap_err().code,
            2
        );
    }

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
