//! The `toolbelt` command line: run tools, talk to MCP servers, serve tools over MCP, and run
//! an agent. Each subcommand lives in its own module.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Toolbelt: the tool layer for LLM agents.
#[derive(Parser, Debug)]
#[command(name = "toolbelt", version, about = "Toolbelt: the tool layer for LLM agents", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

/// The subcommands; later issues add theirs here (one module each).
#[derive(Subcommand, Debug)]
enum Command {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => {
            use clap::CommandFactory;
            // With no subcommand, show the help rather than doing nothing silently.
            let _ = Cli::command().print_help();
            ExitCode::from(2)
        }
        Some(command) => match command {},
    }
}
