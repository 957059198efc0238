//! Finding, starting and ending Chromium.
//!
//! Chromium is started by the one process owner (`toolbelt-process`) inside a cgroup or under
//! a subreaper, never in a process group alone: its crash handler (`chrome_crashpad_handler`)
//! forks twice and calls `setsid`, so it leaves any group, and a wrapper script given as the
//! executable may start helpers that do the same. It gets a fresh user-data directory and
//! talks CDP over a pipe on its file descriptors 3 and 4 (`--remote-debugging-pipe`): no
//! debugging port is opened that another local program could connect to. Dropping a
//! [`ChromiumProcess`] kills every process it started, waits until they are gone, reaps the
//! main process and then removes the user-data directory.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;
use toolbelt_core::EnvPolicy;
use toolbelt_process::{Contain, Contained, Containment};

/// The names looked up on `PATH` when no Chromium is configured, in order.
pub(crate) const CHROMIUM_NAMES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// The environment variable naming a Chromium executable.
pub const CHROMIUM_ENV: &str = "TOOLBELT_CHROMIUM";

/// Resolves the Chromium to run: the configured path, else `TOOLBELT_CHROMIUM`, else the
/// first of [`CHROMIUM_NAMES`] on `PATH`.
pub(crate) fn find_chromium(configured: Option<&Path>) -> Result<PathBuf, String> {
    let explicit = configured
        .map(|p| (p.to_path_buf(), "the configured Chromium path"))
        .or_else(|| {
            std::env::var_os(CHROMIUM_ENV)
                .filter(|v| !v.is_empty())
                .map(|v| (PathBuf::from(v), CHROMIUM_ENV))
        });
    if let Some((path, source)) = explicit {
        let found = if path.components().count() == 1 {
            search_path(path.as_os_str())
        } else {
            path.is_file().then(|| path.clone())
        };
        return found.ok_or_else(|| {
            format!(
                "the Chromium named by {source} ({}) does not exist or is not a file; \
                 install Chromium (apt-get install chromium) or give the path to its executable",
                path.display()
            )
        });
    }
    CHROMIUM_NAMES
        .iter()
        .find_map(|name| search_path(name.as_ref()))
        .ok_or_else(|| {
            format!(
                "no Chromium found: none of {} is on PATH; install it (apt-get install \
                 chromium) or name the executable with --chromium PATH or {CHROMIUM_ENV}",
                CHROMIUM_NAMES.join(", ")
            )
        })
}

fn search_path(name: &std::ffi::OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A running Chromium: its main process with every process it started, and its user-data
/// directory.
pub(crate) struct ChromiumProcess {
    process: Contained,
    user_data: Option<TempDir>,
}

/// Our ends of the CDP pipe: we write to Chromium's fd 3 and read from its fd 4.
pub(crate) struct CdpPipe {
    pub(crate) to_browser: OwnedFd,
    pub(crate) from_browser: OwnedFd,
}

impl ChromiumProcess {
    /// Starts Chromium headless with the flags this network needs, every connection through
    /// `proxy`, and a fresh user-data directory. Needs a Tokio runtime.
    pub(crate) fn spawn(
        executable: &Path,
        proxy: std::net::SocketAddr,
        viewport: (u32, u32),
    ) -> io::Result<(Self, CdpPipe)> {
        let user_data = tempfile::Builder::new()
            .prefix("toolbelt-browser-")
            .tempdir()?;
        let (browser_reads, we_write) = io::pipe()?;
        let (we_read, browser_writes) = io::pipe()?;
        let mut command = Command::new(executable);
        command.args(chromium_args(user_data.path(), proxy, viewport));
        EnvPolicy::new().apply_to(&mut command);
        // Chromium makes its own temporary folders (`org.chromium.Chromium.*`) under TMPDIR
        // and leaves them behind; inside the profile they go when the profile does.
        let temp = user_data.path().join("tmp");
        std::fs::create_dir(&temp)?;
        command.env("TMPDIR", &temp);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let read_fd = browser_reads.as_raw_fd();
        let write_fd = browser_writes.as_raw_fd();
        // Between fork and exec only async-signal-safe calls (fcntl, dup2) are made, on
        // descriptors that stay open in the parent until spawn returns; after the owner's
        // own step, which marks every descriptor above 2 close-on-exec (dup2 clears that
        // mark on 3 and 4 again).
        let contain = Contain::new(Containment::Auto).pre_exec(Box::new(move || {
            // SAFETY: fcntl and dup2 on descriptors the parent keeps open until spawn returns.
            unsafe {
                // Move both ends above 3 and 4 first, so neither dup2 overwrites the other.
                let high_read = libc::fcntl(read_fd, libc::F_DUPFD_CLOEXEC, 10);
                let high_write = libc::fcntl(write_fd, libc::F_DUPFD_CLOEXEC, 10);
                if high_read < 0
                    || high_write < 0
                    || libc::dup2(high_read, 3) < 0
                    || libc::dup2(high_write, 4) < 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        }));
        let process = contain.spawn(tokio::process::Command::from(command))?;
        drop(browser_reads);
        drop(browser_writes);
        Ok((
            Self {
                process,
                user_data: Some(user_data),
            },
            CdpPipe {
                to_browser: we_write.into(),
                from_browser: we_read.into(),
            },
        ))
    }

    /// The main process id (it leads its own session and process group).
    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Whether the main process has exited (crashed or was killed from outside).
    pub(crate) fn has_exited(&mut self) -> bool {
        !matches!(self.process.try_wait(), Ok(None))
    }
}

impl Drop for ChromiumProcess {
    fn drop(&mut self) {
        // SIGKILL to every process, and a wait until all are gone: one with many threads and
        // much memory takes a moment to exit on a loaded machine, and a closed browser must
        // have no process left running, not merely one on its way out.
        let cleanup = self.process.kill_blocking(EXIT_LIMIT);
        if !cleanup.complete {
            tracing::warn!(
                target: "toolbelt_browser",
                "browser processes outlived the kill ({} were killed)",
                cleanup.killed
            );
        }
        // Only now that nothing writes to it is the profile removed.
        if let Some(dir) = self.user_data.take()
            && let Err(e) = dir.close()
        {
            tracing::warn!(target: "toolbelt_browser", "could not remove the browser profile: {e}");
        }
    }
}

/// How long dropping a browser waits for its killed processes to finish exiting.
const EXIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Chromium's command line: headless, no sandbox (the network is the boundary we enforce;
/// see SECURITY.md), no background traffic, every connection through our proxy.
fn chromium_args(
    user_data: &Path,
    proxy: std::net::SocketAddr,
    (width, height): (u32, u32),
) -> Vec<OsString> {
    let mut data_dir = OsString::from("--user-data-dir=");
    data_dir.push(user_data);
    let mut args: Vec<OsString> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        // Less traffic of the browser's own (time, metrics, translation). Some remains (the
        // sign-in and update services): it goes through the proxy and its policy like any.
        "--disable-breakpad",
        "--disable-client-side-phishing-detection",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--disable-field-trial-config",
        "--metrics-recording-only",
        "--no-service-autorun",
        "--no-pings",
        "--password-store=basic",
        "--use-mock-keychain",
        "--disable-search-engine-choice-screen",
        "--disable-features=Translate,MediaRouter,DialMediaRouteProvider,OptimizationHints,\
         CertificateTransparencyComponentUpdater,NetworkTimeServiceQuerying,\
         AutofillServerCommunication",
        "--mute-audio",
        "--hide-scrollbars",
        // WebRTC must not send UDP around the proxy (it could reach local addresses).
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        // Loopback too goes through the proxy: Chromium bypasses it for loopback by default.
        "--proxy-bypass-list=<-loopback>",
        "--remote-debugging-pipe",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    args.push(format!("--proxy-server=http://{proxy}").into());
    args.push(format!("--window-size={width},{height}").into());
    args.push(data_dir);
    args.push("about:blank".into());
    args
}
