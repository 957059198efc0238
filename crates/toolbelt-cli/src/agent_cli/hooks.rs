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
