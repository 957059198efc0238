//! `toolbelt run PROMPT`: one question to the agent, with the built-in tools in `--dir` and
//! the MCP servers of `--mcp-config`. The answer streams to stdout; tool activity goes to
//! stderr as one compact line per call. Exit code 0 when the run completed, 1 when it ended
//! with an error (the model failed, too many tool rounds, interrupted), 2 for bad flags or no
//! model configured.

use clap::Args;

use crate::agent_cli::{AgentArgs, AgentSession, Renderer, Spinner, model_from};
use crate::common::{CliError, EXIT_OK, EXIT_TOOL_FAILED, Outcome};

/// Flags of `toolbelt run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// What to ask the agent (`-` reads it from stdin).
    prompt: String,
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
    let session = AgentSession::open(&args.agent, model, None).await?;
    let mut renderer = Renderer::new(Spinner::new());
    let summary = renderer
        .render_until_interrupted(session.start(&prompt))
        .await;
    session.close(&args.agent).await;
    match summary {
        None => Err(CliError::failed("interrupted")),
        Some(summary) if summary.failed => Ok(EXIT_TOOL_FAILED),
        Some(_) => Ok(EXIT_OK),
    }
}
