//! Gemini (`models/{model}:generateContent`, `:streamGenerateContent?alt=sse`).
//!
//! Turns are `contents` of role `user` or `model`; system messages go in
//! `systemInstruction`; tools are one `functionDeclarations` list. A call is a
//! `functionCall` part (arguments as an object), its result a `functionResponse` part in
//! the next user turn (images follow it as `inlineData`). The `thoughtSignature` a part
//! carries is kept as a replay item and sent back on that part: the API refuses a
//! function call of the current turn without its signature. A call that Gemini did not
//! write (a session begun on another provider) is sent with the placeholder signature the
//! API documents for that case. Each stream event is a whole `GenerateContentResponse`
//! chunk; the stream is complete once a candidate has a `finishReason`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{
    Decoder, arguments_object, check_answer, data_url, embedded_error, event_json, finish_reason,
    str_at, system_text, text_and_images, u64_at,
};
use crate::declare::WireTools;
use crate::{
    ContentPart, Delta, FinishReason, Message, ModelError, ReplayItem, Request, Response, Role,
    ToolCall, ToolCallDelta, ToolChoice, Usage,
};

const PROVIDER: &str = "gemini";

/// The signature the API accepts on a function call it did not write (documented for
/// conversations moved from another model).
pub(crate) const FOREIGN_SIGNATURE: &str = "skip_thought_signature_validator";

fn user_parts(message: &Message, images: bool) -> Vec<Value> {
    let (text, urls) = text_and_images(message);
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(json!({"text": text}));
    }
    for url in urls {
        match data_url(url) {
            Some((mime_type, data)) if images => {
                parts.push(json!({"inlineData": {"mimeType": mime_type, "data": data}}));
            }
            _ => {
                let note = ContentPart::ImageUrl {
                    url: url.to_string(),
                }
                .as_text();
                parts.push(json!({"text": note}));
            }
        }
    }
    parts
}

fn signature(message: &Message, call: Option<usize>) -> Option<&str> {
    message
        .replay_of(PROVIDER)
        .find(|r| r.tool_call == call)
        .and_then(|r| r.item.get("thoughtSignature"))
        .and_then(Value::as_str)
}

fn model_parts(message: &Message, tools: &WireTools) -> Vec<Value> {
    let mut parts = Vec::new();
    if !message.content.is_empty() {
        let mut part = json!({"text": message.content});
        if let Some(sig) = signature(message, None) {
            part["thoughtSignature"] = json!(sig);
        }
        parts.push(part);
    }
    let written_here = message.replay_of(PROVIDER).next().is_some();
    for (i, call) in message.tool_calls.iter().enumerate() {
        let mut part = json!({"functionCall": {"name": tools.wire_name(&call.name),
            "args": arguments_object(&call.arguments)}});
        match signature(message, Some(i)) {
            Some(sig) => part["thoughtSignature"] = json!(sig),
            // Only the first call of a turn carries a signature.
            None if i == 0 && !written_here => part["thoughtSignature"] = json!(FOREIGN_SIGNATURE),
            None => {}
        }
        parts.push(part);
    }
    parts
}

/// An id for a call Gemini sent without one: unique in this process, so the results of
/// different turns never share one.
fn new_call_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("gemini_call_{n}")
}

/// The request body.
pub(crate) fn body(request: &Request, tools: &WireTools, images: bool) -> Value {
    // Tool messages name their tool; older ones may not, so the call's name is looked up.
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, parts) = match message.role {
            Role::System => continue,
            Role::User => ("user", user_parts(message, images)),
            Role::Assistant => {
                for call in &message.tool_calls {
                    names.insert(call.id.as_str(), call.name.as_str());
                }
                ("model", model_parts(message, tools))
            }
            Role::Tool => {
                let id = message.tool_call_id.as_deref().unwrap_or_default();
                let name = message
                    .name
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .or_else(|| names.get(id).copied())
                    .unwrap_or_default();
                let (mut text, urls) = text_and_images(message);
                let mut images_after = Vec::new();
                for url in urls {
                    match data_url(url) {
                        Some((mime_type, data)) if images => images_after
                            .push(json!({"inlineData": {"mimeType": mime_type, "data": data}})),
                        _ => {
                            let note = ContentPart::ImageUrl {
                                url: url.to_string(),
                            }
                            .as_text();
                            text.push('\n');
                            text.push_str(&note);
                        }
                    }
                }
                let key = if message.is_error { "error" } else { "result" };
                let mut parts = vec![json!({"functionResponse": {
                    "name": tools.wire_name(name), "response": {key: text}}})];
                parts.extend(images_after);
                ("user", parts)
            }
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, existing)) if *last == role => {
                // Function responses first, as their calls came.
                if parts.iter().any(|p| p.get("functionResponse").is_some()) {
                    let at = existing
                        .iter()
                        .take_while(|p| p.get("functionResponse").is_some())
                        .count();
                    let tail = existing.split_off(at);
                    existing.extend(parts);
                    existing.extend(tail);
                } else {
                    existing.extend(parts);
                }
            }
            _ => contents.push((role, parts)),
        }
    }
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(
            contents
                .into_iter()
                .map(|(role, parts)| json!({"role": role, "parts": parts}))
                .collect(),
        ),
    );
    if let Some(system) = system_text(request) {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    if !tools.tools.is_empty() {
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": tools.tools }]),
        );
        let config = match &request.tool_choice {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Tool(name) => {
                json!({"mode": "ANY", "allowedFunctionNames": [tools.wire_name(name)]})
            }
        };
        body.insert(
            "toolConfig".into(),
            json!({"functionCallingConfig": config}),
        );
    }
    let config = &request.config;
    let mut generation = Map::new();
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            generation.insert(key.into(), value);
        }
    };
    set("maxOutputTokens", config.max_tokens.map(|v| json!(v)));
    set("temperature", config.temperature.map(|v| json!(v)));
    set("topP", config.top_p.map(|v| json!(v)));
    set("presencePenalty", config.presence_penalty.map(|v| json!(v)));
    set(
        "frequencyPenalty",
        config.frequency_penalty.map(|v| json!(v)),
    );
    set("seed", config.seed.map(|v| json!(v)));
    set(
        "stopSequences",
        (!config.stop.is_empty()).then(|| json!(config.stop)),
    );
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    Value::Object(body)
}

/// The answer built so far from parts.
#[derive(Default)]
struct Answer {
    message: Option<Message>,
    finish: Option<String>,
    usage: Option<Usage>,
    id: String,
    model: String,
}

impl Answer {
    /// Adds one chunk's parts and metadata; returns what they add.
    fn add(&mut self, value: &Value) -> Result<Delta, ModelError> {
        if let Some(error) = embedded_error(value) {
            return Err(error);
        }
        let message = self.message.get_or_insert_with(|| Message::assistant(""));
        let mut delta = Delta::default();
        if let Some(id) = value.get("responseId").and_then(Value::as_str) {
            self.id = id.to_string();
        }
        if let Some(model) = value.get("modelVersion").and_then(Value::as_str) {
            self.model = model.to_string();
        }
        let usage = &value["usageMetadata"];
        if usage.is_object() {
            let prompt = u64_at(usage, "promptTokenCount");
            let completion =
                u64_at(usage, "candidatesTokenCount") + u64_at(usage, "thoughtsTokenCount");
            self.usage = Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: usage["totalTokenCount"]
                    .as_u64()
                    .unwrap_or(prompt + completion),
            });
        }
        let Some(candidate) = value["candidates"].as_array().and_then(|c| c.first()) else {
            if let Some(reason) = value["promptFeedback"]["blockReason"].as_str() {
                self.finish = Some(reason.to_string());
            }
            return Ok(delta);
        };
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let sig = part.get("thoughtSignature").and_then(Value::as_str);
            if let Some(call) = part.get("functionCall") {
                let index = message.tool_calls.len();
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .map_or_else(new_call_id, str::to_string);
                let args = call.get("args").cloned().unwrap_or(json!({}));
                let name = str_at(call, "name");
                message
                    .tool_calls
                    .push(ToolCall::new(&id, name, args.to_string()));
                delta.tool_calls.push(ToolCallDelta {
                    index,
                    id: Some(id),
                    name: Some(name.to_string()),
                    arguments: args.to_string(),
                });
                if let Some(sig) = sig {
                    message.replay.push(ReplayItem::new(
                        PROVIDER,
                        Some(index),
                        json!({"thoughtSignature": sig}),
                    ));
                }
            } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                if part["thought"] == json!(true) {
                    message.reasoning.push_str(text);
                    delta.reasoning.push_str(text);
                } else {
                    message.content.push_str(text);
                    delta.content.push_str(text);
                }
                if let Some(sig) = sig.filter(|_| part["thought"] != json!(true)) {
                    message.replay.retain(|r| r.tool_call.is_some());
                    message.replay.push(ReplayItem::new(
                        PROVIDER,
                        None,
                        json!({"thoughtSignature": sig}),
                    ));
                }
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            self.finish = Some(reason.to_string());
        }
        Ok(delta)
    }

    fn finish(&mut self) -> Result<Response, ModelError> {
        let message = self
            .message
            .take()
            .unwrap_or_else(|| Message::assistant(""));
        let finish = self
            .finish
            .take()
            .map(|reason| match finish_reason(&reason) {
                FinishReason::Stop if !message.tool_calls.is_empty() => FinishReason::ToolCalls,
                other => other,
            });
        check_answer(Response {
            id: std::mem::take(&mut self.id),
            model: std::mem::take(&mut self.model),
            partial: false,
            delta: Delta::default(),
            message: Some(message),
            finish_reason: finish,
            usage: self.usage.take(),
            warnings: Vec::new(),
        })
    }
}

/// Reads a whole answer.
pub(crate) fn parse(value: &Value) -> Result<Response, ModelError> {
    let mut answer = Answer::default();
    answer.add(value)?;
    answer.finish()
}

/// Reads the event stream.
#[derive(Default)]
pub(crate) struct StreamDecoder {
    answer: Answer,
}

impl Decoder for StreamDecoder {
    fn event(&mut self, _event: &str, data: &str) -> Result<Delta, ModelError> {
        let value = event_json(data)?;
        self.answer.add(&value)
    }

    fn complete(&self) -> bool {
        // Usage arrives with the last chunk, the one with the finish reason.
        self.answer.finish.is_some()
    }

    fn finish(&mut self) -> Result<Response, ModelError> {
        if self.answer.finish.is_none() {
            return Err(ModelError::Decode(
                "the event stream ended before a candidate's finishReason".into(),
            ));
        }
        self.answer.finish()
    }
}
