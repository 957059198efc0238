//! Command policy: optional allow and deny lists, checked against every simple command in a
//! command line (each side of a pipe, `&&`, `||`, `;`, and the commands inside `$(...)`,
//! backticks, `<(...)` and subshells).
//!
//! This is a convenience that catches a model's obvious mistakes (`git push` when it was told
//! not to), **not a security boundary**: a shell has too many ways to run a program (aliases,
//! functions, interpreters, scripts written to disk). Use the
//! [`LandlockSandbox`](super::LandlockSandbox) to limit what commands can do.
//!
//! When a policy is set, the parser refuses anything it cannot analyse (here-documents,
//! `for`/`case` loops, `[[ ]]`, a command name that is itself an expansion, unbalanced quotes)
//! rather than guess.

use std::fmt;

/// A pattern naming a command, optionally with its first arguments: `rm` matches every `rm`
/// command (also `/bin/rm`), `git push` matches `git push origin main` but not `git status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPattern {
    words: Vec<String>,
}

impl CommandPattern {
    /// A pattern from whitespace-separated words (`"git push"`). Returns `None` for an empty
    /// pattern.
    pub fn new(pattern: &str) -> Option<Self> {
        let words: Vec<String> = pattern.split_whitespace().map(str::to_string).collect();
        (!words.is_empty()).then_some(Self { words })
    }

    fn matches(&self, command: &[String]) -> bool {
        if command.len() < self.words.len() {
            return false;
        }
        let name_matches = {
            let name = &command[0];
            let base = name.rsplit('/').next().unwrap_or(name);
            name == &self.words[0] || base == self.words[0]
        };
        name_matches && self.words[1..] == command[1..self.words.len()]
    }
}

impl fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words.join(" "))
    }
}

/// Allow and deny lists for commands. The deny list is checked first; an empty allow list
/// allows everything that is not denied.
///
/// ```
/// use toolbelt_builtin::shell::CommandPolicy;
///
/// let policy = CommandPolicy::new().deny("rm").deny("git push");
/// assert!(policy.check("ls -la && git status").is_ok());
/// assert!(policy.check("echo hi | xargs rm -rf").is_err());
/// assert!(policy.check("git status; git push origin main").is_err());
/// ```
#[derive(Debug, Clone, Default)]
pub struct CommandPolicy {
    allow: Vec<CommandPattern>,
    deny: Vec<CommandPattern>,
}

/// Why a command line was refused by a [`CommandPolicy`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyViolation {
    /// A sub-command matches the deny list.
    #[error("command {command:?} is denied by the command policy (rule {rule:?})")]
    Denied {
        /// The offending sub-command.
        command: String,
        /// The deny rule it matched.
        rule: String,
    },
    /// A sub-command matches no entry of the allow list.
    #[error("command {command:?} is not in the allowed commands ({allowed})")]
    NotAllowed {
        /// The offending sub-command.
        command: String,
        /// The allow list, comma-separated.
        allowed: String,
    },
    /// The command line could not be analysed, so it cannot be checked.
    #[error("the command policy cannot check this command: {0}; simplify the command")]
    Unparsable(String),
}

impl CommandPolicy {
    /// An empty policy (allows everything).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an allowed command pattern (see [`CommandPattern`]).
    pub fn allow(mut self, pattern: &str) -> Self {
        self.allow.extend(CommandPattern::new(pattern));
        self
    }

    /// Adds a denied command pattern (see [`CommandPattern`]).
    pub fn deny(mut self, pattern: &str) -> Self {
        self.deny.extend(CommandPattern::new(pattern));
        self
    }

    /// Whether the policy has no rules.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Checks every sub-command of `command_line`.
    pub fn check(&self, command_line: &str) -> Result<(), PolicyViolation> {
        if self.is_empty() {
            return Ok(());
        }
        let commands = parse_commands(command_line).map_err(PolicyViolation::Unparsable)?;
        for command in &commands {
            if let Some(rule) = self.deny.iter().find(|rule| rule.matches(command)) {
                return Err(PolicyViolation::Denied {
                    command: command.join(" "),
                    rule: rule.to_string(),
                });
            }
        }
        if self.allow.is_empty() {
            return Ok(());
        }
        for command in &commands {
            if !self.allow.iter().any(|rule| rule.matches(command)) {
                let allowed: Vec<String> = self.allow.iter().map(|r| r.to_string()).collect();
                return Err(PolicyViolation::NotAllowed {
                    command: command.join(" "),
                    allowed: allowed.join(", "),
                });
            }
        }
        Ok(())
    }
}

/// A word of a command: its text with quotes removed, and whether any part of it comes from
/// an expansion whose value is unknown until the shell runs it.
#[derive(Debug, Clone, Default)]
struct Word {
    text: String,
    dynamic: bool,
}

/// Commands that run the command given in their arguments.
const WRAPPERS: &[&str] = &[
    "sudo", "env", "nohup", "exec", "command", "builtin", "nice", "xargs", "time", "timeout",
    "stdbuf", "doas",
];
/// Shells whose `-c` argument is itself a command line.
const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh"];
/// Reserved words that only introduce the command after them.
const TRANSPARENT_KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "{", "}",
];
/// Reserved words whose syntax this parser does not follow.
const UNSUPPORTED_KEYWORDS: &[&str] = &["for", "case", "select", "function", "[[", "(("];

/// Splits a command line into its simple commands (words with quotes removed), including
/// commands nested in substitutions and subshells and those run by wrappers (`xargs rm`) or
/// `bash -c`.
pub(crate) fn parse_commands(line: &str) -> Result<Vec<Vec<String>>, String> {
    let chars: Vec<char> = line.chars().collect();
    let mut parser = Parser {
        chars: &chars,
        pos: 0,
        depth: 0,
        commands: Vec::new(),
    };
    parser.list(None)?;
    let raw = std::mem::take(&mut parser.commands);
    let mut out = Vec::new();
    for words in raw {
        expand_command(words, &mut out, 0)?;
    }
    Ok(out)
}

/// Resolves keywords, assignments, wrappers and `bash -c` in one simple command.
fn expand_command(
    words: Vec<Word>,
    out: &mut Vec<Vec<String>>,
    depth: usize,
) -> Result<(), String> {
    if depth > 8 {
        return Err("commands are nested too deeply".into());
    }
    let mut rest: &[Word] = &words;
    // Leading reserved words and variable assignments do not name the command.
    loop {
        match rest.first() {
            Some(w) if !w.dynamic && TRANSPARENT_KEYWORDS.contains(&w.text.as_str()) => {
                rest = &rest[1..]
            }
            Some(w) if is_assignment(w) => rest = &rest[1..],
            _ => break,
        }
    }
    let Some(name) = rest.first() else {
        return Ok(());
    };
    if name.dynamic {
        return Err(format!(
            "the command name {:?} comes from an expansion",
            name.text
        ));
    }
    if UNSUPPORTED_KEYWORDS.contains(&name.text.as_str()) {
        return Err(format!("`{}` constructs are not supported", name.text));
    }
    out.push(rest.iter().map(|w| w.text.clone()).collect());
    let base = name.text.rsplit('/').next().unwrap_or(&name.text);
    if WRAPPERS.contains(&base) {
        let mut inner = &rest[1..];
        // Skip the wrapper's own options and, for env, its assignments; `timeout` takes a
        // duration first.
        let mut skipped_duration = base != "timeout";
        while let Some(w) = inner.first() {
            if w.text.starts_with('-') || is_assignment(w) {
                inner = &inner[1..];
            } else if !skipped_duration {
                skipped_duration = true;
                inner = &inner[1..];
            } else {
                break;
            }
        }
        if !inner.is_empty() {
            expand_command(inner.to_vec(), out, depth + 1)?;
        }
    } else if SHELLS.contains(&base) || base == "eval" {
        let script = if base == "eval" {
            Some(&rest[1..])
        } else {
            rest.iter()
                .position(|w| w.text == "-c")
                .map(|i| &rest[i + 1..(i + 2).min(rest.len())])
        };
        if let Some(script) = script {
            if script.iter().any(|w| w.dynamic) {
                return Err(format!(
                    "the script given to {base} comes from an expansion"
                ));
            }
            let text: Vec<&str> = script.iter().map(|w| w.text.as_str()).collect();
            for nested in parse_commands(&text.join(" "))? {
                expand_command(
                    nested
                        .into_iter()
                        .map(|text| Word {
                            text,
                            dynamic: false,
                        })
                        .collect(),
                    out,
                    depth + 1,
                )?;
            }
        }
    }
    Ok(())
}

fn is_assignment(word: &Word) -> bool {
    let Some((name, _)) = word.text.split_once('=') else {
        return false;
    };
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
    depth: usize,
    commands: Vec<Vec<Word>>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Parses a list of commands until `close` (or the end of input when `None`).
    fn list(&mut self, close: Option<char>) -> Result<(), String> {
        self.depth += 1;
        if self.depth > 32 {
            return Err("commands are nested too deeply".into());
        }
        let mut words: Vec<Word> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                if let Some(close) = close {
                    return Err(format!("missing closing {close:?}"));
                }
                break;
            };
            if Some(c) == close {
                self.pos += 1;
                break;
            }
            match c {
                ' ' | '\t' => self.pos += 1,
                '&' if self.peek_at(1) == Some('>') => self.redirection()?,
                '\n' | ';' | '&' | '|' => {
                    self.finish(&mut words);
                    self.pos += 1;
                    // `&&`, `||`, `|&`, `;;` are one operator.
                    if matches!(self.peek(), Some('&' | '|' | ';')) {
                        self.pos += 1;
                    }
                }
                '#' if words.is_empty() || self.at_word_start() => {
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                '(' if words.is_empty() => {
                    if self.peek_at(1) == Some('(') {
                        return Err("arithmetic commands `(( ))` are not supported".into());
                    }
                    self.pos += 1;
                    self.list(Some(')'))?;
                }
                '(' => return Err("unexpected `(` (function definitions are not supported)".into()),
                ')' => return Err("unbalanced `)`".into()),
                '<' | '>' => self.redirection()?,
                _ => {
                    if c.is_ascii_digit() && self.is_fd_redirection() {
                        self.pos += 1;
                        continue;
                    }
                    let word = self.word()?;
                    words.push(word);
                }
            }
        }
        self.finish(&mut words);
        self.depth -= 1;
        Ok(())
    }

    fn at_word_start(&self) -> bool {
        self.pos == 0 || matches!(self.chars.get(self.pos - 1), Some(' ' | '\t' | '\n' | ';'))
    }

    /// Whether a digit at the cursor is a file descriptor number before `>` or `<` (`2>&1`).
    fn is_fd_redirection(&self) -> bool {
        let mut i = self.pos;
        while self.chars.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        self.at_word_start() && matches!(self.chars.get(i), Some('<' | '>'))
    }

    fn finish(&mut self, words: &mut Vec<Word>) {
        if !words.is_empty() {
            self.commands.push(std::mem::take(words));
        }
    }

    /// Skips a redirection operator and its target; runs process substitutions.
    fn redirection(&mut self) -> Result<(), String> {
        let c = self.peek().unwrap_or('>');
        if self.peek_at(1) == Some('(') {
            // Process substitution: <(cmd) or >(cmd).
            self.pos += 2;
            return self.list(Some(')'));
        }
        if c == '<' && self.peek_at(1) == Some('<') && self.peek_at(2) != Some('<') {
            return Err("here-documents are not supported".into());
        }
        while matches!(self.peek(), Some('<' | '>' | '&' | '|')) {
            self.pos += 1;
        }
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
        match self.peek() {
            None | Some('\n' | ';' | '|' | '&' | ')') => Err("a redirection has no target".into()),
            Some(_) => self.word().map(drop),
        }
    }

    /// Reads one word, removing quotes and recording commands in substitutions.
    fn word(&mut self) -> Result<Word, String> {
        let mut word = Word::default();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => {}
                        Some(c) => word.text.push(c),
                        None => return Err("a trailing backslash".into()),
                    }
                    self.pos += 1;
                }
                '\'' => {
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            Some('\'') => break,
                            Some(c) => word.text.push(c),
                            None => return Err("an unterminated single quote".into()),
                        }
                        self.pos += 1;
                    }
                    self.pos += 1;
                }
                '"' => {
                    self.pos += 1;
                    loop {
                        match self.peek() {
                            Some('"') => break,
                            Some('\\') => {
                                self.pos += 1;
                                match self.peek() {
                                    Some(c @ ('"' | '\\' | '$' | '`')) => word.text.push(c),
                                    Some('\n') => {}
                                    Some(c) => {
                                        word.text.push('\\');
                                        word.text.push(c);
                                    }
                                    None => return Err("an unterminated double quote".into()),
                                }
                                self.pos += 1;
                            }
                            Some('$') => self.dollar(&mut word)?,
                            Some('`') => self.backtick(&mut word)?,
                            Some(c) => {
                                word.text.push(c);
                                self.pos += 1;
                            }
                            None => return Err("an unterminated double quote".into()),
                        }
                    }
                    self.pos += 1;
                }
                '$' => self.dollar(&mut word)?,
                '`' => self.backtick(&mut word)?,
                _ => {
                    word.text.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(word)
    }

    /// Handles `$...` at the cursor: command substitutions are parsed, other expansions make
    /// the word dynamic.
    fn dollar(&mut self, word: &mut Word) -> Result<(), String> {
        self.pos += 1;
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                // Arithmetic: no commands inside (nested substitutions are refused).
                self.pos += 2;
                let mut depth = 2usize;
                while depth > 0 {
                    match self.peek() {
                        Some('(') => depth += 1,
                        Some(')') => depth -= 1,
                        Some('$' | '`') => {
                            return Err("substitutions inside arithmetic are not supported".into());
                        }
                        Some(_) => {}
                        None => return Err("an unterminated `$((`".into()),
                    }
                    self.pos += 1;
                }
                word.dynamic = true;
                word.text.push_str("$((…))");
            }
            Some('(') => {
                self.pos += 1;
                self.list(Some(')'))?;
                word.dynamic = true;
                word.text.push_str("$(…)");
            }
            Some('{') => {
                self.pos += 1;
                loop {
                    match self.peek() {
                        Some('}') => break,
                        Some('$' | '`') => {
                            return Err("substitutions inside `${}` are not supported".into());
                        }
                        Some(_) => self.pos += 1,
                        None => return Err("an unterminated `${`".into()),
                    }
                }
                self.pos += 1;
                word.dynamic = true;
                word.text.push_str("${…}");
            }
            Some('\'') => {
                // ANSI-C quoting: $'...'; its escapes are not decoded, only skipped.
                self.pos += 1;
                loop {
                    match self.peek() {
                        Some('\\') => self.pos += 2,
                        Some('\'') => break,
                        Some(c) => {
                            word.text.push(c);
                            self.pos += 1;
                        }
                        None => return Err("an unterminated `$'`".into()),
                    }
                }
                self.pos += 1;
                word.dynamic = true;
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                let single = !(c.is_ascii_alphanumeric() || c == '_') || c.is_ascii_digit();
                self.pos += 1;
                while !single
                    && self
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                word.dynamic = true;
                word.text.push_str("$…");
            }
            _ => word.text.push('$'),
        }
        Ok(())
    }

    /// Parses a backtick substitution at the cursor.
    fn backtick(&mut self, word: &mut Word) -> Result<(), String> {
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                Some('\\') => self.pos += 2,
                Some('`') => break,
                Some(_) => self.pos += 1,
                None => return Err("an unterminated backtick".into()),
            }
        }
        let inner: String = self.chars[start..self.pos].iter().collect();
        self.pos += 1;
        let nested = parse_commands(&inner.replace("\\`", "`"))?;
        // Nested commands are already expanded; record them as literal words.
        self.commands.extend(nested.into_iter().map(|words| {
            words
                .into_iter()
                .map(|text| Word {
                    text,
                    dynamic: false,
                })
                .collect()
        }));
        word.dynamic = true;
        word.text.push_str("`…`");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(line: &str) -> Vec<String> {
        parse_commands(line)
            .unwrap()
            .into_iter()
            .map(|c| c.join(" "))
            .collect()
    }

    #[test]
    fn chains_and_pipes_are_split_into_commands() {
        assert_eq!(
            names("ls -la | grep foo && echo 'a | b' || true; pwd &"),
            vec!["ls -la", "grep foo", "echo a | b", "true", "pwd"]
        );
    }

    #[test]
    fn substitutions_and_subshells_are_looked_into() {
        assert_eq!(
            names("echo \"$(whoami)\" `date` $HOME; (cd /tmp && rm x) 2>&1 >out.txt"),
            vec!["whoami", "date", "echo $(…) `…` $…", "cd /tmp", "rm x"]
        );
        assert_eq!(names("diff <(sort a) b"), vec!["sort a", "diff b"]);
    }

    #[test]
    fn wrappers_and_nested_shells_expose_their_command() {
        assert_eq!(
            names("FOO=1 sudo -E rm -rf /"),
            vec!["sudo -E rm -rf /", "rm -rf /"]
        );
        assert_eq!(
            names("bash -c 'git push && ls'"),
            vec!["bash -c git push && ls", "git push", "ls"]
        );
        assert_eq!(
            names("timeout 5 curl x"),
            vec!["timeout 5 curl x", "curl x"]
        );
    }

    #[test]
    fn constructs_it_cannot_follow_are_refused() {
        for line in [
            "cat <<EOF\nhi\nEOF",
            "$CMD arg",
            "for f in *; do rm $f; done",
            "echo 'unterminated",
            "f() { rm x; }",
        ] {
            assert!(parse_commands(line).is_err(), "{line}");
        }
    }

    #[test]
    fn deny_rules_match_any_sub_command_and_full_paths() {
        let policy = CommandPolicy::new().deny("rm");
        assert!(policy.check("echo ok").is_ok());
        let err = policy.check("echo ok && /bin/rm -f x").unwrap_err();
        assert!(matches!(err, PolicyViolation::Denied { .. }), "{err}");
        assert!(policy.check("echo $(rm x)").is_err());
    }

    #[test]
    fn allow_lists_require_every_sub_command_to_match() {
        let policy = CommandPolicy::new().allow("ls").allow("git status");
        assert!(policy.check("ls && git status").is_ok());
        let err = policy.check("ls | git commit -m x").unwrap_err();
        assert!(err.to_string().contains("git commit"), "{err}");
    }
}
