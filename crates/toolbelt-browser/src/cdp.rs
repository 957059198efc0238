//! A small Chrome DevTools Protocol client over Chromium's debugging pipe.
//!
//! Messages are JSON objects separated by a NUL byte. Commands carry an id and get one answer
//! with that id; everything else is an event, broadcast to whoever listens. Flat sessions
//! (`Target.attachToTarget {flatten: true}`) put a `sessionId` on commands and events for a
//! page, so one pipe serves the browser and its page.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{broadcast, oneshot};

/// The largest message accepted from the browser (a full-HD screenshot is a few MiB).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// An event from the browser.
#[derive(Debug, Clone)]
pub(crate) struct CdpEvent {
    pub(crate) method: String,
    pub(crate) params: Value,
    pub(crate) session_id: Option<String>,
}

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum CdpError {
    /// The pipe closed: the browser exited.
    Closed,
    /// No answer within the time limit.
    Timeout(String),
    /// The browser answered with an error.
    Protocol(String),
}

impl std::fmt::Display for CdpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => f.write_str("the browser exited"),
            Self::Timeout(method) => write!(f, "the browser did not answer {method} in time"),
            Self::Protocol(message) => f.write_str(message),
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, CdpError>>>>>;

/// One CDP connection. Dropping it stops its reader.
pub(crate) struct Cdp {
    shared: Arc<Shared>,
    reader: tokio::task::JoinHandle<()>,
}

struct Shared {
    writer: tokio::sync::Mutex<pipe::Sender>,
    next_id: AtomicU64,
    pending: Pending,
    events: broadcast::Sender<CdpEvent>,
    closed: Arc<AtomicBool>,
    timeout: Duration,
}

/// A handle that can close pages, for the task that closes popups.
pub(crate) struct Closer(Arc<Shared>);

impl Closer {
    /// Closes the page target `id` (errors are logged: the page may be gone already).
    pub(crate) async fn close_target(&self, id: &str) {
        if let Err(e) = self
            .0
            .call("Target.closeTarget", json!({"targetId": id}), None)
            .await
        {
            tracing::debug!(target: "toolbelt_browser", "closing page {id}: {e}");
        }
    }
}

impl Cdp {
    /// Starts a client on the two pipe ends.
    pub(crate) fn new(
        to_browser: OwnedFd,
        from_browser: OwnedFd,
        timeout: Duration,
    ) -> std::io::Result<Self> {
        let writer = pipe::Sender::from_owned_fd(to_browser)?;
        let reader = pipe::Receiver::from_owned_fd(from_browser)?;
        let pending: Pending = Arc::default();
        let (events, _) = broadcast::channel(1024);
        let closed = Arc::new(AtomicBool::new(false));
        let reader = tokio::spawn(read_loop(
            reader,
            pending.clone(),
            events.clone(),
            closed.clone(),
        ));
        Ok(Self {
            shared: Arc::new(Shared {
                writer: tokio::sync::Mutex::new(writer),
                next_id: AtomicU64::new(1),
                pending,
                events,
                closed,
                timeout,
            }),
            reader,
        })
    }

    /// Whether the browser closed the pipe.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Events from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<CdpEvent> {
        self.shared.events.subscribe()
    }

    /// A handle for closing pages from another task.
    pub(crate) fn closer(&self) -> Closer {
        Closer(self.shared.clone())
    }

    /// Sends a command (to a page when `session` is set) and waits for its result.
    pub(crate) async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, CdpError> {
        self.shared.call(method, params, session).await
    }
}

impl Shared {
    async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, CdpError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CdpError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = Value::String(session.to_string());
        }
        let mut bytes =
            serde_json::to_vec(&message).map_err(|e| CdpError::Protocol(e.to_string()))?;
        bytes.push(0);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        // Removes the entry however this call ends (answered, timed out, or dropped).
        let _forget = ForgetOnDrop {
            pending: &self.pending,
            id,
        };
        {
            let mut writer = self.writer.lock().await;
            writer
                .write_all(&bytes)
                .await
                .map_err(|_| CdpError::Closed)?;
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(CdpError::Closed),
            Err(_) => Err(CdpError::Timeout(method.to_string())),
        }
    }
}

impl Drop for Cdp {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

struct ForgetOnDrop<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

async fn read_loop(
    mut reader: pipe::Receiver,
    pending: Pending,
    events: broadcast::Sender<CdpEvent>,
    closed: Arc<AtomicBool>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    'read: loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let scan_from = buf.len();
        buf.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        let mut search = scan_from;
        while let Some(offset) = buf[search..].iter().position(|&b| b == 0) {
            let end = search + offset;
            dispatch(&buf[start..end], &pending, &events);
            start = end + 1;
            search = start;
        }
        buf.drain(..start);
        if buf.len() > MAX_MESSAGE_BYTES {
            tracing::warn!(target: "toolbelt_browser", "a CDP message over {MAX_MESSAGE_BYTES} bytes; closing");
            break 'read;
        }
    }
    closed.store(true, Ordering::Release);
    let waiting: Vec<_> = pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .collect();
    for (_, tx) in waiting {
        let _ = tx.send(Err(CdpError::Closed));
    }
}

fn dispatch(bytes: &[u8], pending: &Pending, events: &broadcast::Sender<CdpEvent>) {
    let Ok(mut message) = serde_json::from_slice::<Value>(bytes) else {
        tracing::debug!(target: "toolbelt_browser", "a CDP message that is not JSON");
        return;
    };
    if let Some(id) = message.get("id").and_then(Value::as_u64) {
        let Some(tx) = pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
        else {
            return;
        };
        let result = match message.get_mut("error") {
            Some(error) => Err(CdpError::Protocol(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the browser refused the command")
                    .to_string(),
            )),
            None => Ok(message
                .get_mut("result")
                .map(Value::take)
                .unwrap_or(Value::Null)),
        };
        let _ = tx.send(result);
        return;
    }
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        let _ = events.send(CdpEvent {
            method: method.to_string(),
            session_id: message
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_string),
            params: message
                .get_mut("params")
                .map(Value::take)
                .unwrap_or(Value::Null),
        });
    }
}
