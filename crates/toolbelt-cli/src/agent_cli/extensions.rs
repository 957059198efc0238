//! The extensions `run` and `chat` start: the project rules of `--dir` (unless
//! `--no-rules`) and the skills of `--dir`'s `.toolbelt/skills`, `~/.toolbelt/skills` and
//! each `--skills-dir`. They reach every agent of the run as runner extensions.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use toolbelt::agent::{Extension, Extensions};
use toolbelt_ext::{RulesExtension, SkillsConfig, SkillsExtension};

use crate::common::CliError;

/// The flags for skills and project rules.
#[derive(Args, Debug, Clone, Default)]
pub struct ExtensionArgs {
    /// Do not put the project's AGENTS.md / CLAUDE.md files (from --dir up to the
    /// repository root) into the instructions.
    #[arg(long)]
    pub no_rules: bool,
    /// Also look for skills in DIR (searched before the default folders; repeatable).
    /// Its skills may start local commands as MCP servers.
    #[arg(long, value_name = "DIR")]
    pub skills_dir: Vec<PathBuf>,
}

impl ExtensionArgs {
    /// Starts the rules and skills extensions for the project directory `dir`.
    pub async fn start(&self, dir: &std::path::Path) -> Result<Extensions, CliError> {
        let mut started: Vec<Arc<dyn Extension>> = Vec::new();
        if !self.no_rules {
            started.push(Arc::new(RulesExtension::new(dir)));
        }
        started.push(Arc::new(SkillsExtension::new(skills_config(
            &self.skills_dir,
            dir,
        ))));
        Extensions::init(started)
            .await
            .map_err(|e| CliError::failed(e.to_string()))
    }
}

/// `dirs` (trusted, nearest) then the defaults of `project`.
pub fn skills_config(dirs: &[PathBuf], project: &std::path::Path) -> SkillsConfig {
    let mut config = SkillsConfig::new();
    for dir in dirs {
        config = config.folder(dir, true);
    }
    for folder in SkillsConfig::defaults(project).folders() {
        config = config.folder(&folder.path, folder.trusted);
    }
    config
}
