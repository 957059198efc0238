//! A scriptable OpenAI-compatible server on 127.0.0.1, for tests and benchmarks of code that
//! talks to a model (feature `test-server`).
//!
//! The server answers `POST /v1/chat/completions` with the next [`Reply`] of its script (or
//! from a function of the request), streaming it as server-sent events when the request asks
//! for `stream: true` and as one JSON body otherwise. It records every request so a test can
//! assert what the model was sent. Responses carry fields no client knows about, so clients
//! are tested for tolerance on every call.
//!
//! `POST /v1/embeddings` answers with [`hashed_embedding`] vectors (similar texts get similar
//! vectors), or with the next reply pushed by [`ScriptedServer::push_embeddings`] (a
//! [`Reply::Status`] or [`Reply::Raw`] to test error handling); its requests are kept apart in
//! [`ScriptedServer::embedding_requests`].
//!
//! ```
//! use toolbelt_model::testing::{Reply, ScriptedServer};
//! use toolbelt_model::{Message, Model, OpenAiConfig, OpenAiModel, Request};
//! use futures::StreamExt;
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let server = ScriptedServer::start([Reply::text("hello")]).await.unwrap();
//! let model = OpenAiModel::new(OpenAiConfig::new(server.base_url(), "scripted")).unwrap();
//! let mut stream = model.generate(Request::new(vec![Message::user("hi")])).await.unwrap();
//! let response = stream.next().await.unwrap().unwrap();
//! assert_eq!(response.message.unwrap().content, "hello");
//! assert_eq!(server.requests()[0].body["messages"][0]["content"], "hi");
//! # });
//! ```

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::routing::post;
use axum::serve::ListenerExt;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::ToolCall;

mod dialects;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An assistant message: text and tool calls (either may be empty).
    Message {
        /// The text.
        content: String,
        /// The tool calls.
        tool_calls: Vec<ToolCall>,
    },
    /// An error status with an OpenAI-style error body.
    Status {
        /// The HTTP status.
        status: u16,
        /// The `Retry-After` header, if any.
        retry_after: Option<String>,
        /// The error message.
        message: String,
    },
    /// Starts streaming, sends `content` and then goes silent for `pause` before finishing,
    /// to exercise idle timeouts.
    Stall {
        /// Text sent before the pause.
        content: String,
        /// How long nothing is sent.
        pause: Duration,
    },
    /// A text answer that stopped at the token limit (`finish_reason: "length"`).
    Truncated {
        /// The text.
        content: String,
    },
    /// Streams a complete text answer (its `finish_reason` and usage chunk) and then holds
    /// the connection open without `[DONE]`, sending a keep-alive chunk with empty
    /// `choices` every 200 ms, as some proxies do. Answered whole when the request does not
    /// stream.
    HeldOpen {
        /// The text.
        content: String,
    },
    /// Only chunks with empty `choices` (a usage chunk) then `[DONE]`; a completion with
    /// no choices when the request does not stream.
    EmptyChoices,
    /// A body sent as is with this status and content type, whatever the request asked
    /// for: a JSON completion to a streaming request, an `{"error": …}` body, an HTML page.
    Raw {
        /// The HTTP status.
        status: u16,
        /// The `Content-Type` header (none is sent when `None`).
        content_type: Option<String>,
        /// The body.
        body: String,
    },
    /// Reads the request and never answers (a server that accepts and hangs).
    NoAnswer,
    /// An answer that reasons first: Anthropic's `thinking` block with a signature, a
    /// Responses `reasoning` item, a Gemini thought with a signature on the first call
    /// (chat completions: `reasoning_content`). The server then insists that the reasoning
    /// comes back with the calls, as those APIs do.
    Reasoned {
        /// The reasoning text.
        reasoning: String,
        /// The text.
        content: String,
        /// The tool calls.
        tool_calls: Vec<ToolCall>,
    },
}

impl Reply {
    /// A final text answer.
    pub fn text(content: impl Into<String>) -> Self {
        Reply::Message {
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }

    /// One tool call.
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Self {
        Self::tool_calls([(id, name, arguments)])
    }

    /// Several tool calls in one turn, as `(id, name, arguments)`.
    pub fn tool_calls<'a>(calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Self {
        Reply::Message {
            content: String::new(),
            tool_calls: calls
                .into_iter()
                .map(|(id, name, args)| ToolCall::new(id, name, args))
                .collect(),
        }
    }

    /// An error status.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        Reply::Status {
            status,
            retry_after: None,
            message: message.into(),
        }
    }

    /// A text answer cut at the token limit (`finish_reason: "length"`).
    pub fn truncated(content: impl Into<String>) -> Self {
        Reply::Truncated {
            content: content.into(),
        }
    }

    /// A 200 with this content type and body, sent as is.
    pub fn raw(content_type: &str, body: impl Into<String>) -> Self {
        Reply::Raw {
            status: 200,
            content_type: Some(content_type.to_string()),
            body: body.into(),
        }
    }

    /// A whole JSON chat completion with this text, as a non-streaming server sends it
    /// (sent as is, also to a streaming request).
    pub fn json_completion(content: &str) -> Self {
        Self::raw(
            "application/json",
            completion("scripted", content, &[], "stop").to_string(),
        )
    }

    /// Tool calls after reasoning ([`Reply::Reasoned`]).
    pub fn reasoned<'a>(
        reasoning: &str,
        calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Self {
        Reply::Reasoned {
            reasoning: reasoning.to_string(),
            content: String::new(),
            tool_calls: calls
                .into_iter()
                .map(|(id, name, args)| ToolCall::new(id, name, args))
                .collect(),
        }
    }

    /// A 429 with `Retry-After: <seconds>`.
    pub fn rate_limited(retry_after_secs: &str) -> Self {
        Reply::Status {
            status: 429,
            retry_after: Some(retry_after_secs.to_string()),
            message: "rate limit reached, slow down".to_string(),
        }
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The path and query (`/v1/messages`, `/v1beta/models/m:generateContent`).
    pub path: String,
    /// The headers, names lower-cased (a repeated header keeps its last value).
    pub headers: HashMap<String, String>,
    /// The JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// The `messages` of the body.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The names of the tools offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

const LOCALHOST: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

type Responder = dyn Fn(&RecordedRequest) -> Reply + Send + Sync;

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    responder: Option<Box<Responder>>,
    requests: Mutex<Vec<RecordedRequest>>,
    strict: AtomicBool,
    embedding_script: Mutex<VecDeque<Reply>>,
    embedding_requests: Mutex<Vec<RecordedRequest>>,
    issued: Mutex<dialects::Issued>,
}

impl Shared {
    fn new(script: VecDeque<Reply>, responder: Option<Box<Responder>>) -> Self {
        Self {
            script: Mutex::new(script),
            responder,
            requests: Mutex::new(Vec::new()),
            strict: AtomicBool::new(false),
            embedding_script: Mutex::new(VecDeque::new()),
            embedding_requests: Mutex::new(Vec::new()),
            issued: Mutex::default(),
        }
    }
}

/// A running scripted server; it stops when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedServer {
    /// Starts a server that answers with `replies` in order; once they run out it answers
    /// 500 "script exhausted", so a loop that calls the model too often fails loudly.
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> std::io::Result<Self> {
        let shared = Shared::new(replies.into_iter().collect(), None);
        Self::spawn(LOCALHOST, shared).await
    }

    /// Starts a server that computes each reply from the request (after any pushed replies
    /// are used up).
    pub async fn start_with(
        responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        Self::start_with_at(LOCALHOST, responder).await
    }

    /// Like [`ScriptedServer::start_with`], listening on `addr` (a fixed port for a server
    /// that another program is pointed at).
    pub async fn start_with_at(
        addr: SocketAddr,
        responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let shared = Shared::new(VecDeque::new(), Some(Box::new(responder)));
        Self::spawn(addr, shared).await
    }

    /// Turns strict checking of the conversation on or off. A strict server answers 400,
    /// as vLLM does, when an assistant message in the request holds a tool call whose
    /// `arguments` are not a JSON object, or two tool calls with the same id, and, as OpenAI
    /// does, when a declared tool's name has characters other than letters, digits, `_` and
    /// `-` or is longer than 64; the script is not advanced by a refused request.
    pub fn set_strict(&self, strict: bool) {
        self.shared.strict.store(strict, Ordering::Relaxed);
    }

    async fn spawn(addr: SocketAddr, shared: Shared) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(shared);
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/v1/embeddings", post(embeddings))
            .route("/v1/messages", post(dialects::anthropic))
            .route("/v1/responses", post(dialects::responses))
            .route("/v1beta/models/{action}", post(dialects::gemini))
            .with_state(shared.clone());
        // Without TCP_NODELAY the response's first body chunk waits for the client's
        // delayed ACK of the headers (about 40 ms), which would dwarf what benchmarks
        // measure; real model servers set it too.
        let listener = listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%error, "cannot set TCP_NODELAY");
            }
        });
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::warn!(%error, "scripted model server stopped");
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// The base URL to configure a client with (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL of the Gemini routes (`http://127.0.0.1:PORT/v1beta`); the others
    /// (Responses, Anthropic Messages) are under [`ScriptedServer::base_url`].
    pub fn gemini_base_url(&self) -> String {
        format!("http://{}/v1beta", self.addr)
    }

    /// The base URL a client of `provider` is configured with.
    pub fn base_url_for(&self, provider: crate::Provider) -> String {
        match provider {
            crate::Provider::Gemini => self.gemini_base_url(),
            _ => self.base_url(),
        }
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.shared.script).extend(replies);
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many replies of the script are still unused.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.script).len()
    }

    /// Queues answers for the next `/v1/embeddings` requests (used before the computed
    /// vectors): [`Reply::Status`], [`Reply::Raw`] or [`Reply::NoAnswer`]; any other reply
    /// answers 500.
    pub fn push_embeddings(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.shared.embedding_script).extend(replies);
    }

    /// The `/v1/embeddings` requests received so far.
    pub fn embedding_requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.embedding_requests).clone()
    }
}

/// The vector the server computes for `text`: each lower-cased alphanumeric word adds 1 to
/// the dimension its FNV-1a hash picks, so texts sharing words point in similar directions
/// (a text without words gets a 1 in dimension 0). Not normalised.
pub fn hashed_embedding(text: &str, dimensions: usize) -> Vec<f32> {
    let dimensions = dimensions.max(1);
    let mut vector = vec![0.0f32; dimensions];
    let mut words = 0;
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let hash = word
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        vector[(hash % dimensions as u64) as usize] += 1.0;
        words += 1;
    }
    if words == 0 {
        vector[0] = 1.0;
    }
    vector
}

/// Answers `/v1/embeddings`: a pushed reply if any, else [`hashed_embedding`] of each input
/// (`dimensions` from the request, default 64, at most 4,096).
async fn embeddings(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> HttpResponse {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    lock(&shared.embedding_requests).push(RecordedRequest {
        path: "/v1/embeddings".into(),
        headers: headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect(),
        body: body.clone(),
    });
    let next = lock(&shared.embedding_script).pop_front();
    match next {
        Some(Reply::Status {
            status,
            retry_after,
            message,
        }) => return error_response(status, &message, retry_after),
        Some(Reply::Raw {
            status,
            content_type,
            body,
        }) => {
            let mut response = HttpResponse::builder()
                .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK));
            if let Some(content_type) = content_type {
                response = response.header("content-type", content_type);
            }
            return response
                .body(Body::from(body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
        }
        Some(Reply::NoAnswer) => return std::future::pending().await,
        Some(other) => {
            return error_response(500, &format!("not an embeddings reply: {other:?}"), None);
        }
        None => {}
    }
    let inputs: Vec<&str> = match &body["input"] {
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => return error_response(400, "input must be a string or an array of strings", None),
    };
    let dimensions = body["dimensions"]
        .as_u64()
        .map_or(64, |d| d.clamp(1, 4096) as usize);
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            json!({"object": "embedding", "index": index,
                   "embedding": hashed_embedding(text, dimensions)})
        })
        .collect();
    axum::Json(json!({
        "object": "list", "data": data, "model": body["model"].as_str().unwrap_or("scripted"),
        "usage": {"prompt_tokens": inputs.len(), "total_tokens": inputs.len()},
    }))
    .into_response()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking test thread must not turn every later request into a second panic.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn complete(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> HttpResponse {
    let recorded = RecordedRequest {
        path: "/v1/chat/completions".into(),
        headers: headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    if shared.strict.load(Ordering::Relaxed)
        && let Some(problem) = strict_problem(&recorded.body)
    {
        lock(&shared.requests).push(recorded);
        return error_response(400, &problem, None);
    }
    let next = lock(&shared.script).pop_front();
    let reply = match (next, &shared.responder) {
        (Some(reply), _) => reply,
        (None, Some(responder)) => responder(&recorded),
        (None, None) => Reply::status(500, "script exhausted"),
    };
    let stream = recorded.body["stream"].as_bool().unwrap_or(false);
    let model = recorded.body["model"]
        .as_str()
        .unwrap_or("scripted")
        .to_string();
    lock(&shared.requests).push(recorded);
    match reply {
        Reply::Status {
            status,
            retry_after,
            message,
        } => error_response(status, &message, retry_after),
        Reply::Message {
            content,
            tool_calls,
        }
        | Reply::Reasoned {
            content,
            tool_calls,
            ..
        } => answer(&model, &content, &tool_calls, stream, Ending::Done),
        Reply::Truncated { content } => answer(&model, &content, &[], stream, Ending::Length),
        Reply::HeldOpen { content } => answer(&model, &content, &[], stream, Ending::HeldOpen),
        Reply::Stall { content, pause } => {
            let first = vec![chunk(
                &model,
                json!({"role": "assistant", "content": content}),
                None,
            )];
            sse(first, Some(pause))
        }
        Reply::EmptyChoices if !stream => axum::Json(json!({
            "id": "chatcmpl-scripted", "object": "chat.completion", "model": model,
            "choices": [], "usage": usage(),
        }))
        .into_response(),
        Reply::EmptyChoices => {
            let empty = |usage: Value| {
                json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                       "model": model, "choices": [], "usage": usage})
                .to_string()
            };
            sse(
                vec![empty(Value::Null), empty(usage()), "[DONE]".into()],
                None,
            )
        }
        Reply::Raw {
            status,
            content_type,
            body,
        } => {
            let mut response = HttpResponse::builder()
                .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK));
            if let Some(content_type) = content_type {
                response = response.header("content-type", content_type);
            }
            response
                .body(Body::from(body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Reply::NoAnswer => std::future::pending().await,
    }
}

/// How a streamed answer ends.
#[derive(Clone, Copy, PartialEq)]
enum Ending {
    /// `finish_reason` stop or tool_calls, a usage chunk, `[DONE]`.
    Done,
    /// `finish_reason` length, a usage chunk, `[DONE]`.
    Length,
    /// `finish_reason` stop and a usage chunk, then the connection stays open.
    HeldOpen,
}

fn answer(
    model: &str,
    content: &str,
    tool_calls: &[ToolCall],
    stream: bool,
    ending: Ending,
) -> HttpResponse {
    let finish = match ending {
        Ending::Length => "length",
        _ if tool_calls.is_empty() => "stop",
        _ => "tool_calls",
    };
    if !stream {
        return axum::Json(completion(model, content, tool_calls, finish)).into_response();
    }
    let mut events = chunks(model, content, tool_calls, finish);
    if ending == Ending::HeldOpen {
        events.pop();
        let keep_alive = json!({"object": "chat.completion.chunk", "model": model,
                                "choices": []})
        .to_string();
        let body = futures::stream::iter(events)
            .chain(futures::stream::unfold(
                keep_alive,
                |keep_alive| async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Some((keep_alive.clone(), keep_alive))
                },
            ))
            .map(|data| Ok::<_, Infallible>(format!("data: {data}\n\n")));
        return event_stream(Body::from_stream(body));
    }
    sse(events, None)
}

fn error_response(status: u16, message: &str, retry_after: Option<String>) -> HttpResponse {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": message, "type": "scripted", "code": null}});
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
        response.headers_mut().insert("retry-after", value);
    }
    response
}

/// What a strict server (vLLM; OpenAI for the names) refuses in a request: a tool name
/// outside `^[a-zA-Z0-9_-]{1,64}$`, tool-call arguments that are not a JSON object, two tool
/// calls with one id in one assistant message.
fn strict_problem(body: &Value) -> Option<String> {
    for (position, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let name = tool["function"]["name"].as_str().unwrap_or_default();
        if !dialects::openai_name_ok(name) {
            return Some(format!(
                "Invalid 'tools[{position}].function.name': string does not match pattern \
                 '^[a-zA-Z0-9_-]{{1,64}}$': {name:?}"
            ));
        }
    }
    let messages = body["messages"].as_array()?;
    for (position, message) in messages.iter().enumerate() {
        let Some(calls) = message["tool_calls"].as_array() else {
            continue;
        };
        let mut ids = std::collections::HashSet::new();
        for call in calls {
            let id = call["id"].as_str().unwrap_or_default();
            if !ids.insert(id) {
                return Some(format!(
                    "messages[{position}]: duplicate tool call id {id:?}"
                ));
            }
            let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
            let parsed = serde_json::from_str::<Value>(arguments);
            if !matches!(parsed, Ok(Value::Object(_))) {
                return Some(format!(
                    "messages[{position}]: the arguments of tool call {id:?} are not a JSON \
                     object: {arguments:?}"
                ));
            }
        }
    }
    None
}

const USAGE: Value = Value::Null;

fn usage() -> Value {
    json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
           "prompt_tokens_details": {"cached_tokens": 0}})
}

fn completion(model: &str, content: &str, tool_calls: &[ToolCall], finish: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": content, "refusal": null});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
        if content.is_empty() {
            message["content"] = Value::Null;
        }
    }
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_scripted",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage(),
        "x_unknown_extension": {"nested": [1, 2, 3]},
    })
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_scripted",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": USAGE,
    })
    .to_string()
}

/// Splits a reply the way real servers stream: text a few characters at a time, each tool
/// call's id and name first and its arguments in pieces.
fn chunks(model: &str, content: &str, tool_calls: &[ToolCall], finish: &str) -> Vec<String> {
    let mut out = vec![chunk(
        model,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    let chars: Vec<char> = content.chars().collect();
    for piece in chars.chunks(3) {
        let text: String = piece.iter().collect();
        out.push(chunk(model, json!({"content": text}), None));
    }
    for (index, call) in tool_calls.iter().enumerate() {
        let head = json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                          "function": {"name": call.name, "arguments": ""}}]});
        out.push(chunk(model, head, None));
        let args: Vec<char> = call.arguments.chars().collect();
        for piece in args.chunks(4) {
            let text: String = piece.iter().collect();
            let part = json!({"tool_calls": [{"index": index, "function": {"arguments": text}}]});
            out.push(chunk(model, part, None));
        }
    }
    out.push(chunk(model, json!({}), Some(finish)));
    out.push(
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
               "choices": [], "usage": usage()})
        .to_string(),
    );
    out.push("[DONE]".to_string());
    out
}

fn sse(events: Vec<String>, pause: Option<Duration>) -> HttpResponse {
    let body = futures::stream::iter(events)
        .map(|data| Ok::<_, Infallible>(format!("data: {data}\n\n")))
        .chain(futures::stream::once(async move {
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
            Ok(String::new())
        }));
    event_stream(Body::from_stream(body))
}

fn event_stream(body: Body) -> HttpResponse {
    HttpResponse::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
