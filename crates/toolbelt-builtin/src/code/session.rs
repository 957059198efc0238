//! The persistent Python session behind `execute_code` with `session: true`: one long-lived
//! interpreter per tool set, started on first use, so variables survive between calls.
//!
//! The interpreter runs a small driver ([`DRIVER`]) started exactly as `Bash` starts a
//! command (same sandbox, containment and environment). Requests reach it as JSON lines on a
//! FIFO in the shell's private temp dir; the program's stdout and stderr come back on the
//! process's merged output pipe, and the driver ends each request's output with a marker
//! line carrying that request's random nonce and a JSON status, so program output can never
//! be mistaken for the end of a request it did not send.
//!
//! A timeout or a cancelled call kills the interpreter with everything it started; a crash
//! (the interpreter exiting) is noticed at once. Either way the call says the session was
//! lost, and the next call starts a fresh one. `restart: true` starts a fresh one on
//! purpose. Closing or dropping the tool set kills the interpreter.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::unix::pipe;
use toolbelt_core::{ToolContext, ToolError, ToolOutput};

use crate::shell::{CappedOutput, OutputStream, RunningProcess, ShellState};

/// The Python driver: reads JSON requests from the FIFO named by its first argument, runs
/// each one's code in one namespace, and ends each request's output with the marker.
const DRIVER: &str = r#"import json, os, sys, traceback
namespace = {"__name__": "__main__"}
with open(sys.argv[1], "r", encoding="utf-8") as requests:
    for line in requests:
        request = json.loads(line)
        os.environ["OUTPUT_DIR"] = request["output_dir"]
        status = {"ok": True, "error": None}
        try:
            exec(compile(request["code"], "<session>", "exec"), namespace)
        except SystemExit as e:
            status = {"ok": False, "error": "SystemExit: %r" % (e.code,)}
        except BaseException:
            status = {"ok": False, "error": traceback.format_exc()}
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout.write("\n\x1eTOOLBELT-DONE " + request["nonce"] + " " + json.dumps(status) + "\n")
        sys.stdout.flush()
"#;

/// A running interpreter.
struct Live {
    process: Box<dyn RunningProcess>,
    output: OutputStream,
    requests: pipe::Sender,
    dir: PathBuf,
}

impl Drop for Live {
    fn drop(&mut self) {
        // Dropping the process (not waited for) kills every process it started.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One tool set's Python session.
pub(crate) struct PythonSession {
    state: Arc<ShellState>,
    live: tokio::sync::Mutex<Option<Live>>,
    starts: AtomicU64,
}

/// How a session call ended.
enum Ending {
    Done(serde_json::Value),
    Lost(String),
    Cancelled,
}

impl PythonSession {
    pub(crate) fn new(state: Arc<ShellState>) -> Self {
        Self {
            state,
            live: tokio::sync::Mutex::new(None),
            starts: AtomicU64::new(0),
        }
    }

    /// Kills the interpreter, if one runs.
    pub(crate) async fn close(&self) {
        if let Some(mut live) = self.live.lock().await.take() {
            let _ = live.process.terminate(self.state.kill_grace()).await;
        }
    }

    /// Runs `code` in the session (starting it if needed; fresh when `restart`).
    pub(crate) async fn run(
        &self,
        ctx: &ToolContext,
        code: &str,
        restart: bool,
        timeout_ms: Option<i64>,
        output_dir: &Path,
    ) -> Result<ToolOutput, ToolError> {
        let mut guard = self.live.lock().await;
        let mut notes = Vec::new();
        if restart && let Some(mut old) = guard.take() {
            let _ = old.process.terminate(self.state.kill_grace()).await;
            notes.push("The Python session was restarted; earlier variables are gone.");
        }
        if guard.is_none() {
            *guard = Some(self.start().await?);
            if !restart && self.starts.load(Ordering::Relaxed) > 1 {
                notes.push("A new Python session was started; earlier variables are gone.");
            }
        }
        if code.trim().is_empty() {
            let text = notes
                .first()
                .copied()
                .unwrap_or("The Python session is running.");
            return Ok(ToolOutput::text(text));
        }
        let Some(live) = guard.as_mut() else {
            return Err(ToolError::failed("the Python session did not start"));
        };
        let nonce = format!("{:016x}", RandomState::new().hash_one(output_dir));
        let request = json!({
            "code": code,
            "nonce": nonce,
            "output_dir": output_dir.display().to_string(),
        });
        let mut line = request.to_string();
        line.push('\n');
        let timeout = self.state.timeout_for(timeout_ms);
        let mut output = CappedOutput::new(self.state.max_output_chars());
        let marker = format!("\n\x1eTOOLBELT-DONE {nonce} ");
        let ending = tokio::select! {
            ending = exchange(live, line.as_bytes(), marker.as_bytes(), &mut output) => ending,
            () = tokio::time::sleep(timeout) => Ending::Lost(format!(
                "The Python session timed out after {} ms and was killed with everything it \
                 started; the next call starts a new session (earlier variables are gone).",
                timeout.as_millis()
            )),
            () = ctx.cancelled() => Ending::Cancelled,
        };
        if let Ending::Cancelled = ending {
            if let Some(mut live) = guard.take() {
                let _ = live.process.terminate(self.state.kill_grace()).await;
            }
            return Err(ToolError::Cancelled);
        }
        let rendered = output.render();
        let mut text = notes.join(" ");
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&rendered.text);
        match ending {
            Ending::Done(status) => {
                let error = status["error"].as_str().map(str::to_string);
                if let Some(error) = &error {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(error.trim_end());
                }
                if text.is_empty() {
                    text.push_str("(no output)");
                }
                let mut out = if error.is_some() {
                    ToolOutput::error(text)
                } else {
                    ToolOutput::text(text)
                };
                out.meta = Some(
                    [("session".to_string(), json!("python"))]
                        .into_iter()
                        .collect(),
                );
                Ok(out)
            }
            Ending::Cancelled => Err(ToolError::Cancelled),
            Ending::Lost(reason) => {
                if let Some(mut live) = guard.take() {
                    let _ = live.process.terminate(self.state.kill_grace()).await;
                }
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&reason);
                let mut out = ToolOutput::error(text);
                out.meta = Some(
                    [("session_lost".to_string(), json!(true))]
                        .into_iter()
                        .collect(),
                );
                Ok(out)
            }
        }
    }

    /// Starts an interpreter running the driver.
    async fn start(&self) -> Result<Live, ToolError> {
        let n = self.starts.fetch_add(1, Ordering::Relaxed);
        let dir = self
            .state
            .private_temp_dir()
            .join(format!("session-{}-{n}", std::process::id()));
        let failed = |e: io::Error| ToolError::failed(format!("could not start Python: {e}"));
        std::fs::create_dir_all(&dir).map_err(failed)?;
        let fifo = dir.join("requests");
        let driver = dir.join("driver.py");
        std::fs::write(&driver, DRIVER).map_err(failed)?;
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .map_err(|e| failed(e.into()))?;
        // Read-write: opening cannot wait for the driver, and the driver's reads never see
        // end-of-file while this side lives.
        let requests = pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&fifo)
            .map_err(failed)?;
        let command = format!(
            "exec python3 -u {} {}",
            super::quote(&driver),
            super::quote(&fifo)
        );
        let mut process = self.state.spawn_command(&command).await?;
        let Some(output) = process.take_output() else {
            return Err(ToolError::failed(
                "the process backend gave no output pipe for the Python session",
            ));
        };
        Ok(Live {
            process,
            output,
            requests,
            dir,
        })
    }
}

/// Sends one request and reads the program's output until the request's marker line, or
/// until the interpreter ends.
async fn exchange(
    live: &mut Live,
    request: &[u8],
    marker: &[u8],
    output: &mut CappedOutput,
) -> Ending {
    if let Err(e) = live.requests.write_all(request).await {
        return Ending::Lost(format!(
            "The Python session could not be reached ({e}); the next call starts a new session."
        ));
    }
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if let Some(at) = find(&pending, marker) {
            let rest = &pending[at + marker.len()..];
            if let Some(end) = rest.iter().position(|&b| b == b'\n') {
                output.push(&pending[..at]);
                let status = serde_json::from_slice(&rest[..end])
                    .unwrap_or(json!({"error": "the session sent an unreadable status"}));
                return Ending::Done(status);
            }
        } else if pending.len() > marker.len() {
            // Keep only what could be the start of the marker.
            let keep = pending.len() - marker.len();
            output.push(&pending[..keep]);
            pending.drain(..keep);
        }
        tokio::select! {
            read = live.output.read(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    output.push(&pending);
                    let outcome = live.process.wait().await;
                    let how = match outcome {
                        Ok(outcome) => outcome.to_string(),
                        Err(e) => e.to_string(),
                    };
                    return Ending::Lost(format!("The Python session ended ({how}); the next call starts a new session (earlier variables are gone)."));
                }
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            },
            outcome = live.process.wait() => {
                // Collect what it printed before it ended.
                while let Ok(Ok(n)) = tokio::time::timeout(std::time::Duration::from_millis(200), live.output.read(&mut buf)).await {
                    if n == 0 { break; }
                    pending.extend_from_slice(&buf[..n]);
                }
                output.push(&pending);
                let how = match outcome {
                    Ok(outcome) => outcome.to_string(),
                    Err(e) => e.to_string(),
                };
                return Ending::Lost(format!("The Python session ended ({how}); the next call starts a new session (earlier variables are gone)."));
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
