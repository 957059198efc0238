//! The OpenAI chat completions wire format: building request bodies and reading responses
//! and stream chunks.
//!
//! Reading is lenient on purpose: every field is optional, unknown fields are ignored, and
//! the shapes that other servers produce (arguments as a JSON object instead of a string,
//! `reasoning_content` or `reasoning`, a missing `index` on tool-call fragments, usage in a
//! chunk with no choices) are accepted.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::declare::WireTools;

use crate::{
    ContentPart, Delta, FinishReason, Message, ModelError, Request, Response, Role, ToolCall,
    ToolCallDelta, ToolChoice, Usage,
};

/// The JSON body of a chat completions request. With `images` off, every image part is
/// replaced by a text note.
pub(crate) fn request_body(
    model: &str,
    request: &Request,
    tools: &WireTools,
    extra: &Map<String, Value>,
    images: bool,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "messages".into(),
        Value::Array(
            request
                .messages
                .iter()
                .map(|m| message_json(m, images))
                .collect(),
        ),
    );
    if !request.tools.is_empty() {
        // Shaped once per list of declarations (see `Tools`), names the API refuses
        // rewritten; the client maps them back in the response.
        let tools = tools.tools.clone();
        body.insert("tools".into(), Value::Array(tools));
        // tool_choice and parallel_tool_calls are only meaningful (and, on some servers,
        // only accepted) together with tools.
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), choice);
        if let Some(parallel) = request.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    let config = &request.config;
    body.insert("stream".into(), json!(config.stream));
    if config.stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            body.insert(key.into(), value);
        }
    };
    set("max_tokens", config.max_tokens.map(|v| json!(v)));
    set("temperature", config.temperature.map(|v| json!(v)));
    set("top_p", config.top_p.map(|v| json!(v)));
    set(
        "presence_penalty",
        config.presence_penalty.map(|v| json!(v)),
    );
    set(
        "frequency_penalty",
        config.frequency_penalty.map(|v| json!(v)),
    );
    set("seed", config.seed.map(|v| json!(v)));
    set(
        "reasoning_effort",
        config.reasoning_effort.as_ref().map(|v| json!(v)),
    );
    set(
        "stop",
        (!config.stop.is_empty()).then(|| json!(config.stop)),
    );
    for (key, value) in extra {
        body.insert(key.clone(), value.clone());
    }
    Value::Object(body)
}

fn message_json(message: &Message, images: bool) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!(message.role.as_str()));
    let content = if !message.parts.is_empty() {
        parts_json(message, images && message.role == Role::User)
    } else if message.content.is_empty() && message.has_tool_calls() {
        // An assistant turn that only calls tools: `null`, which every server accepts,
        // where an empty string makes some reject or echo it.
        Value::Null
    } else {
        json!(message.content)
    };
    out.insert("content".into(), content);
    if !message.tool_calls.is_empty() {
        out.insert("tool_calls".into(), json!(message.tool_calls));
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    if message.role != Role::Tool
        && let Some(name) = &message.name
    {
        out.insert("name".into(), json!(name));
    }
    Value::Object(out)
}

/// The content of a message with parts: an array of OpenAI content parts, the text first,
/// where images may be sent (user messages of a model that takes them); elsewhere one string
/// with a note in place of each image, since OpenAI's other roles and text-only servers take
/// text only.
fn parts_json(message: &Message, images: bool) -> Value {
    if !images {
        let texts = std::iter::once(message.content.clone())
            .filter(|text| !text.is_empty())
            .chain(message.parts.iter().map(ContentPart::as_text));
        return json!(texts.collect::<Vec<_>>().join("\n\n"));
    }
    let text =
        (!message.content.is_empty()).then(|| json!({"type": "text", "text": message.content}));
    let parts = message.parts.iter().map(|part| match part {
        ContentPart::Text { text } => json!({"type": "text", "text": text}),
        ContentPart::ImageUrl { url } => json!({"type": "image_url", "image_url": {"url": url}}),
    });
    Value::Array(text.into_iter().chain(parts).collect())
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireCompletion {
    id: Option<String>,
    model: Option<String>,
    choices: Vec<WireChoice>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireChoice {
    message: Option<WireMessage>,
    delta: Option<WireMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMessage {
    content: Option<Value>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
}

impl WireUsage {
    fn into_usage(self) -> Usage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let completion = self.completion_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: self.total_tokens.unwrap_or(prompt + completion),
        }
    }
}

/// Text content; some servers send an array of `{type: "text", text}` parts.
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(text)) => text,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Arguments as text; some servers (Ollama's native shapes) send a JSON object.
fn arguments_text(arguments: Option<Value>) -> String {
    match arguments {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text,
        Some(other) => other.to_string(),
    }
}

/// The message of an `{"error": ...}` body, or the body shortened.
pub(crate) fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let error = v.get("error")?;
        Some(match error.get("message").and_then(Value::as_str) {
            Some(message) => message.to_string(),
            None => error
                .as_str()
                .map_or_else(|| error.to_string(), str::to_string),
        })
    });
    let message = from_json.unwrap_or_else(|| body.trim().to_string());
    shorten(&message, 500)
}

fn shorten(text: &str, max: usize) -> String {
    toolbelt_core::text::shorten(text, max).into_owned()
}

fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ModelError> {
    serde_json::from_str(text)
        .map_err(|e| ModelError::Decode(format!("{e} in {:?}", shorten(text, 200))))
}

fn embedded_error(completion: &WireCompletion) -> Option<ModelError> {
    completion.error.as_ref().map(|error| ModelError::Status {
        status: 200,
        message: error_message(&json!({ "error": error }).to_string()),
    })
}

/// Reads a non-streaming response body.
pub(crate) fn parse_completion(body: &str) -> Result<Response, ModelError> {
    let completion: WireCompletion = parse(body)?;
    if let Some(error) = embedded_error(&completion) {
        return Err(error);
    }
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(ModelError::EmptyAnswer {
            finish_reason: None,
        });
    };
    let wire = choice.message.or(choice.delta).unwrap_or_default();
    let tool_calls = wire
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, call)| {
            let function = call.function.unwrap_or_default();
            let id = call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{i}"));
            ToolCall::new(
                id,
                function.name.unwrap_or_default(),
                arguments_text(function.arguments),
            )
        })
        .collect();
    let mut message = Message::assistant_tool_calls(content_text(wire.content), tool_calls);
    message.reasoning = wire
        .reasoning_content
        .or(wire.reasoning)
        .unwrap_or_default();
    if is_empty_answer(&message) {
        return Err(ModelError::EmptyAnswer {
            finish_reason: choice.finish_reason,
        });
    }
    Ok(Response {
        id: completion.id.unwrap_or_default(),
        model: completion.model.unwrap_or_default(),
        partial: false,
        delta: Delta::default(),
        finish_reason: choice.finish_reason.as_deref().map(FinishReason::parse),
        message: Some(message),
        usage: completion.usage.map(WireUsage::into_usage),
        warnings: Vec::new(),
    })
}

/// Whether an assistant message says nothing at all (no text, reasoning or tool calls).
pub(crate) fn is_empty_answer(message: &Message) -> bool {
    message.content.is_empty() && message.reasoning.is_empty() && message.tool_calls.is_empty()
}

/// A body's start as one line, for an error message.
pub(crate) fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return "(empty body)".to_string();
    }
    shorten(&line, 200)
}

/// What one stream chunk carried.
#[derive(Debug, Default)]
pub(crate) struct Chunk {
    pub id: Option<String>,
    pub model: Option<String>,
    pub delta: Delta,
    pub finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
}

/// Reads one stream chunk. `next_index` numbers fragments for servers that omit `index`
/// (each fragment with an id then starts a new call).
pub(crate) fn parse_chunk(data: &str, next_index: &mut usize) -> Result<Chunk, ModelError> {
    let completion: WireCompletion = parse(data)?;
    if let Some(error) = embedded_error(&completion) {
        return Err(error);
    }
    let mut chunk = Chunk {
        id: completion.id,
        model: completion.model,
        usage: completion.usage.map(WireUsage::into_usage),
        ..Chunk::default()
    };
    if let Some(choice) = completion.choices.into_iter().next() {
        chunk.finish_reason = choice.finish_reason.as_deref().map(FinishReason::parse);
        let wire = choice.delta.or(choice.message).unwrap_or_default();
        chunk.delta.content = content_text(wire.content);
        chunk.delta.reasoning = wire
            .reasoning_content
            .or(wire.reasoning)
            .unwrap_or_default();
        for call in wire.tool_calls.unwrap_or_default() {
            let index = match call.index {
                Some(index) => index,
                None if call.id.is_some() => {
                    *next_index += 1;
                    *next_index - 1
                }
                None => next_index.saturating_sub(1),
            };
            *next_index = (*next_index).max(index + 1);
            let function = call.function.unwrap_or_default();
            chunk.delta.tool_calls.push(ToolCallDelta {
                index,
                id: call.id,
                name: function.name,
                arguments: arguments_text(function.arguments),
            });
        }
    }
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbelt_core::Declaration;

    #[test]
    fn tool_only_assistant_turns_send_null_content_and_tool_messages_no_name() {
        let request = Request::new(vec![
            Message::assistant_tool_calls("", vec![ToolCall::new("c1", "t", "{}")]),
            Message::tool("c1", "t", "ok"),
        ])
        .with_tools(vec![Declaration::new("t", "a tool").unwrap()]);
        let tools = request.tools.shaped(crate::ToolDialect::OpenAi);
        let body = request_body("m", &request, &tools, &Map::new(), true);
        assert_eq!(body["messages"][0]["content"], Value::Null);
        assert_eq!(body["messages"][1]["tool_call_id"], "c1");
        assert!(body["messages"][1].get("name").is_none());
        assert_eq!(body["tools"][0]["function"]["name"], "t");
        assert_eq!(body["tool_choice"], "auto");
        assert!(body.get("parallel_tool_calls").is_none());
    }

    #[test]
    fn no_tools_means_no_tool_choice() {
        let request = Request::new(vec![Message::user("hi")]);
        let tools = request.tools.shaped(crate::ToolDialect::OpenAi);
        let body = request_body("m", &request, &tools, &Map::new(), true);
        assert!(body.get("tool_choice").is_none());
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn object_arguments_and_unknown_fields_are_accepted() {
        let body = r#"{"id":"x","object":"chat.completion","surprise":{"a":1},
            "choices":[{"index":0,"logprobs":null,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":{"a":1}}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let response = parse_completion(body).unwrap();
        assert_eq!(response.tool_calls()[0].arguments, r#"{"a":1}"#);
        assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(response.usage.unwrap().total_tokens, 7);
    }

    #[test]
    fn errors_in_a_200_body_are_errors() {
        let err = parse_completion(r#"{"error":{"message":"model not loaded"}}"#).unwrap_err();
        assert!(err.to_string().contains("model not loaded"), "{err}");
    }

    #[test]
    fn fragments_without_index_are_numbered_by_their_ids() {
        let mut next = 0;
        let a = parse_chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{"}}]}}]}"#,
            &mut next,
        )
        .unwrap();
        let b = parse_chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
            &mut next,
        )
        .unwrap();
        let c = parse_chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y"}}]}}]}"#,
            &mut next,
        )
        .unwrap();
        assert_eq!(a.delta.tool_calls[0].index, 0);
        assert_eq!(b.delta.tool_calls[0].index, 0);
        assert_eq!(c.delta.tool_calls[0].index, 1);
    }

    #[test]
    fn long_error_bodies_are_shortened_to_a_count_of_characters() {
        let body = "é".repeat(600);
        let message = error_message(&body);
        assert!(message.ends_with('…'));
        assert_eq!(message.chars().count(), 500);
    }
}
