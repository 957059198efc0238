//! `--model scripted:FILE`: a model that answers from a file, so a person can watch an agent
//! run (its tool calls, approvals, sessions, the web UI) without a model key, and a script
//! can check an agents file the same way every time.
//!
//! ```toml
//! [[reply]]
//! tool_calls = [{ name = "Read", arguments = { file_path = "notes.txt" } }]
//!
//! [[reply]]
//! text = "Your notes list alpha, then beta."
//! ```
//!
//! Each model request gets the next reply, whatever it asks; once they run out, a request is
//! refused with a message naming the file (HTTP 400, which the client does not retry). The
//! replies are served by the scripted OpenAI-compatible server of `toolbelt_model::testing`
//! on 127.0.0.1 inside this process, so every provider's wire format and the whole client
//! run as they do against a real model; each process starts the script from its first reply.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use toolbelt::model::ToolCall;
use toolbelt::model::testing::{Reply, ScriptedServer};

use crate::common::CliError;

use super::AgentArgs;

/// The prefix of `--model` that names a script.
const PREFIX: &str = "scripted:";
/// The largest script read, in bytes.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    reply: Vec<ScriptedReply>,
}

/// One reply: text, tool calls, or both.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedReply {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    /// A table; `{}` when omitted.
    #[serde(default)]
    arguments: Option<Value>,
}

/// With `--model scripted:FILE`, starts the file's model and points `args` at it (base URL
/// and model name); the returned server must be kept for as long as the model is used.
pub async fn start_if_named(args: &mut AgentArgs) -> Result<Option<ScriptedServer>, CliError> {
    let Some(path) = args.model.as_deref().and_then(|m| m.strip_prefix(PREFIX)) else {
        return Ok(None);
    };
    let replies = read(Path::new(path))?;
    let refusal = format!("the script {path} has no more replies");
    let script = std::sync::Mutex::new(std::collections::VecDeque::from(replies));
    let server = ScriptedServer::start_with(move |_| {
        let next = script.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        next.unwrap_or_else(|| Reply::status(400, refusal.clone()))
    })
    .await
    .map_err(|e| CliError::failed(format!("--model scripted: cannot listen on 127.0.0.1: {e}")))?;
    let provider = super::provider_from(args)?;
    args.base_url = Some(server.base_url_for(provider));
    args.model = Some("scripted".to_string());
    Ok(Some(server))
}

/// The replies of the script at `path`, checked.
fn read(path: &Path) -> Result<Vec<Reply>, CliError> {
    use std::io::Read;
    let shown = path.display();
    let refuse = |why: String| CliError::usage(format!("--model scripted:{shown}: {why}"));
    let file = std::fs::File::open(path).map_err(|e| refuse(e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_SCRIPT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| refuse(e.to_string()))?;
    if text.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(refuse(format!("larger than {MAX_SCRIPT_BYTES} bytes")));
    }
    let script: Script = toml::from_str(&text).map_err(|e| refuse(e.to_string()))?;
    if script.reply.is_empty() {
        return Err(refuse("the script has no [[reply]]".into()));
    }
    let mut next_id = 0;
    script
        .reply
        .into_iter()
        .enumerate()
        .map(|(i, reply)| {
            if reply.text.is_empty() && reply.tool_calls.is_empty() {
                return Err(refuse(format!(
                    "reply {} has neither text nor tool_calls",
                    i + 1
                )));
            }
            let tool_calls = reply
                .tool_calls
                .into_iter()
                .map(|call| {
                    next_id += 1;
                    let arguments = call
                        .arguments
                        .unwrap_or_else(|| Value::Object(Default::default()));
                    if !arguments.is_object() {
                        return Err(refuse(format!(
                            "reply {}: the arguments of {} must be a table",
                            i + 1,
                            call.name
                        )));
                    }
                    Ok(ToolCall::new(
                        format!("call_{next_id}"),
                        call.name,
                        arguments.to_string(),
                    ))
                })
                .collect::<Result<_, _>>()?;
            Ok(Reply::Message {
                content: reply.text,
                tool_calls,
            })
        })
        .collect()
}
