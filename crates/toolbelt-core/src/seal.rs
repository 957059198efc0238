//! Keeping this process's own secrets away from the processes it starts.
//!
//! [`EnvPolicy`](crate::EnvPolicy) keeps secrets out of a child's environment, but a child can
//! also read its parent's: `/proc/<pid>/environ` shows the environment the process was
//! *started* with (the block the kernel laid out at `exec`, whatever `unsetenv` did since),
//! and `/proc/<pid>/cmdline` its arguments. A `tr '\0' '\n' < /proc/$PPID/environ` in a Bash
//! call, a script run by `execute_code` or an MCP stdio server printed `OPENAI_API_KEY` and
//! `TOOLBELT_SERVE_TOKEN` that way. [`seal_secrets`], called once at the start of `main`:
//!
//! 1. copies every variable whose name looks like a secret
//!    ([`SECRET_PATTERNS`](crate::env::SECRET_PATTERNS)) to the heap (`setenv`, so
//!    `std::env::var` still finds it) and overwrites its value in the start-up block with
//!    zero bytes, so `/proc/<pid>/environ` no longer holds it, for any reader, root included;
//! 2. does the same for the value of a command-line flag whose name looks like a secret
//!    (`--token VALUE`, `--api-key=VALUE`), which `/proc/<pid>/cmdline` shows to every user;
//! 3. marks the process non-dumpable (`PR_SET_DUMPABLE` 0): processes of the same user that
//!    are not root can then neither `ptrace` it nor open its `/proc/<pid>/{environ,mem,maps}`,
//!    so the heap copies stay out of their reach too. A forked helper that has not yet called
//!    `exec` inherits this; `exec` gives a child its own.
//!
//! What it does not cover: a process running as root (with `CAP_SYS_PTRACE`) can still read
//! this process's memory through `/proc/<pid>/mem` unless a sandbox stops it (Landlock keeps a
//! sandboxed process from tracing one outside its domain); secrets inside another flag's value
//! (`--header 'Authorization: Bearer …'`) are not recognised.

/// What [`seal_secrets`] did, for a debug log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sealed {
    /// The environment variables whose start-up values were overwritten.
    pub variables: Vec<String>,
    /// How many command-line values were overwritten.
    pub arguments: usize,
    /// Whether the process is now non-dumpable.
    pub non_dumpable: bool,
}

/// Removes this process's secrets from what other processes can read of it (see the
/// [module docs](self)). Linux only; elsewhere it does nothing.
///
/// Call it once, at the start of `main`, after the command line was parsed (the parser keeps
/// its own copies of the values) and before anything reads a secret argument again.
///
/// # Safety
///
/// No other thread may run: it changes the environment (`setenv`) and writes to the memory
/// that `std::env::args` reads the arguments from.
pub unsafe fn seal_secrets() -> Sealed {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the caller guarantees that no other thread runs.
        unsafe { linux::seal() }
    }
    #[cfg(not(target_os = "linux"))]
    Sealed::default()
}

#[cfg(target_os = "linux")]
mod linux {
    use super::Sealed;
    use crate::env::SECRET_PATTERNS;

    /// The start and end addresses of this process's start-up arguments and environment, from
    /// `/proc/self/stat` (fields 48 to 51: `arg_start arg_end env_start env_end`).
    fn blocks() -> Option<[usize; 4]> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let after = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        // `after` starts at field 3.
        let field = |n: usize| fields.get(n - 3)?.trim().parse::<usize>().ok();
        Some([field(48)?, field(49)?, field(50)?, field(51)?])
    }

    fn is_secret_name(name: &str) -> bool {
        crate::env::matches_any(SECRET_PATTERNS, name)
    }

    /// The strings of a NUL-separated block, each as its start offset and its bytes.
    fn strings(block: &[u8]) -> Vec<(usize, &[u8])> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, b) in block.iter().enumerate() {
            if *b == 0 {
                out.push((start, &block[start..i]));
                start = i + 1;
            }
        }
        if start < block.len() {
            out.push((start, &block[start..]));
        }
        out
    }

    /// Where in the argument block secret values lie: `--NAME=VALUE` and `--NAME VALUE` for a
    /// secret-looking NAME, as (offset, length) pairs.
    pub(super) fn secret_argument_values(block: &[u8]) -> Vec<(usize, usize)> {
        let args = strings(block);
        let mut out = Vec::new();
        let mut iter = args.iter().peekable();
        while let Some((start, arg)) = iter.next() {
            let Some(flag) = arg.strip_prefix(b"--") else {
                continue;
            };
            let text = String::from_utf8_lossy(flag);
            match text.split_once('=') {
                Some((name, value)) if is_secret_name(name) && !value.is_empty() => {
                    out.push((start + 2 + name.len() + 1, value.len()));
                }
                None if is_secret_name(&text) => {
                    if let Some((next_start, next)) = iter.peek()
                        && !next.starts_with(b"-")
                        && !next.is_empty()
                    {
                        out.push((*next_start, next.len()));
                        iter.next();
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Overwrites `len` bytes at `addr` with zeros.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be writable memory of this process that nothing else reads or
    /// writes meanwhile.
    unsafe fn zero(addr: usize, len: usize) {
        // SAFETY: as the caller guarantees. Volatile, so the writes are not elided.
        for i in 0..len {
            unsafe { std::ptr::write_volatile((addr + i) as *mut u8, 0) };
        }
    }

    /// # Safety
    ///
    /// No other thread may run.
    pub(super) unsafe fn seal() -> Sealed {
        let mut sealed = Sealed::default();
        if let Some([arg_start, arg_end, env_start, env_end]) = blocks() {
            // SAFETY: the kernel laid these blocks out at exec in this process's stack; they
            // stay mapped and writable for the process's life, and no other thread runs.
            let env = unsafe {
                std::slice::from_raw_parts(
                    env_start as *const u8,
                    env_end.saturating_sub(env_start),
                )
            }
            .to_vec();
            for (offset, entry) in strings(&env) {
                let Some(eq) = entry.iter().position(|b| *b == b'=') else {
                    continue;
                };
                let Ok(name) = std::str::from_utf8(&entry[..eq]) else {
                    continue;
                };
                if !is_secret_name(name) {
                    continue;
                }
                let value: &std::ffi::OsStr =
                    std::os::unix::ffi::OsStrExt::from_bytes(&entry[eq + 1..]);
                // Only the start-up value is overwritten, and only once the environment no
                // longer points at it: `setenv` puts a heap copy in its place.
                let still_startup = |var: &str| {
                    let Ok(c) = std::ffi::CString::new(var) else {
                        return true;
                    };
                    // SAFETY: getenv with a NUL-terminated name; no other thread runs.
                    let p = unsafe { libc::getenv(c.as_ptr()) } as usize;
                    p >= env_start && p < env_end
                };
                if std::env::var_os(name).as_deref() == Some(value) {
                    // SAFETY: no other thread runs (the caller's guarantee).
                    unsafe { std::env::set_var(name, value) };
                }
                if still_startup(name) {
                    continue;
                }
                // SAFETY: inside the start-up environment block, which nothing points at any
                // more for this variable.
                unsafe { zero(env_start + offset + eq + 1, entry.len() - eq - 1) };
                sealed.variables.push(name.to_string());
            }
            // SAFETY: as for the environment block above.
            let args = unsafe {
                std::slice::from_raw_parts(
                    arg_start as *const u8,
                    arg_end.saturating_sub(arg_start),
                )
            }
            .to_vec();
            for (offset, len) in secret_argument_values(&args) {
                // SAFETY: inside the argument block; the caller has parsed the arguments.
                unsafe { zero(arg_start + offset, len) };
                sealed.arguments += 1;
            }
        }
        // SAFETY: prctl with PR_SET_DUMPABLE and a plain integer argument.
        sealed.non_dumpable = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } == 0;
        sealed
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::linux::secret_argument_values;

    fn values(args: &[&str]) -> Vec<String> {
        let block: Vec<u8> = args
            .iter()
            .flat_map(|a| [a.as_bytes(), b"\0"].concat())
            .collect();
        secret_argument_values(&block)
            .into_iter()
            .map(|(o, l)| String::from_utf8(block[o..o + l].to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn secret_flag_values_are_found_in_both_spellings_and_nothing_else() {
        let found = values(&[
            "toolbelt",
            "serve",
            "--token",
            "s3cret",
            "--http",
            "8808",
            "--api-key=sk-1",
            "--dir",
            "/token",
            "--token",
            "--verbose",
        ]);
        assert_eq!(found, ["s3cret", "sk-1"]);
    }
}
