//! `toolbelt chat`: a conversation with the agent, one line of stdin per message, with the
//! same tools and flags as `toolbelt run`. Destructive tools (Write, Edit, Bash, …) ask for
//! approval on stderr first unless `--yes`. `/exit`, end of input or Ctrl-C at the prompt
//! leaves; Ctrl-C during an answer stops that answer only.

use std::io::{IsTerminal, Write};

use clap::Args;

use crate::agent_cli::{
    AgentArgs, AgentSession, Approval, Renderer, Spinner, model_from, shared_stdin,
};
use crate::common::{EXIT_OK, EXIT_TOOL_FAILED, Outcome, shutdown_signal};

/// Flags of `toolbelt chat`.
#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// Run destructive tools without asking.
    #[arg(long, short = 'y')]
    yes: bool,
}

/// Runs `toolbelt chat`.
pub async fn run(args: ChatArgs) -> Outcome {
    let model = model_from(&args.agent)?;
    let stdin = shared_stdin();
    let spinner = Spinner::new();
    let approval = (!args.yes).then(|| Approval::new(stdin.clone(), spinner.clone()));
    let session = AgentSession::open(&args.agent, model, approval).await?;
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "toolbelt chat, session {}. /exit or Ctrl-D leaves.",
            session.session_id
        );
    }

    let mut failed = false;
    loop {
        if interactive {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        let line = tokio::select! {
            line = async { stdin.lock().await.next_line().await } => line,
            () = shutdown_signal() => break,
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
        let mut renderer = Renderer::new(spinner.clone());
        // Ctrl-C during an answer stops that answer only.
        if let Some(summary) = renderer.render_until_interrupted(session.start(text)).await {
            failed |= summary.failed;
        }
    }
    session.close(&args.agent).await;
    Ok(if failed { EXIT_TOOL_FAILED } else { EXIT_OK })
}
