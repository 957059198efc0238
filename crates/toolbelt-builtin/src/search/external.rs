//! [`ExternalSearch`]: Grep through the `rg` program and Glob through `fd` (installed as
//! `fdfind` on Debian and Ubuntu; both names are tried).
//!
//! The programs get the options that make them follow the same rules as [`super::LocalSearch`]
//! (`--hidden`, `--no-require-git`, version-control folders excluded, `--sort path` for rg),
//! so the two backends print the same bytes. `rg --sort path` streams in order, so a limit
//! keeps only the selected lines; `fd` cannot sort, so every path is collected, sorted and
//! then cut, which costs time and memory on large trees. Differences: `fd` reads `.fdignore`
//! where the in-process walk reads `.rgignore`, and an `fd` older than 9 honours `.gitignore`
//! only inside a git repository.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use async_trait::async_trait;

use super::{
    GlobQuery, GlobResults, GrepOutputMode, GrepQuery, GrepResults, SearchBackend, SearchError,
    rules,
};

/// Search by running `rg` and `fd`.
#[derive(Debug, Clone)]
pub struct ExternalSearch {
    base: PathBuf,
    rg: PathBuf,
    fd: Option<FdProgram>,
}

#[derive(Debug, Clone)]
struct FdProgram {
    path: PathBuf,
    no_require_git: bool,
}

impl ExternalSearch {
    /// Finds `rg` (required) and `fd`/`fdfind` (needed for Glob) on `PATH`; paths are shown
    /// relative to `base`.
    pub fn detect(base: impl AsRef<Path>) -> Result<Self, SearchError> {
        let base = std::fs::canonicalize(base.as_ref())
            .map_err(|e| SearchError::Failed(format!("base directory: {e}")))?;
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
        Ok(Self { base, rg, fd })
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

    fn grep_blocking(&self, query: &GrepQuery) -> Result<GrepResults, SearchError> {
        // Same regex front end as the in-process backend: identical errors, before any spawn.
        super::local::build_matcher(query)?;
        if let Some(name) = &query.file_type {
            ignore::types::TypesBuilder::new()
                .add_defaults()
                .select(name)
                .build()
                .map_err(|_| SearchError::UnknownType(name.clone()))?;
        }
        let mut child = Command::new(&self.rg)
            .args(self.rg_args(query))
            .current_dir(&self.base)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| SearchError::Unavailable(format!("cannot run rg: {e}")))?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        // Drain stderr on its own thread so a chatty rg never blocks on a full pipe.
        let stderr_reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut stderr) = stderr {
                let _ = stderr.read_to_string(&mut text);
            }
            text
        });
        let mut lines = Vec::new();
        let mut total = 0usize;
        let end = query.head_limit.map(|l| query.offset.saturating_add(l));
        if let Some(stdout) = stdout {
            let mut reader = BufReader::new(stdout);
            let mut buffer = Vec::new();
            loop {
                buffer.clear();
                match reader.read_until(b'\n', &mut buffer) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(SearchError::Failed(format!("reading rg output: {e}")));
                    }
                }
                if total >= query.offset && end.is_none_or(|end| total < end) {
                    let line = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
                    lines.push(String::from_utf8_lossy(line).into_owned());
                }
                total += 1;
            }
        }
        let status = child
            .wait()
            .map_err(|e| SearchError::Failed(format!("waiting for rg: {e}")))?;
        let stderr = stderr_reader.join().unwrap_or_default();
        // rg exits 1 for "no match" and 2 for errors; with output, errors were per file.
        if status.code() == Some(2) && total == 0 && !stderr.trim().is_empty() {
            return Err(SearchError::Failed(stderr.trim().to_string()));
        }
        Ok(GrepResults {
            lines,
            total,
            skipped_outside: 0,
        })
    }

    fn glob_blocking(&self, query: &GlobQuery) -> Result<GlobResults, SearchError> {
        let fd = self.fd.as_ref().ok_or_else(|| {
            SearchError::Unavailable(
                "fd is not installed (install fd-find, for example `apt-get install fd-find`)"
                    .into(),
            )
        })?;
        globset::GlobBuilder::new(&query.pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| SearchError::InvalidGlob(e.to_string()))?;
        let mut command = Command::new(&fd.path);
        command
            .args([
                "--glob",
                "--full-path",
                "--type",
                "f",
                "--hidden",
                "--color",
                "never",
            ])
            .current_dir(&self.base)
            .stdin(Stdio::null());
        if fd.no_require_git {
            command.arg("--no-require-git");
        }
        if query.include_ignored {
            command.arg("--no-ignore");
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
        let output = command
            .output()
            .map_err(|e| SearchError::Unavailable(format!("cannot run fd: {e}")))?;
        if !output.status.success() {
            return Err(SearchError::Failed(
                String::from_utf8_lossy(&output.stderr).trim().to_string(),
            ));
        }
        let mut paths: Vec<String> = output
            .stdout
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| {
                let path = Path::new(std::str::from_utf8(line).unwrap_or_default());
                let shown = path.strip_prefix(&self.base).unwrap_or(path);
                match std::str::from_utf8(line) {
                    Ok(_) => shown.to_string_lossy().into_owned(),
                    Err(_) => String::from_utf8_lossy(line).into_owned(),
                }
            })
            .collect();
        paths.sort();
        let total = paths.len();
        if let Some(limit) = query.limit {
            paths.truncate(limit);
        }
        Ok(GlobResults {
            paths,
            total,
            skipped_outside: 0,
        })
    }
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
    async fn grep(&self, query: GrepQuery) -> Result<GrepResults, SearchError> {
        let this = self.clone();
        super::run_blocking(move || this.grep_blocking(&query)).await
    }

    async fn glob(&self, query: GlobQuery) -> Result<GlobResults, SearchError> {
        let this = self.clone();
        super::run_blocking(move || this.glob_blocking(&query)).await
    }
}
