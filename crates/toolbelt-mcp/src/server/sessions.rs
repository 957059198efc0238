//! HTTP sessions that end when idle and never grow past a cap.
//!
//! Every streamable HTTP client holds a session, and each session keeps a running MCP
//! service (its tasks, channels and in-flight calls) until the client sends `DELETE`. Clients
//! that vanish without one, or a script that opens sessions in a loop, would otherwise grow
//! the server without bound. [`BoundedSessions`] wraps rmcp's in-memory session manager and
//! adds two limits:
//!
//! - **Idle timeout.** A session with no request, response or open stream for the timeout is
//!   closed (the closing ends its service and cancels what it was running). A session with a
//!   stream open (a call still running, a client's `GET` stream listening for notifications)
//!   is never idle, however long the call takes. rmcp's own keep-alive is turned off because
//!   it counts only messages, so it would end a session in the middle of a long, silent call.
//! - **Cap.** Opening a session when the cap is reached closes the session idle the longest
//!   (its client gets 404 on its next request and, as MCP requires, starts a new session).
//!   When every session is busy, the new one is refused: HTTP 503 with a JSON-RPC error.
//!   Evicting an idle session rather than refusing keeps the server usable for new clients
//!   when an old client leaked its sessions.
//!
//! With a `SharedSessionStore` (replicas behind a load balancer, see `shared.rs`), every
//! request naming a session also renews its record in the store, and a session whose record
//! is gone (deleted through another replica, expired) is closed here too and gets 404.
//! Sessions restored from the store count against the cap like new ones. A session being
//! restored exists here before its replayed handshake has run: a request arriving for it
//! meanwhile (a client's `GET` stream beside its first `POST` on this replica) waits for the
//! handshake instead of reaching a service that is not initialized yet (which failed with
//! HTTP 500 under load).
//!
//! Each replica numbers the requests it sends a client (an aggregated server's elicitation,
//! sampling, `roots/list`) on its own, from 0. So that two replicas asking one client at the
//! same moment never send the same id, a replica among several puts its own tag before the
//! number (`r1f0c…-0`) as the request leaves, and takes it off the client's answer before
//! rmcp reads it; an answer carrying another replica's id is passed on to the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::future::Either;
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, RequestId, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::RestoreOutcome;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use super::bus::SessionBus;
use super::handler::SessionClosed;
use super::shared::SharedStoreError;

/// The default idle timeout of an HTTP session.
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The default cap on open HTTP sessions.
pub const DEFAULT_MAX_SESSIONS: usize = 1_000;

/// Why a session could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    /// The cap is reached and every session is busy.
    #[error("{max} MCP sessions are open and all are busy (the most this server allows)")]
    Full {
        /// The cap.
        max: usize,
    },
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// The shared session store failed.
    #[error("the shared session store: {0}")]
    Shared(SharedStoreError),
}

/// What is known of one session's use.
#[derive(Debug)]
struct Activity {
    /// When the session was last used (a request, a message sent, a stream closed).
    last: Instant,
    /// Streams open on the session (request streams of calls running, `GET` streams).
    open_streams: usize,
    /// The requests this replica sent the client (elicitation, sampling, roots) not
    /// answered yet, by the id the client saw, with rmcp's own id: an answer to any other
    /// is another replica's (see `accept_message`).
    asked: HashMap<RequestId, RequestId>,
}

impl Activity {
    fn fresh() -> Self {
        Self {
            last: Instant::now(),
            open_streams: 0,
            asked: HashMap::new(),
        }
    }

    fn idle_for(&self, now: Instant) -> Option<Duration> {
        (self.open_streams == 0).then(|| now.saturating_duration_since(self.last))
    }
}

#[derive(Debug, Default)]
struct Table {
    sessions: HashMap<SessionId, Activity>,
    /// Sessions being created: counted against the cap before they exist.
    pending: usize,
    /// Sessions restored from the shared store whose replayed handshake has not finished:
    /// the sender turns `true` (or is dropped) when it has.
    restoring: HashMap<SessionId, tokio::sync::watch::Sender<bool>>,
}

impl Table {
    fn touch(&mut self, id: &SessionId) {
        if let Some(activity) = self.sessions.get_mut(id) {
            activity.last = Instant::now();
        }
    }

    /// The session idle the longest, if any is idle at all.
    fn longest_idle(&self) -> Option<SessionId> {
        let now = Instant::now();
        self.sessions
            .iter()
            .filter_map(|(id, activity)| Some((activity.idle_for(now)?, id)))
            .max_by_key(|(idle, _)| *idle)
            .map(|(_, id)| id.clone())
    }
}

type SharedTable = Arc<Mutex<Table>>;

/// How long a request waits for the replayed handshake of the session it names.
const RESTORE_WAIT: Duration = Duration::from_secs(30);

fn lock(table: &SharedTable) -> MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// rmcp's local session manager with an idle timeout and a cap (see the module docs).
#[derive(Debug)]
pub(crate) struct BoundedSessions {
    inner: LocalSessionManager,
    table: SharedTable,
    idle_timeout: Duration,
    max: usize,
    /// The store and messages the replicas share, when the server is one of several.
    bus: Option<Arc<SessionBus>>,
    /// What this replica puts before the ids of its requests to clients, when it is one of
    /// several (see the module docs).
    request_tag: Option<Arc<str>>,
    /// Told the id of every session closed here.
    on_close: Option<OnClose>,
}

/// [`SessionClosed`], shown by name only.
struct OnClose(SessionClosed);

impl std::fmt::Debug for OnClose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnClose")
    }
}

impl BoundedSessions {
    /// Sessions idle longer than `idle_timeout` are closed by [`Self::expire_idle`]; at most
    /// `max` (at least 1) are open at once.
    pub fn new(idle_timeout: Duration, max: usize) -> Self {
        let mut inner = LocalSessionManager::default();
        // Idleness is ours to judge (see the module docs).
        inner.session_config.keep_alive = None;
        Self {
            inner,
            table: SharedTable::default(),
            idle_timeout,
            max: max.max(1),
            bus: None,
            request_tag: None,
            on_close: None,
        }
    }

    /// Tells `closed` the id of every session closed here (ended, expired, evicted).
    pub fn on_close(mut self, closed: SessionClosed) -> Self {
        self.on_close = Some(OnClose(closed));
        self
    }

    fn closed(&self, id: &SessionId) {
        if let Some(OnClose(closed)) = &self.on_close {
            closed(id);
        }
    }

    /// Also asks the replicas' store whether a session still exists on every request naming
    /// it, and renews its record there; the `GET` streams held here also carry what the
    /// other replicas publish on `bus` for their sessions.
    pub fn with_shared(mut self, bus: Arc<SessionBus>) -> Self {
        self.bus = Some(bus);
        self.request_tag = Some(replica_tag().into());
        self
    }

    /// Counts one session about to open against the cap, making room by taking out the
    /// session idle the longest (returned, to be closed) when the cap is reached.
    fn reserve(&self) -> Result<Option<SessionId>, SessionsError> {
        let mut table = lock(&self.table);
        let evict = if table.sessions.len() + table.pending >= self.max {
            let oldest = table
                .longest_idle()
                .ok_or(SessionsError::Full { max: self.max })?;
            // Out of the count now, so a racing request cannot pick it too.
            table.sessions.remove(&oldest);
            Some(oldest)
        } else {
            None
        };
        table.pending += 1;
        Ok(evict)
    }

    async fn evict(&self, evicted: Option<SessionId>) {
        if let Some(oldest) = evicted {
            tracing::info!(session = %oldest, "closing the MCP session idle the longest to stay within {} sessions", self.max);
            if let Err(err) = self.inner.close_session(&oldest).await {
                tracing::warn!(session = %oldest, "closing an evicted session failed: {err}");
            }
            self.closed(&oldest);
        }
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Whether a new session would be admitted now (the cap is not reached, or an idle
    /// session can make room). Racing requests are held to the cap by `create_session`.
    pub fn admits_new(&self) -> bool {
        let table = lock(&self.table);
        table.sessions.len() + table.pending < self.max || table.longest_idle().is_some()
    }

    /// How many sessions are open.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        lock(&self.table).sessions.len()
    }

    /// Closes every session idle for longer than the timeout; returns how many.
    pub async fn expire_idle(&self) -> usize {
        let now = Instant::now();
        let expired: Vec<SessionId> = lock(&self.table)
            .sessions
            .iter()
            .filter(|(_, a)| a.idle_for(now).is_some_and(|idle| idle > self.idle_timeout))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            tracing::info!(session = %id, "closing an MCP session idle for over {:?}", self.idle_timeout);
            if let Err(err) = self.close_session(id).await {
                tracing::warn!(session = %id, "closing an idle session failed: {err}");
            }
        }
        expired.len()
    }

    /// Runs [`Self::expire_idle`] until `stop` is cancelled, checking a few times per
    /// timeout (at most every 30 s, at least every 50 ms).
    pub async fn expire_until(self: Arc<Self>, stop: CancellationToken) {
        let every =
            (self.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            self.expire_idle().await;
        }
    }

    fn touch(&self, id: &SessionId) {
        lock(&self.table).touch(id);
    }

    /// Whether session `id` exists: runs here, or (with shared sessions) has a record in the
    /// store. Unlike [`SessionManager::has_session`] it is no use of the session.
    pub async fn knows(&self, id: &SessionId) -> Result<bool, SessionsError> {
        if self.inner.has_session(id).await? {
            return Ok(true);
        }
        match &self.bus {
            Some(bus) => Ok(bus
                .store()
                .load(id)
                .await
                .map_err(SessionsError::Shared)?
                .is_some()),
            None => Ok(false),
        }
    }

    /// Waits, at most [`RESTORE_WAIT`], while session `id` is being restored (see the module
    /// docs); returns at once for any other session.
    async fn until_restored(&self, id: &SessionId) {
        let Some(mut done) = lock(&self.table).restoring.get(id).map(|tx| tx.subscribe()) else {
            return;
        };
        let waited = tokio::time::timeout(RESTORE_WAIT, done.wait_for(|done| *done)).await;
        if waited.is_err() {
            tracing::warn!(session = %id, "a restored session's handshake is still not through after {RESTORE_WAIT:?}");
        }
    }

    /// `stream`, counted as open on session `id` until it ends or is dropped; every message
    /// it carries is activity.
    fn tracked<S>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static + use<S>
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        let guard = OpenStream::new(self.table.clone(), id.clone(), self.request_tag.clone());
        stream.map(move |message| guard.saw(message))
    }
}

impl BoundedSessions {
    /// rmcp's id of the request this replica sent the client of session `id` as `request`,
    /// if it awaited its answer (now no longer).
    fn take_asked(&self, id: &SessionId, request: &RequestId) -> Option<RequestId> {
        lock(&self.table)
            .sessions
            .get_mut(id)
            .and_then(|activity| activity.asked.remove(request))
    }

    /// An answer another replica received for session `id`: given to the session's service
    /// here if this replica asked, else dropped (another one did).
    pub(crate) async fn take_answer(&self, id: &str, message: ClientJsonRpcMessage) {
        let id = SessionId::from(id);
        let Some(request) = answered(&message) else {
            return;
        };
        let Some(own) = self.take_asked(&id, request) else {
            return;
        };
        let message = with_answered_id(message, own);
        if let Err(err) = self.inner.accept_message(&id, message).await {
            tracing::warn!(session = %id, "an answer from another replica could not be delivered: {err}");
        }
    }

    /// `stream` with the other replicas' notifications for session `id` merged in, when it
    /// is the session's `GET` stream (`standalone`) and the server is one of several.
    fn with_published<S>(
        &self,
        id: &SessionId,
        stream: S,
        standalone: bool,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static + use<S>
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        match (&self.bus, standalone) {
            (Some(bus), true) => Either::Left(bus.attach(id, stream)),
            _ => Either::Right(stream),
        }
    }
}

/// Counts one open stream of a session, from creation to drop.
struct OpenStream {
    table: SharedTable,
    id: SessionId,
    request_tag: Option<Arc<str>>,
}

impl OpenStream {
    fn new(table: SharedTable, id: SessionId, request_tag: Option<Arc<str>>) -> Self {
        if let Some(activity) = lock(&table).sessions.get_mut(&id) {
            activity.open_streams += 1;
            activity.last = Instant::now();
        }
        Self {
            table,
            id,
            request_tag,
        }
    }

    /// `message` is on its way to the client: activity, and a request to await the answer
    /// of, with this replica's tag put before its id.
    fn saw(&self, mut message: ServerSseMessage) -> ServerSseMessage {
        let mut table = lock(&self.table);
        let Some(activity) = table.sessions.get_mut(&self.id) else {
            return message;
        };
        activity.last = Instant::now();
        if let Some(ServerJsonRpcMessage::Request(request)) = message.message.as_deref() {
            let own = request.id.clone();
            let sent = match &self.request_tag {
                Some(tag) => RequestId::String(format!("{tag}-{own}").into()),
                None => own.clone(),
            };
            if sent != own {
                let mut request = request.clone();
                request.id = sent.clone();
                message.message = Some(Arc::new(ServerJsonRpcMessage::Request(request)));
            }
            activity.asked.insert(sent, own);
        }
        message
    }
}

/// A tag for this replica's requests to clients: random, so replicas started from one
/// command line still differ.
fn replica_tag() -> String {
    use std::hash::{BuildHasher, Hasher};
    // std seeds every `RandomState` from the system's randomness.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!("r{:016x}", hasher.finish())
}

/// `message`, a client's answer, with `id` as the id of the request it answers.
fn with_answered_id(mut message: ClientJsonRpcMessage, id: RequestId) -> ClientJsonRpcMessage {
    match &mut message {
        ClientJsonRpcMessage::Response(response) => response.id = id,
        ClientJsonRpcMessage::Error(error) => error.id = Some(id),
        _ => {}
    }
    message
}

/// The id of the request a client's message answers, if it is an answer.
fn answered(message: &ClientJsonRpcMessage) -> Option<&RequestId> {
    match message {
        ClientJsonRpcMessage::Response(response) => Some(&response.id),
        ClientJsonRpcMessage::Error(error) => error.id.as_ref(),
        _ => None,
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        if let Some(activity) = lock(&self.table).sessions.get_mut(&self.id) {
            activity.open_streams = activity.open_streams.saturating_sub(1);
            activity.last = Instant::now();
        }
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let evicted = self.reserve()?;
        self.evict(evicted).await;
        let created = self.inner.create_session().await;
        let mut table = lock(&self.table);
        table.pending -= 1;
        let (id, transport) = created?;
        table.sessions.insert(id.clone(), Activity::fresh());
        Ok((id, transport))
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let evicted = self.reserve()?;
        self.evict(evicted).await;
        let restored = self.inner.restore_session(id.clone()).await;
        let mut table = lock(&self.table);
        table.pending -= 1;
        let restored = restored?;
        if matches!(restored, RestoreOutcome::Restored(_)) {
            tracing::debug!(session = %id, "running a session another replica opened");
            table.sessions.insert(id.clone(), Activity::fresh());
            table
                .restoring
                .insert(id, tokio::sync::watch::channel(false).0);
        }
        Ok(restored)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        // Every request naming a session asks this first: it counts as use.
        self.touch(id);
        let here = self.inner.has_session(id).await?;
        let Some(bus) = &self.bus else {
            return Ok(here);
        };
        if !here {
            // rmcp restores it from the store next, if the store has it.
            return Ok(false);
        }
        self.until_restored(id).await;
        let alive = bus
            .store()
            .touch(id, self.idle_timeout)
            .await
            .map_err(SessionsError::Shared)?;
        if !alive {
            tracing::info!(session = %id, "closing an MCP session that ended on another replica or expired");
            self.close_session(id).await?;
        }
        Ok(alive)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        {
            let mut table = lock(&self.table);
            table.sessions.remove(id);
            table.restoring.remove(id);
        }
        let closed = self.inner.close_session(id).await;
        self.closed(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.tracked(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        mut message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        if let Some(request) = answered(&message) {
            match (self.take_asked(id, request), &self.bus) {
                (Some(own), _) => message = with_answered_id(message, own),
                // An answer to a request another replica sent (a load balancer may send the
                // answer anywhere): the one that asked takes it from the bus.
                (None, Some(bus)) => {
                    return bus.answer(id, message).await.map_err(SessionsError::Shared);
                }
                // rmcp tells the client no request has that id.
                (None, None) => {}
            }
        }
        let initialized = matches!(
            &message,
            ClientJsonRpcMessage::Notification(n)
                if matches!(n.notification, ClientNotification::InitializedNotification(_))
        );
        self.inner.accept_message(id, message).await?;
        if initialized && let Some(done) = lock(&self.table).restoring.remove(id) {
            // The replayed handshake is through: requests held by `until_restored` go on.
            done.send_replace(true);
        }
        Ok(())
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.tracked(id, self.with_published(id, stream, true)))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // rmcp's event ids name the request a stream answers after a `/`; the `GET` stream's
        // have none.
        let standalone = !last_event_id.contains('/');
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(self.tracked(id, self.with_published(id, stream, standalone)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::shared::SharedSessionStore;

    async fn open(sessions: &BoundedSessions) -> SessionId {
        sessions.create_session().await.expect("a session").0
    }

    /// Holds a stream open on `id`, as a running call or a `GET` stream does.
    fn busy(
        sessions: &BoundedSessions,
        id: &SessionId,
    ) -> impl Stream<Item = ServerSseMessage> + use<> {
        sessions.tracked(id, futures::stream::pending())
    }

    #[tokio::test]
    async fn over_the_cap_the_idle_session_makes_room_and_busy_ones_refuse() {
        let sessions = BoundedSessions::new(DEFAULT_SESSION_IDLE_TIMEOUT, 2);
        let idle = open(&sessions).await;
        let working = open(&sessions).await;
        let _stream = busy(&sessions, &working);
        assert!(sessions.admits_new());

        let newest = open(&sessions).await;
        assert!(
            !sessions.has_session(&idle).await.unwrap(),
            "the idle one was closed"
        );
        assert!(sessions.has_session(&working).await.unwrap());
        assert_eq!(sessions.len(), 2);

        let _also = busy(&sessions, &newest);
        assert!(!sessions.admits_new());
        let err = sessions.create_session().await.err().expect("refused");
        assert!(matches!(err, SessionsError::Full { max: 2 }), "{err}");
        assert_eq!(sessions.len(), 2);
    }

    #[tokio::test]
    async fn idle_sessions_expire_and_sessions_with_an_open_stream_do_not() {
        let sessions = BoundedSessions::new(Duration::ZERO, 10);
        let idle = open(&sessions).await;
        let working = open(&sessions).await;
        let stream = busy(&sessions, &working);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(sessions.expire_idle().await, 1);
        assert!(!sessions.has_session(&idle).await.unwrap());
        assert!(sessions.has_session(&working).await.unwrap());

        // Once its stream ends, the session is idle like any other.
        drop(stream);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(sessions.expire_idle().await, 1);
        assert_eq!(sessions.len(), 0);
    }

    #[tokio::test]
    async fn every_way_a_session_closes_is_told_with_its_id() {
        let told = Arc::new(Mutex::new(Vec::<String>::new()));
        let hear = told.clone();
        let sessions =
            BoundedSessions::new(Duration::ZERO, 2).on_close(Arc::new(move |id: &str| {
                hear.lock().unwrap().push(id.into())
            }));
        let ended = open(&sessions).await;
        sessions.close_session(&ended).await.unwrap();
        let evicted = open(&sessions).await;
        let expired = open(&sessions).await;
        let stream = busy(&sessions, &expired);
        // The cap is reached: the idle one makes room.
        let working = open(&sessions).await;
        let _working = busy(&sessions, &working);
        drop(stream);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(sessions.expire_idle().await, 1);
        let told: Vec<String> = told.lock().unwrap().clone();
        let ids: Vec<String> = [ended, evicted, expired]
            .iter()
            .map(|id| id.to_string())
            .collect();
        assert_eq!(told, ids, "ended, evicted, expired, in that order");
    }

    #[tokio::test]
    async fn a_session_whose_shared_record_is_gone_is_closed_here_too() {
        let records = Arc::new(super::super::shared::tests::Records::default());
        let sessions = BoundedSessions::new(DEFAULT_SESSION_IDLE_TIMEOUT, 10)
            .with_shared(SessionBus::new(records.clone()));
        let id = open(&sessions).await;
        records.save(&id, "{}", Duration::ZERO).await.unwrap();
        assert!(sessions.has_session(&id).await.unwrap());

        // Deleted through another replica (or expired there): gone here at the next request.
        records.delete(&id).await.unwrap();
        assert!(!sessions.has_session(&id).await.unwrap());
        assert_eq!(sessions.len(), 0, "and its service closed");
    }

    /// Carries a `ping` request with rmcp's id `own` on a stream of session `id`; returns
    /// the id the client sees.
    async fn carry(sessions: &BoundedSessions, id: &SessionId, own: i64) -> RequestId {
        let ping = rmcp::model::ServerRequest::PingRequest(Default::default());
        let request = ServerJsonRpcMessage::request(ping, RequestId::Number(own));
        let carried: Vec<_> = sessions
            .tracked(
                id,
                futures::stream::iter([ServerSseMessage::from_message(request)]),
            )
            .collect()
            .await;
        match carried[0].message.as_deref() {
            Some(ServerJsonRpcMessage::Request(request)) => request.id.clone(),
            other => panic!("not a request: {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_answer_is_taken_once_and_only_for_a_request_this_replica_sent_that_session() {
        let sessions = BoundedSessions::new(DEFAULT_SESSION_IDLE_TIMEOUT, 10);
        let asked = open(&sessions).await;
        let other = open(&sessions).await;
        let sent = carry(&sessions, &asked, 7).await;
        assert_eq!(
            sent,
            RequestId::Number(7),
            "alone, a server sends rmcp's ids"
        );

        assert_eq!(
            sessions.take_asked(&other, &sent),
            None,
            "another session's id"
        );
        assert_eq!(
            sessions.take_asked(&asked, &RequestId::Number(8)),
            None,
            "an id never sent"
        );
        assert_eq!(
            sessions.take_asked(&asked, &sent),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            sessions.take_asked(&asked, &sent),
            None,
            "answered once only"
        );
    }

    #[tokio::test]
    async fn replicas_asking_one_client_at_once_send_different_ids_and_each_takes_its_own_answer() {
        let records = Arc::new(super::super::shared::tests::Records::default());
        let replica = || {
            BoundedSessions::new(DEFAULT_SESSION_IDLE_TIMEOUT, 10)
                .with_shared(SessionBus::new(records.clone()))
        };
        let (first, second) = (replica(), replica());
        let id = open(&first).await;
        second.restore_session(id.clone()).await.unwrap();

        // Both number from 0: the client must still see two ids.
        let (from_first, from_second) = (carry(&first, &id, 0).await, carry(&second, &id, 0).await);
        assert_ne!(from_first, from_second);
        assert!(matches!(&from_first, RequestId::String(s) if s.ends_with("-0")));

        assert_eq!(second.take_asked(&id, &from_first), None, "not its request");
        assert_eq!(
            first.take_asked(&id, &from_first),
            Some(RequestId::Number(0))
        );
        assert_eq!(
            second.take_asked(&id, &from_second),
            Some(RequestId::Number(0))
        );

        // The answer rmcp reads names rmcp's own id again.
        let answer = ClientJsonRpcMessage::response(
            rmcp::model::ClientResult::empty(()),
            from_first.clone(),
        );
        assert!(matches!(
            with_answered_id(answer, RequestId::Number(0)),
            ClientJsonRpcMessage::Response(r) if r.id == RequestId::Number(0)
        ));
    }

    #[tokio::test]
    async fn restored_sessions_count_against_the_cap() {
        let sessions = BoundedSessions::new(DEFAULT_SESSION_IDLE_TIMEOUT, 1);
        let working = open(&sessions).await;
        let _stream = busy(&sessions, &working);
        let refused = sessions.restore_session("from-elsewhere".into()).await;
        assert!(matches!(refused, Err(SessionsError::Full { max: 1 })));
        assert_eq!(sessions.len(), 1);
    }
}
