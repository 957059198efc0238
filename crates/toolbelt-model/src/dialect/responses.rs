//! The OpenAI Responses API (`POST /v1/responses`).
//!
//! The conversation is a list of `input` items: messages (`input_text`, `input_image`),
//! `function_call` items for the assistant's calls and `function_call_output` items for
//! their results (text, or text and images); a call to a freeform tool is a
//! `custom_tool_call` whose `input` is the tool's one argument, answered by a
//! `custom_tool_call_output`. System messages go in `instructions`. Requests
//! are stateless (`store: false`) and ask for `reasoning.encrypted_content`, so reasoning
//! items come back whole: they are kept as replay items and sent again before the calls
//! they led to, as reasoning models require. The stream's `response.output_text.delta`,
//! `response.reasoning_summary_text.delta`, `response.output_item.added` and
//! `response.function_call_arguments.delta` events are the deltas; `response.completed` (or
//! `.incomplete`) carries the whole response, read like a non-streamed one; `.failed` and
//! `error` end the stream with their error.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{
    Decoder, bad_event, check_answer, embedded_error, event_json, str_at, system_text, u64_at,
};
use crate::declare::WireTools;
use crate::{
    ContentPart, Delta, FinishReason, Message, ModelError, ReplayItem, Request, Response, Role,
    ToolCall, ToolCallDelta, ToolChoice, Usage,
};

const PROVIDER: &str = "openai-responses";

fn content_parts(message: &Message, images: bool) -> Vec<Value> {
    let mut parts = Vec::new();
    if !message.content.is_empty() {
        parts.push(json!({"type": "input_text", "text": message.content}));
    }
    for part in &message.parts {
        match part {
            ContentPart::Text { text } => parts.push(json!({"type": "input_text", "text": text})),
            ContentPart::ImageUrl { url } if images => {
                parts.push(json!({"type": "input_image", "image_url": url}));
            }
            other => parts.push(json!({"type": "input_text", "text": other.as_text()})),
        }
    }
    parts
}

/// The request body.
pub(crate) fn body(model: &str, request: &Request, tools: &WireTools, images: bool) -> Value {
    let mut input = Vec::new();
    // The ids of calls made to freeform tools: their results are custom outputs.
    let mut custom_calls = HashSet::new();
    for message in &request.messages {
        match message.role {
            Role::System => {}
            Role::User => {
                let content = content_parts(message, images);
                if !content.is_empty() {
                    input.push(json!({"type": "message", "role": "user", "content": content}));
                }
            }
            Role::Assistant => {
                input.extend(
                    message
                        .replay_of(PROVIDER)
                        .filter(|r| r.tool_call.is_none())
                        .map(|r| r.item.clone()),
                );
                if !message.content.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": message.content}]}));
                }
                for (i, call) in message.tool_calls.iter().enumerate() {
                    let name = tools.wire_name(&call.name);
                    let mut item = match tools.freeform_argument(name) {
                        Some(argument) => {
                            custom_calls.insert(call.id.as_str());
                            json!({"type": "custom_tool_call", "call_id": call.id,
                                "name": name, "input": freeform_text(call.arguments.as_str(), argument)})
                        }
                        None => json!({"type": "function_call", "call_id": call.id,
                            "name": name, "arguments": call.arguments}),
                    };
                    if let Some(id) = message
                        .replay_of(PROVIDER)
                        .find(|r| r.tool_call == Some(i))
                        .and_then(|r| r.item.get("id"))
                    {
                        item["id"] = id.clone();
                    }
                    input.push(item);
                }
            }
            Role::Tool => {
                let id = message.tool_call_id.clone().unwrap_or_default();
                let output = if message.parts.is_empty() {
                    json!(message.content)
                } else {
                    Value::Array(content_parts(message, images))
                };
                let kind = if custom_calls.contains(id.as_str()) {
                    "custom_tool_call_output"
                } else {
                    "function_call_output"
                };
                input.push(json!({"type": kind, "call_id": id, "output": output}));
            }
        }
    }
    let config = &request.config;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("input".into(), Value::Array(input));
    if let Some(system) = system_text(request) {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if !tools.tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools.tools.clone()));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => {
                let name = tools.wire_name(name);
                let kind = match tools.freeform_argument(name) {
                    Some(_) => "custom",
                    None => "function",
                };
                json!({"type": kind, "name": name})
            }
        };
        body.insert("tool_choice".into(), choice);
        if let Some(parallel) = request.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    if config.stream {
        body.insert("stream".into(), json!(true));
    }
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            body.insert(key.into(), value);
        }
    };
    set("max_output_tokens", config.max_tokens.map(|v| json!(v)));
    set("temperature", config.temperature.map(|v| json!(v)));
    set("top_p", config.top_p.map(|v| json!(v)));
    set(
        "reasoning",
        config
            .reasoning_effort
            .as_ref()
            .map(|e| json!({"effort": e})),
    );
    Value::Object(body)
}

/// The text a freeform call carries: argument `argument` of the call's JSON arguments (the
/// arguments as they are when they are not such an object, as a call begun in another
/// dialect may have them).
fn freeform_text(arguments: &str, argument: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(mut object)) => match object.remove(argument) {
            Some(Value::String(text)) => text,
            _ => arguments.to_string(),
        },
        _ => arguments.to_string(),
    }
}

/// Reads a whole response object.
pub(crate) fn parse(value: &Value, tools: &WireTools) -> Result<Response, ModelError> {
    if str_at(value, "status") == "failed" {
        return Err(embedded_error(value).unwrap_or_else(|| ModelError::Status {
            status: 200,
            message: "the response failed".into(),
        }));
    }
    let output = value
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::Decode("the response has no `output` array".into()))?;
    let mut message = Message::assistant("");
    let mut refused = false;
    for item in output {
        match str_at(item, "type") {
            "message" => {
                for part in item["content"].as_array().into_iter().flatten() {
                    match str_at(part, "type") {
                        "output_text" => message.content.push_str(str_at(part, "text")),
                        "refusal" => {
                            refused = true;
                            message.content.push_str(str_at(part, "refusal"));
                        }
                        _ => {}
                    }
                }
            }
            kind @ ("function_call" | "custom_tool_call") => {
                let index = message.tool_calls.len();
                let name = str_at(item, "name");
                let arguments = if kind == "custom_tool_call" {
                    // The tool's one argument gets the text, so the tool sees the same
                    // arguments as from a JSON call.
                    let argument = tools.freeform_argument(name).unwrap_or("input");
                    json!({argument: str_at(item, "input")}).to_string()
                } else {
                    str_at(item, "arguments").to_string()
                };
                message
                    .tool_calls
                    .push(ToolCall::new(str_at(item, "call_id"), name, arguments));
                if let Some(id) = item.get("id") {
                    message
                        .replay
                        .push(ReplayItem::new(PROVIDER, Some(index), json!({"id": id})));
                }
            }
            "reasoning" => {
                for part in item["summary"].as_array().into_iter().flatten() {
                    if !message.reasoning.is_empty() {
                        message.reasoning.push('\n');
                    }
                    message.reasoning.push_str(str_at(part, "text"));
                }
                // Sent back as it came, without the output-only status.
                let mut item = item.clone();
                if let Some(object) = item.as_object_mut() {
                    object.remove("status");
                }
                message.replay.push(ReplayItem::new(PROVIDER, None, item));
            }
            _ => {}
        }
    }
    let finish = match str_at(value, "status") {
        "incomplete" => match str_at(&value["incomplete_details"], "reason") {
            "max_output_tokens" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        },
        _ if refused => FinishReason::ContentFilter,
        _ if !message.tool_calls.is_empty() => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    };
    let usage = &value["usage"];
    let prompt = u64_at(usage, "input_tokens");
    let completion = u64_at(usage, "output_tokens");
    check_answer(Response {
        id: str_at(value, "id").to_string(),
        model: str_at(value, "model").to_string(),
        partial: false,
        delta: Delta::default(),
        message: Some(message),
        finish_reason: Some(finish),
        usage: usage.is_object().then(|| Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: usage["total_tokens"]
                .as_u64()
                .unwrap_or(prompt + completion),
        }),
        warnings: Vec::new(),
    })
}

/// Reads the event stream.
pub(crate) struct StreamDecoder {
    /// `output_index` of each function call, in call order.
    calls: Vec<u64>,
    done: Option<Value>,
    /// The request's tools, for the argument of a freeform call.
    tools: Arc<WireTools>,
}

impl StreamDecoder {
    pub(crate) fn new(tools: Arc<WireTools>) -> Self {
        Self {
            calls: Vec::new(),
            done: None,
            tools,
        }
    }
}

impl Decoder for StreamDecoder {
    fn event(&mut self, _event: &str, data: &str) -> Result<Delta, ModelError> {
        let value = event_json(data)?;
        let mut delta = Delta::default();
        match str_at(&value, "type") {
            "response.output_text.delta" => delta.content = str_at(&value, "delta").to_string(),
            "response.reasoning_summary_text.delta" => {
                delta.reasoning = str_at(&value, "delta").to_string();
            }
            "response.output_item.added"
                if matches!(
                    str_at(&value["item"], "type"),
                    "function_call" | "custom_tool_call"
                ) =>
            {
                let item = &value["item"];
                self.calls
                    .push(value["output_index"].as_u64().unwrap_or(u64::MAX));
                // A freeform call's text is not JSON: its fragments are not arguments, and
                // the whole call comes with `response.completed`.
                delta.tool_calls.push(ToolCallDelta {
                    index: self.calls.len() - 1,
                    id: Some(str_at(item, "call_id").to_string()),
                    name: Some(str_at(item, "name").to_string()),
                    arguments: str_at(item, "arguments").to_string(),
                });
            }
            "response.function_call_arguments.delta" => {
                let output = value["output_index"].as_u64().unwrap_or(u64::MAX);
                let index = self
                    .calls
                    .iter()
                    .position(|o| *o == output)
                    .ok_or_else(|| bad_event(data, "arguments for a call that was not added"))?;
                delta.tool_calls.push(ToolCallDelta {
                    index,
                    arguments: str_at(&value, "delta").to_string(),
                    ..ToolCallDelta::default()
                });
            }
            "response.completed" | "response.incomplete" => {
                self.done = Some(value["response"].clone());
            }
            "response.failed" => {
                return Err(embedded_error(&value["response"]).unwrap_or_else(|| {
                    ModelError::Status {
                        status: 200,
                        message: "the response failed".into(),
                    }
                }));
            }
            "error" => {
                let message = str_at(&value, "message");
                let status = match str_at(&value, "code") {
                    "rate_limit_exceeded" => 429,
                    "server_error" => 500,
                    _ => 200,
                };
                return Err(ModelError::Status {
                    status,
                    message: message.to_string(),
                });
            }
            _ => {}
        }
        Ok(delta)
    }

    fn complete(&self) -> bool {
        self.done.is_some()
    }

    fn finish(&mut self) -> Result<Response, ModelError> {
        match self.done.take() {
            Some(response) => parse(&response, &self.tools),
            None => Err(ModelError::Decode(
                "the event stream ended before `response.completed`".into(),
            )),
        }
    }
}
