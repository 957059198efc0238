//! Each client's notifications from the aggregated servers: a bounded queue and a task of
//! its own, so a client that does not read cannot hold up the others or grow the server.
//!
//! A client with a `GET` stream it never reads makes every send to it wait forever (rmcp's
//! session channel is full, and then its socket). Sending to the clients one after another
//! from one queue would stall them all behind it while the queue grew without bound. Here
//! every client has an [`Outbox`], filled without waiting and emptied by the client's own
//! task:
//!
//! - Log messages wait in a queue of at most [`MAX_QUEUED_LOGS`] messages and
//!   [`MAX_QUEUED_LOG_BYTES`] bytes. Beyond that, new ones are dropped for that client only
//!   and counted; when the client reads again it is first told, by a `warning` log message
//!   from the logger `toolbelt`, how many it missed. Messages are shared between the
//!   queues, so a message waiting for many clients is kept once.
//! - List changes (resources, prompts) are a flag each and resource updates one entry per
//!   URI, so they are never dropped, only merged: a client that lags gets the latest state.
//!   They may overtake log messages still queued.
//!
//! A session without a `GET` stream takes notifications as fast as they come (rmcp drops
//! them), so idle sessions keep nothing either.

// Logging is deprecated in rmcp's newest protocol version (SEP-2577) but is what clients and
// servers of the versions in use speak.
#![allow(deprecated)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerNotification,
};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::Notify;

use super::bus::SessionBus;
use super::relay::Relay;

/// The most log messages queued for one client.
pub(crate) const MAX_QUEUED_LOGS: usize = 1024;
/// The most bytes of log messages (as JSON) queued for one client.
pub(crate) const MAX_QUEUED_LOG_BYTES: usize = 8 * 1024 * 1024;

/// How often an idle client's task looks whether the client is gone.
const IDLE_CHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// A log message on its way to the clients, with its size, shared by their queues.
pub(crate) struct SharedLog {
    message: LoggingMessageNotificationParam,
    bytes: usize,
}

impl SharedLog {
    pub(crate) fn new(message: LoggingMessageNotificationParam) -> Arc<Self> {
        let bytes = serde_json::to_vec(&message.data).map_or(0, |d| d.len()) + 64;
        Arc::new(Self { message, bytes })
    }
}

/// What waits for one client (see the module docs).
#[derive(Default)]
struct Pending {
    logs: VecDeque<Arc<SharedLog>>,
    log_bytes: usize,
    /// Log messages dropped since the client was last told.
    dropped: u64,
    /// Resource updates by the URI the client subscribed to, with its HTTP session.
    updates: Vec<(Option<String>, ResourceUpdatedNotificationParam)>,
    resources_changed: bool,
    prompts_changed: bool,
}

/// One message taken from [`Pending`].
enum Next {
    Dropped(u64),
    Log(Arc<SharedLog>),
    Updated(Option<String>, ResourceUpdatedNotificationParam),
    ResourcesChanged,
    PromptsChanged,
}

impl Pending {
    fn take(&mut self) -> Option<Next> {
        if self.dropped > 0 {
            return Some(Next::Dropped(std::mem::take(&mut self.dropped)));
        }
        if self.resources_changed {
            self.resources_changed = false;
            return Some(Next::ResourcesChanged);
        }
        if self.prompts_changed {
            self.prompts_changed = false;
            return Some(Next::PromptsChanged);
        }
        if !self.updates.is_empty() {
            let (session, update) = self.updates.remove(0);
            return Some(Next::Updated(session, update));
        }
        let log = self.logs.pop_front()?;
        self.log_bytes -= log.bytes;
        Some(Next::Log(log))
    }
}

/// One client's queue, emptied by a task of its own (see the module docs).
pub(crate) struct Outbox {
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Outbox {
    /// An outbox for `peer`, with the task that sends to it until the client is gone (or the
    /// relay is: `relay` is held weakly).
    pub(crate) fn start(peer: Peer<RoleServer>, relay: Weak<Relay>) -> Arc<Self> {
        let outbox = Arc::new(Self {
            pending: Mutex::default(),
            wake: Notify::new(),
        });
        tokio::spawn(deliver(Arc::downgrade(&outbox), peer, relay));
        outbox
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `log`, or drops it (counted) when the queue is full.
    pub(crate) fn log(&self, log: &Arc<SharedLog>) {
        {
            let mut pending = self.lock();
            let full = pending.logs.len() >= MAX_QUEUED_LOGS
                || pending.log_bytes + log.bytes > MAX_QUEUED_LOG_BYTES;
            if full {
                if pending.dropped == 0 {
                    tracing::warn!(
                        "a client does not read its notifications; dropping its log messages until it does"
                    );
                }
                pending.dropped += 1;
                return;
            }
            pending.log_bytes += log.bytes;
            pending.logs.push_back(log.clone());
        }
        self.wake.notify_one();
    }

    /// Queues an update of the resource the client subscribed to as `update.uri`, replacing
    /// one still waiting for that URI.
    pub(crate) fn updated(
        &self,
        session: Option<String>,
        update: ResourceUpdatedNotificationParam,
    ) {
        {
            let mut pending = self.lock();
            match pending
                .updates
                .iter_mut()
                .find(|(_, u)| u.uri == update.uri)
            {
                Some(waiting) => *waiting = (session, update),
                None => pending.updates.push((session, update)),
            }
        }
        self.wake.notify_one();
    }

    pub(crate) fn resources_changed(&self) {
        self.lock().resources_changed = true;
        self.wake.notify_one();
    }

    pub(crate) fn prompts_changed(&self) {
        self.lock().prompts_changed = true;
        self.wake.notify_one();
    }

    /// How many log messages wait, and how many were dropped since the client was told.
    #[cfg(test)]
    fn queued(&self) -> (usize, u64) {
        let pending = self.lock();
        (pending.logs.len(), pending.dropped)
    }
}

/// Sends what `outbox` queues to `peer`, one message at a time, until the client or the
/// outbox is gone. The outbox is held only while looking into it, so dropping it (the relay
/// forgot the client) ends the task.
async fn deliver(outbox: Weak<Outbox>, peer: Peer<RoleServer>, relay: Weak<Relay>) {
    loop {
        if peer.is_transport_closed() {
            return;
        }
        let Some(strong) = outbox.upgrade() else {
            return;
        };
        let notified = strong.wake.notified();
        let next = strong.lock().take();
        let Some(next) = next else {
            // Woken by a new message, or now and then to see whether the client is gone.
            let _ = tokio::time::timeout(IDLE_CHECK, notified).await;
            continue;
        };
        drop(notified);
        drop(strong);
        let sent = match next {
            Next::Dropped(count) => {
                let mut notice = LoggingMessageNotificationParam::new(
                    LoggingLevel::Warning,
                    format!(
                        "{count} log messages from the aggregated servers were dropped: this \
                         client did not read its notifications fast enough"
                    )
                    .into(),
                );
                notice.logger = Some("toolbelt".into());
                peer.notify_logging_message(notice).await
            }
            Next::Log(log) => peer.notify_logging_message(log.message.clone()).await,
            Next::Updated(session, update) => {
                let notification = ServerNotification::ResourceUpdatedNotification(
                    ResourceUpdatedNotification::new(update),
                );
                let relay = relay.upgrade();
                let bus = relay.as_ref().and_then(|r| r.bus());
                SessionBus::notify_client(bus, session.as_deref(), &peer, notification).await;
                Ok(())
            }
            Next::ResourcesChanged => peer.notify_resource_list_changed().await,
            Next::PromptsChanged => peer.notify_prompt_list_changed().await,
        };
        if let Err(err) = sent {
            tracing::debug!("could not forward a notification: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox() -> Outbox {
        Outbox {
            pending: Mutex::default(),
            wake: Notify::new(),
        }
    }

    fn log(text: &str) -> Arc<SharedLog> {
        SharedLog::new(LoggingMessageNotificationParam::new(
            LoggingLevel::Info,
            text.into(),
        ))
    }

    #[test]
    fn a_client_that_never_reads_keeps_a_bounded_queue_and_is_told_what_it_missed() {
        let outbox = outbox();
        for i in 0..10_000 {
            outbox.log(&log(&format!("message {i}")));
        }
        assert_eq!(
            outbox.queued(),
            (MAX_QUEUED_LOGS, 10_000 - MAX_QUEUED_LOGS as u64)
        );
        assert!(matches!(outbox.lock().take(), Some(Next::Dropped(n)) if n == 8976));
        assert!(
            matches!(outbox.lock().take(), Some(Next::Log(l)) if l.message.data == "message 0")
        );
    }

    #[test]
    fn big_messages_are_bounded_by_their_bytes() {
        let outbox = outbox();
        let big = log(&"x".repeat(1024 * 1024));
        for _ in 0..100 {
            outbox.log(&big);
        }
        let (queued, dropped) = outbox.queued();
        assert!(
            queued < 8 && dropped > 92,
            "{queued} queued, {dropped} dropped"
        );
    }

    #[test]
    fn list_changes_and_updates_are_merged_never_dropped() {
        let outbox = outbox();
        for _ in 0..3 {
            outbox.resources_changed();
            outbox.updated(None, ResourceUpdatedNotificationParam::new("memo://a"));
        }
        outbox.updated(None, ResourceUpdatedNotificationParam::new("memo://b"));
        let mut pending = outbox.lock();
        assert!(matches!(pending.take(), Some(Next::ResourcesChanged)));
        assert!(matches!(pending.take(), Some(Next::Updated(_, u)) if u.uri == "memo://a"));
        assert!(matches!(pending.take(), Some(Next::Updated(_, u)) if u.uri == "memo://b"));
        assert!(pending.take().is_none());
    }
}
