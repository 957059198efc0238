//! What the web UI tests share: `toolbelt ui` started on a free loopback port against a
//! scripted model server, its URL and token, and `toolbelt run --session` runs writing to
//! the same file from another process.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolbelt_model::testing::ScriptedServer;

/// The token the tests give `toolbelt ui`.
pub const TOKEN: &str = "ui-test-token-5f2c";

/// `toolbelt` configured for `server`, working in `dir`.
pub fn toolbelt(server: &ScriptedServer, dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .current_dir(dir)
        .env("OPENAI_BASE_URL", server.base_url())
        .env("TOOLBELT_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLBELT_UI_TOKEN")
        .env_remove("TOOLBELT_LOG");
    command
}

/// A running `toolbelt ui`; killed (and reaped) when dropped.
pub struct Ui {
    child: Child,
    /// `http://127.0.0.1:PORT/`.
    pub base: String,
    stderr: Arc<Mutex<String>>,
}

impl Ui {
    /// Starts `toolbelt ui --session FILE --http 127.0.0.1:0 --token TOKEN --yes --dir DIR`
    /// plus `extra`, and waits for the line naming its URL.
    pub fn start(server: &ScriptedServer, dir: &Path, session: &Path, extra: &[&str]) -> Self {
        let mut extra = extra.to_vec();
        extra.push("--yes");
        Self::start_asking(server, dir, session, &extra)
    }

    /// As [`Ui::start`] without `--yes`: calls the rules ask about pause for the page.
    pub fn start_asking(
        server: &ScriptedServer,
        dir: &Path,
        session: &Path,
        extra: &[&str],
    ) -> Self {
        let mut command = toolbelt(server, dir);
        command
            .args(["ui", "--http", "127.0.0.1:0", "--token", TOKEN, "--session"])
            .arg(session)
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Self::spawn(command, "toolbelt: web UI on ")
    }

    /// Spawns `command` and waits for the stderr line starting with `marker` followed by the
    /// URL.
    pub fn spawn(mut command: Command, marker: &str) -> Self {
        let mut child = command.spawn().expect("start toolbelt");
        let stderr = child.stderr.take().expect("stderr");
        let seen = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = seen.clone();
        let marker = marker.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                // Kept before the URL is announced: a test that reads stderr as soon as
                // `spawn` returns must find the line there.
                {
                    let mut all = sink.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
                if let Some(url) = line.strip_prefix(&marker) {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let Ok(url) = rx.recv_timeout(Duration::from_secs(60)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "toolbelt never printed its URL; stderr:\n{}",
                seen.lock().unwrap()
            );
        };
        let base = match url.split_once('?') {
            Some((base, _)) => base.to_string(),
            None => url,
        };
        Self {
            child,
            base,
            stderr: seen,
        }
    }

    /// `base` + `path` (`path` without the leading slash).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path.trim_start_matches('/'))
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// An HTTP client sending the bearer token.
    pub fn client(&self) -> reqwest::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {TOKEN}").parse().unwrap(),
        );
        reqwest::Client::builder()
            .default_headers(headers)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    /// GET `path` with the token, as JSON (status 200 required).
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let response = self.client().get(self.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "GET {path}: {}", self.stderr());
        response.json().await.unwrap()
    }

    /// Its stdin (when it was piped).
    pub fn child_stdin(&mut self) -> std::process::ChildStdin {
        self.child.stdin.take().expect("stdin was piped")
    }

    /// Its stdout (when it was piped).
    pub fn child_stdout(&mut self) -> std::process::ChildStdout {
        self.child.stdout.take().expect("stdout was piped")
    }

    /// Stops it with SIGTERM and returns its exit code.
    pub fn stop(&mut self) -> Option<i32> {
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().expect("wait for toolbelt ui");
        status.code()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project directory: `notes.txt`, `pixel.png` (an 8×8 PNG) and `payload.txt`, whose text is
/// markup a careless page would run.
pub fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.path().join("pixel.png"), PNG_8X8).unwrap();
    std::fs::write(dir.path().join("payload.txt"), PAYLOAD).unwrap();
    dir
}

/// Markup that must stay text on the page.
pub const PAYLOAD: &str =
    "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";

/// An 8×8 red PNG.
pub const PNG_8X8: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x08, 0x08, 0x02, 0x00, 0x00, 0x00, 0x4b, 0x6d, 0x29,
    0xdc, 0x00, 0x00, 0x00, 0x11, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xb8, 0xa3, 0xa1, 0x81,
    0x15, 0x31, 0x0c, 0x2d, 0x09, 0x00, 0x7b, 0x7b, 0x4b, 0x01, 0xfb, 0xa2, 0x51, 0xf0, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// `dir/name` as a JSON string body.
pub fn path_arg(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().replace('\\', "\\\\")
}

/// The session file in `dir`'s parent-free temp space.
pub fn session_file(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("sessions.db")
}

/// Runs `toolbelt run PROMPT --session FILE --yes` to the end, off the async runtime; returns
/// (exit code, stderr).
pub async fn run_in_session(
    server: &ScriptedServer,
    dir: &Path,
    session: &Path,
    prompt: &str,
    extra: &[&str],
) -> (Option<i32>, String) {
    let mut extra = extra.to_vec();
    extra.push("--yes");
    run_asking_in_session(server, dir, session, prompt, &extra).await
}

/// As [`run_in_session`] without `--yes`: with no terminal, the run pauses on what the rules
/// ask about (exit 3).
pub async fn run_asking_in_session(
    server: &ScriptedServer,
    dir: &Path,
    session: &Path,
    prompt: &str,
    extra: &[&str],
) -> (Option<i32>, String) {
    let mut command = toolbelt(server, dir);
    command
        .args(["run", prompt, "--session"])
        .arg(session)
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || command.output().expect("run toolbelt"))
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
