//! The `toolbelt` command line: run tools, talk to MCP servers, serve tools over MCP, and run
//! an agent. Each subcommand lives in its own module; what they share (building the tool
//! sets from flags, exit codes, logging) is in [`common`].

mod agent_cli;
mod browser;
mod chat;
mod common;
mod knowledge;
mod mcp;
mod mcp_client;
mod mcp_login;
mod output;
mod progress;
mod run;
mod serve;
mod sessions;
mod signal;
mod skills;
#[cfg(feature = "otel")]
mod telemetry;
mod tools;
mod tools_search;
mod ui;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Toolbelt: the tool layer for LLM agents.
#[derive(Parser, Debug)]
#[command(name = "toolbelt", version, about = "Toolbelt: the tool layer for LLM agents", long_about = None)]
struct Cli {
    /// How much to log to stderr: error, warn, info, debug or trace (`TOOLBELT_LOG`, an
    /// env-filter directive, overrides it).
    #[arg(
        long,
        global = true,
        value_name = "LEVEL",
        default_value = "warn",
        value_parser = ["off", "error", "warn", "info", "debug", "trace"]
    )]
    log_level: String,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The subcommands, one module each.
#[derive(Subcommand, Debug)]
enum Command {
    /// List the built-in tools (and configured MCP servers' tools) or call one through the
    /// executor.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// List the tools of one MCP server or call one of them (the server named by --stdio,
    /// --sse, --http, or --config and --server).
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Serve the built-in tools (and configured MCP servers' tools) to MCP clients over
    /// stdio or streamable HTTP.
    Serve(serve::ServeArgs),
    /// Ask the agent one question: the answer streams to stdout, tool activity to stderr.
    /// Needs a model: OPENAI_BASE_URL (or OPENAI_API_KEY) and TOOLBELT_MODEL, or --base-url
    /// and --model.
    Run(run::RunArgs),
    /// Talk to the agent, one line per message; destructive tools ask first unless --yes.
    Chat(chat::ChatArgs),
    /// The conversations a --session store keeps (a SQLite file, postgres://, redis://):
    /// list them with their first prompt, show one, or delete one. `chat --continue` goes on
    /// with the latest, `--session-id ID` with any.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// The skills an agent in --dir is offered: list them, or show one.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// A knowledge base of files and folders: index it, search it as the agent's
    /// knowledge_search tools do, or show what it holds.
    #[command(subcommand)]
    Knowledge(knowledge::KnowledgeCommand),
    /// A local web page of the runs in a session file, live, with a chat box that starts
    /// runs (needs --session FILE; the model flags as for `run`).
    Ui(ui::UiArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        use clap::CommandFactory;
        // With no subcommand, show the help rather than doing nothing silently.
        let _ = Cli::command().print_help();
        return ExitCode::from(common::EXIT_USAGE);
    };
    // Before any thread starts, and after clap has copied the arguments: this process's own
    // secrets (API keys, serve's token) out of what the processes it starts can read of it.
    // SAFETY: only this thread runs, and nothing reads the arguments again.
    let sealed = unsafe { toolbelt::core::seal_secrets() };
    let logging = match common::init_logging(&cli.log_level) {
        Ok(logging) => logging,
        Err(err) => return common::finish(Err(err)),
    };
    tracing::debug!(
        variables = ?sealed.variables,
        arguments = sealed.arguments,
        non_dumpable = sealed.non_dumpable,
        "secrets sealed"
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("toolbelt: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async move {
        match command {
            Command::Tools(command) => tools::run(command).await,
            Command::Mcp(command) => mcp::run(command).await,
            Command::Serve(args) => serve::run(args).await,
            Command::Run(args) => run::run(args).await,
            Command::Chat(args) => chat::run(args).await,
            Command::Sessions(command) => sessions::run(command).await,
            Command::Skills(command) => skills::run(command).await,
            Command::Knowledge(command) => knowledge::run(command).await,
            Command::Ui(args) => ui::run(args).await,
        }
    });
    // The command has closed what it opened. A read of stdin still pending (chat left at its
    // prompt) runs on a blocking thread that would hold the process open forever.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // After every outcome (errors and SIGINT return here too): the last spans go out.
    logging.shutdown();
    common::finish(outcome)
}
