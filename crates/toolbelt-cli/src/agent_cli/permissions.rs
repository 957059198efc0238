//! The permission rules of `run`, `chat` and `ui` (settings files, then flags, over the
//! `--approval` policy) and of `serve` (the same files and flags; what no rule decides runs).
//!
//! Read in this order, each adding to the lists (deny beats ask beats allow, whichever
//! file a rule came from): `~/.config/toolbelt/settings.json` (or under
//! `$XDG_CONFIG_HOME`), then in `--dir` `.claude/settings.json` (its `permissions` only)
//! and `.toolbelt/settings.json`, then `--allow`, `--ask` and `--deny`. A file that is
//! missing is skipped; one that cannot be read or parsed stops the command with its name.

use std::io::Read;
use std::path::{Path, PathBuf};

use toolbelt::builtin::permission::{Fallback, MAX_SETTINGS_BYTES, PermissionRules, RuleKind};

use super::{AgentArgs, ApprovalPolicy};
use crate::common::CliError;

/// The settings files read, in order, for the base directory `dir`.
pub fn settings_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(config) = config {
        files.push(config.join("toolbelt/settings.json"));
    }
    files.push(dir.join(".claude/settings.json"));
    files.push(dir.join(".toolbelt/settings.json"));
    files
}

/// The rules for a run in `dir` (canonical) with `args`; `delegations` are tools that only
/// hand work to other agents (agent tools, the transfer tool): their agents' own calls are
/// decided one by one, so they are allowed unless `--approval always` asks for everything.
pub fn rules_from(
    args: &AgentArgs,
    dir: &Path,
    delegations: &[String],
) -> Result<PermissionRules, CliError> {
    let policy = args.approval_policy();
    let lists = RuleLists {
        allow: &args.allow,
        ask: &args.ask,
        deny: &args.deny,
    };
    let mut rules = load(
        PermissionRules::new(dir).fallback(policy.fallback()),
        dir,
        lists,
    )?;
    if policy != ApprovalPolicy::Always {
        for name in delegations {
            // A tool name is a valid rule; a name that is not is never a delegation.
            let _ = rules.add(RuleKind::Allow, name);
        }
    }
    Ok(rules)
}

/// The rules of `toolbelt serve` in `dir` (canonical): those of the settings files and the
/// flags; what no rule decides runs (the MCP client decides about its own calls, as it does
/// for any server's tools), and what a rule asks about is asked of the client.
pub fn serve_rules(dir: &Path, lists: RuleLists<'_>) -> Result<PermissionRules, CliError> {
    load(
        PermissionRules::new(dir).fallback(Fallback::Allow),
        dir,
        lists,
    )
}

/// The `--allow`, `--ask` and `--deny` rules of a command line.
#[derive(Clone, Copy)]
pub struct RuleLists<'a> {
    /// `--allow RULE`s.
    pub allow: &'a [String],
    /// `--ask RULE`s.
    pub ask: &'a [String],
    /// `--deny RULE`s.
    pub deny: &'a [String],
}

/// `rules` with the settings files' rules, then the flags'.
fn load(
    mut rules: PermissionRules,
    dir: &Path,
    lists: RuleLists<'_>,
) -> Result<PermissionRules, CliError> {
    for file in settings_files(dir) {
        if let Some(text) = read_settings(&file)? {
            rules
                .add_settings(&text, &file)
                .map_err(|e| CliError::usage(format!("permission settings: {e}")))?;
        }
    }
    for (kind, list) in [
        (RuleKind::Allow, lists.allow),
        (RuleKind::Ask, lists.ask),
        (RuleKind::Deny, lists.deny),
    ] {
        for rule in list {
            rules
                .add(kind, rule)
                .map_err(|e| CliError::usage(e.to_string()))?;
        }
    }
    Ok(rules)
}

/// A settings file's text, `None` when there is none; bounded, so a huge or endless file
/// (a FIFO, `/dev/zero` behind a symlink) cannot stall the start.
pub(crate) fn read_settings(path: &Path) -> Result<Option<String>, CliError> {
    let refuse = |why: String| CliError::usage(format!("{}: {why}", path.display()));
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refuse(e.to_string())),
    };
    if !file
        .metadata()
        .map_err(|e| refuse(e.to_string()))?
        .is_file()
    {
        return Err(refuse("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SETTINGS_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(e.to_string()))?;
    if bytes.len() > MAX_SETTINGS_BYTES {
        return Err(refuse(format!("larger than {MAX_SETTINGS_BYTES} bytes")));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| refuse("not UTF-8".into()))
}

/// Adds `rules` to the allow list of `.toolbelt/settings.json` in `dir` (created when
/// missing; its other keys and rules kept, a rule already there not repeated), written whole
/// to a temporary file and renamed over the old one, so a crash never leaves half a file.
/// Returns the file's path.
pub fn remember_allow(dir: &Path, rules: &[String]) -> Result<PathBuf, CliError> {
    let path = dir.join(".toolbelt/settings.json");
    let refuse = |why: String| CliError::failed(format!("{}: {why}", path.display()));
    let mut settings = match read_settings(&path)? {
        Some(text) => serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|e| refuse(format!("not JSON: {e}")))?,
        None => serde_json::json!({}),
    };
    let Some(object) = settings.as_object_mut() else {
        return Err(refuse("not a JSON object".into()));
    };
    let permissions = object
        .entry("permissions")
        .or_insert_with(|| serde_json::json!({}));
    let Some(permissions) = permissions.as_object_mut() else {
        return Err(refuse("`permissions` is not an object".into()));
    };
    let allow = permissions
        .entry("allow")
        .or_insert_with(|| serde_json::json!([]));
    let Some(allow) = allow.as_array_mut() else {
        return Err(refuse("`permissions.allow` is not a list".into()));
    };
    for rule in rules {
        if !allow.iter().any(|r| r == rule.as_str()) {
            allow.push(rule.as_str().into());
        }
    }
    let folder = path.parent().expect("the settings file is in a folder");
    std::fs::create_dir_all(folder).map_err(|e| refuse(e.to_string()))?;
    let text = serde_json::to_string_pretty(&settings).expect("JSON values serialize") + "\n";
    let mut temp = tempfile::NamedTempFile::new_in(folder).map_err(|e| refuse(e.to_string()))?;
    std::io::Write::write_all(&mut temp, text.as_bytes()).map_err(|e| refuse(e.to_string()))?;
    temp.persist(&path).map_err(|e| refuse(e.to_string()))?;
    Ok(path)
}

/// The rules a command checks calls with while it runs: those it started with, plus the allow
/// rules a person adds on the way ("Always" in the web UI), which also go into the project's
/// `.toolbelt/settings.json` so later commands keep them.
#[derive(Debug)]
pub struct LiveRules {
    current: std::sync::RwLock<std::sync::Arc<PermissionRules>>,
    /// The base directory, whose settings file keeps what is added.
    dir: PathBuf,
}

impl LiveRules {
    /// `rules`, for the canonical base directory `dir`.
    pub fn new(rules: PermissionRules, dir: &Path) -> Self {
        Self {
            current: std::sync::RwLock::new(std::sync::Arc::new(rules)),
            dir: dir.to_path_buf(),
        }
    }

    /// The rules as they stand.
    pub fn current(&self) -> std::sync::Arc<PermissionRules> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Allows from now on what a call of `tool` with `arguments` needs (the rules
    /// [`PermissionRules::allow_rules_for`] gives): in force at once and written to the
    /// settings file. Returns the rules added (none when no rule can cover such a call).
    pub fn allow_always(&self, tool: &str, arguments: &str) -> Result<Vec<String>, CliError> {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        let allow = current.allow_rules_for(tool, arguments);
        if allow.is_empty() {
            return Ok(allow);
        }
        let mut next = PermissionRules::clone(&current);
        for rule in &allow {
            next.add(RuleKind::Allow, rule)
                .map_err(|e| CliError::failed(format!("allow rule {rule}: {e}")))?;
        }
        remember_allow(&self.dir, &allow)?;
        *current = std::sync::Arc::new(next);
        Ok(allow)
    }
}

impl toolbelt::core::PermissionCheck for LiveRules {
    fn check(&self, request: &toolbelt::core::PermissionRequest<'_>) -> toolbelt::core::Permission {
        self.current().check(request)
    }

    fn preview(&self, request: &toolbelt::core::PermissionRequest<'_>) -> Option<String> {
        self.current().preview(request)
    }
}
