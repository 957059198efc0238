//! The command hooks of `run`, `chat` and `ui` (Claude Code's `PreToolUse` and `PostToolUse`
//! in the settings files; see `toolbelt_ext::hooks` for the protocol).
//!
//! A hook is a program that runs outside the tools' sandbox, so where it comes from matters:
//! the user's own `~/.config/toolbelt/settings.json` is read always, the project's files in
//! `--dir` (`.claude/settings.json`, `.toolbelt/settings.json`) only with `--project-hooks`,
//! so that a cloned repository cannot run code by being opened (Claude Code asks to trust a
//! folder first for the same reason).

use std::path::Path;
use std::sync::Arc;

use toolbelt::exec::Approver;
use toolbelt_ext::{CommandHooks, CommandHooksBuilder};

use super::permissions::{read_settings, settings_files};
use crate::common::CliError;

/// The hooks of a run in `dir` (canonical); `None` when no file names any. `project` says
/// whether the project's settings files may add hooks. An `ask` answer goes to `approver`.
pub fn hooks_from(
    dir: &Path,
    project: bool,
    approver: Option<Arc<dyn Approver>>,
) -> Result<Option<CommandHooks>, CliError> {
    let mut builder = CommandHooksBuilder::new(dir);
    for file in settings_files(dir) {
        if !project && file.starts_with(dir) {
            if read_settings(&file)?.is_some_and(|text| text.contains("\"hooks\"")) {
                eprintln!(
                    "toolbelt: {} has hooks, not run without --project-hooks",
                    file.display()
                );
            }
            continue;
        }
        if let Some(text) = read_settings(&file)? {
            builder
                .add_settings(&text, &file)
                .map_err(|e| CliError::usage(format!("hooks: {e}")))?;
        }
    }
    if builder.is_empty() {
        return Ok(None);
    }
    let hooks = builder.build(approver);
    for event in hooks.unsupported() {
        eprintln!(
            "toolbelt: warning: hook event {} is not run",
            toolbelt::visible(event)
        );
    }
    Ok(Some(hooks))
}

/// How many times Stop hooks may send the agent on after one prompt.
pub const MAX_STOP_ROUNDS: usize = 8;

impl super::AgentSession {
    /// The `UserPromptSubmit` hooks' answer to `prompt` in `session_id`: the messages to
    /// send (the prompt, then the context the hooks add), or why it must not be sent.
    pub async fn prompt_hooks(
        &self,
        session_id: &str,
        prompt: &str,
    ) -> Result<Vec<toolbelt::model::Message>, String> {
        use toolbelt::model::Message;
        use toolbelt_ext::PromptCheck;
        let mut messages = vec![Message::user(prompt)];
        let Some(hooks) = self.hooks.as_ref().filter(|h| h.checks_prompts()) else {
            return Ok(messages);
        };
        match hooks.user_prompt_submit(prompt, session_id).await? {
            PromptCheck::Send { context } => {
                messages.extend(context.into_iter().map(Message::user));
                Ok(messages)
            }
            PromptCheck::Block(why) => Err(format!("a UserPromptSubmit hook refused it: {why}")),
        }
    }

    /// What a `Stop` hook sends the agent on with in `session_id`, if it does; `active`
    /// says a Stop hook already did after this prompt. A failing hook is reported on stderr
    /// and lets the run end.
    pub async fn stop_hooks(&self, session_id: &str, active: bool) -> Option<String> {
        use toolbelt_ext::StopCheck;
        let hooks = self.hooks.as_ref().filter(|h| h.checks_stops())?;
        match hooks.stop(session_id, active).await {
            Ok(StopCheck::Stop) => None,
            Ok(StopCheck::Continue(reason)) => {
                eprintln!(
                    "toolbelt: a Stop hook sends the agent on: {}",
                    toolbelt::visible(&reason)
                );
                Some(reason)
            }
            Err(why) => {
                eprintln!("toolbelt: warning: {}", toolbelt::visible(&why));
                None
            }
        }
    }
}
