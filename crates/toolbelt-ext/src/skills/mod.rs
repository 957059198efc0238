//! Skills in the Agent Skills layout: a folder holding `SKILL.md` (YAML front matter, then
//! instructions) with scripts and resources beside it.
//!
//! [`SkillsConfig`] names the folders searched, nearest first (by default
//! `.toolbelt/skills/` and `.claude/skills/` under the project directory, then the same under
//! the home directory); each
//! sub-folder with a `SKILL.md` is a skill. [`discover`] finds and checks them: a skill
//! whose front matter is wrong is left out with an error naming the file and field
//! ([`front_matter`] says what is checked), and on a name clash the nearer folder's skill
//! wins, with a warning.
//!
//! [`SkillsExtension`] offers them to an agent with progressive disclosure: only names and
//! descriptions go into the instructions; `skill_load(name)` returns the body and the list
//! of the skill's files; `skill_read(skill, file_path)` reads a file of the skill, confined
//! to its folder; and a skill's MCP endpoints become reachable through broker tools once it
//! is loaded (see [`SkillsExtension`]).

mod broker;
mod extension;
pub mod front_matter;

use std::path::{Path, PathBuf};

use toolbelt_builtin::fs::{FileOps, LocalFileOps};
use toolbelt_mcp::{ConnectionConfig, McpServersFile};

pub use extension::SkillsExtension;

/// The largest SKILL.md read (a larger one is an error).
pub const MAX_SKILL_FILE: u64 = 256 * 1024;
/// The most skills read from one folder (the rest are left out with a warning).
pub const MAX_SKILLS_PER_FOLDER: usize = 256;

/// A skill file that could not be used: the file, the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {field}: {problem}", path.display())]
pub struct SkillError {
    /// The SKILL.md (or the folder) at fault.
    pub path: PathBuf,
    /// The front matter field, or what was being done (`front matter`, `read`, `mcp.NAME`).
    pub field: String,
    /// What is wrong.
    pub problem: String,
}

impl SkillError {
    pub(crate) fn new(path: &Path, field: &str, problem: String) -> Self {
        Self {
            path: path.to_path_buf(),
            field: field.to_string(),
            problem,
        }
    }
}

/// One folder searched for skills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFolder {
    /// The folder; a missing one is skipped.
    pub path: PathBuf,
    /// Whether its skills may start local commands as MCP servers (`mcp: {x: {command}}`).
    /// Off for the project's folder by default: a cloned repository must not run a program
    /// because a model loaded one of its skills.
    pub trusted: bool,
}

/// Where skills are found, nearest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillsConfig {
    folders: Vec<SkillFolder>,
}

impl SkillsConfig {
    /// No folders.
    pub fn new() -> Self {
        Self::default()
    }

    /// The default folders, nearest first: the project's `.toolbelt/skills` and
    /// `.claude/skills` (Claude Code's, so skills written for it are found; neither trusted to
    /// start commands), then the same two under `HOME` when it is set (trusted).
    pub fn defaults(project: &Path) -> Self {
        let mut config = Self::new();
        for tool in [".toolbelt", ".claude"] {
            config = config.folder(project.join(tool).join("skills"), false);
        }
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            for tool in [".toolbelt", ".claude"] {
                config = config.folder(PathBuf::from(&home).join(tool).join("skills"), true);
            }
        }
        config
    }

    /// Adds a folder, searched after those already added (farther).
    pub fn folder(mut self, path: impl Into<PathBuf>, trusted: bool) -> Self {
        self.folders.push(SkillFolder {
            path: path.into(),
            trusted,
        });
        self
    }

    /// The folders, nearest first.
    pub fn folders(&self) -> &[SkillFolder] {
        &self.folders
    }
}

/// A checked skill.
#[derive(Debug, Clone)]
pub struct Skill {
    /// Its name (equal to its folder's).
    pub name: String,
    /// What it is for and when to use it.
    pub description: String,
    /// `allowed-tools`, as written.
    pub allowed_tools: Option<Vec<String>>,
    /// Its MCP endpoints, by server name, in name order.
    pub mcp: Vec<(String, ConnectionConfig)>,
    /// Its folder (canonical).
    pub dir: PathBuf,
    /// Its SKILL.md.
    pub file: PathBuf,
    body: String,
}

impl Skill {
    /// The instructions after the front matter.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Whether `allowed-tools` lets the model call `tool` of the skill's MCP server
    /// `server`: with no `allowed-tools`, every tool of its servers; else only those listed
    /// as `server.tool` or `server.*`.
    pub fn allows_mcp_tool(&self, server: &str, tool: &str) -> bool {
        match &self.allowed_tools {
            None => true,
            Some(list) => list.iter().any(|entry| {
                entry == &format!("{server}.{tool}") || entry == &format!("{server}.*")
            }),
        }
    }

    /// Reads and checks the skill in `dir` (a folder holding SKILL.md). Commands as MCP
    /// servers are refused unless `trusted`. Returns the skill and its warnings.
    pub async fn load(dir: &Path, trusted: bool) -> Result<(Skill, Vec<String>), SkillError> {
        let file = dir.join("SKILL.md");
        let read_error = |e: &dyn std::fmt::Display| SkillError::new(&file, "read", e.to_string());
        let dir = std::fs::canonicalize(dir).map_err(|e| read_error(&e))?;
        let folder = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        // Through the confined file ops: a SKILL.md that is a symlink out of the folder is
        // refused like any other escaping path.
        let ops = LocalFileOps::new(&dir).map_err(|e| read_error(&e))?;
        let path = ops.resolve("SKILL.md").map_err(|e| read_error(&e))?;
        let contents = ops
            .read(&path, Some(MAX_SKILL_FILE))
            .await
            .map_err(|e| read_error(&e))?;
        let text = String::from_utf8(contents.bytes)
            .map_err(|_| read_error(&"SKILL.md is not UTF-8 text"))?;
        let parsed = front_matter::parse(&file, &folder, &text)?;
        let mcp = match parsed.mcp {
            None => Vec::new(),
            Some(servers) => mcp_servers(&file, &dir, servers, trusted)?,
        };
        let skill = Skill {
            name: parsed.name,
            description: parsed.description,
            allowed_tools: parsed.allowed_tools,
            mcp,
            file: dir.join("SKILL.md"),
            dir,
            body: parsed.body,
        };
        Ok((skill, parsed.warnings))
    }
}

/// The `mcp` map as connection configs. `${VAR}` is never expanded from the environment
/// (a skill must not be able to send the user's secrets to a server it names): a reference
/// without a `:-default` is an error.
fn mcp_servers(
    file: &Path,
    dir: &Path,
    servers: serde_json::Value,
    trusted: bool,
) -> Result<Vec<(String, ConnectionConfig)>, SkillError> {
    let shape = serde_json::json!({ "mcpServers": servers });
    let parsed = McpServersFile::parse_with(&shape.to_string(), |_: &str| None)
        .map_err(|e| SkillError::new(file, "mcp", e.to_string()))?;
    let mut out = Vec::new();
    for (name, config) in parsed.servers() {
        let field = format!("mcp.{name}");
        if let Err(problem) = front_matter::check_name(&name.replace('_', "-")) {
            return Err(SkillError::new(
                file,
                &field,
                format!("server name {problem}"),
            ));
        }
        let config = config.map_err(|e| SkillError::new(file, &field, e.to_string()))?;
        let config = match &config.transport {
            toolbelt_mcp::TransportConfig::Stdio { .. } if !trusted => {
                return Err(SkillError::new(
                    file,
                    &field,
                    "a command as MCP server is allowed only in a trusted skills folder \
                     (~/.toolbelt/skills or one configured as trusted), not in a project's"
                        .into(),
                ));
            }
            toolbelt_mcp::TransportConfig::Stdio { cwd: None, .. } => config.with_cwd(dir),
            _ => config,
        };
        out.push((name, config));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What [`discover`] found.
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    /// The usable skills, sorted by name.
    pub skills: Vec<Skill>,
    /// Skills left out because they are wrong.
    pub errors: Vec<SkillError>,
    /// Things to tell the user (name clashes, unknown keys, skipped entries).
    pub warnings: Vec<String>,
}

impl Discovered {
    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// Finds the skills of `config`'s folders (nearest first; on a name clash the nearer wins).
/// A skill folder that is a symbolic link is skipped with a warning: a skill is read where
/// it lies.
pub async fn discover(config: &SkillsConfig) -> Discovered {
    let mut found = Discovered::default();
    for folder in config.folders() {
        let entries = match std::fs::read_dir(&folder.path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                found
                    .warnings
                    .push(format!("skills folder {}: {e}", folder.path.display()));
                continue;
            }
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                found.warnings.push(format!(
                    "{}: a symbolic link, skipped (put the skill itself there)",
                    entry.path().display()
                ));
            } else if kind.is_dir() && entry.path().join("SKILL.md").exists() {
                dirs.push(entry.path());
            }
        }
        dirs.sort();
        if dirs.len() > MAX_SKILLS_PER_FOLDER {
            found.warnings.push(format!(
                "skills folder {}: {} skills, only the first {MAX_SKILLS_PER_FOLDER} by name are read",
                folder.path.display(),
                dirs.len()
            ));
            dirs.truncate(MAX_SKILLS_PER_FOLDER);
        }
        for dir in dirs {
            match Skill::load(&dir, folder.trusted).await {
                Ok((skill, warnings)) => {
                    found.warnings.extend(warnings);
                    if let Some(kept) = found.get(&skill.name) {
                        found.warnings.push(format!(
                            "skill {} in {} is shadowed by the nearer {}",
                            skill.name,
                            skill.dir.display(),
                            kept.dir.display()
                        ));
                    } else {
                        found.skills.push(skill);
                    }
                }
                Err(error) => found.errors.push(error),
            }
        }
    }
    found.skills.sort_by(|a, b| a.name.cmp(&b.name));
    found
}
