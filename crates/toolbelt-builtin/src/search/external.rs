//! [`ExternalSearch`]: Grep through the `rg` program and Glob through `fd` (installed as
//! `fdfind` on Debian and Ubuntu; both names are tried).
//!
//! # Confinement
//!
//! `rg` and `fd` open files by path, so they are confined by the kernel instead: each runs
//! under a Landlock ruleset (Linux 5.13+) that lets it read only beneath the base directory,
//! plus the files starting it needs (the program, its loader and shared libraries as `ldd`
//! lists them once, `/etc/ld.so.cache`: binary files, which the search skips), and write
//! nothing. They follow symlinks (`--follow`), so a symlink whose target is inside
//! the base is followed, as in the in-process backend; one pointing outside cannot be read
//! (the kernel refuses it) and is counted as skipped. Every path `fd` lists is checked again
//! by the confined resolver, so a link to a file outside is not listed either. The search
//! root is a path already resolved by the confined resolver. Where Landlock is unavailable,
//! [`ExternalSearch::detect`] refuses to build the backend. Each child is started and ended
//! by `toolbelt-process`, the one owner of child processes: a search whose caller stops
//! waiting ends the child's whole tree.
//!
//! Limits: the children cannot read ignore files above the base or the global git excludes
//! file, so they are told not to (`--no-ignore-parent`, `--no-ignore-global`); where such
//! files exist, this backend may list files the in-process backend skips. A file `rg` cannot
//! read inside the base (permission denied) is counted as a skipped symlink too.
//!
//! The programs get the options that make them follow the same rules as [`super::LocalSearch`]
//! (`--hidden`, `--no-require-git`, version-control folders excluded, `--sort path` for rg),
//! so the two backends print the same bytes. `rg --sort path` streams in order, so a limit
//! keeps only the selected lines; `fd` cannot sort, so every path is collected, sorted and
//! then cut, which costs time and memory on large trees. Differences: `fd` reads `.fdignore`
//! where the in-process walk reads `.rgignore`, and an `fd` older than 9 honours `.gitignore`
//! only inside a git repository.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
};
use rustix::fs::OFlags;
use tokio::io::{AsyncBufReadExt, BufReader};
use toolbelt_process::{Contain, Containment, ExitOutcome, PreExec};

use super::{
    GlobQuery, GlobResults, GrepOutputMode, GrepQuery, GrepResults, SearchBackend, SearchError,
    rules,
};
use crate::confine::{Confinement, PathError};

/// Search by running `rg` and `fd`, each confined to the base directory by Landlock.
#[derive(Debug, Clone)]
pub struct ExternalSearch {
    base: PathBuf,
    confinement: Confinement,
    rg: PathBuf,
    fd: Option<FdProgram>,
    /// Files the children may read outside the base: their libraries and the loader cache.
    loader_files: Arc<Vec<PathBuf>>,
}

#[derive(Debug, Clone)]
struct FdProgram {
    path: PathBuf,
    no_require_git: bool,
}

/// The Landlock ABI asked for (best effort above the first one, which has what matters here:
/// reading files and directories).
const LANDLOCK_ABI: ABI = ABI::V5;

/// What stderr says when a child was refused a read (a symlink pointing outside).
const PERMISSION_DENIED: &str = "Permission denied";

/// What stderr says about a file or directory that vanished (or was swapped) while the
/// search ran: passed by without a word, as the in-process walk does.
const VANISHED: &str = "No such file or directory";

/// The most of a stderr line that is kept (the rest of a longer line is dropped).
const MAX_STDERR_LINE: usize = 4096;
/// The most of stderr's other errors that is kept for the message.
const MAX_STDERR_KEPT: usize = 64 * 1024;

/// What a search child said on stderr, read line by line within bounds: a tree of a million
/// unreadable files makes a million lines, which are counted, not kept.
#[derive(Debug, Default)]
struct Stderr {
    /// Reads the jail refused (symlinks pointing outside the base).
    refused: usize,
    /// The first lines that are neither a refused read nor a vanished file.
    other: String,
}

impl Stderr {
    fn take_line(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        if line.contains(PERMISSION_DENIED) {
            self.refused += 1;
        } else if !line.trim().is_empty()
            && !line.contains(VANISHED)
            && self.other.len() < MAX_STDERR_KEPT
        {
            self.other.push_str(line.trim_end());
            self.other.push('\n');
        }
    }

    /// Whether stderr has an error other than a refused read or a vanished file.
    fn has_other_errors(&self) -> bool {
        !self.other.is_empty()
    }

    /// Reads `pipe` to its end.
    async fn read(pipe: impl tokio::io::AsyncRead + Unpin) -> Self {
        use tokio::io::AsyncReadExt;
        let mut out = Stderr::default();
        let mut pipe = pipe;
        let mut chunk = vec![0u8; 8192];
        let mut line: Vec<u8> = Vec::new();
        while let Ok(n) = pipe.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            for &byte in &chunk[..n] {
                if byte == b'\n' {
                    out.take_line(&line);
                    line.clear();
                } else if line.len() < MAX_STDERR_LINE {
                    line.push(byte);
                }
            }
        }
        if !line.is_empty() {
            out.take_line(&line);
        }
        out
    }
}

impl ExternalSearch {
    /// Finds `rg` (required) and `fd`/`fdfind` (needed for Glob) on `PATH`; paths are shown
    /// relative to `base`. Fails where Landlock cannot confine them (not Linux 5.13+, or
    /// Landlock turned off).
    pub fn detect(base: impl AsRef<Path>) -> Result<Self, SearchError> {
        let confinement = Confinement::new(base.as_ref())
            .map_err(|e| SearchError::Failed(format!("base directory: {e}")))?;
        Self::detect_with(confinement)
    }

    /// [`ExternalSearch::detect`] with an existing confinement, which checks the search root
    /// and `fd`'s paths (for tests that pick its resolver, see
    /// [`Confinement::with_resolver`]).
    #[doc(hidden)]
    pub fn detect_with(confinement: Confinement) -> Result<Self, SearchError> {
        let base = confinement.base().to_path_buf();
        read_jail(&base, &[]).map_err(|e| {
            SearchError::Unavailable(format!(
                "rg and fd cannot be confined to the base directory here ({e}); use the \
                 in-process search"
            ))
        })?;
        let rg = find_program(&["rg"], "ripgrep").ok_or_else(|| {
            SearchError::Unavailable(
                "rg is not installed (install ripgrep, for example `apt-get install ripgrep`)"
                    .into(),
            )
        })?;
        let fd = find_program(&["fd", "fdfind"], "fd").map(|path| {
            let help = Command::new(&path)
                .arg("--help")
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            FdProgram {
                path,
                no_require_git: help.contains("--no-require-git"),
            }
        });
        let mut loader_files = loader_files(&rg);
        if let Some(fd) = &fd {
            loader_files.extend(loader_files_of(&fd.path));
        }
        loader_files.sort();
        loader_files.dedup();
        Ok(Self {
            base,
            confinement,
            rg,
            fd,
            loader_files: Arc::new(loader_files),
        })
    }

    /// Makes `command` run under the read jail: reads beneath the base and of the loader's
    /// files only, no writes.
    /// The hook that puts a child in the read jail before `exec`.
    fn confine(&self) -> Result<PreExec, SearchError> {
        let ruleset = read_jail(&self.base, &self.loader_files)
            .map_err(|e| SearchError::Unavailable(format!("cannot confine the search: {e}")))?;
        let mut ruleset = Some(ruleset);
        // Only prctl and the Landlock system calls on a ruleset built before the fork (as
        // the shell sandbox does): nothing allocated on success.
        Ok(Box::new(move || -> io::Result<()> {
            let ruleset = ruleset
                .take()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
            match ruleset.restrict_self() {
                Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
                _ => Err(io::Error::from_raw_os_error(libc::EPERM)),
            }
        }))
    }

    /// Runs `command` (rg or fd) jailed and contained, giving each line of its stdout to
    /// `line` as it arrives; its stderr and how it ended. Every process it started is gone
    /// when this returns, and also when the caller stops waiting (a timeout, a cancelled
    /// call): dropping the future drops the child's [`toolbelt_process::Contained`], which
    /// ends its whole tree, so a child blocked for good (a FIFO swapped into the tree
    /// mid-search) never outlives the call.
    async fn run_child(
        &self,
        mut command: tokio::process::Command,
        mut line: impl FnMut(&[u8]),
    ) -> io::Result<(ExitOutcome, Stderr)> {
        command
            .current_dir(&self.base)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let hook = self
            .confine()
            .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()))?;
        let mut child = Contain::new(Containment::Auto)
            .pre_exec(hook)
            .spawn(command)?;
        let stdout = child.take_stdout();
        let stderr = child.take_stderr();
        // Both pipes at once, so a chatty stderr never blocks the child on a full pipe.
        let read_stderr = async move {
            match stderr {
                Some(stderr) => Stderr::read(stderr).await,
                None => Stderr::default(),
            }
        };
        let read_stdout = async move {
            let Some(stdout) = stdout else {
                return Ok::<(), io::Error>(());
            };
            let mut reader = BufReader::new(stdout);
            let mut buffer = Vec::new();
            loop {
                buffer.clear();
                if reader.read_until(b'\n', &mut buffer).await? == 0 {
                    return Ok(());
                }
                line(buffer.strip_suffix(b"\n").unwrap_or(&buffer));
            }
        };
        let (read, stderr) = tokio::join!(read_stdout, read_stderr);
        read?;
        let outcome = child.wait().await?;
        // rg and fd start no programs of their own; anything left would still go here.
        child.kill_leftovers(Duration::ZERO).await;
        Ok((outcome, stderr))
    }

    /// The `rg` program in use.
    pub fn rg_path(&self) -> &Path {
        &self.rg
    }

    /// The `fd` program in use, if one was found.
    pub fn fd_path(&self) -> Option<&Path> {
        self.fd.as_ref().map(|fd| fd.path.as_path())
    }

    /// The `rg` arguments for `query` (run in the base directory).
    pub fn rg_args(&self, query: &GrepQuery) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--no-config",
            "--sort",
            "path",
            "--hidden",
            "--no-require-git",
            "--with-filename",
            "--no-heading",
            "--color",
            "never",
            "--follow",
            "--no-ignore-parent",
            "--no-ignore-global",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let mut push = |a: &str| args.push(a.into());
        if query.include_ignored {
            push("--no-ignore");
        }
        if query.case_insensitive {
            push("--ignore-case");
        }
        if query.multiline {
            push("--multiline");
            push("--multiline-dotall");
        }
        match query.output_mode {
            GrepOutputMode::FilesWithMatches => push("--files-with-matches"),
            GrepOutputMode::Count => push("--count"),
            GrepOutputMode::Content => {
                push(if query.line_numbers {
                    "--line-number"
                } else {
                    "--no-line-number"
                });
                push(&format!("--before-context={}", query.before_context));
                push(&format!("--after-context={}", query.after_context));
            }
        }
        if let Some(glob) = &query.glob {
            for part in rules::split_user_globs(glob) {
                push(&format!("--glob={part}"));
            }
        }
        for pattern in query.hidden.iter() {
            push(&format!("--glob=!{pattern}"));
        }
        for vcs in rules::VCS_FOLDERS {
            push(&format!("--glob=!{vcs}"));
        }
        if let Some(file_type) = &query.file_type {
            push(&format!("--type={file_type}"));
        }
        push(&format!("--regexp={}", query.pattern));
        if let Ok(relative) = query.root.strip_prefix(&self.base)
            && !relative.as_os_str().is_empty()
        {
            args.push("--".into());
            args.push(relative.as_os_str().to_owned());
        } else if query.root.strip_prefix(&self.base).is_err() {
            args.push("--".into());
            args.push(query.root.as_os_str().to_owned());
        }
        args
    }

    async fn grep_child(&self, query: &GrepQuery) -> Result<GrepResults, SearchError> {
        // Same regex front end as the in-process backend: identical errors, before any spawn.
        super::local::build_matcher(query)?;
        if let Some(glob) = &query.glob {
            super::check_glob_len(glob)?;
        }
        if let Some(name) = &query.file_type {
            ignore::types::TypesBuilder::new()
                .add_defaults()
                .select(name)
                .build()
                .map_err(|_| SearchError::UnknownType(name.clone()))?;
        }
        if !self.check_root(&query.root)? {
            return Ok(GrepResults {
                lines: Vec::new(),
                total: 0,
                skipped_outside: 0,
            });
        }
        let mut command = tokio::process::Command::new(&self.rg);
        command.args(self.rg_args(query));
        let mut lines = Vec::new();
        let mut total = 0usize;
        let end = query.head_limit.map(|l| query.offset.saturating_add(l));
        let (status, stderr) = self
            .run_child(command, |line| {
                if total >= query.offset && end.is_none_or(|end| total < end) {
                    lines.push(String::from_utf8_lossy(line).into_owned());
                }
                total += 1;
            })
            .await
            .map_err(|e| SearchError::Unavailable(format!("cannot run rg: {e}")))?;
        // Per-file refusals: what the jail denied (symlinks pointing outside the base).
        let skipped_outside = stderr.refused;
        // rg exits 1 for "no match" and 2 for errors; with output, errors were per file.
        if status.code == Some(2) && total == 0 && stderr.has_other_errors() {
            return Err(SearchError::Failed(super::short_message(
                stderr.other.trim(),
            )));
        }
        Ok(GrepResults {
            lines,
            total,
            skipped_outside,
        })
    }

    async fn glob_child(&self, query: GlobQuery) -> Result<GlobResults, SearchError> {
        let fd = self.fd.as_ref().ok_or_else(|| {
            SearchError::Unavailable(
                "fd is not installed (install fd-find, for example `apt-get install fd-find`)"
                    .into(),
            )
        })?;
        super::check_glob_len(&query.pattern)?;
        globset::GlobBuilder::new(&query.pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| SearchError::InvalidGlob(super::short_message(e)))?;
        if !self.check_root(&query.root)? {
            return Ok(GlobResults {
                paths: Vec::new(),
                total: 0,
                skipped_outside: 0,
            });
        }
        let mut command = tokio::process::Command::new(&fd.path);
        command.args([
            "--glob",
            "--full-path",
            // fd's default "smart case" turns insensitive when the whole pattern,
            // base path included, is lowercase; Glob is always case-sensitive.
            "--case-sensitive",
            "--type",
            "f",
            "--hidden",
            "--color",
            "never",
            "--follow",
            "--no-ignore-parent",
            // Refusals by the jail are counted from these messages.
            "--show-errors",
        ]);
        if fd.no_require_git {
            command.arg("--no-require-git");
        }
        if query.include_ignored {
            command.arg("--no-ignore");
        }
        for pattern in query.hidden.iter() {
            command.arg(format!("--exclude={pattern}"));
        }
        for vcs in rules::VCS_FOLDERS {
            command.arg(format!("--exclude={vcs}"));
        }
        let full_pattern = format!(
            "{}/{}",
            escape_glob(&query.root.to_string_lossy()),
            query.pattern
        );
        command.arg("--").arg(full_pattern).arg(&query.root);
        let mut listed: Vec<Vec<u8>> = Vec::new();
        let (status, stderr) = self
            .run_child(command, |line| {
                if !line.is_empty() {
                    listed.push(line.to_vec());
                }
            })
            .await
            .map_err(|e| SearchError::Unavailable(format!("cannot run fd: {e}")))?;
        let skipped = stderr.refused;
        if !status.success() && stderr.has_other_errors() {
            return Err(SearchError::Failed(super::short_message(
                stderr.other.trim(),
            )));
        }
        // One open per path: on a large tree, work for a blocking thread.
        let this = self.clone();
        super::run_blocking(move || this.keep_listed(listed, skipped, query.limit)).await
    }

    /// The paths `fd` listed that the confined resolver opens, sorted, relative to the
    /// base, cut at `limit`; `skipped` counts those refused already.
    fn keep_listed(
        &self,
        listed: Vec<Vec<u8>>,
        mut skipped_outside: usize,
        limit: Option<usize>,
    ) -> Result<GlobResults, SearchError> {
        let mut paths: Vec<String> = Vec::new();
        for line in &listed {
            let path = Path::new(std::ffi::OsStr::from_bytes(line));
            // fd lists a symlink by its own name without reading it: the rule decides.
            match self.confinement.open(path, OFlags::PATH) {
                Ok(_) => {}
                Err(PathError::OutsideBase { .. }) => {
                    skipped_outside += 1;
                    continue;
                }
                Err(_) => continue,
            }
            let shown = path.strip_prefix(&self.base).unwrap_or(path);
            paths.push(shown.to_string_lossy().into_owned());
        }
        paths.sort();
        let total = paths.len();
        if let Some(limit) = limit {
            paths.truncate(limit);
        }
        Ok(GlobResults {
            paths,
            total,
            skipped_outside,
        })
    }

    /// Opens the search root beneath the base (the rule for symlinks applies to it too), so
    /// a refused root is the same clear error as in the in-process backend. `false` when the
    /// root is neither a regular file nor a directory: a FIFO, socket or device is never
    /// searched (`rg` reads a FIFO given by name, and would wait for a writer forever), so
    /// the answer is empty, as from the in-process backend.
    fn check_root(&self, root: &Path) -> Result<bool, SearchError> {
        let fd = self
            .confinement
            .open(root, OFlags::PATH)
            .map_err(|e| SearchError::Path(e.to_string()))?;
        let st = rustix::fs::fstat(&fd)
            .map_err(|e| SearchError::Path(format!("{}: {e}", root.display())))?;
        Ok(matches!(
            rustix::fs::FileType::from_raw_mode(st.st_mode),
            rustix::fs::FileType::RegularFile | rustix::fs::FileType::Directory
        ))
    }
}

/// A Landlock ruleset that allows reading beneath `base` and the files `also`, and no other
/// file access (execution is not restricted: the child is exec'd after the ruleset applies).
fn read_jail(base: &Path, also: &[PathBuf]) -> Result<RulesetCreated, landlock::RulesetError> {
    let handled = AccessFs::from_all(LANDLOCK_ABI) & !BitFlags::from(AccessFs::Execute);
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    Ruleset::default()
        // Reading files and directories (ABI 1) must be enforced; newer rights as available.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(read)?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)?
        .create()?
        .add_rules(path_beneath_rules([base], read))?
        .add_rules(path_beneath_rules(also, AccessFs::ReadFile))
}

/// The files starting `program` reads: the program (execve reads it), its loader and shared
/// libraries (as `ldd` lists them) and the loader cache.
fn loader_files(program: &Path) -> Vec<PathBuf> {
    let mut files = loader_files_of(program);
    files.push(PathBuf::from("/etc/ld.so.cache"));
    files
}

fn loader_files_of(program: &Path) -> Vec<PathBuf> {
    let mut files = vec![program.to_path_buf()];
    let Ok(output) = Command::new("ldd")
        .arg(program)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return files;
    };
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux... (0x...)"
    let listed = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let path = line.split("=>").last()?.split(" (").next()?.trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .filter(|path| path.is_file())
        .collect::<Vec<_>>();
    files.extend(listed);
    files
}

/// Escapes glob metacharacters in a literal path.
fn escape_glob(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '!') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

/// The first of `names` on `PATH` whose `--version` mentions `expect`.
fn find_program(names: &[&str], expect: &str) -> Option<PathBuf> {
    for name in names {
        for candidate in crate::which::on_path(name) {
            let version = Command::new(&candidate)
                .arg("--version")
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output();
            if let Ok(output) = version
                && String::from_utf8_lossy(&output.stdout).contains(expect)
            {
                return Some(candidate);
            }
        }
    }
    None
}

#[async_trait]
impl SearchBackend for ExternalSearch {
    fn searches_local_files(&self) -> bool {
        true
    }

    async fn grep(&self, query: GrepQuery) -> Result<GrepResults, SearchError> {
        self.grep_child(&query).await
    }

    async fn glob(&self, query: GlobQuery) -> Result<GlobResults, SearchError> {
        self.glob_child(query).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: u32) -> bool {
        // A zombie is as good as gone: it runs nothing.
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    /// Where `program` is (a path is taken as it is).
    fn which(program: &str) -> PathBuf {
        if program.starts_with('/') {
            return PathBuf::from(program);
        }
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
            .unwrap_or_else(|| panic!("{program} is not on PATH (apt-get install util-linux)"))
    }

    /// The pid of the process whose command line ends with `wanted`, once it runs.
    async fn started(wanted: &str) -> u32 {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found = std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .find(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| c.ends_with(wanted.as_bytes()))
                });
            if let Some(pid) = found {
                return pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{wanted:?} never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A search whose caller stopped waiting ends its child and what the child started, a
    /// `setsid` escapee included (rg and fd start nothing, but the promise is the owner's).
    #[tokio::test]
    async fn an_abandoned_search_leaves_no_process() {
        let base = tempfile::tempdir().unwrap();
        let Ok(search) = ExternalSearch::detect(base.path()) else {
            panic!("rg and Landlock are needed here: install ripgrep (apt-get install ripgrep)");
        };
        // The jail lets the child write nothing, so the escapee is found by its unique
        // argument instead of a pid file.
        let unique = format!("300.{}", std::process::id());
        // The jail lets the child read only the base and rg's libraries (libc among
        // them), and exec needs to read the program: so the programs are copied in.
        let bin = base.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for (name, program) in [("sh", "/bin/sh"), ("setsid", "setsid"), ("sleep", "sleep")] {
            let path = which(program);
            std::fs::copy(&path, bin.join(name)).unwrap();
        }
        let mut command = tokio::process::Command::new(bin.join("sh"));
        command
            .env("PATH", &bin)
            .arg("-c")
            .arg(format!("setsid -f sleep {unique}; exec sleep 301"));
        let wanted = format!("sleep\0{unique}\0");
        // Boxed, so that dropping it below drops the future itself.
        let mut run = Box::pin(search.run_child(command, |_| {}));
        let escapee = tokio::select! {
            ended = &mut run => panic!("the child ended by itself: {ended:?}"),
            pid = started(&wanted) => pid,
        };
        // The caller stops waiting.
        drop(run);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while alive(escapee) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            !alive(escapee),
            "the setsid escapee {escapee} outlived the search: {:?} {:?}",
            std::fs::read_to_string(format!("/proc/{escapee}/stat")),
            std::fs::read_to_string(format!("/proc/{escapee}/cgroup"))
        );
    }
}

#[cfg(test)]
mod stderr_tests {
    use super::*;

    #[tokio::test]
    async fn a_flood_of_refusals_is_counted_not_kept_and_long_lines_are_cut() {
        let mut text = "rg: ./x: Permission denied (os error 13)\n".repeat(200_000);
        text.push_str(&format!("rg: regex parse error: {}\n", "y".repeat(100_000)));
        text.push_str("rg: ./gone: No such file or directory (os error 2)\n");
        let stderr = Stderr::read(text.as_bytes()).await;
        assert_eq!(stderr.refused, 200_000);
        assert!(stderr.has_other_errors());
        assert!(stderr.other.starts_with("rg: regex parse error"));
        assert!(
            stderr.other.len() <= MAX_STDERR_LINE + 1,
            "{}",
            stderr.other.len()
        );
    }
}
