//! One permission rule in Claude Code's syntax, and what it matches.
//!
//! | rule | matches |
//! |---|---|
//! | `Tool` | every call of the tool (a family name covers its family, below) |
//! | `Bash(npm run test:*)` | a command starting with those words |
//! | `Bash(git * main)` | a command matching the wildcard (`*`: any text) |
//! | `Bash(npm test)` | exactly that command |
//! | `Read(path)`, `Edit(path)` | a file by a gitignore pattern (see [`PathGlob`]) |
//! | `WebFetch(domain:host)` | a fetch of that host (`*.host`: its subdomains too) |
//! | `mcp__server`, `mcp__server__*` | every tool of that MCP server |
//! | `mcp__server__tool` | one tool of that MCP server |
//!
//! Families: `Bash` covers Bash, exec_command and write_stdin (what is typed into a terminal
//! session cannot be read as a command, so only a bare `Bash` rule covers write_stdin);
//! `Read` covers Read, Grep and Glob; `Edit` covers Edit, Write, NotebookEdit and
//! apply_patch. Any other name is one tool.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde_json::Value;

use crate::shell::policy::{SimpleCommand, simple_commands};

/// Why a rule's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("permission rule {rule:?}: {message}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub message: String,
}

/// The tools a rule's name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Commands,
    Reads,
    Edits,
    Tool(String),
    /// An MCP server's tools, or one of them.
    Mcp {
        server: String,
        tool: Option<String>,
    },
}

/// What a rule says about the call's arguments.
#[derive(Debug, Clone)]
enum Spec {
    Any,
    Command(CommandGlob),
    Path(PathGlob),
    Domain(String),
}

/// A parsed permission rule.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    target: Target,
    spec: Spec,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether a rule applies to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Match {
    Yes,
    No,
    /// The call's arguments cannot be checked against the rule (a command the parser cannot
    /// read, a path that is missing); the text says why.
    Unknown(String),
}

/// What rules look at in one call, worked out once.
#[derive(Debug)]
pub(crate) struct Subject<'a> {
    pub tool: &'a str,
    pub set: Option<&'a str>,
    pub arguments: Value,
}

impl Rule {
    /// Parses `text`; `base` is the directory relative paths are taken from and `home` the
    /// user's home (for `~/`).
    pub fn parse(text: &str, base: &Path, home: Option<&Path>) -> Result<Self, RuleError> {
        let error = |message: &str| RuleError {
            rule: text.to_string(),
            message: message.to_string(),
        };
        let trimmed = text.trim();
        let (name, content) = match trimmed.find('(') {
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(error("the specifier does not end with `)`"));
                };
                (&trimmed[..open], Some(inner.trim()))
            }
            None => (trimmed, None),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*'))
        {
            return Err(error(
                "a rule starts with a tool name (`Bash`, `Read(./.env)`)",
            ));
        }
        let content = content.filter(|c| !c.is_empty() && *c != "*");
        let target = target_of(name).map_err(|m| error(&m))?;
        let spec = match (&target, content) {
            (_, None) => Spec::Any,
            (Target::Commands, Some(c)) => Spec::Command(CommandGlob::new(c)),
            (Target::Reads | Target::Edits, Some(c)) => {
                Spec::Path(PathGlob::new(c, base, home).map_err(|m| error(&m))?)
            }
            (Target::Tool(tool), Some(c)) if tool == "WebFetch" => {
                let Some(host) = c.strip_prefix("domain:") else {
                    return Err(error(
                        "WebFetch rules name a host: `WebFetch(domain:example.com)`",
                    ));
                };
                Spec::Domain(host.trim().to_ascii_lowercase())
            }
            (Target::Tool(tool), Some(_)) if matches!(tool.as_str(), "Write" | "NotebookEdit") => {
                Spec::Path(
                    PathGlob::new(content.unwrap_or_default(), base, home)
                        .map_err(|m| error(&m))?,
                )
            }
            (_, Some(_)) => {
                return Err(error(
                    "only Bash, Read, Edit, Write, NotebookEdit and WebFetch rules take a \
                     specifier in parentheses; name the tool alone",
                ));
            }
        };
        Ok(Self {
            text: trimmed.to_string(),
            target,
            spec,
        })
    }

    /// The pattern this rule hides from searches, relative to `base`, if it is a path rule
    /// about reading inside the base.
    pub(crate) fn hidden_pattern(&self) -> Option<&str> {
        match (&self.target, &self.spec) {
            (Target::Reads, Spec::Path(glob)) => glob.relative.as_deref(),
            _ => None,
        }
    }

    /// Whether the rule names this call's tool at all.
    fn covers(&self, tool: &str, set: Option<&str>) -> bool {
        match &self.target {
            Target::Commands => matches!(tool, "Bash" | "exec_command" | "write_stdin"),
            Target::Reads => matches!(tool, "Read" | "Grep" | "Glob"),
            Target::Edits => matches!(tool, "Edit" | "Write" | "NotebookEdit" | "apply_patch"),
            Target::Tool(name) => name == tool,
            Target::Mcp { server, tool: one } => {
                set == Some(server.as_str())
                    && one
                        .as_ref()
                        .is_none_or(|one| tool == one || tool == format!("{server}_{one}"))
            }
        }
    }

    /// Whether the rule applies to the call; `allowing` says the rule is an allow rule,
    /// matched strictly (see [`CommandGlob`]).
    pub(crate) fn matches(&self, subject: &Subject<'_>, allowing: bool) -> Match {
        if !self.covers(subject.tool, subject.set) {
            return Match::No;
        }
        match &self.spec {
            Spec::Any => Match::Yes,
            Spec::Command(glob) => match commands_of(subject) {
                Err(why) => Match::Unknown(why),
                Ok(commands) => {
                    let hit = |c: &SimpleCommand| glob.matches(&c.words, allowing);
                    if allowing {
                        // An allow rule matches when it covers every command of the line
                        // except those that only run others; several allow rules together are
                        // weighed by [`all_allowed`].
                        bool_match(commands.iter().filter(|c| !c.only_runs_others).all(hit))
                    } else {
                        bool_match(commands.iter().any(hit))
                    }
                }
            },
            Spec::Path(glob) => match paths_of(subject) {
                Err(why) => Match::Unknown(why),
                Ok(paths) => {
                    if allowing {
                        bool_match(paths.iter().all(|p| glob.covers(p, true)))
                    } else {
                        bool_match(paths.iter().any(|p| glob.covers(p, false)))
                    }
                }
            },
            Spec::Domain(host) => match host_of(subject) {
                None => Match::Unknown("the call names no URL with a host".into()),
                Some(actual) => bool_match(domain_matches(host, &actual)),
            },
        }
    }

    /// For an allow rule over commands: whether it covers this one command.
    pub(crate) fn allows_command(&self, command: &SimpleCommand) -> bool {
        match &self.spec {
            Spec::Any => matches!(self.target, Target::Commands),
            Spec::Command(glob) => glob.matches(&command.words, true),
            _ => false,
        }
    }

    /// Whether this is a command rule that applies to `tool`.
    pub(crate) fn is_command_rule_for(&self, tool: &str) -> bool {
        matches!(self.target, Target::Commands) && self.covers(tool, None)
    }
}

fn bool_match(yes: bool) -> Match {
    if yes { Match::Yes } else { Match::No }
}

fn target_of(name: &str) -> Result<Target, String> {
    if let Some(rest) = name.strip_prefix("mcp__") {
        let (server, tool) = match rest.split_once("__") {
            Some((server, tool)) => (server, Some(tool)),
            None => (rest, None),
        };
        if server.is_empty() || server.contains('*') {
            return Err(
                "an MCP rule names its server: `mcp__server` or `mcp__server__tool`".into(),
            );
        }
        let tool = tool.filter(|t| *t != "*").map(str::to_string);
        if tool
            .as_deref()
            .is_some_and(|t| t.is_empty() || t.contains('*'))
        {
            return Err("an MCP rule names one tool or `*`".into());
        }
        return Ok(Target::Mcp {
            server: server.to_string(),
            tool,
        });
    }
    if name.contains('*') {
        return Err("wildcards go inside the parentheses, not in the tool name".into());
    }
    Ok(match name {
        "Bash" => Target::Commands,
        "Read" => Target::Reads,
        "Edit" => Target::Edits,
        other => Target::Tool(other.to_string()),
    })
}

/// The commands a call of a command tool runs.
pub(crate) fn commands_of(subject: &Subject<'_>) -> Result<Vec<SimpleCommand>, String> {
    let key = match subject.tool {
        "Bash" => "command",
        "exec_command" => "cmd",
        _ => return Err("what is typed into a terminal session is not a command line".into()),
    };
    let Some(line) = subject.arguments.get(key).and_then(Value::as_str) else {
        return Err(format!("the call has no `{key}`"));
    };
    simple_commands(line).map_err(|why| format!("the command cannot be checked: {why}"))
}

/// A path a call touches, and whether it is a directory to search.
#[derive(Debug, Clone)]
pub(crate) struct Touched {
    path: String,
    is_dir: bool,
}

fn paths_of(subject: &Subject<'_>) -> Result<Vec<Touched>, String> {
    let get = |key: &str| subject.arguments.get(key).and_then(Value::as_str);
    let file = |key: &str| {
        get(key)
            .map(|p| {
                vec![Touched {
                    path: p.to_string(),
                    is_dir: false,
                }]
            })
            .ok_or_else(|| format!("the call has no `{key}`"))
    };
    match subject.tool {
        "Read" | "Write" | "Edit" => file("file_path"),
        "NotebookEdit" => file("notebook_path"),
        "Grep" | "Glob" => Ok(vec![Touched {
            path: get("path").unwrap_or(".").to_string(),
            is_dir: true,
        }]),
        "apply_patch" => {
            let patch = get("input").ok_or("the call has no `input`")?;
            let hunks = crate::fs::patch::parse::parse(patch)
                .map_err(|e| format!("the patch cannot be read: {e}"))?;
            let mut paths = Vec::new();
            for hunk in &hunks {
                paths.push(hunk.path().to_string());
                if let crate::fs::patch::parse::Hunk::Update {
                    move_to: Some(to), ..
                } = hunk
                {
                    paths.push(to.clone());
                }
            }
            Ok(paths
                .into_iter()
                .map(|path| Touched {
                    path,
                    is_dir: false,
                })
                .collect())
        }
        other => Err(format!("{other} names no file")),
    }
}

pub(crate) fn host_of(subject: &Subject<'_>) -> Option<String> {
    let url = subject.arguments.get("url")?.as_str()?;
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#', '\\']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host_port.split(':').next()?,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

fn domain_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(parent) => host == parent || host.ends_with(&format!(".{parent}")),
        None => host == pattern,
    }
}

/// The command part of a `Bash(…)` rule.
///
/// `words:*` is a prefix of whole words (`npm run test:*` matches `npm run test` and
/// `npm run test --watch`, not `npm run testing`); text with `*` elsewhere is a wildcard over
/// the command's words joined by single spaces; anything else is the whole command. Matched
/// against each simple command of the line, after the wrappers the command policy unwraps
/// (`env X=1 git push`, `sh -c "…"`, `timeout 5 …`) and git's global options
/// (`git -C . push`).
///
/// Deny and ask rules match cautiously: the command's name may be a path (`/usr/bin/git`),
/// and a prefix's words may be separated by options (`git --no-pager push` still matches
/// `git push:*`). Allow rules match strictly: the name as written, the prefix word by word.
#[derive(Debug, Clone)]
struct CommandGlob {
    words: Vec<String>,
    kind: CommandKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommandKind {
    Prefix,
    Wildcard,
    Exact,
}

impl CommandGlob {
    fn new(text: &str) -> Self {
        let (text, kind) = match text.strip_suffix(":*") {
            Some(prefix) => (prefix, CommandKind::Prefix),
            None if text.contains('*') => (text, CommandKind::Wildcard),
            None => (text, CommandKind::Exact),
        };
        Self {
            words: text.split_whitespace().map(str::to_string).collect(),
            kind,
        }
    }

    fn matches(&self, command: &[String], strict: bool) -> bool {
        let Some(name) = command.first() else {
            return false;
        };
        let base = name.rsplit('/').next().unwrap_or(name);
        let named = |pattern: &str| name == pattern || (!strict && base == pattern);
        match self.kind {
            CommandKind::Exact => {
                command.len() == self.words.len()
                    && self.words.first().is_some_and(|w| named(w))
                    && self.words[1..] == command[1..]
            }
            CommandKind::Prefix => {
                if !self.words.first().is_some_and(|w| named(w)) {
                    return false;
                }
                if strict {
                    command.len() >= self.words.len()
                        && self.words[1..] == command[1..self.words.len()]
                } else {
                    let mut args = command[1..].iter();
                    self.words[1..].iter().all(|w| args.any(|a| a == w))
                }
            }
            CommandKind::Wildcard => {
                let mut words = command.to_vec();
                if !strict {
                    words[0] = base.to_string();
                }
                wildcard(&self.words.join(" "), &words.join(" "))
            }
        }
    }
}

/// `*` matches any text (spaces included); everything else matches itself.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().expect("split yields one part");
    let Some(mut text) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return text.is_empty();
    };
    for part in middle {
        match text.find(part) {
            Some(at) => text = &text[at + part.len()..],
            None => return false,
        }
    }
    text.ends_with(last)
}

/// The path part of a `Read(…)` or `Edit(…)` rule: a gitignore pattern.
///
/// `//path` is an absolute path, `~/path` is under the home directory, `/path` and `./path`
/// are anchored at the base directory (`--dir`), and a pattern without those prefixes is
/// gitignore's: without a slash it matches at any depth (`*.env`, `.env`), with one it is
/// anchored at the base. A pattern naming a directory covers everything in it.
#[derive(Debug, Clone)]
struct PathGlob {
    /// The matcher, rooted at the base, the home or `/`.
    matcher: Gitignore,
    root: PathBuf,
    /// The base directory calls' relative paths are joined to.
    base: PathBuf,
    /// The pattern relative to the base, when the rule is about paths inside it.
    relative: Option<String>,
}

impl PathGlob {
    fn new(text: &str, base: &Path, home: Option<&Path>) -> Result<Self, String> {
        let (root, line) = if let Some(abs) = text.strip_prefix("//") {
            let absolute = format!("/{abs}");
            match Path::new(&absolute).strip_prefix(base) {
                Ok(inside) => (base.to_path_buf(), format!("/{}", inside.display())),
                Err(_) => (PathBuf::from("/"), absolute),
            }
        } else if let Some(rest) = text.strip_prefix("~/") {
            let home = home.ok_or("`~/` needs a home directory ($HOME is not set)")?;
            let absolute = home.join(rest);
            match absolute.strip_prefix(base) {
                Ok(inside) => (base.to_path_buf(), format!("/{}", inside.display())),
                Err(_) => (home.to_path_buf(), format!("/{rest}")),
            }
        } else if let Some(rest) = text.strip_prefix("./") {
            (base.to_path_buf(), format!("/{rest}"))
        } else {
            (base.to_path_buf(), text.to_string())
        };
        let mut builder = GitignoreBuilder::new(&root);
        builder
            .add_line(None, &line)
            .map_err(|e| format!("not a valid path pattern: {e}"))?;
        let matcher = builder
            .build()
            .map_err(|e| format!("not a valid path pattern: {e}"))?;
        let relative = (root == base).then(|| line.clone());
        Ok(Self {
            matcher,
            root,
            base: base.to_path_buf(),
            relative,
        })
    }

    /// Whether the rule covers the path a call touches. The path is taken as written
    /// (joined to the base, `..` resolved) and, where it exists, with its symlinks resolved:
    /// a deny or ask rule applies when either form matches, an allow rule only when both do,
    /// so a symlink can neither hide a denied file nor borrow an allowed one's name.
    fn covers(&self, touched: &Touched, allowing: bool) -> bool {
        let written = normalize(&self.base.join(&touched.path));
        let real = resolved(&written);
        let hit = |path: &Path| self.hits(path, touched.is_dir);
        match real {
            Some(real) if real != written => {
                if allowing {
                    hit(&written) && hit(&real)
                } else {
                    hit(&written) || hit(&real)
                }
            }
            _ => hit(&written),
        }
    }

    fn hits(&self, path: &Path, is_dir: bool) -> bool {
        if path == self.root || !path.starts_with(&self.root) {
            return false;
        }
        if self
            .matcher
            .matched_path_or_any_parents(path, is_dir)
            .is_ignore()
        {
            return true;
        }
        // A search of a directory reaches into it: `Read(secrets/**)` keeps Grep out of
        // `secrets` itself.
        is_dir
            && self
                .matcher
                .matched_path_or_any_parents(path.join("_"), false)
                .is_ignore()
    }
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `path` with symlinks resolved: the path itself where it exists, else its nearest
/// existing parent's resolution with the rest appended (a file about to be written).
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut missing = Vec::new();
    let mut current = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(current) {
            let mut real = real;
            for part in missing.iter().rev() {
                real.push(part);
            }
            return Some(real);
        }
        missing.push(current.file_name()?.to_os_string());
        current = current.parent()?;
    }
}
