//! `toolbelt chat`: a conversation with the agent, one line of stdin per message, with the
//! same tools and flags as `toolbelt run`. Tools not declared read-only (Write, Edit, Bash, …)
//! ask for approval on the terminal first, per `--approval` (`--yes` never asks); when stdin
//! is not a terminal such calls are refused, since a piped line must not approve a command.
//! `/exit` or end of input leaves (exit 0, or 1 if an answer ended with an error); Ctrl-C
//! during an answer stops that answer only, at the prompt it leaves with exit code 130.
//!
//! A line starting with `/` is a command for `chat` itself, never sent to the model (as in
//! Claude Code): `/help`, `/clear` (a new session), `/tools`, `/model`, `/sessions`,
//! `/resume ID`, `/exit`; an unknown one says so. `/sessions` lists the store's sessions as
//! `toolbelt sessions list` does (newest first, each by its first prompt).
//!
//! `--continue` goes on with the store's most recently updated session, or starts a new one
//! (saying so) when it holds none.

use std::io::{IsTerminal, Write};

use clap::Args;

use toolbelt::agent::RunInput;

use crate::agent_cli::{
    APP, AgentArgs, AgentSession, Format, MAX_STOP_ROUNDS, Renderer, RunEnd, Spinner, USER,
    approval_from, model_from, new_session_id, resolve_continue, shared_stdin, watch_run,
};
use crate::common::{EXIT_OK, EXIT_TOOL_FAILED, Outcome};
use crate::signal::stop_signal;

/// Flags of `toolbelt chat`.
#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    agent: AgentArgs,
}

/// Runs `toolbelt chat`.
pub async fn run(mut args: ChatArgs) -> Outcome {
    let _script = crate::agent_cli::scripted::start_if_named(&mut args.agent).await?;
    let model = model_from(&args.agent)?;
    resolve_continue(&mut args.agent, true).await?;
    let stdin = shared_stdin();
    let spinner = Spinner::new(Format::Human);
    let model = model.with_retry_observer(spinner.retry_observer());
    let model_name = toolbelt::model::Model::name(&model).to_string();
    let approval = approval_from(&stdin, &spinner);
    let mut session = AgentSession::open(&args.agent, model, approval, &spinner).await?;
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "toolbelt chat, session {}. /help lists the commands; /exit or Ctrl-D leaves.",
            session.session_id
        );
    }

    let mut session_id = session.session_id.clone();
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
        if let Some(command) = text.strip_prefix('/') {
            match slash_command(command, &session, &model_name, &mut session_id).await {
                Next::Prompt => continue,
                Next::Leave => break,
            }
        }
        let sent = match session.prompt_hooks(&session_id, text).await {
            Ok(sent) => sent,
            Err(why) => {
                // A hook's own words (its stderr) may hold anything: escaped.
                eprintln!(
                    "toolbelt: the prompt was not sent: {}",
                    toolbelt::visible(&why)
                );
                continue;
            }
        };
        let mut renderer = Renderer::new(spinner.clone(), Format::Human);
        let mut input = RunInput::from(sent);
        // A Stop hook may send the agent on, a bounded number of times per prompt.
        for round in 0..=MAX_STOP_ROUNDS {
            // A signal during an answer stops that answer only.
            let events = session.start_with(&session_id, input, Default::default());
            let RunEnd::Completed(summary) = watch_run(&mut renderer, events).await else {
                break;
            };
            failed |= summary.failed;
            if summary.failed || summary.paused() || round == MAX_STOP_ROUNDS {
                break;
            }
            let Some(reason) = session.stop_hooks(&session_id, round > 0).await else {
                break;
            };
            input = RunInput::from(reason);
        }
    }
    // The resume hint names the session the chat ended in.
    session.session_id = session_id;
    session.close(&args.agent).await;
    Ok(match stopped_by {
        Some(signal) => signal.exit_code(),
        None if failed => EXIT_TOOL_FAILED,
        None => EXIT_OK,
    })
}

/// What the loop does after a command.
enum Next {
    Prompt,
    Leave,
}

const HELP: &str = "\
/help         this list
/clear        start a new session (the conversation so far stays stored)
/tools        the tools the agent may call
/model        the model answering
/sessions     the stored sessions of this store, newest first, with their first prompt
/resume ID    go on with a stored session
/exit         leave (also /quit, Ctrl-D)
Any other line goes to the model.";

/// Runs the chat command `command` (the line without its `/`), printing on stderr.
async fn slash_command(
    command: &str,
    session: &AgentSession,
    model_name: &str,
    session_id: &mut String,
) -> Next {
    let (name, rest) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(name, rest)| (name, rest.trim()));
    match name {
        "exit" | "quit" => return Next::Leave,
        "help" | "?" => eprintln!("{HELP}"),
        "clear" | "new" => {
            *session_id = new_session_id();
            eprintln!("new session {session_id}");
        }
        "tools" => {
            let tools = session.toolbox.registry.tool_names();
            let noun = if tools.len() == 1 { "tool" } else { "tools" };
            eprintln!("{} {noun}: {}", tools.len(), tools.join(", "));
        }
        "model" => eprintln!("model: {}", toolbelt::visible(model_name)),
        "sessions" => match crate::sessions::listed(session.runner.sessions().as_ref()).await {
            Ok(listed) if listed.is_empty() => eprintln!("no stored sessions"),
            Ok(listed) => {
                for s in listed {
                    let mark = if s.id == *session_id {
                        " (this one)"
                    } else {
                        ""
                    };
                    eprintln!("{}{mark}", crate::sessions::line_of(&s));
                }
            }
            Err(err) => eprintln!("toolbelt: cannot list the sessions: {}", err.message),
        },
        "resume" if rest.is_empty() => eprintln!("/resume needs a session id (see /sessions)"),
        "resume" => match session.runner.sessions().list_sessions(APP, USER).await {
            Ok(ids) if ids.iter().any(|id| id == rest) => {
                *session_id = rest.to_string();
                eprintln!("resumed session {session_id}");
            }
            Ok(_) => eprintln!(
                "no stored session {}; /sessions lists them",
                toolbelt::visible(rest)
            ),
            Err(err) => eprintln!("toolbelt: cannot list the sessions: {err}"),
        },
        _ => eprintln!(
            "unknown command /{}; /help lists them (a message starting with / is not sent)",
            toolbelt::visible(name)
        ),
    }
    Next::Prompt
}
