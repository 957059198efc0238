//! Messages between the replicas of one server about a session, through the shared store.
//!
//! A client listens for notifications on its `GET` stream, which one replica holds, while a
//! load balancer may send its requests to any other. So a notification a replica has for a
//! session's client (its tool list changed after a `tool_search`, a resource it subscribed
//! to was updated) is published for the session instead of being sent on the spot: every
//! replica receives it, and the one holding the session's `GET` stream sends it there. An
//! unsubscribe that reaches a replica other than the one holding the subscription is passed
//! on the same way, and so is the client's answer to a request (an aggregated server's
//! elicitation, sampling or `roots/list`) that reaches a replica other than the one that
//! asked.
//!
//! The ids of requests a replica sends a client carry the replica's own tag
//! (`sessions.rs`), so the replica an answer belongs to is never in doubt.
//!
//! Delivery is at most once, like an SSE stream's: a message published while a replica is
//! subscribing again (the store restarted) is lost, and one for a session whose `GET`
//! stream is open nowhere is dropped. Messages sent this way carry no event id, so a client
//! resuming its stream with `Last-Event-ID` is not sent them twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage, ServerNotification};
use rmcp::service::{Peer, RoleServer};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use toolbelt_core::ToolContext;

use super::relay::Relay;
use super::sessions::BoundedSessions;
use super::shared::{SharedSessionStore, SharedStoreError};

/// How long a replica waits before subscribing again after losing the store.
const RESUBSCRIBE_DELAY: Duration = Duration::from_secs(1);

/// What one replica tells the others about a session.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum BusMessage {
    /// A notification for the session's client, for its `GET` stream.
    Notify {
        /// The JSON-RPC notification, as the client will read it.
        notification: Box<ServerJsonRpcMessage>,
    },
    /// The client's answer to a request another replica sent it (elicitation, sampling,
    /// roots), for the replica that asked.
    Answer {
        /// The JSON-RPC response or error, as the client sent it.
        answer: Box<ClientJsonRpcMessage>,
    },
    /// The client unsubscribed from `uri` through a replica that does not hold the
    /// subscription.
    Unsubscribe {
        /// The URI as the client subscribed to it.
        uri: String,
    },
}

/// Senders into the `GET` streams open on a replica, by session id.
type Streams = HashMap<String, Vec<mpsc::UnboundedSender<ServerSseMessage>>>;

/// What other replicas publish for one `GET` stream; dropped with the stream, it forgets
/// the session's closed streams, so the table holds only sessions with a stream open here.
struct Published {
    rx: mpsc::UnboundedReceiver<ServerSseMessage>,
    streams: Arc<Mutex<Streams>>,
    session: String,
}

impl Stream for Published {
    type Item = ServerSseMessage;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<ServerSseMessage>> {
        self.rx.poll_next_unpin(cx)
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.rx.close();
        let mut streams = lock(&self.streams);
        if let Some(senders) = streams.get_mut(&self.session) {
            senders.retain(|tx| !tx.is_closed());
            if senders.is_empty() {
                streams.remove(&self.session);
            }
        }
    }
}

/// The messages of one server's replicas (see the module docs).
pub(crate) struct SessionBus {
    store: Arc<dyn SharedSessionStore>,
    /// The `GET` streams open on this replica, by session id.
    streams: Arc<Mutex<Streams>>,
    /// Where unsubscribes passed on by other replicas go.
    relay: OnceLock<Weak<Relay>>,
    /// Where answers passed on by other replicas go.
    sessions: OnceLock<Weak<BoundedSessions>>,
}

impl std::fmt::Debug for SessionBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBus").finish_non_exhaustive()
    }
}

impl SessionBus {
    pub(crate) fn new(store: Arc<dyn SharedSessionStore>) -> Arc<Self> {
        Arc::new(Self {
            store,
            streams: Arc::default(),
            relay: OnceLock::new(),
            sessions: OnceLock::new(),
        })
    }

    /// The store the replicas share.
    pub(crate) fn store(&self) -> &Arc<dyn SharedSessionStore> {
        &self.store
    }

    /// Passes unsubscribes from other replicas to `relay`.
    pub(crate) fn serve_relay(&self, relay: &Arc<Relay>) {
        let _ = self.relay.set(Arc::downgrade(relay));
    }

    /// Passes the client's answers that reached other replicas to `sessions`.
    pub(crate) fn serve_sessions(&self, sessions: &Arc<BoundedSessions>) {
        let _ = self.sessions.set(Arc::downgrade(sessions));
    }

    /// Passes the client's `answer`, to a request this replica did not send, to the replica
    /// that sent it.
    pub(crate) async fn answer(
        &self,
        session: &str,
        answer: ClientJsonRpcMessage,
    ) -> Result<(), SharedStoreError> {
        let answer = Box::new(answer);
        self.publish(session, &BusMessage::Answer { answer }).await
    }

    /// Sends `notification` to the client of `session` on its `GET` stream, on whichever
    /// replica holds it.
    pub(crate) async fn notify(
        &self,
        session: &str,
        notification: ServerNotification,
    ) -> Result<(), SharedStoreError> {
        let notification = Box::new(ServerJsonRpcMessage::notification(notification));
        self.publish(session, &BusMessage::Notify { notification })
            .await
    }

    /// Sends `notification` to a client: through `bus` when the server is one of several and
    /// the client has an HTTP `session` (its `GET` stream may be on another replica), else,
    /// or when publishing fails, straight to `peer`.
    pub(crate) async fn notify_client(
        bus: Option<&SessionBus>,
        session: Option<&str>,
        peer: &Peer<RoleServer>,
        notification: ServerNotification,
    ) {
        if let (Some(bus), Some(session)) = (bus, session) {
            match bus.notify(session, notification.clone()).await {
                Ok(()) => return,
                Err(err) => tracing::warn!(
                    session,
                    "cannot publish a notification for the client; sending it from here: {err}"
                ),
            }
        }
        if let Err(err) = peer.send_notification(notification).await {
            tracing::debug!("could not send a notification to the client: {err}");
        }
    }

    /// Asks the replica holding `session`'s subscription to `uri` to end it.
    pub(crate) async fn unsubscribe(
        &self,
        session: &str,
        uri: &str,
    ) -> Result<(), SharedStoreError> {
        let uri = uri.to_string();
        self.publish(session, &BusMessage::Unsubscribe { uri })
            .await
    }

    async fn publish(&self, session: &str, message: &BusMessage) -> Result<(), SharedStoreError> {
        let text = serde_json::to_string(message)?;
        self.store.publish(session, &text).await
    }

    /// `stream`, a `GET` stream of `session` open on this replica, with the notifications
    /// other replicas publish for the session sent on it too. It ends when `stream` ends.
    pub(crate) fn attach<S>(
        &self,
        session: &str,
        stream: S,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static + use<S>
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::unbounded();
        {
            let mut streams = lock(&self.streams);
            let senders = streams.entry(session.to_string()).or_default();
            senders.retain(|tx| !tx.is_closed());
            senders.push(tx);
        }
        // `None` marks the end of the session's own stream, which ends the merged one.
        let own = stream
            .map(Some)
            .chain(futures::stream::once(async { None }));
        let published = Published {
            rx,
            streams: self.streams.clone(),
            session: session.to_string(),
        }
        .map(Some);
        futures::stream::select(own, published)
            .take_while(|message| std::future::ready(message.is_some()))
            .filter_map(std::future::ready)
    }

    /// Receives what the replicas publish until `stop` is cancelled, subscribing again
    /// whenever the connection to the store is lost.
    pub(crate) async fn listen(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let subscribed = tokio::select! {
                _ = stop.cancelled() => return,
                subscribed = self.store.subscribe() => subscribed,
            };
            match subscribed {
                Ok(mut messages) => loop {
                    let next = tokio::select! {
                        _ = stop.cancelled() => return,
                        next = messages.next() => next,
                    };
                    match next {
                        Some((session, text)) => self.receive(&session, &text),
                        None => {
                            tracing::warn!("lost the shared store's messages; subscribing again");
                            break;
                        }
                    }
                },
                Err(err) => tracing::warn!(
                    "cannot receive the other replicas' messages from the shared store: {err}"
                ),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RESUBSCRIBE_DELAY) => {}
            }
        }
    }

    /// Handles one published message.
    fn receive(&self, session: &str, text: &str) {
        let message = match serde_json::from_str::<BusMessage>(text) {
            Ok(message) => message,
            Err(err) => {
                // Another version's message, or someone else's: not ours to act on.
                tracing::debug!(
                    session,
                    "an unreadable message from the shared store: {err}"
                );
                return;
            }
        };
        match message {
            BusMessage::Notify { notification } => {
                let mut streams = lock(&self.streams);
                let Some(senders) = streams.get_mut(session) else {
                    return; // the session's GET stream is not here
                };
                let event = ServerSseMessage::from_message(*notification);
                senders.retain(|tx| tx.unbounded_send(event.clone()).is_ok());
                if senders.is_empty() {
                    streams.remove(session);
                }
            }
            BusMessage::Answer { answer } => {
                let Some(sessions) = self.sessions.get().and_then(Weak::upgrade) else {
                    return;
                };
                let session = session.to_string();
                tokio::spawn(async move { sessions.take_answer(&session, *answer).await });
            }
            BusMessage::Unsubscribe { uri } => {
                let Some(relay) = self.relay.get().and_then(Weak::upgrade) else {
                    return;
                };
                let session = session.to_string();
                tokio::spawn(async move {
                    let ctx = ToolContext::new();
                    if let Err(err) = relay.unsubscribe_session(&ctx, &session, &uri).await {
                        tracing::warn!(session, uri, "ending a subscription failed: {err:?}");
                    }
                });
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;
    use rmcp::model::ToolListChangedNotification;

    use super::*;
    use crate::server::shared::tests::Records;

    /// Two replicas' buses over one store, both listening.
    async fn two_replicas() -> (Arc<SessionBus>, Arc<SessionBus>, CancellationToken) {
        let store: Arc<dyn SharedSessionStore> = Arc::new(Records::default());
        let stop = CancellationToken::new();
        let a = SessionBus::new(store.clone());
        let b = SessionBus::new(store);
        tokio::spawn(a.clone().listen(stop.clone()));
        tokio::spawn(b.clone().listen(stop.clone()));
        // Let both subscribe before anything is published.
        tokio::time::sleep(Duration::from_millis(50)).await;
        (a, b, stop)
    }

    fn changed() -> ServerNotification {
        ServerNotification::ToolListChangedNotification(ToolListChangedNotification::default())
    }

    #[tokio::test]
    async fn a_notification_reaches_its_sessions_stream_on_another_replica_and_no_other() {
        let (a, b, stop) = two_replicas().await;
        let mut mine = Box::pin(b.attach("session-1", futures::stream::pending()));
        let mut other = Box::pin(b.attach("session-2", futures::stream::pending()));

        a.notify("session-1", changed()).await.unwrap();
        let arrived = tokio::time::timeout(Duration::from_secs(5), mine.next())
            .await
            .expect("the notification arrives")
            .expect("the stream is open");
        let json = serde_json::to_value(arrived.message.as_deref().unwrap()).unwrap();
        assert_eq!(json["method"], "notifications/tools/list_changed");
        assert_eq!(arrived.event_id, None, "not replayed on resumption");

        // Garbage on the channel is ignored; the other session heard nothing.
        a.store()
            .publish("session-2", "not a message")
            .await
            .unwrap();
        a.notify("session-1", changed()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), mine.next())
            .await
            .expect("the second arrives");
        let nothing = tokio::time::timeout(Duration::from_millis(200), other.next()).await;
        assert!(nothing.is_err(), "session-2 got {nothing:?}");
        stop.cancel();
    }

    #[tokio::test]
    async fn a_merged_stream_ends_when_the_sessions_own_stream_ends() {
        let (_a, b, stop) = two_replicas().await;
        let own = futures::stream::iter([ServerSseMessage::retry(Duration::from_secs(1))]);
        let merged: Vec<_> = b.attach("session-1", own).collect().await;
        assert_eq!(merged.len(), 1);
        assert!(lock(&b.streams).is_empty(), "the ended stream is forgotten");
        stop.cancel();
    }
}
