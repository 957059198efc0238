//! Anthropic Messages (`POST /v1/messages`, `anthropic-version` header).
//!
//! System messages go in the top-level `system`; an assistant turn is `text`, `thinking`
//! (replayed) and `tool_use` blocks; tool results are `tool_result` blocks (with `is_error`
//! and image blocks) at the start of the next user message, so consecutive tool and user
//! messages are merged into one. The stream is `message_start`, `content_block_start` /
//! `_delta` (`text_delta`, `input_json_delta`, `thinking_delta`, `signature_delta`) /
//! `_stop`, `message_delta` (stop reason, output tokens), `message_stop`; `ping` is
//! ignored and `error` ends it with that error.

use serde_json::{Map, Value, json};

use super::{
    Decoder, arguments_object, bad_event, check_answer, data_url, embedded_error, event_json,
    finish_reason, str_at, system_text, text_and_images, u64_at,
};
use crate::declare::WireTools;
use crate::{
    Delta, Message, ModelError, ReplayItem, Request, Response, Role, ToolCall, ToolCallDelta,
    ToolChoice, Usage,
};

/// The API version sent in `anthropic-version`.
pub(crate) const VERSION: &str = "2023-06-01";

/// The replay tag of this provider.
const PROVIDER: &str = "anthropic";

/// `max_tokens` is required by the API; this is sent when the request sets none.
const DEFAULT_MAX_TOKENS: u32 = 8192;

fn image_block(url: &str) -> Value {
    match data_url(url) {
        Some((media_type, data)) => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

fn user_blocks(message: &Message, images: bool) -> Vec<Value> {
    let (text, urls) = text_and_images(message);
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for url in urls {
        if images {
            blocks.push(image_block(url));
        } else {
            let note = crate::ContentPart::ImageUrl {
                url: url.to_string(),
            }
            .as_text();
            blocks.push(json!({"type": "text", "text": note}));
        }
    }
    blocks
}

fn assistant_blocks(message: &Message, tools: &WireTools) -> Vec<Value> {
    let mut blocks: Vec<Value> = message
        .replay_of(PROVIDER)
        .filter(|r| r.tool_call.is_none())
        .map(|r| r.item.clone())
        .collect();
    if !message.content.is_empty() {
        blocks.push(json!({"type": "text", "text": message.content}));
    }
    for call in &message.tool_calls {
        blocks.push(json!({"type": "tool_use", "id": call.id,
            "name": tools.wire_name(&call.name), "input": arguments_object(&call.arguments)}));
    }
    blocks
}

fn tool_result(message: &Message, images: bool) -> Value {
    let mut content = user_blocks(message, images);
    if content.is_empty() {
        content.push(json!({"type": "text", "text": "(no output)"}));
    }
    let mut block = json!({"type": "tool_result",
        "tool_use_id": message.tool_call_id.clone().unwrap_or_default(), "content": content});
    if message.is_error {
        block["is_error"] = json!(true);
    }
    block
}

/// The request body.
pub(crate) fn body(model: &str, request: &Request, tools: &WireTools, images: bool) -> Value {
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", user_blocks(message, images)),
            Role::Tool => ("user", vec![tool_result(message, images)]),
            Role::Assistant => ("assistant", assistant_blocks(message, tools)),
        };
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            // Tool results must lead the user message that follows the calls.
            Some((last, existing)) if *last == role => {
                let results = blocks.iter().filter(|b| b["type"] == "tool_result").count();
                if results > 0 {
                    let at = existing
                        .iter()
                        .take_while(|b| b["type"] == "tool_result")
                        .count();
                    let mut blocks = blocks;
                    let tail = existing.split_off(at);
                    existing.append(&mut blocks);
                    existing.extend(tail);
                } else {
                    existing.extend(blocks);
                }
            }
            _ => messages.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let config = &request.config;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(config.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    body.insert("messages".into(), Value::Array(messages));
    if let Some(system) = system_text(request) {
        body.insert("system".into(), json!(system));
    }
    if !tools.tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools.tools.clone()));
        let mut choice = match &request.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": tools.wire_name(name)}),
        };
        if request.parallel_tool_calls == Some(false) && choice["type"] != "none" {
            choice["disable_parallel_tool_use"] = json!(true);
        }
        body.insert("tool_choice".into(), choice);
    }
    if config.stream {
        body.insert("stream".into(), json!(true));
    }
    if let Some(t) = config.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = config.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if !config.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(config.stop));
    }
    Value::Object(body)
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        prompt_tokens: input,
        completion_tokens: output,
        total_tokens: input + output,
    }
}

/// What the blocks of an answer make: the message with its replay items.
fn message_of(blocks: &[Value]) -> Message {
    let mut message = Message::assistant("");
    for block in blocks {
        match str_at(block, "type") {
            "text" => message.content.push_str(str_at(block, "text")),
            "tool_use" => {
                let input = block.get("input").cloned().unwrap_or(json!({}));
                message.tool_calls.push(ToolCall::new(
                    str_at(block, "id"),
                    str_at(block, "name"),
                    input.to_string(),
                ));
            }
            "thinking" | "redacted_thinking" => {
                message.reasoning.push_str(str_at(block, "thinking"));
                message
                    .replay
                    .push(ReplayItem::new(PROVIDER, None, block.clone()));
            }
            _ => {}
        }
    }
    message
}

/// Reads a whole answer.
pub(crate) fn parse(value: &Value) -> Result<Response, ModelError> {
    let blocks = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::Decode("the answer has no `content` array".into()))?;
    let u = &value["usage"];
    Ok(Response {
        id: str_at(value, "id").to_string(),
        model: str_at(value, "model").to_string(),
        partial: false,
        delta: Delta::default(),
        message: Some(message_of(blocks)),
        finish_reason: value
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(finish_reason),
        usage: Some(usage(u64_at(u, "input_tokens"), u64_at(u, "output_tokens"))),
        warnings: Vec::new(),
    })
}

/// Reads the event stream.
#[derive(Default)]
pub(crate) struct StreamDecoder {
    id: String,
    model: String,
    /// The blocks so far, by their index; tool inputs as JSON text while they stream.
    blocks: Vec<Value>,
    /// Each block's tool-call position, when it is a `tool_use`.
    call_of: Vec<Option<usize>>,
    calls: usize,
    input_tokens: u64,
    output_tokens: u64,
    stop_reason: Option<String>,
    started: bool,
    stopped: bool,
}

impl StreamDecoder {
    fn block(&mut self, index: usize, data: &str) -> Result<&mut Value, ModelError> {
        self.blocks
            .get_mut(index)
            .ok_or_else(|| bad_event(data, format!("no content block {index} was started")))
    }
}

impl Decoder for StreamDecoder {
    fn event(&mut self, _event: &str, data: &str) -> Result<Delta, ModelError> {
        let value = event_json(data)?;
        let mut delta = Delta::default();
        match str_at(&value, "type") {
            "message_start" => {
                let message = &value["message"];
                self.started = true;
                self.id = str_at(message, "id").to_string();
                self.model = str_at(message, "model").to_string();
                self.input_tokens = u64_at(&message["usage"], "input_tokens");
                self.output_tokens = u64_at(&message["usage"], "output_tokens");
            }
            "content_block_start" => {
                let index = value["index"].as_u64().unwrap_or(self.blocks.len() as u64) as usize;
                if index != self.blocks.len() {
                    return Err(bad_event(data, "content blocks out of order"));
                }
                let mut block = value["content_block"].clone();
                let call = if block["type"] == "tool_use" {
                    self.calls += 1;
                    delta.tool_calls.push(ToolCallDelta {
                        index: self.calls - 1,
                        id: Some(str_at(&block, "id").to_string()),
                        name: Some(str_at(&block, "name").to_string()),
                        arguments: String::new(),
                    });
                    // The input streams as JSON text; a whole input in the start block
                    // (some proxies) is kept unless deltas follow.
                    let start = block["input"].clone();
                    block["_partial"] = json!("");
                    block["_start"] = start;
                    Some(self.calls - 1)
                } else {
                    if block["type"] == "text" {
                        delta.content = str_at(&block, "text").to_string();
                    }
                    None
                };
                self.blocks.push(block);
                self.call_of.push(call);
            }
            "content_block_delta" => {
                let index = value["index"].as_u64().unwrap_or(u64::MAX) as usize;
                let call = self.call_of.get(index).copied().flatten();
                let piece = &value["delta"];
                let block = self.block(index, data)?;
                match str_at(piece, "type") {
                    "text_delta" => {
                        let text = str_at(piece, "text");
                        let mut all = str_at(block, "text").to_string();
                        all.push_str(text);
                        block["text"] = json!(all);
                        delta.content = text.to_string();
                    }
                    "input_json_delta" => {
                        let text = str_at(piece, "partial_json");
                        let mut all = str_at(block, "_partial").to_string();
                        all.push_str(text);
                        block["_partial"] = json!(all);
                        delta.tool_calls.push(ToolCallDelta {
                            index: call.unwrap_or_default(),
                            arguments: text.to_string(),
                            ..ToolCallDelta::default()
                        });
                    }
                    "thinking_delta" => {
                        let text = str_at(piece, "thinking");
                        let mut all = str_at(block, "thinking").to_string();
                        all.push_str(text);
                        block["thinking"] = json!(all);
                        delta.reasoning = text.to_string();
                    }
                    "signature_delta" => {
                        let mut all = str_at(block, "signature").to_string();
                        all.push_str(str_at(piece, "signature"));
                        block["signature"] = json!(all);
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = value["index"].as_u64().unwrap_or(u64::MAX) as usize;
                let block = self.block(index, data)?;
                if block["type"] == "tool_use" {
                    let partial = str_at(block, "_partial").to_string();
                    let input = if partial.trim().is_empty() {
                        block["_start"].clone()
                    } else {
                        serde_json::from_str(&partial).map_err(|e| {
                            bad_event(data, format!("the input of a tool_use is not JSON: {e}"))
                        })?
                    };
                    let object = block.as_object_mut().expect("blocks are objects");
                    object.remove("_partial");
                    object.remove("_start");
                    object.insert(
                        "input".into(),
                        if input.is_null() { json!({}) } else { input },
                    );
                }
            }
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(output) = value["usage"]["output_tokens"].as_u64() {
                    self.output_tokens = output;
                }
                if let Some(input) = value["usage"]["input_tokens"].as_u64() {
                    self.input_tokens = input;
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                return Err(embedded_error(&value)
                    .unwrap_or_else(|| bad_event(data, "an error event without an error")));
            }
            // ping, and event types added later.
            _ => {}
        }
        Ok(delta)
    }

    fn complete(&self) -> bool {
        self.stopped
    }

    fn finish(&mut self) -> Result<Response, ModelError> {
        if !self.started || !self.stopped {
            return Err(ModelError::Decode(
                "the event stream ended before `message_stop`".into(),
            ));
        }
        if self.blocks.iter().any(|b| b.get("_partial").is_some()) {
            return Err(ModelError::Decode(
                "the event stream ended inside a tool_use block".into(),
            ));
        }
        check_answer(Response {
            id: std::mem::take(&mut self.id),
            model: std::mem::take(&mut self.model),
            partial: false,
            delta: Delta::default(),
            message: Some(message_of(&self.blocks)),
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: Some(usage(self.input_tokens, self.output_tokens)),
            warnings: Vec::new(),
        })
    }
}
