//! The hooks of the conversation rather than of one call: `UserPromptSubmit` (before a
//! prompt reaches the model) and `Stop` (when the agent is about to end its turn), with
//! Claude Code's inputs and answers.
//!
//! `UserPromptSubmit` gets `{"hook_event_name", "session_id", "cwd", "prompt"}`. Exit 0: its
//! stdout, plain text or a JSON object's `hookSpecificOutput.additionalContext`, is added to
//! what the model reads; `decision: "block"` (with `reason`) or exit 2 (with its stderr)
//! refuses the prompt. `Stop` gets `{"hook_event_name", "session_id", "cwd",
//! "stop_hook_active"}` (true when the agent is already going on because of a Stop hook, so
//! a hook can let it end); exit 2 or `decision: "block"` make the agent go on, reading the
//! reason as the next message. As for tool hooks, anything else (another exit code, the
//! timeout, stdout that a JSON-answering event cannot read) is a failure the caller reports.

use serde_json::{Value, json};

use super::{Answer, CommandHooks, Ran, cut};

/// What the `UserPromptSubmit` hooks said about a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptCheck {
    /// Send it, with this context (each hook's text; may be empty).
    Send {
        /// Text the hooks added for the model.
        context: Vec<String>,
    },
    /// Do not send it; why.
    Block(String),
}

/// What the `Stop` hooks said when the agent was about to end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCheck {
    /// It may end.
    Stop,
    /// It goes on, reading this as the next message.
    Continue(String),
}

impl CommandHooks {
    /// Whether any `UserPromptSubmit` hook is set.
    pub fn checks_prompts(&self) -> bool {
        !self.inner.prompt.is_empty()
    }

    /// Whether any `Stop` hook is set.
    pub fn checks_stops(&self) -> bool {
        !self.inner.stop.is_empty()
    }

    /// Runs the `UserPromptSubmit` hooks on `prompt`; `Err` says which hook failed how.
    pub async fn user_prompt_submit(
        &self,
        prompt: &str,
        session_id: &str,
    ) -> Result<PromptCheck, String> {
        let input = json!({
            "hook_event_name": "UserPromptSubmit",
            "session_id": session_id,
            "cwd": self.inner.project.display().to_string(),
            "prompt": prompt,
        });
        let mut context = Vec::new();
        for command in self.inner.prompt.iter().flat_map(|m| m.commands.iter()) {
            let name = &command.line;
            match self.run(command, &input).await {
                Ran::Exited {
                    code: Some(0),
                    stdout,
                    ..
                } => {
                    let text = stdout.trim();
                    match serde_json::from_str::<Value>(text) {
                        Ok(value @ Value::Object(_)) => {
                            let answer: Answer = serde_json::from_value(value)
                                .map_err(|e| format!("the hook `{name}` answered badly: {e}"))?;
                            if answer.decision.as_deref() == Some("block") {
                                return Ok(PromptCheck::Block(
                                    answer
                                        .reason
                                        .unwrap_or_else(|| format!("blocked by the hook `{name}`")),
                                ));
                            }
                            let added = answer
                                .hook_specific_output
                                .and_then(|s| s.additional_context);
                            context.extend(added.filter(|c| !c.trim().is_empty()));
                        }
                        _ if !text.is_empty() => context.push(text.to_string()),
                        _ => {}
                    }
                }
                other => return blocked_or_failed(name, other).map(PromptCheck::Block),
            }
        }
        Ok(PromptCheck::Send { context })
    }

    /// Runs the `Stop` hooks; `active` says the agent already went on because of one.
    pub async fn stop(&self, session_id: &str, active: bool) -> Result<StopCheck, String> {
        let input = json!({
            "hook_event_name": "Stop",
            "session_id": session_id,
            "cwd": self.inner.project.display().to_string(),
            "stop_hook_active": active,
        });
        for command in self.inner.stop.iter().flat_map(|m| m.commands.iter()) {
            let name = &command.line;
            match self.run(command, &input).await {
                Ran::Exited {
                    code: Some(0),
                    stdout,
                    ..
                } => {
                    let text = stdout.trim();
                    if text.is_empty() {
                        continue;
                    }
                    let answer: Answer = serde_json::from_str(text).map_err(|_| {
                        format!(
                            "the hook `{name}` printed something that is not a JSON object: {}",
                            cut(text)
                        )
                    })?;
                    if answer.decision.as_deref() == Some("block") {
                        let reason = answer.reason.unwrap_or_else(|| "go on".into());
                        return Ok(StopCheck::Continue(reason));
                    }
                }
                other => return blocked_or_failed(name, other).map(StopCheck::Continue),
            }
        }
        Ok(StopCheck::Stop)
    }
}

/// Exit 2: the hook's stderr (its reason); any other end: the failure.
fn blocked_or_failed(name: &str, ran: Ran) -> Result<String, String> {
    match ran {
        Ran::Exited {
            code: Some(2),
            stderr,
            ..
        } => Ok(if stderr.trim().is_empty() {
            format!("the hook `{name}` said no")
        } else {
            stderr.trim().to_string()
        }),
        Ran::Exited { code, stderr, .. } => Err(format!(
            "the hook `{name}` {}: {}",
            code.map_or("was killed by a signal".to_string(), |c| format!(
                "exited with {c}"
            )),
            cut(stderr.trim())
        )),
        Ran::Failed(why) => Err(format!("the hook `{name}` {why}")),
    }
}
