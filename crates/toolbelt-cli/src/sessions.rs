//! `toolbelt sessions list|show|rm --session FILE|URL`: the conversations a `--session`
//! store keeps (a SQLite file, PostgreSQL, Redis), found by their title (the first prompt),
//! read back, and deleted. What the model, the user or a tool wrote is escaped before the
//! terminal shows it.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use toolbelt::agent::session::title;
use toolbelt::agent::{AgentError, Event, EventKind, SessionKey, SessionService};
use toolbelt::model::Role;
use toolbelt::visible;

use crate::agent_cli::render::print_json;
use crate::agent_cli::{APP, USER, open_store};
use crate::common::{CliError, EXIT_OK, Outcome};

/// The most characters of a tool call's arguments or result `show` prints.
const PREVIEW_CHARS: usize = 100;

/// `toolbelt sessions` subcommands.
#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// The stored sessions, the most recently updated first: id, title (the first prompt),
    /// number of events and when it last changed.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print a JSON array of {session_id, title, events, updated_ms} instead.
        #[arg(long)]
        json: bool,
    },
    /// One session's conversation: prompts, answers, tool calls and results in short.
    Show {
        /// The session's id, as `list` prints it.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Print every stored event whole, one JSON object per line, in the format of
        /// `run --json`, instead.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session and its conversation.
    Rm {
        /// The session's id, as `list` prints it.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Which store.
#[derive(Args, Debug)]
pub struct StoreArgs {
    /// The session store, as `run` and `chat` take it: a SQLite file, or
    /// postgres://USER:PASSWORD@HOST/DB or redis://HOST:PORT (builds with features
    /// postgres, redis).
    #[arg(long, value_name = "FILE|URL")]
    session: PathBuf,
}

/// What a listing says about one stored session.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The session's id.
    pub id: String,
    /// Its first prompt on one line ([`title`]), unescaped.
    pub title: Option<String>,
    /// How many events it holds.
    pub events: usize,
    /// When its last event was stored, in milliseconds since the Unix epoch (`None` when no
    /// event carries a time).
    pub updated_ms: Option<u64>,
}

/// The sessions of `store` (this command line's application and user), the most recently
/// updated first; sessions without a time last, by id.
pub async fn listed(store: &dyn SessionService) -> Result<Vec<Listed>, CliError> {
    let read = |e: AgentError| CliError::failed(format!("reading the sessions: {e}"));
    let mut listed = Vec::new();
    for id in store.list_sessions(APP, USER).await.map_err(read)? {
        let events = store
            .events(&SessionKey::new(APP, USER, &id))
            .await
            .map_err(read)?;
        listed.push(Listed {
            title: title(&events),
            events: events.len(),
            updated_ms: events
                .iter()
                .map(|e| e.timestamp_ms)
                .filter(|&t| t > 0)
                .max(),
            id,
        });
    }
    listed.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(a.id.cmp(&b.id)));
    Ok(listed)
}

/// Runs `toolbelt sessions`.
pub async fn run(command: SessionsCommand) -> Outcome {
    match command {
        SessionsCommand::List { store, json } => {
            let sessions = open_store(&store.session).await?;
            let listed = listed(sessions.as_ref()).await?;
            if json {
                let rows: Vec<_> = listed
                    .iter()
                    .map(|s| {
                        serde_json::json!({
                            "session_id": s.id,
                            "title": s.title,
                            "events": s.events,
                            "updated_ms": s.updated_ms,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else if listed.is_empty() {
                eprintln!("no stored sessions");
            } else {
                for s in &listed {
                    println!("{}", line_of(s));
                }
            }
            Ok(EXIT_OK)
        }
        SessionsCommand::Show { id, store, json } => {
            let sessions = open_store(&store.session).await?;
            let key = existing(sessions.as_ref(), &id, &store).await?;
            let events = sessions
                .events(&key)
                .await
                .map_err(|e| CliError::failed(format!("reading the session: {e}")))?;
            for event in &events {
                if json {
                    print_json(event);
                } else if let Some(text) = shown(event) {
                    println!("{text}");
                }
            }
            Ok(EXIT_OK)
        }
        SessionsCommand::Rm { id, store } => {
            let sessions = open_store(&store.session).await?;
            let key = existing(sessions.as_ref(), &id, &store).await?;
            sessions
                .delete_session(&key)
                .await
                .map_err(|e| CliError::failed(format!("deleting the session: {e}")))?;
            println!("deleted session {}", visible(&id));
            Ok(EXIT_OK)
        }
    }
}

/// One line of `list`: id, title, events, time (all but the numbers escaped).
pub fn line_of(s: &Listed) -> String {
    let title = s.title.as_deref().map_or("(no prompt)".into(), visible);
    let when = s.updated_ms.map(ago).unwrap_or_default();
    let events = if s.events == 1 { "event" } else { "events" };
    format!("{}  {title}  [{} {events}{when}]", visible(&s.id), s.events)
}

/// `, N min ago` and the like, from a time in milliseconds since the epoch.
fn ago(ms: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let secs = now.saturating_sub(ms) / 1000;
    match secs {
        0..60 => ", just now".into(),
        60..3600 => format!(", {} min ago", secs / 60),
        3600..86400 => format!(", {} h ago", secs / 3600),
        86400..172800 => ", 1 day ago".into(),
        _ => format!(", {} days ago", secs / 86400),
    }
}

/// The key of session `id`, which must exist; else a usage error saying how to find one.
async fn existing(
    sessions: &dyn SessionService,
    id: &str,
    store: &StoreArgs,
) -> Result<SessionKey, CliError> {
    let ids = sessions
        .list_sessions(APP, USER)
        .await
        .map_err(|e| CliError::failed(format!("reading the sessions: {e}")))?;
    if !ids.iter().any(|known| known == id) {
        let file = store.session.to_string_lossy();
        // A URL may hold a password: only a file is named.
        let named = if file.contains("://") {
            String::new()
        } else {
            format!(" {}", visible(&file))
        };
        return Err(CliError::usage(format!(
            "no stored session {}; `toolbelt sessions list --session{named}` lists them",
            visible(id),
        )));
    }
    Ok(SessionKey::new(APP, USER, id))
}

/// How `show` prints one event, escaped; `None` for what a reader of the conversation does
/// not need (run boundaries, graph bookkeeping).
fn shown(event: &Event) -> Option<String> {
    let text = match &event.kind {
        EventKind::UserInput { message } => {
            let who = match message.role {
                Role::User => "user",
                Role::System => "system",
                _ => "input",
            };
            block(who, &message.content)
        }
        EventKind::ModelResponse { message, .. } => {
            let mut lines = Vec::new();
            if !message.content.trim().is_empty() {
                lines.push(block(&event.author, &message.content));
            }
            for call in &message.tool_calls {
                lines.push(format!(
                    "  → {}({})",
                    visible(&call.name),
                    visible(&preview(&call.arguments))
                ));
            }
            if lines.is_empty() {
                return None;
            }
            lines.join("\n")
        }
        EventKind::ToolResult { result } => format!(
            "  {} {}: {}",
            if result.is_error { "✗" } else { "✓" },
            visible(&result.name),
            visible(&preview(result.text_for_user()))
        ),
        EventKind::ToolInput { results } => results
            .iter()
            .map(|r| {
                format!(
                    "  ✓ {} (given): {}",
                    visible(&r.name),
                    visible(&preview(&r.content))
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        EventKind::ApprovalRequested { name, .. } => {
            format!("  ? {} waits for approval", visible(name))
        }
        EventKind::ApprovalDecided { name, decision, .. } => {
            let verdict = match decision {
                toolbelt::agent::Decision::Approve => "approved",
                toolbelt::agent::Decision::Deny { .. } => "refused",
                toolbelt::agent::Decision::Edit { .. } => "edited",
            };
            format!("  {} {verdict}", visible(name))
        }
        EventKind::ToolPending { name, status, .. } => {
            format!(
                "  … {} runs on: {}",
                visible(name),
                visible(&preview(status))
            )
        }
        EventKind::Warning { message } => format!("warning: {}", visible(message)),
        EventKind::Error { message, .. } => format!("error: {}", visible(message)),
        _ => return None,
    };
    Some(text)
}

/// `text` under `who: `, its further lines indented (so no line of it passes for a label).
fn block(who: &str, text: &str) -> String {
    let mut lines = text.trim_end().lines();
    let first = lines.next().unwrap_or_default();
    let mut out = format!("{}: {}", visible(who), visible(first));
    for line in lines {
        out.push_str("\n    ");
        out.push_str(&visible(line));
    }
    out
}

/// `text` on one line, cut to [`PREVIEW_CHARS`] characters with `…`.
fn preview(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= PREVIEW_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(PREVIEW_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_line_counts_one_event_in_the_singular() {
        let listed = |events| Listed {
            id: "s1".into(),
            title: Some("Hello".into()),
            events,
            updated_ms: None,
        };
        assert_eq!(line_of(&listed(1)), "s1  Hello  [1 event]");
        assert_eq!(line_of(&listed(2)), "s1  Hello  [2 events]");
    }
}
