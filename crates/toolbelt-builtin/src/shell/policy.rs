//! Command policy: optional allow and deny lists, checked against every simple command in a
//! command line.
//!
//! What it sees:
//! - each side of a pipe, `&&`, `||`, `;` and `&`, and the commands inside `$(...)`, backticks,
//!   `<(...)`, `>(...)` and subshells;
//! - the command run by a wrapper, whose own options are read as that wrapper reads them
//!   (`env -u X rm`, `timeout -s KILL 5 rm`, `nice -n 5 rm`, `sudo -u u rm`, `exec -a n rm`,
//!   `xargs -I {} rm {}`; also `doas`, `command`, `builtin`, `time`, `stdbuf`, `ionice`,
//!   `taskset`, `chrt`, `setsid`, `nohup`, `unbuffer`, `busybox`, `coproc`), and the command
//!   line given as an option's value (`env -S`, `flock -c`, `su -c`) or as `watch`'s operands;
//! - the commands of `find -exec`, `-execdir`, `-ok` and `-okdir`;
//! - the command line of `bash -c` (options in any cluster: `-xc`, `-ec`), of `eval`, and of
//!   a here-string a shell reads (`bash <<< 'rm x'`);
//! - a git subcommand behind git's global options: `git -C . push` is checked as `git push`.
//!
//! A deny rule is matched cautiously: `git push` denies a git command with `push` among its
//! arguments (so options before a subcommand cannot hide it); an allow rule must be the start
//! of the command (`git status` allows `git status -s`, not `git push status`), and every
//! wrapper on the line must be allowed itself.
//!
//! What it cannot see, and refuses when a policy is set (the command "cannot be checked"): a
//! shell reading its commands from a pipe, a file or its input (`curl … | bash`,
//! `bash < x.sh`, `sudo -s`), git aliases set with `-c alias.…`, here-documents,
//! `for`/`case` loops, `[[ ]]`, functions, a command name or wrapper option that is itself an
//! expansion, unbalanced quotes.
//!
//! What it does not see at all: scripts on disk (`bash x.sh`, `./x.sh`, `make`), other
//! interpreters (`python -c`, `perl -e`, `node -e`), aliases and functions defined earlier,
//! programs that delete without being named (`find -delete`, `rsync --delete`), and wrappers
//! not listed above. So this is a convenience that catches a model's obvious mistakes
//! (`git push` when it was told not to), **not a security boundary**. Use the
//! [`LandlockSandbox`](super::LandlockSandbox) to limit what commands can do.

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

    fn names(&self, command: &[String]) -> bool {
        command.first().is_some_and(|name| {
            let base = name.rsplit('/').next().unwrap_or(name);
            *name == self.words[0] || base == self.words[0]
        })
    }

    /// An allow rule: the command starts with the pattern's words (`git status` allows
    /// `git status -s`, not `git push status`).
    fn allows(&self, command: &[String]) -> bool {
        self.names(command)
            && command.len() >= self.words.len()
            && self.words[1..] == command[1..self.words.len()]
    }

    /// A deny rule, cautious: the pattern's words after the name appear in this order among
    /// the arguments, so options before a subcommand do not hide it (`docker -H host rm`
    /// matches `docker rm`), at the price of matching `git log push` for `git push`.
    fn denies(&self, command: &[String]) -> bool {
        if !self.names(command) {
            return false;
        }
        let mut args = command[1..].iter();
        self.words[1..]
            .iter()
            .all(|word| args.any(|arg| arg == word))
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
            if let Some(rule) = self.deny.iter().find(|rule| rule.denies(command)) {
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
            if !self.allow.iter().any(|rule| rule.allows(command)) {
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

/// How a wrapper command (`sudo`, `env`, `timeout`, ...) reads its own options, and where
/// the command it runs starts.
struct Wrapper {
    names: &'static [&'static str],
    /// Short options that take a value (attached, `-n5`, or the next word, `-n 5`).
    short_values: &'static str,
    /// Long options that take a value (`--user=u` or `--user u`).
    long_values: &'static [&'static str],
    /// Words between the options and the command: `timeout`'s duration, `flock`'s file.
    operands: usize,
    /// Options whose value is a command line run by a shell (`env -S`, `flock -c`, `su -c`).
    short_script: Option<char>,
    long_script: Option<&'static str>,
    /// Options that make the wrapper only look the command up (`command -v`).
    short_no_run: &'static str,
    /// Options that start a shell reading its commands from stdin when no command follows
    /// (`sudo -s`), or `*` when the wrapper always does so without a command (`su`).
    short_shell: &'static str,
    /// Its operands are joined and run by `sh -c` (`watch`).
    joins_operands: bool,
}

const fn wrapper(names: &'static [&'static str]) -> Wrapper {
    Wrapper {
        names,
        short_values: "",
        long_values: &[],
        operands: 0,
        short_script: None,
        long_script: None,
        short_no_run: "",
        short_shell: "",
        joins_operands: false,
    }
}

/// Commands that run the command given in their arguments.
const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        short_values: "CDghpRrTtUu",
        long_values: &[
            "--close-from",
            "--chdir",
            "--group",
            "--host",
            "--prompt",
            "--chroot",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--user",
        ],
        short_shell: "is",
        ..wrapper(&["sudo"])
    },
    Wrapper {
        short_values: "Cu",
        short_shell: "s",
        ..wrapper(&["doas"])
    },
    Wrapper {
        short_values: "CuS",
        long_values: &["--chdir", "--unset", "--split-string"],
        short_script: Some('S'),
        long_script: Some("--split-string"),
        ..wrapper(&["env"])
    },
    Wrapper {
        short_values: "a",
        ..wrapper(&["exec"])
    },
    Wrapper {
        short_no_run: "vV",
        ..wrapper(&["command"])
    },
    Wrapper {
        short_values: "n",
        long_values: &["--adjustment"],
        ..wrapper(&["nice"])
    },
    Wrapper {
        short_values: "fo",
        long_values: &["--format", "--output"],
        ..wrapper(&["time"])
    },
    Wrapper {
        short_values: "ks",
        long_values: &["--kill-after", "--signal"],
        operands: 1,
        ..wrapper(&["timeout"])
    },
    Wrapper {
        short_values: "eio",
        long_values: &["--error", "--input", "--output"],
        ..wrapper(&["stdbuf"])
    },
    Wrapper {
        short_values: "aEdILnPs",
        long_values: &[
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-chars",
            "--max-procs",
            "--process-slot-var",
        ],
        ..wrapper(&["xargs"])
    },
    Wrapper {
        short_values: "cnpPu",
        long_values: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
        ..wrapper(&["ionice"])
    },
    Wrapper {
        operands: 1,
        ..wrapper(&["taskset", "chrt"])
    },
    Wrapper {
        short_values: "wEc",
        long_values: &["--timeout", "--wait", "--conflict-exit-code", "--command"],
        operands: 1,
        short_script: Some('c'),
        long_script: Some("--command"),
        ..wrapper(&["flock"])
    },
    Wrapper {
        short_values: "cgGsw",
        long_values: &[
            "--command",
            "--group",
            "--supp-group",
            "--shell",
            "--whitelist-environment",
        ],
        short_script: Some('c'),
        long_script: Some("--command"),
        short_shell: "*",
        ..wrapper(&["su"])
    },
    Wrapper {
        short_values: "nd",
        long_values: &["--interval"],
        joins_operands: true,
        ..wrapper(&["watch"])
    },
    wrapper(&[
        "nohup", "builtin", "setsid", "unbuffer", "coproc", "busybox",
    ]),
];
/// Shells whose `-c` argument is itself a command line, and that read commands from stdin
/// when given neither `-c` nor a script file.
const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh",
];
/// `find` actions whose arguments up to `;` or `+` are a command.
const FIND_ACTIONS: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];
/// Git's options before the subcommand that take a value as the next word.
const GIT_VALUE_OPTIONS: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
];
/// Reserved words that only introduce the command after them.
const TRANSPARENT_KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "{", "}",
];
/// Reserved words whose syntax this parser does not follow.
const UNSUPPORTED_KEYWORDS: &[&str] = &["for", "case", "select", "function", "[[", "(("];

/// Where a simple command's standard input comes from, as far as the line says.
#[derive(Debug, Clone, Default)]
enum Stdin {
    /// Not known from the command itself: the tool's `/dev/null`, a file (`< file`), or a
    /// redirection of an enclosing group or loop.
    #[default]
    Unknown,
    /// The output of the command before a `|`.
    Pipe,
    /// A here-string, `<<< word`.
    HereString(Word),
}

/// A simple command as parsed: its words and its standard input.
#[derive(Debug, Clone)]
struct RawCommand {
    words: Vec<Word>,
    stdin: Stdin,
}

/// Splits a command line into its simple commands (words with quotes removed), including
/// commands nested in substitutions and subshells and those run by wrappers (`xargs rm`),
/// `find -exec`, `bash -c` and shells reading a here-string.
pub(crate) fn parse_commands(line: &str) -> Result<Vec<Vec<String>>, String> {
    Ok(simple_commands(line)?
        .into_iter()
        .map(|c| c.words)
        .collect())
}

/// One simple command of a command line, as [`simple_commands`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// Its words, quotes removed (git's global options dropped).
    pub words: Vec<String>,
    /// It only runs the commands that follow it in the list, which are checked themselves,
    /// and does nothing else worth a rule of its own: `env X=1`, `timeout 5`, `nice`,
    /// `nohup`, `time`, `bash -c '…'`, `eval`. Privilege changes (`sudo`), `xargs` and
    /// `find -exec` are not: they change what runs or as whom.
    pub only_runs_others: bool,
}

/// Wrappers that change nothing about the command they run but its timing, priority or
/// environment, so an allow rule for that command covers them.
const PLAIN_WRAPPERS: &[&str] = &[
    "env", "timeout", "nice", "nohup", "time", "stdbuf", "ionice", "command", "builtin", "exec",
    "setsid", "unbuffer", "taskset", "chrt", "flock",
];

/// [`parse_commands`], saying of each command whether it only runs the others.
pub(crate) fn simple_commands(line: &str) -> Result<Vec<SimpleCommand>, String> {
    let mut out = Vec::new();
    expand_line(line, &mut out, 0)?;
    Ok(out)
}

/// Parses a command line and expands each of its simple commands into `out`.
fn expand_line(line: &str, out: &mut Vec<SimpleCommand>, depth: usize) -> Result<(), String> {
    if depth > 8 {
        return Err("commands are nested too deeply".into());
    }
    for command in parse_raw(line)? {
        expand_command(command, out, depth)?;
    }
    Ok(())
}

/// Splits a command line into its simple commands, substitutions' included, unexpanded.
fn parse_raw(line: &str) -> Result<Vec<RawCommand>, String> {
    let chars: Vec<char> = line.chars().collect();
    let mut parser = Parser {
        chars: &chars,
        pos: 0,
        depth: 0,
        stdin: Stdin::Unknown,
        commands: Vec::new(),
    };
    parser.list(None)?;
    Ok(parser.commands)
}

/// The text of a word that must be known before the command runs.
fn static_text<'w>(word: &'w Word, what: &str) -> Result<&'w str, String> {
    if word.dynamic {
        return Err(format!("{what} comes from an expansion ({:?})", word.text));
    }
    Ok(&word.text)
}

/// Resolves keywords, assignments, wrappers, `find -exec`, shells and git's global options in
/// one simple command.
fn expand_command(
    command: RawCommand,
    out: &mut Vec<SimpleCommand>,
    depth: usize,
) -> Result<(), String> {
    if depth > 8 {
        return Err("commands are nested too deeply".into());
    }
    let mut rest: &[Word] = &command.words;
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
    let name = static_text(name, "the command name")?;
    if UNSUPPORTED_KEYWORDS.contains(&name) {
        return Err(format!("`{name}` constructs are not supported"));
    }
    let base = name.rsplit('/').next().unwrap_or(name);
    let args = &rest[1..];
    let at = out.len();
    let words = if base == "git" {
        git_command(name, args)?
    } else {
        rest.iter().map(|w| w.text.clone()).collect()
    };
    out.push(SimpleCommand {
        words,
        only_runs_others: false,
    });
    let plain = PLAIN_WRAPPERS.contains(&base);
    let inner = |words: &[Word], out: &mut Vec<SimpleCommand>| {
        expand_command(
            RawCommand {
                words: words.to_vec(),
                stdin: command.stdin.clone(),
            },
            out,
            depth + 1,
        )
    };
    if let Some(wrapper) = WRAPPERS.iter().find(|w| w.names.contains(&base)) {
        match unwrap(wrapper, base, args)? {
            Wrapped::Command(words) if wrapper.joins_operands => {
                let text: Vec<&str> = words
                    .iter()
                    .map(|w| static_text(w, &format!("the command given to {base}")))
                    .collect::<Result<_, _>>()?;
                expand_line(&text.join(" "), out, depth + 1)?;
            }
            Wrapped::Command(words) => {
                inner(words, out)?;
                out[at].only_runs_others = plain;
            }
            Wrapped::Script(script) => {
                let script = static_text(script, &format!("the command given to {base}"))?;
                expand_line(script, out, depth + 1)?;
                out[at].only_runs_others = plain;
            }
            Wrapped::Shell => shell_stdin(base, &command.stdin, out, depth)?,
            Wrapped::Nothing => {}
        }
    } else if base == "find" {
        let mut words = args;
        while let Some(at) = words
            .iter()
            .position(|w| FIND_ACTIONS.contains(&w.text.as_str()))
        {
            let action = &words[at + 1..];
            let end = action
                .iter()
                .position(|w| w.text == ";" || w.text == "+")
                .unwrap_or(action.len());
            if end > 0 {
                inner(&action[..end], out)?;
            }
            words = &action[end..];
        }
    } else if SHELLS.contains(&base) {
        match shell_input(args)? {
            ShellInput::Script(script) => {
                let script = static_text(script, &format!("the script given to {base}"))?;
                expand_line(script, out, depth + 1)?;
                out[at].only_runs_others = true;
            }
            ShellInput::Stdin => shell_stdin(base, &command.stdin, out, depth)?,
            // A script file: what it runs is not on the command line.
            ShellInput::File => {}
        }
    } else if base == "eval" {
        let text: Vec<&str> = args
            .iter()
            .map(|w| static_text(w, "the command given to eval"))
            .collect::<Result<_, _>>()?;
        expand_line(&text.join(" "), out, depth + 1)?;
        out[at].only_runs_others = true;
    }
    Ok(())
}

/// What a wrapper runs.
enum Wrapped<'w> {
    /// The command in these words.
    Command(&'w [Word]),
    /// A command line given as an option's value.
    Script(&'w Word),
    /// A shell reading its commands from stdin.
    Shell,
    /// No command (`command -v rm`, `exec` with redirections only).
    Nothing,
}

/// Reads a wrapper's options and finds what it runs.
fn unwrap<'w>(wrapper: &Wrapper, base: &str, args: &'w [Word]) -> Result<Wrapped<'w>, String> {
    let mut i = 0;
    let mut operands = wrapper.operands;
    let mut options_done = false;
    let mut shell = false;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        let is_option = !options_done && text.starts_with('-') && text.len() > 1;
        if !is_option {
            if base == "env" && is_assignment(word) {
                i += 1;
            } else if operands > 0 {
                operands -= 1;
                i += 1;
            } else {
                break;
            }
            continue;
        }
        static_text(word, &format!("an option of {base}"))?;
        if text == "--" {
            options_done = true;
            i += 1;
            continue;
        }
        if let Some(long) = text.strip_prefix("--").map(|_| text) {
            let (name, value) = match long.split_once('=') {
                Some((name, _)) => (name, Some(i)),
                None => (long, None),
            };
            let takes_value = wrapper.long_values.contains(&name);
            let value_at = match value {
                Some(at) => Some(at),
                None if takes_value => {
                    i += 1;
                    Some(i)
                }
                None => None,
            };
            if wrapper.long_script == Some(name) {
                let Some(at) = value_at.filter(|&at| at < args.len()) else {
                    return Err(format!("{base} {name} has no command"));
                };
                if value.is_some() {
                    return Err(format!(
                        "write {base} {name} with its command as the next word"
                    ));
                }
                return Ok(Wrapped::Script(&args[at]));
            }
            i += 1;
            continue;
        }
        // A cluster of short options: `-Eu root`, `-n5`, `-xc`.
        let letters = &text[1..];
        for (at, letter) in letters.char_indices() {
            if wrapper.short_no_run.contains(letter) {
                return Ok(Wrapped::Nothing);
            }
            if wrapper.short_shell.contains(letter) {
                shell = true;
            }
            if wrapper.short_values.contains(letter) {
                let attached = &letters[at + letter.len_utf8()..];
                if wrapper.short_script == Some(letter) {
                    if !attached.is_empty() {
                        return Err(format!(
                            "write {base} -{letter} with its command as the next word"
                        ));
                    }
                    return match args.get(i + 1) {
                        Some(script) => Ok(Wrapped::Script(script)),
                        None => Err(format!("{base} -{letter} has no command")),
                    };
                }
                if attached.is_empty() {
                    i += 1;
                }
                break;
            }
        }
        i += 1;
    }
    let command = &args[i.min(args.len())..];
    if !command.is_empty() {
        Ok(Wrapped::Command(command))
    } else if shell || wrapper.short_shell == "*" {
        Ok(Wrapped::Shell)
    } else {
        Ok(Wrapped::Nothing)
    }
}

/// Where a shell reads its commands.
enum ShellInput<'w> {
    /// `-c` and its command line.
    Script(&'w Word),
    /// Standard input (no `-c`, no file, or `-s`).
    Stdin,
    /// A script file.
    File,
}

fn shell_input(args: &[Word]) -> Result<ShellInput<'_>, String> {
    let mut i = 0;
    let mut command_string = false;
    let mut from_stdin = false;
    while let Some(word) = args.get(i) {
        let text = static_text(word, "an option of the shell")?;
        if text == "--" || text == "-" {
            i += 1;
            break;
        }
        if text.starts_with("--") {
            // bash's long options; two take a file.
            if matches!(text, "--rcfile" | "--init-file") {
                i += 1;
            }
            i += 1;
            continue;
        }
        if !(text.starts_with('-') || text.starts_with('+')) || text.len() < 2 {
            break;
        }
        for letter in text[1..].chars() {
            match letter {
                'c' if text.starts_with('-') => command_string = true,
                's' => from_stdin = true,
                // `-o pipefail`, `-O extglob`: the option name is the next word.
                'o' | 'O' => i += 1,
                _ => {}
            }
        }
        i += 1;
    }
    let operands = &args[i.min(args.len())..];
    if command_string {
        return match operands.first() {
            Some(script) => Ok(ShellInput::Script(script)),
            None => Err("a shell's -c has no command".into()),
        };
    }
    if from_stdin || operands.is_empty() {
        Ok(ShellInput::Stdin)
    } else {
        Ok(ShellInput::File)
    }
}

/// Checks what a shell reading stdin runs: a here-string's commands; anything else (a pipe, a
/// file, an enclosing redirection) cannot be known from the line.
fn shell_stdin(
    shell: &str,
    stdin: &Stdin,
    out: &mut Vec<SimpleCommand>,
    depth: usize,
) -> Result<(), String> {
    match stdin {
        Stdin::HereString(script) => {
            let script = static_text(script, &format!("the here-string given to {shell}"))?;
            expand_line(script, out, depth + 1)
        }
        Stdin::Pipe => Err(format!(
            "{shell} reads its commands from a pipe, which the policy cannot see"
        )),
        Stdin::Unknown => Err(format!(
            "{shell} reads its commands from its input, which the policy cannot see"
        )),
    }
}

/// A git command with its global options (`-C dir`, `-c key=value`, `--no-pager`) left out,
/// so patterns name the subcommand: `git -C . push` is checked as `git push`. Aliases defined
/// with `-c alias.x=...` are refused: they can run anything.
fn git_command(name: &str, args: &[Word]) -> Result<Vec<String>, String> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if !text.starts_with('-') {
            break;
        }
        let (option, attached) = match text.split_once('=') {
            Some((option, value)) => (option, Some(value)),
            None => (text, None),
        };
        let value = match attached {
            Some(value) => Some(value),
            None if GIT_VALUE_OPTIONS.contains(&option) => {
                i += 1;
                args.get(i).map(|w| w.text.as_str())
            }
            None => None,
        };
        if matches!(option, "-c" | "--config-env")
            && value.is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("alias."))
        {
            return Err("git aliases set on the command line are not checked".into());
        }
        i += 1;
    }
    let mut command = vec![name.to_string()];
    command.extend(args[i.min(args.len())..].iter().map(|w| w.text.clone()));
    Ok(command)
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
    /// The standard input of the command being read.
    stdin: Stdin,
    commands: Vec<RawCommand>,
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
                    let pipe = c == '|' && self.peek_at(1) != Some('|');
                    self.finish(&mut words);
                    self.pos += 1;
                    // `&&`, `||`, `|&`, `;;` are one operator.
                    if matches!(self.peek(), Some('&' | '|' | ';')) {
                        self.pos += 1;
                    }
                    self.stdin = if pipe { Stdin::Pipe } else { Stdin::Unknown };
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
            self.commands.push(RawCommand {
                words: std::mem::take(words),
                stdin: std::mem::take(&mut self.stdin),
            });
        }
    }

    /// Parses a substitution's commands, which do not read the enclosing command's input.
    fn substitution(&mut self) -> Result<(), String> {
        let outer = std::mem::take(&mut self.stdin);
        let result = self.list(Some(')'));
        self.stdin = outer;
        result
    }

    /// Skips a redirection operator and its target; runs process substitutions.
    fn redirection(&mut self) -> Result<(), String> {
        let c = self.peek().unwrap_or('>');
        if self.peek_at(1) == Some('(') {
            // Process substitution: <(cmd) or >(cmd).
            self.pos += 2;
            return self.substitution();
        }
        if c == '<' && self.peek_at(1) == Some('<') && self.peek_at(2) != Some('<') {
            return Err("here-documents are not supported".into());
        }
        let start = self.pos;
        while matches!(self.peek(), Some('<' | '>' | '&' | '|')) {
            self.pos += 1;
        }
        let operator: String = self.chars[start..self.pos].iter().collect();
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
        let target = match self.peek() {
            None | Some('\n' | ';' | '|' | '&' | ')') => {
                return Err("a redirection has no target".into());
            }
            Some(_) => self.word()?,
        };
        // What the command reads: a here-string's text; after any other input redirection
        // (`< file`, `<&3`, also of another descriptor), something the line does not show.
        match operator.as_str() {
            "<<<" => self.stdin = Stdin::HereString(target),
            o if o.starts_with('<') => self.stdin = Stdin::Unknown,
            _ => {}
        }
        Ok(())
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
                self.substitution()?;
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
        let nested = parse_raw(&inner.replace("\\`", "`"))?;
        self.commands.extend(nested);
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
