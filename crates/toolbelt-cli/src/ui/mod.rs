//! `toolbelt ui --session FILE`: a local web page of the sessions and runs in a session file,
//! live as they happen (runs of this process and of any `toolbelt run --session FILE`), with
//! a chat box that starts runs; and `serve --ui ADDR`, the live list of a server's MCP calls.
//!
//! What the page shows of a run: the invocation tree (agents, transfers, agents run as
//! tools), a card per model call (its text and tool calls, tokens, latency, the size of the
//! conversation it was sent), a card per tool call (arguments, the result as a user sees it,
//! errors, duration, an Edit's diff, images), and a timeline.
//!
//! The page is a few plain files embedded in the binary (`assets/ui/`: HTML, CSS, three
//! JavaScript modules, no build step): a fixed header and session list with the run pane
//! scrolling beside them. It writes everything that came from a model, a tool or a file as
//! text (never as HTML; the model's Markdown is laid out by `markdown.js` from text nodes, links
//! for http and https only) and is served with a strict Content-Security-Policy, so a tool
//! result holding `<script>` is shown, not run. The page's first answer carries the data its
//! first paint shows (the sessions, the newest one's events) in a JSON data block, which the
//! policy lets through because it is never run.
//!
//! Access follows `serve --http` ([`auth`]): a token (given, or generated and printed within
//! the URL on loopback), `--no-auth` on loopback only, no start without a token on an address
//! other machines can reach; `Host` and `Origin` are checked either way.
//!
//! Modules: [`auth`] (who may connect), [`feed`] (what the page is told, from the file, from
//! this process's runs, from serve's calls), [`runs`] (the chat box's runs), [`server`] (the
//! routes).

mod auth;
mod feed;
mod runs;
mod server;

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Args;
use tokio::net::TcpListener;
use toolbelt::agent::session::SqliteSessionService;
use toolbelt::exec::DynMiddleware;
use toolbelt::mcp::server::CancellationToken;

use crate::agent_cli::{AgentArgs, AgentSession};
use crate::common::{CliError, EXIT_OK, EXIT_USAGE, Outcome};
use crate::signal::stop_signal;
use auth::{Access, Guard};
use feed::Hub;
use server::{Mode, UiState};

pub use auth::TOKEN_ENV;

/// Where `toolbelt ui` listens unless told otherwise.
const DEFAULT_ADDR: &str = "127.0.0.1:8810";

/// Flags of `toolbelt ui`.
#[derive(Args, Debug)]
pub struct UiArgs {
    /// Serve the page at ADDR (`PORT`, `HOST:PORT` or `IP:PORT`; a bare port binds
    /// 127.0.0.1).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_ADDR)]
    http: String,
    /// Require this token (also read from TOOLBELT_UI_TOKEN). Without one, a loopback
    /// address gets a random token, printed within the URL to open; any other address
    /// refuses to start.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Serve without a token. Allowed on a loopback address only (every local user and
    /// program can then start runs).
    #[arg(long, conflicts_with = "token")]
    no_auth: bool,
    /// A `Host` value to accept besides the loopback names and the bound address
    /// (repeatable; needed behind a proxy or under another name).
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// The session file (`--session FILE`, required) and the agent the chat box runs: the
    /// flags of `toolbelt run`. Without a model configured the page only shows sessions.
    #[command(flatten)]
    agent: AgentArgs,
}

/// Runs `toolbelt ui` until SIGINT or SIGTERM.
pub async fn run(mut args: UiArgs) -> Outcome {
    let addr = crate::serve::parse_addr(&args.http)?;
    let _script = crate::agent_cli::scripted::start_if_named(&mut args.agent).await?;
    let Some(path) = args.agent.session.clone() else {
        return Err(CliError::usage(
            "toolbelt ui needs the session file: --session FILE (the one `toolbelt run --session` writes)",
        ));
    };
    if args.agent.continue_last {
        return Err(CliError::usage(
            "toolbelt ui shows every session of the file (the newest first); --continue is \
             for chat and run",
        ));
    }
    if path.to_string_lossy().contains("://") {
        return Err(CliError::usage(
            "toolbelt ui follows a SQLite session file (--session FILE); sessions in a server \
             (postgres://, redis://) are not shown by the web UI yet",
        ));
    }
    let access = auth::resolve(
        addr,
        args.token.clone(),
        std::env::var(TOKEN_ENV).ok(),
        args.no_auth,
    )?;
    let store = SqliteSessionService::open(&path)
        .map_err(|e| CliError::failed(format!("--session {}: {e}", path.display())))?;

    // The chat box needs a model; without one configured at all the page still shows the
    // sessions. A model named by flags but unusable is a mistake worth stopping for.
    let explicit = args.agent.model.is_some() || args.agent.base_url.is_some();
    let (model, chat_off) = match crate::agent_cli::model_from(&args.agent) {
        Ok(model) => (Some(model), None),
        Err(err) if !explicit && err.code == EXIT_USAGE => {
            eprintln!("toolbelt: no model configured, so the chat box is off");
            (None, Some(err.message))
        }
        Err(err) => return Err(err),
    };

    let stop = CancellationToken::new();
    let hub = Hub::new();
    let runs = match model {
        Some(model) => {
            // Approvals are asked in the page: a call the rules ask about pauses its run,
            // and the page's buttons resume it (`--yes` runs every call).
            let approval = None;
            // A cold tool-search index build shows its progress on the terminal.
            let status = crate::progress::Progress::on_stderr(false);
            let session = AgentSession::open(&args.agent, model, approval, &status).await?;
            Some(Arc::new(runs::Runs::new(
                session,
                hub.clone(),
                stop.clone(),
            )))
        }
        None => None,
    };
    let last_seq = match store.last_seq().await {
        Ok(seq) => seq,
        Err(e) => {
            close(runs, &stop).await;
            return Err(CliError::failed(format!(
                "--session {}: {e}",
                path.display()
            )));
        }
    };
    let poller = tokio::spawn(feed::poll_store(
        store.clone(),
        hub.clone(),
        last_seq,
        stop.clone(),
    ));
    let state = Arc::new(UiState {
        mode: Mode::Sessions,
        hub,
        store: Some(store),
        runs: runs.clone(),
        chat_off,
        stop: stop.clone(),
    });
    let served = serve(addr, access, &args.allow_hosts, state, stop.clone()).await;
    stop.cancel();
    let _ = poller.await;
    close(runs, &stop).await;
    served.map(|()| EXIT_OK)
}

async fn close(runs: Option<Arc<runs::Runs>>, stop: &CancellationToken) {
    stop.cancel();
    if let Some(runs) = runs {
        runs.close().await;
    }
}

/// Binds `addr`, prints where to go, and serves until a signal (or `stop`).
async fn serve(
    addr: SocketAddr,
    access: Access,
    allow_hosts: &[String],
    state: Arc<UiState>,
    stop: CancellationToken,
) -> Result<(), CliError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::failed(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::failed(format!("cannot read the bound address: {e}")))?;
    let guard = Arc::new(Guard::new(access, bound, allow_hosts));
    let base = format!("http://{bound}/");
    if guard.generated() {
        eprintln!(
            "toolbelt: no token given, so one was generated and is part of the URL below \
             (choose one with --token or {TOKEN_ENV}; --no-auth serves loopback without one)"
        );
    }
    // A machine-readable line a supervisor (or a test) can wait for; it comes last.
    eprintln!("toolbelt: web UI on {}", guard.url_to_open(&base));
    let app = server::router(state, guard);
    let signals = stop.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = stop_signal() => {}
                _ = signals.cancelled() => {}
            }
            // Ends the event streams too, so open pages do not hold the shutdown.
            signals.cancel();
        })
        .await
        .map_err(|e| CliError::failed(format!("serving the web UI: {e}")))
}

/// `serve --ui ADDR`: the page of a server's MCP calls. Returns the middleware to put
/// outermost in the serve executor; the page runs until `stop`.
pub(crate) async fn start_for_serve(
    addr_text: &str,
    stop: CancellationToken,
) -> Result<(DynMiddleware, tokio::task::JoinHandle<()>), CliError> {
    let addr = crate::serve::parse_addr(addr_text)?;
    let access = auth::resolve(addr, None, std::env::var(TOKEN_ENV).ok(), false)?;
    let hub = Hub::new();
    let tap: DynMiddleware = Arc::new(feed::CallTap::new(hub.clone()));
    let state = Arc::new(UiState {
        mode: Mode::Serve,
        hub,
        store: None,
        runs: None,
        chat_off: Some("serve --ui shows the server's calls; runs start from `toolbelt ui`".into()),
        stop: stop.clone(),
    });
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::failed(format!("--ui: cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::failed(format!("--ui: cannot read the bound address: {e}")))?;
    let guard = Arc::new(Guard::new(access, bound, &[]));
    eprintln!(
        "toolbelt: web UI of the calls on {}",
        guard.url_to_open(&format!("http://{bound}/"))
    );
    let app = server::router(state, guard);
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the web UI stopped");
        }
    });
    Ok((tap, task))
}
