//! `toolbelt chat`: a conversation with the agent, one line of stdin per message, with the
//! same tools and flags as `toolbelt run`. Tools not declared read-only (Write, Edit, Bash, …)
//! ask for approval on the terminal first, per `--approval` (`--yes` never asks); when stdin
//! is not a terminal such calls are refused, since a piped line must not approve a command.
//! `/exit` or end of input leaves (exit 0, or 1 if an answer ended with an error); Ctrl-C
//! during an answer stops that answer only, at the prompt it leaves with exit code 130.

use std::io::{IsTerminal, Write};

use clap::Args;

use crate::agent_cli::{
    AgentArgs, AgentSession, Format, Renderer, RunEnd, Spinner, approval_from, model_from,
    shared_stdin, stop_signal, watch_run,
};
use crate::common::{EXIT_OK, EXIT_TOOL_FAILED, Outcome};

/// Flags of `toolbelt chat`.
#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    agent: AgentArgs,
}

/// Runs `toolbelt chat`.
pub async fn run(args: ChatArgs) -> Outcome {
    let model = model_from(&args.agent)?;
    let stdin = shared_stdin();
    let spinner = Spinner::new(Format::Human);
    let model = model.with_retry_observer(spinner.retry_observer());
    let approval = approval_from(&args.agent, &stdin, &spinner);
    let session = AgentSession::open(&args.agent, model, approval, &spinner).await?;
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "toolbelt chat, session {}. /exit or Ctrl-D leaves.",
            session.session_id
        );
    }

    let mut failed = false;
    let mut stopped_by = None;
    loop {
        if interactive {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        let line = tokio::select! {
            line = async { stdin.lock().await.next_line().await } => line,
            signal = stop_signal() => {
                stopped_by = Some(signal);
                break;
            }
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(err) => {
                eprintln!("toolbelt: cannot read stdin: {err}");
                failed = true;
                break;
            }
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if matches!(text, "/exit" | "/quit") {
            break;
        }
        let mut renderer = Renderer::new(spinner.clone(), Format::Human);
        // A signal during an answer stops that answer only.
        if let RunEnd::Completed(summary) = watch_run(&mut renderer, session.start(text)).await {
            failed |= summary.failed;
        }
    }
    session.close(&args.agent).await;
    Ok(match stopped_by {
        Some(signal) => signal.exit_code(),
        None if failed => EXIT_TOOL_FAILED,
        None => EXIT_OK,
    })
}
