//! `toolbelt run PROMPT`: one question to the agent, with the built-in tools in `--dir` and
//! the MCP servers of `--mcp-config`. Only the final answer goes to stdout; the text the
//! model writes between tool calls, one line per tool call, warnings and errors go to stderr.
//! With `--json`, stdout carries every event of the run instead, one JSON object per line
//! (the `toolbelt::agent::Event` serde form, a stable format).
//!
//! Exit codes: 0 the run completed, 1 it ended with an error event (the model or the session
//! store failed, too many tool rounds), 2 bad flags or no model configured, 130 after SIGINT
//! and 143 after SIGTERM (the run is cancelled and its tools stopped first).

use clap::Args;

use crate::agent_cli::{
    AgentArgs, AgentSession, Format, Renderer, RunEnd, Spinner, approval_from, model_from,
    shared_stdin, watch_run,
};
use crate::common::{CliError, EXIT_OK, EXIT_TOOL_FAILED, Outcome};

/// Flags of `toolbelt run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// What to ask the agent (`-` reads it from stdin).
    prompt: String,
    /// Print every event of the run on stdout as one JSON object per line (a stable format:
    /// see the README) instead of the answer.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    agent: AgentArgs,
}

/// Runs `toolbelt run`.
pub async fn run(args: RunArgs) -> Outcome {
    // The model first: without one there is nothing to do, and nothing should be opened.
    let model = model_from(&args.agent)?;
    let prompt = if args.prompt == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| CliError::usage(format!("cannot read the prompt from stdin: {e}")))?
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        return Err(CliError::usage("the prompt is empty"));
    }
    let format = if args.json {
        Format::Json
    } else {
        Format::Human
    };
    let spinner = Spinner::new(format);
    let model = model.with_retry_observer(spinner.retry_observer());
    let approval = approval_from(&shared_stdin(), &spinner);
    let session = AgentSession::open(&args.agent, model, approval, &spinner).await?;
    let mut renderer = Renderer::new(spinner, format);
    let end = watch_run(&mut renderer, session.start(&prompt)).await;
    session.close(&args.agent).await;
    match end {
        RunEnd::Stopped(signal) => {
            eprintln!("toolbelt: interrupted");
            Ok(signal.exit_code())
        }
        RunEnd::Completed(summary) if summary.failed => Ok(EXIT_TOOL_FAILED),
        RunEnd::Completed(_) => Ok(EXIT_OK),
    }
}
