//! The `toolbelt` command line.

use clap::Parser;

/// Toolbelt: the tool layer for LLM agents.
#[derive(Parser, Debug)]
#[command(name = "toolbelt", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
