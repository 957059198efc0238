//! The scripted server's Anthropic Messages, OpenAI Responses and Gemini routes.
//!
//! Each answers the same [`Reply`] script in its provider's wire format, streamed or
//! whole, and is as strict as the real API where its documentation says so: it refuses
//! (400, the provider's error shape) a missing `anthropic-version` or key, unknown fields,
//! tool results that answer no preceding call and calls left unanswered, tool names and
//! schema keywords the provider refuses, and replays that drop what the provider asked to
//! get back (a thinking block's signature, a reasoning item, a thought signature). A
//! refused request is recorded but does not advance the script.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response as HttpResponse};
use futures::StreamExt;
use serde_json::{Value, json};

use super::{RecordedRequest, Reply, Shared, error_response, event_stream, lock};
use crate::ToolCall;

/// What the server handed out that must come back.
#[derive(Debug, Default)]
pub(super) struct Issued {
    /// Anthropic: the signature of the thinking block issued with each `tool_use` id.
    thinking: HashMap<String, String>,
    /// Responses: the reasoning item issued with each `function_call` item id.
    reasoning: HashMap<String, String>,
    /// Gemini: the thought signatures issued.
    signatures: HashSet<String>,
    counter: u64,
}

impl Issued {
    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Dialect {
    Anthropic,
    Responses,
    Gemini,
}

type Problem = (u16, String);

fn bad(message: impl Into<String>) -> Option<Problem> {
    Some((400, message.into()))
}

fn record(path: &str, headers: &HeaderMap, body: &[u8]) -> RecordedRequest {
    RecordedRequest {
        path: path.to_string(),
        headers: headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    }
}

fn next_reply(shared: &Shared, recorded: &RecordedRequest) -> Reply {
    let next = lock(&shared.script).pop_front();
    match (next, &shared.responder) {
        (Some(reply), _) => reply,
        (None, Some(responder)) => responder(recorded),
        (None, None) => Reply::status(500, "script exhausted"),
    }
}

fn dialect_error(
    dialect: Dialect,
    status: u16,
    message: &str,
    retry_after: Option<String>,
) -> HttpResponse {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match dialect {
        Dialect::Responses => return error_response(status, message, retry_after),
        Dialect::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Dialect::Gemini => {
            let kind = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": kind}})
        }
    };
    let mut response = (code, axum::Json(body)).into_response();
    if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
        response.headers_mut().insert("retry-after", value);
    }
    response
}

/// One event of a stream: its `event:` name (if the dialect names events) and its data.
type Event = (Option<&'static str>, Value);

fn stream_of(events: Vec<Event>, pause: Option<Duration>) -> HttpResponse {
    let body = futures::stream::iter(events)
        .map(|(name, data)| {
            let line = match name {
                Some(name) => format!("event: {name}\ndata: {data}\n\n"),
                None => format!("data: {data}\n\n"),
            };
            Ok::<_, Infallible>(line)
        })
        .chain(futures::stream::once(async move {
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
            Ok(String::new())
        }));
    event_stream(Body::from_stream(body))
}

fn raw(status: u16, content_type: Option<String>, body: String) -> HttpResponse {
    let mut response =
        HttpResponse::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK));
    if let Some(content_type) = content_type {
        response = response.header("content-type", content_type);
    }
    response
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// What a reply says, dialect aside.
struct Answer {
    reasoning: String,
    content: String,
    calls: Vec<ToolCall>,
    truncated: bool,
    /// Stop after the first text and go silent this long (then close).
    stall: Option<Duration>,
}

/// The reply as an answer, or the response it is on its own (errors, raw bodies, hangs).
async fn answer_of(dialect: Dialect, reply: Reply) -> Result<Answer, HttpResponse> {
    let plain = |content: String| Answer {
        reasoning: String::new(),
        content,
        calls: Vec::new(),
        truncated: false,
        stall: None,
    };
    Ok(match reply {
        Reply::Message {
            content,
            tool_calls,
        } => Answer {
            calls: tool_calls,
            ..plain(content)
        },
        Reply::Reasoned {
            reasoning,
            content,
            tool_calls,
        } => Answer {
            reasoning,
            calls: tool_calls,
            ..plain(content)
        },
        Reply::Truncated { content } => Answer {
            truncated: true,
            ..plain(content)
        },
        Reply::HeldOpen { content } => plain(content),
        Reply::EmptyChoices => plain(String::new()),
        Reply::Stall { content, pause } => Answer {
            stall: Some(pause),
            ..plain(content)
        },
        Reply::Status {
            status,
            retry_after,
            message,
        } => return Err(dialect_error(dialect, status, &message, retry_after)),
        Reply::Raw {
            status,
            content_type,
            body,
        } => return Err(raw(status, content_type, body)),
        Reply::NoAnswer => std::future::pending().await,
    })
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn arguments(call: &ToolCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or(json!({}))
}

async fn handle(
    dialect: Dialect,
    shared: Arc<Shared>,
    path: String,
    headers: HeaderMap,
    body: axum::body::Bytes,
    stream: Option<bool>,
) -> HttpResponse {
    let recorded = record(&path, &headers, &body);
    let problem = if recorded.body.is_null() {
        bad("the body is not JSON")
    } else {
        let issued = lock(&shared.issued);
        match dialect {
            Dialect::Anthropic => anthropic_problem(&headers, &recorded.body, &issued),
            Dialect::Responses => responses_problem(&headers, &recorded.body, &issued),
            Dialect::Gemini => gemini_problem(&headers, &recorded.body, &issued),
        }
    };
    if let Some((status, message)) = problem {
        lock(&shared.requests).push(recorded);
        return dialect_error(dialect, status, &message, None);
    }
    let reply = next_reply(&shared, &recorded);
    let stream = stream.unwrap_or_else(|| recorded.body["stream"].as_bool().unwrap_or(false));
    let model = recorded.body["model"]
        .as_str()
        .unwrap_or("scripted")
        .to_string();
    let custom = custom_tools(&recorded.body);
    lock(&shared.requests).push(recorded);
    let answer = match answer_of(dialect, reply).await {
        Ok(answer) => answer,
        Err(response) => return response,
    };
    let mut issued = lock(&shared.issued);
    match dialect {
        Dialect::Anthropic => anthropic_answer(&model, answer, stream, &mut issued),
        Dialect::Responses => responses_answer(&model, answer, stream, &mut issued, &custom),
        Dialect::Gemini => gemini_answer(answer, stream, &mut issued),
    }
}

// ---------------------------------------------------------------------------------------
// Anthropic Messages

pub(super) async fn anthropic(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> HttpResponse {
    handle(
        Dialect::Anthropic,
        shared,
        "/v1/messages".into(),
        headers,
        body,
        None,
    )
    .await
}

fn unknown_key(object: &Value, allowed: &[&str], at: &str) -> Option<Problem> {
    let key = object
        .as_object()?
        .keys()
        .find(|k| !allowed.contains(&k.as_str()))?;
    bad(format!("{at}{key}: Extra inputs are not permitted"))
}

fn anthropic_name_ok(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn anthropic_problem(headers: &HeaderMap, body: &Value, issued: &Issued) -> Option<Problem> {
    if !headers.contains_key("anthropic-version") {
        return bad("anthropic-version: header is required");
    }
    if !headers.contains_key("x-api-key") {
        return Some((401, "x-api-key header is required".into()));
    }
    const TOP: &[&str] = &[
        "model",
        "messages",
        "max_tokens",
        "system",
        "tools",
        "tool_choice",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "metadata",
        "thinking",
        "service_tier",
    ];
    if let Some(problem) = unknown_key(body, TOP, "") {
        return Some(problem);
    }
    for field in ["model", "max_tokens", "messages"] {
        if body.get(field).is_none() {
            return bad(format!("{field}: Field required"));
        }
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let at = format!("tools.{i}.");
        if let Some(problem) = unknown_key(
            tool,
            &["name", "description", "input_schema", "cache_control"],
            &at,
        ) {
            return Some(problem);
        }
        let name = tool["name"].as_str().unwrap_or_default();
        if !anthropic_name_ok(name) {
            return bad(format!(
                "{at}name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            ));
        }
        if tool["input_schema"]["type"] != "object" {
            return bad(format!("{at}input_schema.type: Input should be 'object'"));
        }
        if ["oneOf", "anyOf", "allOf"]
            .iter()
            .any(|k| tool["input_schema"].get(*k).is_some())
        {
            return bad(format!(
                "{at}custom.input_schema: input_schema does not support oneOf, allOf, or \
                 anyOf at the top level"
            ));
        }
    }
    let messages = body["messages"].as_array()?;
    if messages.first().is_some_and(|m| m["role"] != "user") {
        return bad("messages.0.role: the first message must use the \"user\" role");
    }
    let mut open_calls: Vec<String> = Vec::new();
    for (k, message) in messages.iter().enumerate() {
        let at = format!("messages.{k}.");
        if let Some(problem) = unknown_key(message, &["role", "content"], &at) {
            return Some(problem);
        }
        let role = message["role"].as_str().unwrap_or_default();
        let blocks: Vec<Value> = match &message["content"] {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks.clone(),
            _ => return bad(format!("{at}content: Input should be a valid list")),
        };
        let allowed: &[&str] = match role {
            "user" => &["text", "image", "tool_result", "document"],
            "assistant" => &["text", "tool_use", "thinking", "redacted_thinking"],
            _ => return bad(format!("{at}role: Input should be 'user' or 'assistant'")),
        };
        let mut answered = Vec::new();
        let mut seen_other = false;
        for (j, block) in blocks.iter().enumerate() {
            let at = format!("{at}content.{j}.");
            let kind = block["type"].as_str().unwrap_or_default();
            if !allowed.contains(&kind) {
                return bad(format!(
                    "{at}type: block type {kind:?} is not allowed in a {role} message"
                ));
            }
            let keys: &[&str] = match kind {
                "text" => &["type", "text", "cache_control", "citations"],
                "image" => &["type", "source", "cache_control"],
                "tool_result" => &[
                    "type",
                    "tool_use_id",
                    "content",
                    "is_error",
                    "cache_control",
                ],
                "tool_use" => &["type", "id", "name", "input", "cache_control"],
                "thinking" => &["type", "thinking", "signature"],
                "redacted_thinking" => &["type", "data"],
                _ => &[
                    "type",
                    "source",
                    "title",
                    "context",
                    "citations",
                    "cache_control",
                ],
            };
            if let Some(problem) = unknown_key(block, keys, &at) {
                return Some(problem);
            }
            if kind == "image" {
                let source = &block["source"];
                let ok = match source["type"].as_str() {
                    Some("base64") => {
                        source["media_type"].is_string() && source["data"].is_string()
                    }
                    Some("url") => source["url"].is_string(),
                    _ => false,
                };
                if !ok {
                    return bad(format!("{at}source: an image needs a base64 or url source"));
                }
            }
            if kind == "tool_result" {
                if seen_other {
                    return bad(format!(
                        "{at}type: tool_result blocks must come before any other content"
                    ));
                }
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                if !open_calls.iter().any(|c| c == id) {
                    return bad(format!(
                        "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each \
                         `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
                for part in block["content"].as_array().into_iter().flatten() {
                    if !matches!(part["type"].as_str(), Some("text" | "image")) {
                        return bad(format!(
                            "{at}content: a tool_result holds text and image blocks only"
                        ));
                    }
                }
                answered.push(id.to_string());
            } else {
                seen_other = true;
            }
        }
        if role == "user" {
            if let Some(missing) = open_calls.iter().find(|c| !answered.contains(c)) {
                return bad(format!(
                    "{at}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}"
                ));
            }
            open_calls.clear();
        } else {
            if let Some(missing) = open_calls.first() {
                return bad(format!(
                    "{at}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}"
                ));
            }
            for block in &blocks {
                if block["type"] == "tool_use" {
                    let id = block["id"].as_str().unwrap_or_default().to_string();
                    if let Some(signature) = issued.thinking.get(&id) {
                        let first = &blocks[0];
                        if first["type"] != "thinking" {
                            return bad(format!(
                                "{at}content.0.type: Expected `thinking` or `redacted_thinking`, but found \
                                 `{}`. When `thinking` is enabled, an assistant message with tool use must \
                                 start with its thinking block",
                                first["type"].as_str().unwrap_or_default()
                            ));
                        }
                        if first["signature"].as_str() != Some(signature) {
                            return bad(format!(
                                "{at}content.0: Invalid `signature` in `thinking` block"
                            ));
                        }
                    }
                    open_calls.push(id);
                }
            }
        }
    }
    None
}

fn anthropic_answer(
    model: &str,
    answer: Answer,
    stream: bool,
    issued: &mut Issued,
) -> HttpResponse {
    let n = issued.next();
    let mut blocks = Vec::new();
    if !answer.reasoning.is_empty() {
        let signature = format!("sig_{n}");
        for call in &answer.calls {
            issued.thinking.insert(call.id.clone(), signature.clone());
        }
        blocks.push(
            json!({"type": "thinking", "thinking": answer.reasoning, "signature": signature}),
        );
    }
    if !answer.content.is_empty() {
        blocks.push(json!({"type": "text", "text": answer.content}));
    }
    for call in &answer.calls {
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments(call)}),
        );
    }
    let stop = if answer.truncated {
        "max_tokens"
    } else if answer.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let id = format!("msg_scripted_{n}");
    if !stream {
        return axum::Json(
            json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 0},
            "x_unknown_extension": {"nested": [1]}}),
        )
        .into_response();
    }
    let mut events: Vec<Event> = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 11, "output_tokens": 1}}}),
    )];
    events.push((Some("ping"), json!({"type": "ping"})));
    for (index, block) in blocks.iter().enumerate() {
        let start = match block["type"].as_str() {
            Some("text") => json!({"type": "text", "text": ""}),
            Some("thinking") => json!({"type": "thinking", "thinking": "", "signature": ""}),
            _ => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        };
        events.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        let delta = |delta: Value| {
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        match block["type"].as_str() {
            Some("text") => {
                for piece in pieces(block["text"].as_str().unwrap_or_default(), 3) {
                    events.push(delta(json!({"type": "text_delta", "text": piece})));
                }
                if let Some(pause) = answer.stall {
                    return stream_of(events, Some(pause));
                }
            }
            Some("thinking") => {
                for piece in pieces(block["thinking"].as_str().unwrap_or_default(), 5) {
                    events.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                }
                events.push(delta(
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ));
            }
            _ => {
                for piece in pieces(&block["input"].to_string(), 4) {
                    events.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
            }
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        Some("message_delta"),
        json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 7}}),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    stream_of(events, None)
}

// ---------------------------------------------------------------------------------------
// OpenAI Responses

pub(super) async fn responses(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> HttpResponse {
    handle(
        Dialect::Responses,
        shared,
        "/v1/responses".into(),
        headers,
        body,
        None,
    )
    .await
}

/// Keywords the Responses API refuses in a strict function schema.
const STRICT_REFUSED: &[&str] = &[
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "dependentRequired",
    "dependentSchemas",
    "prefixItems",
    "contains",
    "uniqueItems",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "default",
];

/// Why `schema` is not a valid strict schema.
fn strict_problem(schema: &Value, at: &str) -> Option<String> {
    let object = schema.as_object()?;
    for key in object.keys() {
        if STRICT_REFUSED.contains(&key.as_str()) {
            return Some(format!("In context=({at}), '{key}' is not permitted."));
        }
    }
    let is_object = object.get("type") == Some(&json!("object"))
        || object
            .get("type")
            .and_then(Value::as_array)
            .is_some_and(|t| t.contains(&json!("object")));
    if is_object {
        if object.get("additionalProperties") != Some(&json!(false)) {
            return Some(format!(
                "In context=({at}), 'additionalProperties' is required to be supplied and to be false."
            ));
        }
        let properties = object.get("properties").and_then(Value::as_object);
        let required: HashSet<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for name in properties.into_iter().flat_map(|p| p.keys()) {
            if !required.contains(name.as_str()) {
                return Some(format!(
                    "In context=({at}), 'required' is required to be supplied and to be an array \
                     including every key in properties. Missing '{name}'."
                ));
            }
        }
        for (name, property) in properties.into_iter().flatten() {
            if let Some(problem) =
                strict_problem(property, &format!("{at}, 'properties', '{name}'"))
            {
                return Some(problem);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = object.get(key).filter(|c| c.is_object())
            && let Some(problem) = strict_problem(child, &format!("{at}, '{key}'"))
        {
            return Some(problem);
        }
    }
    for key in ["anyOf"] {
        for (i, child) in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(problem) = strict_problem(child, &format!("{at}, '{key}', {i}")) {
                return Some(problem);
            }
        }
    }
    for (name, child) in object
        .get("$defs")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(problem) = strict_problem(child, &format!("{at}, '$defs', '{name}'")) {
            return Some(problem);
        }
    }
    None
}

pub(super) fn openai_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn responses_problem(headers: &HeaderMap, body: &Value, issued: &Issued) -> Option<Problem> {
    if !headers.contains_key("authorization") {
        return Some((401, "You didn't provide an API key.".into()));
    }
    const TOP: &[&str] = &[
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "store",
        "include",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "metadata",
        "previous_response_id",
        "text",
        "truncation",
        "user",
        "service_tier",
        "background",
        "prompt_cache_key",
        "safety_identifier",
        "max_tool_calls",
        "top_logprobs",
        "stream_options",
        "conversation",
        "prompt",
    ];
    let unknown = |object: &Value, allowed: &[&str], at: &str| -> Option<Problem> {
        let key = object
            .as_object()?
            .keys()
            .find(|k| !allowed.contains(&k.as_str()))?;
        bad(format!("Unknown parameter: '{at}{key}'."))
    };
    if let Some(problem) = unknown(body, TOP, "") {
        return Some(problem);
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let at = format!("tools[{i}].");
        let custom = tool["type"] == "custom";
        let keys: &[&str] = if custom {
            &["type", "name", "description", "format"]
        } else {
            &["type", "name", "description", "parameters", "strict"]
        };
        if let Some(problem) = unknown(tool, keys, &at) {
            return Some(problem);
        }
        let name = tool["name"].as_str().unwrap_or_default();
        if !openai_name_ok(name) {
            return bad(format!(
                "Invalid '{at}name': string does not match pattern '^[a-zA-Z0-9_-]+$'."
            ));
        }
        if custom {
            if let Some(problem) = custom_format_problem(&tool["format"], &format!("{at}format")) {
                return bad(problem);
            }
            continue;
        }
        // Function tools are strict unless they say otherwise.
        if tool["strict"] != json!(false)
            && let Some(problem) = strict_problem(&tool["parameters"], "root")
        {
            return bad(format!("Invalid schema for function '{name}': {problem}"));
        }
    }
    let input = match &body["input"] {
        Value::String(_) => return None,
        Value::Array(items) => items,
        _ => return bad("Missing required parameter: 'input'."),
    };
    let mut calls: Vec<String> = Vec::new();
    let mut custom_calls: HashSet<String> = HashSet::new();
    let mut outputs: HashSet<String> = HashSet::new();
    let mut reasoning_seen: HashSet<String> = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        let at = format!("input[{i}].");
        let kind = item["type"].as_str().unwrap_or("message");
        let keys: &[&str] = match kind {
            "message" => &["type", "role", "content", "id", "status"],
            "function_call" => &["type", "call_id", "name", "arguments", "id", "status"],
            "custom_tool_call" => &["type", "call_id", "name", "input", "id", "status"],
            "function_call_output" | "custom_tool_call_output" => {
                &["type", "call_id", "output", "id", "status"]
            }
            "reasoning" => &["type", "id", "summary", "encrypted_content", "content"],
            other => {
                return bad(format!(
                    "Invalid value: '{other}'. Supported values are: 'message', 'function_call', 'function_call_output', 'custom_tool_call', 'custom_tool_call_output', 'reasoning'."
                ));
            }
        };
        if let Some(problem) = unknown(item, keys, &at) {
            return Some(problem);
        }
        match kind {
            "message" => {
                for (j, part) in item["content"].as_array().into_iter().flatten().enumerate() {
                    let keys: &[&str] = match part["type"].as_str().unwrap_or_default() {
                        "input_text" | "output_text" => {
                            &["type", "text", "annotations", "logprobs"]
                        }
                        "input_image" => &["type", "image_url", "detail", "file_id"],
                        other => {
                            return bad(format!(
                                "Invalid value: '{other}' at {at}content[{j}].type"
                            ));
                        }
                    };
                    if let Some(problem) = unknown(part, keys, &format!("{at}content[{j}].")) {
                        return Some(problem);
                    }
                }
            }
            "reasoning" => {
                let id = item["id"].as_str().unwrap_or_default();
                if !issued.reasoning.values().any(|r| r == id) {
                    return Some((404, format!("Item with id '{id}' not found.")));
                }
                reasoning_seen.insert(id.to_string());
            }
            "custom_tool_call" => {
                if !item["input"].is_string() {
                    return bad(format!("Invalid type for '{at}input': expected a string."));
                }
                let id = item["call_id"].as_str().unwrap_or_default().to_string();
                custom_calls.insert(id.clone());
                calls.push(id);
            }
            "function_call" => {
                if let Some(id) = item["id"].as_str()
                    && let Some(reasoning) = issued.reasoning.get(id)
                    && !reasoning_seen.contains(reasoning)
                {
                    return bad(format!(
                        "Item '{id}' of type 'function_call' was provided without its required \
                         'reasoning' item: '{reasoning}'."
                    ));
                }
                calls.push(item["call_id"].as_str().unwrap_or_default().to_string());
            }
            _ => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !calls.iter().any(|c| c == id) {
                    return bad(format!(
                        "No tool call found for function call output with call_id {id}."
                    ));
                }
                // A custom call is answered by a custom output, a function call by a function
                // output.
                if custom_calls.contains(id) != (kind == "custom_tool_call_output") {
                    return bad(format!(
                        "Invalid {at}type: '{kind}' does not answer the call with call_id {id}."
                    ));
                }
                if let Value::Array(parts) = &item["output"] {
                    for part in parts {
                        if !matches!(
                            part["type"].as_str(),
                            Some("input_text" | "input_image" | "input_file")
                        ) {
                            return bad(format!(
                                "Invalid {at}output: parts are input_text, input_image or input_file"
                            ));
                        }
                    }
                }
                outputs.insert(id.to_string());
            }
        }
    }
    if let Some(call) = calls.iter().find(|c| !outputs.contains(*c)) {
        return bad(format!("No tool output found for function call {call}."));
    }
    None
}

/// Why a custom tool's `format` is not one the Responses API takes.
fn custom_format_problem(format: &Value, at: &str) -> Option<String> {
    match format["type"].as_str() {
        None if format.is_null() => None,
        Some("text") => None,
        Some("grammar") => {
            let syntax = format["syntax"].as_str().unwrap_or_default();
            if !matches!(syntax, "lark" | "regex") {
                return Some(format!(
                    "Invalid value: '{syntax}' at {at}.syntax: use 'lark' or 'regex'."
                ));
            }
            match format["definition"].as_str() {
                Some(definition) if !definition.trim().is_empty() => None,
                _ => Some(format!("Missing required parameter: '{at}.definition'.")),
            }
        }
        _ => Some(format!(
            "Invalid value at {at}.type: use 'text' or 'grammar'."
        )),
    }
}

/// The names of the request's custom (freeform) tools.
fn custom_tools(body: &Value) -> HashSet<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|tool| tool["type"] == "custom")
        .filter_map(|tool| Some(tool["name"].as_str()?.to_string()))
        .collect()
}

/// The text of a scripted call to a custom tool: its arguments' one string value when they
/// are a JSON object holding one, else the arguments as written.
fn custom_input(call: &ToolCall) -> String {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(object)) if object.len() == 1 => match object.values().next() {
            Some(Value::String(text)) => text.clone(),
            _ => call.arguments.clone(),
        },
        _ => call.arguments.clone(),
    }
}

fn responses_answer(
    model: &str,
    answer: Answer,
    stream: bool,
    issued: &mut Issued,
    custom: &HashSet<String>,
) -> HttpResponse {
    let n = issued.next();
    let mut output = Vec::new();
    let reasoning_id = format!("rs_{n}");
    if !answer.reasoning.is_empty() {
        output.push(json!({"type": "reasoning", "id": reasoning_id,
            "summary": [{"type": "summary_text", "text": answer.reasoning}],
            "encrypted_content": format!("enc_{n}"), "status": "completed"}));
    }
    if !answer.content.is_empty() {
        output.push(json!({"type": "message", "id": format!("msg_{n}"), "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": answer.content, "annotations": []}]}));
    }
    for (i, call) in answer.calls.iter().enumerate() {
        let id = format!("fc_{n}_{i}");
        if !answer.reasoning.is_empty() {
            issued.reasoning.insert(id.clone(), reasoning_id.clone());
        }
        output.push(if custom.contains(call.name.as_str()) {
            json!({"type": "custom_tool_call", "id": id, "call_id": call.id,
            "name": call.name, "input": custom_input(call), "status": "completed"})
        } else {
            json!({"type": "function_call", "id": id, "call_id": call.id,
            "name": call.name, "arguments": call.arguments, "status": "completed"})
        });
    }
    let (status, incomplete) = if answer.truncated {
        ("incomplete", json!({"reason": "max_output_tokens"}))
    } else {
        ("completed", Value::Null)
    };
    let response = |status: &str, output: Value| {
        json!({"id": format!("resp_{n}"), "object": "response", "created_at": 1_700_000_000,
            "status": status, "incomplete_details": incomplete, "model": model, "output": output,
            "usage": {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18,
                      "output_tokens_details": {"reasoning_tokens": 0}},
            "error": null, "x_unknown_extension": {"nested": [1]}})
    };
    if !stream {
        return axum::Json(response(status, Value::Array(output))).into_response();
    }
    let mut sequence = 0;
    let mut events: Vec<Event> = Vec::new();
    let mut push = |events: &mut Vec<Event>, mut data: Value| {
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        events.push((None, data));
    };
    push(
        &mut events,
        json!({"type": "response.created", "response": response("in_progress", json!([]))}),
    );
    for (index, item) in output.iter().enumerate() {
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("message") => added["content"] = json!([]),
            Some("function_call") => added["arguments"] = json!(""),
            Some("custom_tool_call") => added["input"] = json!(""),
            Some("reasoning") => added["summary"] = json!([]),
            _ => {}
        }
        push(
            &mut events,
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        );
        let item_id = item["id"].clone();
        match item["type"].as_str() {
            Some("message") => {
                let text = item["content"][0]["text"].as_str().unwrap_or_default();
                for piece in pieces(text, 3) {
                    push(
                        &mut events,
                        json!({"type": "response.output_text.delta", "item_id": item_id,
                        "output_index": index, "content_index": 0, "delta": piece}),
                    );
                }
                if let Some(pause) = answer.stall {
                    return stream_of(events, Some(pause));
                }
                push(
                    &mut events,
                    json!({"type": "response.output_text.done", "item_id": item_id,
                    "output_index": index, "content_index": 0, "text": text}),
                );
            }
            Some("function_call") => {
                let args = item["arguments"].as_str().unwrap_or_default();
                for piece in pieces(args, 4) {
                    push(
                        &mut events,
                        json!({"type": "response.function_call_arguments.delta",
                        "item_id": item_id, "output_index": index, "delta": piece}),
                    );
                }
                push(
                    &mut events,
                    json!({"type": "response.function_call_arguments.done",
                    "item_id": item_id, "output_index": index, "arguments": args}),
                );
            }
            Some("custom_tool_call") => {
                let text = item["input"].as_str().unwrap_or_default();
                for piece in pieces(text, 4) {
                    push(
                        &mut events,
                        json!({"type": "response.custom_tool_call_input.delta",
                        "item_id": item_id, "output_index": index, "delta": piece}),
                    );
                }
                push(
                    &mut events,
                    json!({"type": "response.custom_tool_call_input.done",
                    "item_id": item_id, "output_index": index, "input": text}),
                );
            }
            Some("reasoning") => {
                let text = item["summary"][0]["text"].as_str().unwrap_or_default();
                for piece in pieces(text, 5) {
                    push(
                        &mut events,
                        json!({"type": "response.reasoning_summary_text.delta",
                        "item_id": item_id, "output_index": index, "summary_index": 0, "delta": piece}),
                    );
                }
            }
            _ => {}
        }
        push(
            &mut events,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    let done = if answer.truncated {
        "response.incomplete"
    } else {
        "response.completed"
    };
    push(
        &mut events,
        json!({"type": done, "response": response(status, Value::Array(output))}),
    );
    stream_of(events, None)
}

// ---------------------------------------------------------------------------------------
// Gemini

pub(super) async fn gemini(
    State(shared): State<Arc<Shared>>,
    Path(action): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> HttpResponse {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.to_string());
    let stream = match action.rsplit_once(':') {
        Some((_, "generateContent")) => false,
        Some((_, "streamGenerateContent")) => {
            if !uri
                .query()
                .is_some_and(|q| q.split('&').any(|p| p == "alt=sse"))
            {
                return dialect_error(
                    Dialect::Gemini,
                    400,
                    "this server streams only with alt=sse",
                    None,
                );
            }
            true
        }
        _ => {
            return dialect_error(
                Dialect::Gemini,
                404,
                &format!("unknown method {action}"),
                None,
            );
        }
    };
    handle(Dialect::Gemini, shared, path, headers, body, Some(stream)).await
}

/// The `Schema` fields of Gemini's function declarations.
const GEMINI_SCHEMA: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

const GEMINI_TYPES: &[&str] = &[
    "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL",
];

fn gemini_schema_problem(schema: &Value, at: &str) -> Option<String> {
    let Some(object) = schema.as_object() else {
        return Some(format!(
            "Invalid value at '{at}': a schema must be an object"
        ));
    };
    for (key, value) in object {
        if !GEMINI_SCHEMA.contains(&key.as_str()) {
            return Some(format!(
                "Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
            ));
        }
        match key.as_str() {
            "type" => {
                let ok = value
                    .as_str()
                    .is_some_and(|t| GEMINI_TYPES.contains(&t.to_ascii_uppercase().as_str()));
                if !ok {
                    return Some(format!(
                        "Invalid value at '{at}.type' ({value}): not a Type"
                    ));
                }
            }
            "enum"
                if !value
                    .as_array()
                    .is_some_and(|v| v.iter().all(Value::is_string)) =>
            {
                return Some(format!(
                    "Invalid value at '{at}.enum': enum values are strings"
                ));
            }
            "properties" => {
                for (name, child) in value.as_object().into_iter().flatten() {
                    if let Some(problem) =
                        gemini_schema_problem(child, &format!("{at}.properties[{name}]"))
                    {
                        return Some(problem);
                    }
                }
            }
            "items" => {
                if let Some(problem) = gemini_schema_problem(value, &format!("{at}.items")) {
                    return Some(problem);
                }
            }
            "anyOf" => {
                for (i, child) in value.as_array().into_iter().flatten().enumerate() {
                    if let Some(problem) =
                        gemini_schema_problem(child, &format!("{at}.any_of[{i}]"))
                    {
                        return Some(problem);
                    }
                }
            }
            _ => {}
        }
    }
    None
}

fn gemini_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

fn gemini_problem(headers: &HeaderMap, body: &Value, issued: &Issued) -> Option<Problem> {
    if !headers.contains_key("x-goog-api-key") {
        return Some((403, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.".into()));
    }
    let unknown = |object: &Value, allowed: &[&str], at: &str| -> Option<Problem> {
        let key = object
            .as_object()?
            .keys()
            .find(|k| !allowed.contains(&k.as_str()))?;
        bad(format!(
            "Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
        ))
    };
    const TOP: &[&str] = &[
        "contents",
        "tools",
        "toolConfig",
        "systemInstruction",
        "generationConfig",
        "safetySettings",
        "cachedContent",
    ];
    if let Some(problem) = unknown(body, TOP, "") {
        return Some(problem);
    }
    for (t, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        for (i, declaration) in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("tools[{t}].function_declarations[{i}]");
            if let Some(problem) = unknown(
                declaration,
                &["name", "description", "parameters", "response", "behavior"],
                &at,
            ) {
                return Some(problem);
            }
            let name = declaration["name"].as_str().unwrap_or_default();
            if !gemini_name_ok(name) {
                return bad(format!(
                    "* GenerateContentRequest.{at}.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64."
                ));
            }
            if let Some(parameters) = declaration.get("parameters")
                && let Some(problem) =
                    gemini_schema_problem(parameters, &format!("{at}.parameters"))
            {
                return bad(problem);
            }
        }
    }
    let contents = body["contents"].as_array()?;
    // The current turn starts after the last user content with text (not results).
    let current = contents
        .iter()
        .rposition(|c| {
            c["role"] == "user"
                && c["parts"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p.get("text").is_some()))
                && !c["parts"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()))
        })
        .unwrap_or(0);
    let mut pending: Option<Vec<String>> = None;
    for (k, content) in contents.iter().enumerate() {
        let at = format!("contents[{k}]");
        if let Some(problem) = unknown(content, &["role", "parts"], &at) {
            return Some(problem);
        }
        let role = content["role"].as_str().unwrap_or_default();
        if role != "user" && role != "model" {
            return bad(format!("Please use a valid role: user, model. ({at})"));
        }
        let parts = content["parts"].as_array().cloned().unwrap_or_default();
        let mut calls = Vec::new();
        let mut responses = Vec::new();
        for (j, part) in parts.iter().enumerate() {
            let at = format!("{at}.parts[{j}]");
            if let Some(problem) = unknown(
                part,
                &[
                    "text",
                    "inlineData",
                    "fileData",
                    "functionCall",
                    "functionResponse",
                    "thought",
                    "thoughtSignature",
                ],
                &at,
            ) {
                return Some(problem);
            }
            if let Some(call) = part.get("functionCall") {
                if let Some(problem) = unknown(
                    call,
                    &["name", "args", "id"],
                    &format!("{at}.function_call"),
                ) {
                    return Some(problem);
                }
                let name = call["name"].as_str().unwrap_or_default();
                if k > current && calls.is_empty() {
                    match part["thoughtSignature"].as_str() {
                        None => {
                            return bad(format!(
                                "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{name}`, position {}.",
                                j + 1
                            ));
                        }
                        Some(sig)
                            if sig != crate::dialect::FOREIGN_SIGNATURE
                                && !issued.signatures.contains(sig) =>
                        {
                            return bad("Invalid thought signature.");
                        }
                        Some(_) => {}
                    }
                }
                calls.push(name.to_string());
            }
            if let Some(response) = part.get("functionResponse") {
                if let Some(problem) = unknown(
                    response,
                    &["name", "response", "id", "parts"],
                    &format!("{at}.function_response"),
                ) {
                    return Some(problem);
                }
                if !response["response"].is_object() {
                    return bad(format!(
                        "Invalid value at '{at}.function_response.response': a Struct is expected"
                    ));
                }
                responses.push(response["name"].as_str().unwrap_or_default().to_string());
            }
            if let Some(data) = part.get("inlineData")
                && !(data["mimeType"].is_string() && data["data"].is_string())
            {
                return bad(format!("{at}.inline_data: mimeType and data are required"));
            }
        }
        match pending.take() {
            Some(called) => {
                if role != "user" || responses.len() != called.len() {
                    return bad(
                        "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
                    );
                }
                let mut sorted = called.clone();
                sorted.sort();
                let mut answered = responses.clone();
                answered.sort();
                if sorted != answered {
                    return bad(format!(
                        "{at}: function responses {answered:?} do not answer the calls {sorted:?}"
                    ));
                }
            }
            None if !responses.is_empty() => {
                return bad(format!(
                    "{at}: a function response turn must come right after a function call turn"
                ));
            }
            None => {}
        }
        if role == "model" && !calls.is_empty() {
            pending = Some(calls);
        }
    }
    None
}

fn gemini_answer(answer: Answer, stream: bool, issued: &mut Issued) -> HttpResponse {
    let n = issued.next();
    let mut parts = Vec::new();
    if !answer.reasoning.is_empty() {
        parts.push(json!({"text": answer.reasoning, "thought": true}));
    }
    if !answer.content.is_empty() {
        parts.push(json!({"text": answer.content}));
    }
    for (i, call) in answer.calls.iter().enumerate() {
        let mut part = json!({"functionCall": {"name": call.name, "args": arguments(call)}});
        // Only the first call of a turn carries the signature.
        if i == 0 {
            let signature = format!("c2lnbmF0dXJl{n}");
            issued.signatures.insert(signature.clone());
            part["thoughtSignature"] = json!(signature);
        }
        parts.push(part);
    }
    let finish = if answer.truncated {
        "MAX_TOKENS"
    } else {
        "STOP"
    };
    let usage = json!({"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18});
    let chunk = |parts: Vec<Value>, last: bool| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        let mut chunk =
            json!({"modelVersion": "scripted-gemini", "responseId": format!("resp_{n}")});
        if last {
            candidate["finishReason"] = json!(finish);
            chunk["usageMetadata"] = usage.clone();
        }
        chunk["candidates"] = json!([candidate]);
        chunk
    };
    if !stream {
        return axum::Json(chunk(parts, true)).into_response();
    }
    let mut split = Vec::new();
    for part in parts {
        match part.get("text").and_then(Value::as_str) {
            Some(text) if part.get("thoughtSignature").is_none() => {
                for piece in pieces(text, 3) {
                    let mut piece_part = part.clone();
                    piece_part["text"] = json!(piece);
                    split.push(piece_part);
                }
            }
            _ => split.push(part),
        }
    }
    let count = split.len();
    let mut events: Vec<Event> = Vec::new();
    if count == 0 {
        events.push((None, chunk(vec![json!({"text": ""})], true)));
    }
    for (i, part) in split.into_iter().enumerate() {
        let is_text = part.get("text").is_some();
        events.push((
            None,
            chunk(vec![part], i + 1 == count && answer.stall.is_none()),
        ));
        if is_text && let Some(pause) = answer.stall {
            return stream_of(events, Some(pause));
        }
    }
    stream_of(events, None)
}
