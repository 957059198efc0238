//! Permission rules as data, in Claude Code's syntax: which calls run, which are refused and
//! which a person is asked about.
//!
//! [`PermissionRules`] holds allow, ask and deny lists of [`Rule`]s (the forms are listed in
//! [`rule`](self::Rule)'s module) and a [`Fallback`] for calls no rule matches. Deny beats ask
//! beats allow. It implements [`PermissionCheck`], so an executor built with
//! `.permissions(Arc::new(rules))` decides every call with it after validation and before
//! hooks. A Read deny rule also keeps Grep and Glob out of those paths: pass
//! [`PermissionRules::hidden_paths`] to [`SearchOptions::hidden`](crate::SearchOptions::hidden).
//!
//! A call whose arguments cannot be checked against a deny or ask rule (a command the parser
//! cannot read, a patch that does not parse) is asked about, never allowed by default; an
//! allow rule never covers what it cannot check.
//!
//! These rules are a policy over what a call says it will do. A Bash rule reads the command
//! line, not what the programs it starts go on to do (`make`, a script, `python -c`); the
//! sandbox ([`SandboxMode`](crate::shell::SandboxMode)) is what limits that. SECURITY.md
//! says what a rule guarantees.
//!
//! ```
//! use toolbelt_builtin::permission::{Fallback, PermissionRules};
//! use toolbelt_core::{Declaration, Permission, PermissionCheck, PermissionRequest};
//!
//! let base = std::env::temp_dir();
//! let rules = PermissionRules::new(&base)
//!     .fallback(Fallback::AskUnlessReadOnly)
//!     .allow("Bash(npm run test:*)").unwrap()
//!     .deny("Bash(git push:*)").unwrap();
//! let bash = Declaration::new("Bash", "Runs a command").unwrap();
//! let decide = |arguments: &str| {
//!     rules.check(&PermissionRequest { declaration: &bash, set: None, arguments })
//! };
//! assert_eq!(decide(r#"{"command":"npm run test -- --watch"}"#), Permission::Allow);
//! assert!(matches!(decide(r#"{"command":"env X=1 git -C . push"}"#), Permission::Deny(_)));
//! assert!(matches!(decide(r#"{"command":"rm -rf build"}"#), Permission::Ask(_)));
//! ```

mod always;
mod preview;
mod rule;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toolbelt_core::{Permission, PermissionCheck, PermissionRequest};

pub use preview::MAX_PREVIEW_FILE_BYTES;
use rule::{Match, Subject, commands_of};
pub use rule::{Rule, RuleError};

/// What happens to a call no rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// It runs.
    Allow,
    /// It runs when its tool is declared read-only, and is asked about otherwise (the
    /// default: Claude Code's and Codex's default mode).
    #[default]
    AskUnlessReadOnly,
    /// It is asked about.
    Ask,
}

/// Allow, ask and deny rules, and what happens to the rest. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct PermissionRules {
    base: PathBuf,
    home: Option<PathBuf>,
    allow: Vec<Rule>,
    ask: Vec<Rule>,
    deny: Vec<Rule>,
    fallback: Fallback,
}

/// Which list a rule goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// Calls it matches run.
    Allow,
    /// Calls it matches are asked about.
    Ask,
    /// Calls it matches are refused.
    Deny,
}

/// Why a settings file was refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file is not JSON of the expected shape.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// One of its rules does not parse.
    #[error("{path}: {error}")]
    Rule {
        /// The file.
        path: String,
        /// The rule's error.
        error: RuleError,
    },
}

/// The largest settings file read (a settings file is a few kilobytes).
pub const MAX_SETTINGS_BYTES: usize = 1 << 20;

#[derive(Deserialize, Default)]
struct SettingsFile {
    #[serde(default)]
    permissions: Option<PermissionLists>,
}

#[derive(Deserialize, Default)]
struct PermissionLists {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

impl PermissionRules {
    /// No rules, [`Fallback::AskUnlessReadOnly`]; relative paths in rules are taken from
    /// `base_dir` (the tools' base directory), `~/` from `$HOME`.
    pub fn new(base_dir: impl AsRef<Path>) -> Self {
        let base = base_dir.as_ref();
        Self {
            base: std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf()),
            home: std::env::var_os("HOME").map(PathBuf::from),
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            fallback: Fallback::default(),
        }
    }

    /// Sets what happens to calls no rule matches.
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Adds an allow rule.
    pub fn allow(self, rule: &str) -> Result<Self, RuleError> {
        self.with(RuleKind::Allow, rule)
    }

    /// Adds an ask rule.
    pub fn ask(self, rule: &str) -> Result<Self, RuleError> {
        self.with(RuleKind::Ask, rule)
    }

    /// Adds a deny rule.
    pub fn deny(self, rule: &str) -> Result<Self, RuleError> {
        self.with(RuleKind::Deny, rule)
    }

    /// Adds a rule to the list `kind` names.
    pub fn with(mut self, kind: RuleKind, rule: &str) -> Result<Self, RuleError> {
        self.add(kind, rule)?;
        Ok(self)
    }

    /// Adds a rule to the list `kind` names, in place.
    pub fn add(&mut self, kind: RuleKind, rule: &str) -> Result<(), RuleError> {
        let rule = Rule::parse(rule, &self.base, self.home.as_deref())?;
        match kind {
            RuleKind::Allow => self.allow.push(rule),
            RuleKind::Ask => self.ask.push(rule),
            RuleKind::Deny => self.deny.push(rule),
        }
        Ok(())
    }

    /// Adds the `permissions` of a settings file's text (`{"permissions": {"allow": […],
    /// "ask": […], "deny": […]}}`, the shape of Claude Code's `settings.json`); other keys
    /// are left to their readers. `source` names the file in errors.
    pub fn add_settings(&mut self, text: &str, source: &Path) -> Result<(), SettingsError> {
        let path = source.display().to_string();
        if text.len() > MAX_SETTINGS_BYTES {
            return Err(SettingsError::Invalid {
                path,
                message: format!("larger than {MAX_SETTINGS_BYTES} bytes"),
            });
        }
        let file: SettingsFile =
            serde_json::from_str(text).map_err(|e| SettingsError::Invalid {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let lists = file.permissions.unwrap_or_default();
        for (kind, rules) in [
            (RuleKind::Allow, &lists.allow),
            (RuleKind::Ask, &lists.ask),
            (RuleKind::Deny, &lists.deny),
        ] {
            for rule in rules {
                self.add(kind, rule).map_err(|error| SettingsError::Rule {
                    path: path.clone(),
                    error,
                })?;
            }
        }
        Ok(())
    }

    /// Whether there are no rules at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ask.is_empty() && self.deny.is_empty()
    }

    /// The gitignore patterns (relative to the base) of the Read deny rules about paths
    /// inside the base: what Grep and Glob must never show
    /// ([`SearchOptions::hidden`](crate::SearchOptions::hidden)).
    pub fn hidden_paths(&self) -> Vec<String> {
        self.deny
            .iter()
            .filter_map(Rule::hidden_pattern)
            .map(str::to_string)
            .collect()
    }

    /// Whether every command of a command tool's call is covered by some allow rule.
    fn commands_allowed(&self, subject: &Subject<'_>) -> bool {
        let rules: Vec<&Rule> = self
            .allow
            .iter()
            .filter(|rule| rule.is_command_rule_for(subject.tool))
            .collect();
        if rules.is_empty() {
            return false;
        }
        if rules
            .iter()
            .any(|rule| rule.matches(subject, true) == Match::Yes)
        {
            return true;
        }
        let Ok(commands) = commands_of(subject) else {
            return false;
        };
        commands
            .iter()
            .filter(|c| !c.only_runs_others)
            .all(|c| rules.iter().any(|rule| rule.allows_command(c)))
    }
}

impl PermissionCheck for PermissionRules {
    fn check(&self, request: &PermissionRequest<'_>) -> Permission {
        let subject = Subject {
            tool: request.tool_name(),
            set: request.set,
            arguments: serde_json::from_str(request.arguments).unwrap_or_default(),
        };
        let mut asked = None;
        for rule in &self.deny {
            match rule.matches(&subject, false) {
                Match::Yes => {
                    return Permission::Deny(format!(
                        "the permission rule {rule} denies this call"
                    ));
                }
                Match::Unknown(why) if asked.is_none() => {
                    asked = Some(format!("{why}, so the deny rule {rule} cannot be applied"));
                }
                _ => {}
            }
        }
        if let Some(reason) = asked {
            return Permission::Ask(reason);
        }
        for rule in &self.ask {
            match rule.matches(&subject, false) {
                Match::Yes => return Permission::Ask(format!("the permission rule {rule} asks")),
                Match::Unknown(why) => {
                    return Permission::Ask(format!(
                        "{why}, so the ask rule {rule} cannot be applied"
                    ));
                }
                Match::No => {}
            }
        }
        if self.commands_allowed(&subject)
            || self
                .allow
                .iter()
                .any(|rule| rule.matches(&subject, true) == Match::Yes)
        {
            return Permission::Allow;
        }
        let read_only = request.declaration.meta.is_read_only();
        match self.fallback {
            Fallback::Allow => Permission::Allow,
            Fallback::AskUnlessReadOnly if read_only => Permission::Allow,
            Fallback::AskUnlessReadOnly => Permission::Ask(format!(
                "{} may change files or run commands, and no allow rule covers this call",
                request.tool_name()
            )),
            Fallback::Ask => Permission::Ask("every call is asked about".into()),
        }
    }

    fn preview(&self, request: &PermissionRequest<'_>) -> Option<String> {
        let arguments = serde_json::from_str(request.arguments).ok()?;
        preview::preview(&self.base, request.tool_name(), &arguments)
    }
}

#[cfg(test)]
mod tests;
