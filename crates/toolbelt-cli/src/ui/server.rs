//! The HTTP side: the embedded page, the JSON API and the event stream, behind the guard.
//!
//! Layers, outermost first: security headers on every answer (a strict Content-Security-Policy
//! among them, so even a rendering bug cannot run a script that came in a tool result), then
//! the guard ([`super::auth`]), then the routes.
//!
//! | route | answers |
//! |---|---|
//! | `GET /` | the page (embedded in the binary), with the data of its first paint inlined ([`page_data`]) |
//! | `GET /assets/{file}` | the page's scripts and styles (embedded) |
//! | `GET /api/config` | the mode, whether the chat box works (and why not) |
//! | `GET /api/sessions` | every session in the file (its title: the first prompt, escaped), and the last sequence number |
//! | `GET /api/events?app=&user=&session=` | one session's stored events with their sequence numbers |
//! | `GET /api/stream?after=SEQ` | server-sent events: stored events after `SEQ`, then everything new |
//! | `POST /api/runs` | `{"message", "session_id"?}` starts a run; 202 with the session id |
//! | `POST /api/decisions` | `{"session_id", "decisions": {CALL: Decision}}` resumes a run paused for approval; 202 |
//! | `GET /api/calls` | `serve --ui`: the recent tool calls |

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use toolbelt::agent::SessionKey;
use toolbelt::agent::session::{SqliteSessionService, title};
use toolbelt::mcp::server::CancellationToken;

use super::auth::{self, Guard};
use super::feed::{self, FeedItem, Hub};
use super::runs::{Runs, StartError};

/// The page's files, compiled in: no build step, nothing read from disk at run time.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/ui/app.js"),
    ),
    (
        "view.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/ui/view.js"),
    ),
    (
        "markdown.js",
        "text/javascript; charset=utf-8",
        include_str!("../../assets/ui/markdown.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../assets/ui/style.css"),
    ),
];
const INDEX: &str = include_str!("../../assets/ui/index.html");

/// The policy every answer carries: scripts and styles from this server only, images from it
/// or inline `data:` (tool results' images), no frames, no plugins, no forms elsewhere.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// The most bytes of stored events the page carries inline; a longer session is loaded by the
/// page through `/api/events` after the first paint.
const MAX_INLINE_EVENTS_BYTES: usize = 4 * 1024 * 1024;
/// Where the page's data block goes in `index.html`.
const DATA_MARK: &str = "<!--initial-data-->";

/// The longest message the chat box may send.
const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// The longest session id the chat box may name: it travels in URLs of the page.
const MAX_SESSION_ID_CHARS: usize = 128;

/// What the page is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `toolbelt ui`: the sessions of a file.
    Sessions,
    /// `serve --ui`: the MCP calls of this server.
    Serve,
}

/// What the handlers share.
pub(crate) struct UiState {
    pub(crate) mode: Mode,
    pub(crate) hub: Arc<Hub>,
    pub(crate) store: Option<SqliteSessionService>,
    pub(crate) runs: Option<Arc<Runs>>,
    /// Why the chat box is off, when it is.
    pub(crate) chat_off: Option<String>,
    /// Ends the event streams at shutdown (they would hold it open otherwise).
    pub(crate) stop: CancellationToken,
}

/// The router: routes, the guard, then the headers (outermost).
pub(crate) fn router(state: Arc<UiState>, guard: Arc<Guard>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/assets/{file}", get(asset))
        .route("/api/config", get(config))
        .route("/api/sessions", get(sessions))
        .route("/api/events", get(events))
        .route("/api/stream", get(stream))
        .route("/api/runs", post(start_run))
        .route("/api/decisions", post(decide))
        .route("/api/calls", get(calls))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(guard, auth::check))
        .layer(axum::middleware::map_response(security_headers))
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The page, with what its first paint shows inlined, so it shows the sessions and the newest
/// run without waiting for a request. Without the data (the file cannot be read) it is the
/// plain page, which asks the API and says what went wrong.
async fn index(State(state): State<Arc<UiState>>) -> Response {
    let page = match page_data(&state).await {
        Ok(data) => INDEX.replacen(DATA_MARK, &data_block(&data), 1),
        Err(error) => {
            tracing::warn!(%error, "web UI: the page goes out without its data");
            INDEX.replacen(DATA_MARK, "", 1)
        }
    };
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// What the page needs for its first paint: `config` (as `/api/config`), and in sessions
/// mode `sessions` (as `/api/sessions`) and `events`, the newest session's stored events
/// (null when they pass [`MAX_INLINE_EVENTS_BYTES`]); in serve mode `calls`, the recent
/// calls as the stream sends them.
async fn page_data(state: &UiState) -> Result<Value, String> {
    let config = config_json(state);
    let Some(store) = store(state) else {
        return Ok(json!({ "config": config, "calls": state.hub.recent_calls() }));
    };
    let sessions = session_list(store).await?;
    let newest = sessions["sessions"].get(0).map(|s| {
        let part = |name: &str| s[name].as_str().unwrap_or_default().to_string();
        SessionKey::new(part("app"), part("user_id"), part("session_id"))
    });
    let events = match newest {
        Some(key) => {
            use toolbelt::agent::SessionService;
            let events = store.events(&key).await.map_err(|e| e.to_string())?;
            let events = serde_json::to_value(events).map_err(|e| e.to_string())?;
            let bytes = serde_json::to_string(&events).map_or(usize::MAX, |text| text.len());
            if bytes <= MAX_INLINE_EVENTS_BYTES {
                events
            } else {
                Value::Null
            }
        }
        None => json!([]),
    };
    Ok(json!({ "config": config, "sessions": sessions, "events": events }))
}

/// `data` as a JSON data block: `type="application/json"` is never run (so the
/// Content-Security-Policy needs no exception), and `<`, `>` and `&` are written as JSON
/// escapes, so no text in the data (a session title holding `</script>` or `<!--`) can end
/// the block or start markup; `JSON.parse` reads the escapes back as the characters.
fn data_block(data: &Value) -> String {
    let mut text = String::with_capacity(64);
    for c in data.to_string().chars() {
        match c {
            '<' => text.push_str("\\u003c"),
            '>' => text.push_str("\\u003e"),
            '&' => text.push_str("\\u0026"),
            // Line and paragraph separators: valid in JSON, kept out of the page's source.
            '\u{2028}' => text.push_str("\\u2028"),
            '\u{2029}' => text.push_str("\\u2029"),
            c => text.push(c),
        }
    }
    format!("<script type=\"application/json\" id=\"initial-data\">{text}</script>")
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, body)) => ([(header::CONTENT_TYPE, *kind)], *body).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

async fn config(State(state): State<Arc<UiState>>) -> Json<Value> {
    Json(config_json(&state))
}

/// The mode, whether the chat box works (and why not), and the key parts of its sessions.
fn config_json(state: &UiState) -> Value {
    let (app, user) = state
        .runs
        .as_ref()
        .map_or(("", ""), |runs| runs.key_parts());
    json!({
        "mode": match state.mode { Mode::Sessions => "sessions", Mode::Serve => "serve" },
        "chat": state.runs.is_some(),
        "chat_off": state.chat_off,
        "app": app,
        "user_id": user,
    })
}

/// The session file, or the answer saying there is none (`serve --ui`).
fn store(state: &UiState) -> Option<&SqliteSessionService> {
    state.store.as_ref()
}

fn no_store() -> Response {
    error(StatusCode::NOT_FOUND, "this UI has no session file")
}

async fn sessions(State(state): State<Arc<UiState>>) -> Response {
    let Some(store) = store(&state) else {
        return no_store();
    };
    match session_list(store).await {
        Ok(list) => Json(list).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// Every session of the file, the newest first, with the last sequence number.
async fn session_list(store: &SqliteSessionService) -> Result<Value, String> {
    // The last sequence number first: anything committed after it reaches a page that
    // follows the stream from it (twice at worst; the page keeps events by id).
    let last_seq = store.last_seq().await.map_err(|e| e.to_string())?;
    let list = store.sessions().await.map_err(|e| e.to_string())?;
    let mut sessions = Vec::with_capacity(list.len());
    for s in &list {
        // The first prompt, escaped as the terminal shows it: the page writes it as text,
        // and an escape sequence or a bidirectional override reads as what it is.
        let inputs = store.user_inputs(&s.key).await.map_err(|e| e.to_string())?;
        let title = title(&inputs).map(|t| toolbelt::visible(&t).into_owned());
        sessions.push(json!({
            "app": s.key.app,
            "user_id": s.key.user_id,
            "session_id": s.key.session_id,
            "title": title,
            "created_ms": s.created_ms,
            "updated_ms": s.updated_ms,
            "events": s.events,
        }));
    }
    Ok(json!({ "last_seq": last_seq, "sessions": sessions }))
}

#[derive(Deserialize)]
struct SessionQuery {
    app: String,
    user: String,
    session: String,
}

async fn events(State(state): State<Arc<UiState>>, Query(q): Query<SessionQuery>) -> Response {
    let Some(store) = store(&state) else {
        return no_store();
    };
    use toolbelt::agent::SessionService;
    let key = SessionKey::new(q.app, q.user, q.session);
    match store.events(&key).await {
        Ok(events) => Json(json!({ "events": events })).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct StreamQuery {
    #[serde(default)]
    after: i64,
}

/// Server-sent events: each item as one `data:` line of JSON (its `kind` says what it is).
async fn stream(State(state): State<Arc<UiState>>, Query(q): Query<StreamQuery>) -> Response {
    // Subscribe before catching up, so nothing committed in between is missed.
    let live = state.hub.subscribe();
    let (tx, rx) = mpsc::channel::<SseEvent>(64);
    let stop = state.stop.clone();
    let feed = follow(state.clone(), live, q.after, tx);
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = feed => {}
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), rx))
    });
    Sse::new(body)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Feeds one page until it leaves: catch up from the file, then the broadcast; after falling
/// behind the broadcast, catch up from the file again.
async fn follow(
    state: Arc<UiState>,
    mut live: broadcast::Receiver<Arc<FeedItem>>,
    after: i64,
    tx: mpsc::Sender<SseEvent>,
) {
    let mut cursor = after;
    if state.mode == Mode::Serve {
        for item in state.hub.recent_calls() {
            if send(&tx, &item).await.is_err() {
                return;
            }
        }
    }
    if catch_up(&state, &mut cursor, &tx).await.is_err() {
        return;
    }
    loop {
        match live.recv().await {
            Ok(item) => {
                if let Some(seq) = item.seq() {
                    if seq <= cursor {
                        continue;
                    }
                    cursor = seq;
                }
                if send(&tx, &item).await.is_err() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                if catch_up(&state, &mut cursor, &tx).await.is_err() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Sends the stored events after `cursor`, page by page; `Err` when the page left.
async fn catch_up(
    state: &UiState,
    cursor: &mut i64,
    tx: &mpsc::Sender<SseEvent>,
) -> Result<(), ()> {
    let Some(store) = &state.store else {
        return Ok(());
    };
    loop {
        let items = match feed::stored_after(store, *cursor).await {
            Ok(items) => items,
            Err(error) => {
                tracing::warn!(%error, "web UI: cannot read the session file");
                return Ok(());
            }
        };
        let full = items.len() == feed::PAGE;
        for item in items {
            if let Some(seq) = item.seq() {
                *cursor = (*cursor).max(seq);
            }
            send(tx, &item).await?;
        }
        if !full {
            return Ok(());
        }
    }
}

async fn send(tx: &mpsc::Sender<SseEvent>, item: &FeedItem) -> Result<(), ()> {
    let event = SseEvent::default()
        .json_data(item)
        .map_err(|error| tracing::warn!(%error, "web UI: cannot encode an event"))?;
    tx.send(event).await.map_err(|_| ())
}

#[derive(Deserialize)]
struct StartRun {
    message: String,
    #[serde(default)]
    session_id: Option<String>,
}

/// Whether `id` can name a session from the chat box: short enough for the page's URLs and
/// made of characters no URL, terminal or HTML needs to escape.
fn is_session_id(id: &str) -> bool {
    id.len() <= MAX_SESSION_ID_CHARS
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

async fn start_run(
    State(state): State<Arc<UiState>>,
    body: Result<Json<StartRun>, JsonRejection>,
) -> Response {
    let runs = match runs_of(&state) {
        Ok(runs) => runs,
        Err(answer) => return *answer,
    };
    // axum's Json extractor insists on `Content-Type: application/json`, which a cross-site
    // form cannot send; the origin check has already refused cross-site scripts.
    let start = match body {
        Ok(Json(start)) => start,
        Err(rejection) => {
            return error(
                rejection.status(),
                format!(
                    "expected a JSON body {{\"message\": …, \"session_id\": …}}: {}",
                    rejection.body_text()
                ),
            );
        }
    };
    if start.message.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "the message is empty");
    }
    if start.message.len() > MAX_MESSAGE_BYTES {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "the message is too long");
    }
    let session_id = start.session_id.filter(|id| !id.trim().is_empty());
    if let Some(id) = &session_id
        && !is_session_id(id)
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "a session id is 1 to {MAX_SESSION_ID_CHARS} characters of letters, digits and . _ : -"
            ),
        );
    }
    let session_id = session_id.unwrap_or_else(crate::agent_cli::new_session_id);
    let input = match runs.prompt(&session_id, &start.message).await {
        Ok(messages) => toolbelt::agent::RunInput::from(messages),
        // The hook's own words are shown by the page as text.
        Err(why) => return error(StatusCode::UNPROCESSABLE_ENTITY, why),
    };
    started(
        runs.start(Some(session_id), input, Default::default())
            .await,
    )
}

/// The answer to a request that started a run.
fn started(result: Result<String, StartError>) -> Response {
    match result {
        Ok(session_id) => (
            StatusCode::ACCEPTED,
            Json(json!({ "session_id": session_id })),
        )
            .into_response(),
        Err(StartError::Busy) => error(
            StatusCode::CONFLICT,
            "a run of this session is still going; wait for it to end",
        ),
    }
}

/// The runs of a UI that can start them, or the answer saying why it cannot.
fn runs_of(state: &UiState) -> Result<&Arc<Runs>, Box<Response>> {
    state.runs.as_ref().ok_or_else(|| {
        Box::new(error(
            StatusCode::CONFLICT,
            state
                .chat_off
                .clone()
                .unwrap_or_else(|| "this UI cannot start runs".into()),
        ))
    })
}

#[derive(Debug, Deserialize)]
struct Decide {
    session_id: String,
    decisions: std::collections::HashMap<String, toolbelt::agent::Decision>,
    /// Approved calls whose kind is allowed from now on ("Always").
    #[serde(default)]
    always: Vec<String>,
}

/// The most decisions one request may carry (a turn's paused calls).
const MAX_DECISIONS: usize = 64;

/// A person's buttons on a paused run: resumes the session with their decisions (the run
/// refuses, as an error event, a decision for a call that waits for none).
async fn decide(
    State(state): State<Arc<UiState>>,
    body: Result<Json<Decide>, JsonRejection>,
) -> Response {
    let runs = match runs_of(&state) {
        Ok(runs) => runs,
        Err(answer) => return *answer,
    };
    let decide = match body {
        Ok(Json(decide)) => decide,
        Err(rejection) => {
            return error(
                rejection.status(),
                format!(
                    "expected a JSON body {{\"session_id\": …, \"decisions\": {{CALL: {{\"decision\": \"approve\"}}}}}}: {}",
                    rejection.body_text()
                ),
            );
        }
    };
    if !is_session_id(&decide.session_id) {
        return error(StatusCode::BAD_REQUEST, "not a session id of this page");
    }
    if decide.decisions.is_empty() || decide.decisions.len() > MAX_DECISIONS {
        return error(
            StatusCode::BAD_REQUEST,
            format!("give 1 to {MAX_DECISIONS} decisions"),
        );
    }
    for id in &decide.always {
        if !matches!(
            decide.decisions.get(id),
            Some(toolbelt::agent::Decision::Approve)
        ) {
            return error(
                StatusCode::BAD_REQUEST,
                format!("\"always\" names call {id}, which this request does not approve"),
            );
        }
    }
    if !decide.always.is_empty()
        && let Err(why) = runs
            .approve_always(&decide.session_id, &decide.always)
            .await
    {
        return error(StatusCode::BAD_REQUEST, why);
    }
    let input = toolbelt::agent::RunInput::resume();
    started(
        runs.start(Some(decide.session_id), input, decide.decisions)
            .await,
    )
}

async fn calls(State(state): State<Arc<UiState>>) -> Json<Value> {
    Json(json!({ "calls": state.hub.recent_calls() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_block_cannot_be_ended_by_the_data_and_reads_back_whole() {
        let title = "</script><script>window.__pwned = 7</script> <!-- & \u{2028}";
        let data = json!({ "sessions": [{ "title": title }] });
        let block = data_block(&data);
        let inner = block
            .strip_prefix(r#"<script type="application/json" id="initial-data">"#)
            .and_then(|rest| rest.strip_suffix("</script>"))
            .expect("one data block");
        for markup in ['<', '>', '&', '\u{2028}'] {
            assert!(!inner.contains(markup), "{markup:?} in {inner}");
        }
        let back: Value = serde_json::from_str(inner).unwrap();
        assert_eq!(back["sessions"][0]["title"], title);
    }

    #[test]
    fn the_page_has_one_place_for_its_data() {
        assert_eq!(INDEX.matches(DATA_MARK).count(), 1);
    }
}
