//! Background tasks: commands started with `run_in_background`, whose output goes to a log
//! file under the tool set's temp dir, read incrementally by `TaskOutput` and stopped by
//! `TaskStop` or when the tool set closes.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::output::{CappedOutput, RenderedOutput};
use super::process::{Cleanup, ExitOutcome, Killer, OutputTarget, ProcessBackend, ProcessRequest};

/// The state of a background task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Still running.
    Running,
    /// Ended on its own.
    Completed(ExitOutcome),
    /// Stopped by `TaskStop` or by closing the tool set.
    Killed,
}

impl TaskStatus {
    /// A one-word name: `running`, `completed` or `killed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed(_) => "completed",
            TaskStatus::Killed => "killed",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskStatus::Completed(outcome) => write!(f, "completed ({outcome})"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// One background task.
struct Task {
    id: String,
    command: String,
    log_path: PathBuf,
    /// How far `TaskOutput` has read the log.
    read_offset: tokio::sync::Mutex<u64>,
    state: watch::Receiver<TaskState>,
    stop: CancellationToken,
    /// Kills the task's processes from `Drop`, where nothing can be awaited.
    killer: Option<Killer>,
}

/// A task's status and, once it ended, what ending its processes did.
#[derive(Debug, Clone, Copy)]
struct TaskState {
    status: TaskStatus,
    cleanup: Cleanup,
}

impl Task {
    fn status(&self) -> TaskStatus {
        self.state.borrow().status
    }

    async fn ended(&self) -> TaskState {
        let mut state = self.state.clone();
        match state.wait_for(|s| s.status != TaskStatus::Running).await {
            Ok(state) => *state,
            // The task's driver is gone (its runtime shut down): report what is known.
            Err(_) => *self.state.borrow(),
        }
    }
}

/// What one `TaskOutput` read returned.
#[derive(Debug, Clone)]
pub(crate) struct TaskRead {
    pub status: TaskStatus,
    /// What ending the task's leftover processes did, once it ended.
    pub cleanup: Cleanup,
    pub output: RenderedOutput,
    pub log_path: PathBuf,
    pub command: String,
}

/// The background tasks of one tool set.
pub(crate) struct TaskRegistry {
    dir: PathBuf,
    grace: Duration,
    max_output_chars: usize,
    next_id: AtomicU64,
    closed: AtomicBool,
    tasks: Mutex<BTreeMap<u64, Arc<Task>>>,
}

impl TaskRegistry {
    pub fn new(dir: PathBuf, grace: Duration, max_output_chars: usize) -> Self {
        Self {
            dir,
            grace,
            max_output_chars,
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Task>>> {
        // A panic while holding the lock leaves the map intact; keep using it.
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts `request` in the background and returns the task id and log path.
    pub async fn start(
        &self,
        backend: &dyn ProcessBackend,
        mut request: ProcessRequest,
    ) -> Result<(String, PathBuf), String> {
        if self.is_closed() {
            return Err("the tool set is closed; no new tasks can start".into());
        }
        let number = self.next_id.fetch_add(1, Ordering::SeqCst);
        let id = format!("task_{number}");
        let log_path = self.dir.join(format!("{id}.log"));
        request.output = OutputTarget::File(log_path.clone());
        let command = request.command.clone();
        let mut process = backend
            .spawn(request)
            .await
            .map_err(|e| format!("could not start the background task: {e}"))?;
        let killer = process.killer();
        let (state_tx, state_rx) = watch::channel(TaskState {
            status: TaskStatus::Running,
            cleanup: Cleanup::NOTHING,
        });
        let stop = CancellationToken::new();
        let grace = self.grace;
        let stop_signal = stop.clone();
        tokio::spawn(async move {
            let unknown = ExitOutcome {
                code: None,
                signal: None,
            };
            let failed = Cleanup {
                killed: 0,
                complete: false,
            };
            let state = tokio::select! {
                result = process.wait() => TaskState {
                    status: TaskStatus::Completed(result.unwrap_or(unknown)),
                    cleanup: process.kill_leftovers(grace).await.unwrap_or(failed),
                },
                _ = stop_signal.cancelled() => TaskState {
                    // The task is reported killed whether or not the kill raced its exit.
                    status: TaskStatus::Killed,
                    cleanup: process.terminate(grace).await.map_or(failed, |(_, c)| c),
                },
            };
            let _ = state_tx.send(state);
        });
        let task = Arc::new(Task {
            id: id.clone(),
            command,
            log_path: log_path.clone(),
            read_offset: tokio::sync::Mutex::new(0),
            state: state_rx,
            stop,
            killer,
        });
        self.lock().insert(number, task);
        if self.is_closed() {
            // `close` ran while this task was starting and did not see it.
            self.stop_all().await;
        }
        Ok((id, log_path))
    }

    fn find(&self, id: &str) -> Result<Arc<Task>, String> {
        let tasks = self.lock();
        if let Some(task) = tasks.values().find(|t| t.id == id.trim()) {
            return Ok(task.clone());
        }
        let known: Vec<&str> = tasks.values().map(|t| t.id.as_str()).collect();
        Err(if known.is_empty() {
            format!("no background task with id {id:?}; no tasks have been started")
        } else {
            format!(
                "no background task with id {id:?}; known tasks: {}",
                known.join(", ")
            )
        })
    }

    /// Returns new output since the last read and the status, first waiting up to `wait` for
    /// the task to finish when `wait` is given.
    pub async fn read(
        &self,
        id: &str,
        wait: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<TaskRead, String> {
        let task = self.find(id)?;
        if let Some(wait) = wait {
            tokio::select! {
                _ = tokio::time::timeout(wait, task.ended()) => {}
                _ = cancel.cancelled() => {}
            }
        }
        // Read the status before the log, so "completed" always comes with all its output.
        let TaskState { status, cleanup } = *task.state.borrow();
        let mut offset = task.read_offset.lock().await;
        let (output, new_offset) = read_new_output(
            &task.log_path,
            *offset,
            status == TaskStatus::Running,
            self.max_output_chars,
        )
        .map_err(|e| format!("could not read the output of {}: {e}", task.id))?;
        *offset = new_offset;
        Ok(TaskRead {
            status,
            cleanup,
            output,
            log_path: task.log_path.clone(),
            command: task.command.clone(),
        })
    }

    /// Kills every process of a running task and waits until they are gone. Returns the
    /// task's command and what was killed.
    pub async fn stop(&self, id: &str) -> Result<(String, Cleanup), String> {
        let task = self.find(id)?;
        let current = task.status();
        if current != TaskStatus::Running {
            return Err(format!(
                "task {} is not running: it has already {current}; nothing to stop",
                task.id
            ));
        }
        task.stop.cancel();
        let ended = task.ended().await;
        Ok((task.command.clone(), ended.cleanup))
    }

    /// Refuses new tasks and kills every running one, waiting for each to be reaped.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.stop_all().await;
    }

    async fn stop_all(&self) {
        let tasks: Vec<Arc<Task>> = self.lock().values().cloned().collect();
        for task in &tasks {
            task.stop.cancel();
        }
        for task in tasks {
            task.ended().await;
        }
    }
}

impl Drop for TaskRegistry {
    fn drop(&mut self) {
        // A backstop for a tool set dropped without `close`: nothing can be awaited here, so
        // kill every running task's processes outright, and stop its driver.
        for task in self.lock().values() {
            if task.status() == TaskStatus::Running
                && let Some(kill) = &task.killer
            {
                kill();
            }
            task.stop.cancel();
        }
    }
}

/// Reads the log from `offset` to its end into a capped buffer. While the task runs, an
/// incomplete UTF-8 character at the end is left for the next read.
fn read_new_output(
    path: &Path,
    offset: u64,
    running: bool,
    max_chars: usize,
) -> std::io::Result<(RenderedOutput, u64)> {
    let mut capped = CappedOutput::new(max_chars);
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((capped.render(), offset)),
        Err(e) => return Err(e),
    };
    file.seek(SeekFrom::Start(offset))?;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut consumed = offset;
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        capped.push(&pending);
        consumed += pending.len() as u64;
        pending.clear();
        pending.extend_from_slice(&buffer[..n]);
    }
    let keep = if running {
        incomplete_utf8_suffix(&pending)
    } else {
        0
    };
    let complete = pending.len() - keep;
    capped.push(&pending[..complete]);
    consumed += complete as u64;
    Ok((capped.render(), consumed))
}

/// The length of an incomplete UTF-8 sequence at the end of `bytes` (0 to 3).
fn incomplete_utf8_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_characters_at_the_end_are_detected() {
        let e = "é".as_bytes();
        assert_eq!(incomplete_utf8_suffix(b"abc"), 0);
        assert_eq!(incomplete_utf8_suffix(&[b'a', e[0]]), 1);
        assert_eq!(incomplete_utf8_suffix(&[b'a', e[0], e[1]]), 0);
        let euro = "€".as_bytes();
        assert_eq!(incomplete_utf8_suffix(&euro[..2]), 2);
    }
}
