//! What a tool returns: one result for the model, one for the user, and optional multimodal
//! blocks and structured data.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JsonObject;

/// A value shown to a model or a user: plain text or JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Payload {
    /// Plain text, shown as is.
    Text(String),
    /// JSON, rendered compactly when a text form is needed.
    Json(Value),
}

impl Payload {
    /// The text form: the text itself, or compact JSON (a JSON string renders unquoted).
    pub fn to_text(&self) -> String {
        match self {
            Payload::Text(text) => text.clone(),
            Payload::Json(Value::String(s)) => s.clone(),
            Payload::Json(value) => value.to_string(),
        }
    }

    /// The length of the text form in bytes, without building it for text payloads.
    pub fn text_len(&self) -> usize {
        match self {
            Payload::Text(text) => text.len(),
            other => other.to_text().len(),
        }
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Text(String::new())
    }
}

impl From<String> for Payload {
    fn from(text: String) -> Self {
        Payload::Text(text)
    }
}

impl From<&str> for Payload {
    fn from(text: &str) -> Self {
        Payload::Text(text.to_string())
    }
}

impl From<Value> for Payload {
    fn from(value: Value) -> Self {
        Payload::Json(value)
    }
}

/// A multimodal piece of a result, mirroring MCP's content types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// For example `image/png`.
        mime_type: String,
        /// Base64 of the image bytes.
        data: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// For example `audio/wav`.
        mime_type: String,
        /// Base64 of the audio bytes.
        data: String,
    },
    /// A link to a resource the client can fetch.
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// A short name.
        name: String,
        /// What the resource is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its MIME type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A resource embedded in the result.
    Resource {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its text, for a text resource.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Base64 of its bytes, for a binary resource.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// An image block from base64 data.
    pub fn image(mime_type: impl Into<String>, base64_data: impl Into<String>) -> Self {
        ContentBlock::Image {
            mime_type: mime_type.into(),
            data: base64_data.into(),
        }
    }

    /// A one-line text rendering, for models or terminals that cannot show the block itself.
    pub fn summary(&self) -> String {
        match self {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::Image { mime_type, data } => {
                format!("[image {mime_type}, {} bytes base64]", data.len())
            }
            ContentBlock::Audio { mime_type, data } => {
                format!("[audio {mime_type}, {} bytes base64]", data.len())
            }
            ContentBlock::ResourceLink { uri, name, .. } => format!("[resource {name}: {uri}]"),
            ContentBlock::Resource { uri, text, .. } => match text {
                Some(text) => text.clone(),
                None => format!("[resource {uri}]"),
            },
        }
    }
}

/// The result of a tool call.
///
/// `for_llm` is what the model reads; `for_user` is what a person sees and defaults to the
/// same. These control presentation only: they do not keep anything secret from a UI that
/// shows raw history.
///
/// ```
/// use toolbelt_core::ToolOutput;
/// let out = ToolOutput::text("3 files changed").with_user_text("3 files changed\n--- a/x\n+++ b/x");
/// assert_eq!(out.llm_text(), "3 files changed");
/// assert!(out.user_text().contains("+++ b/x"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// What the model sees.
    pub for_llm: Payload,
    /// What a user sees; `None` means the same as `for_llm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_user: Option<Payload>,
    /// Given to the model but not shown to the user.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub silent: bool,
    /// Multimodal blocks, for providers and clients that support them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<ContentBlock>,
    /// Structured JSON, set when the tool declared an output schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// The tool ran but reports a failure (MCP's `isError`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Free-form metadata (MCP's `_meta`), visible to after hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// The work goes on outside the call (a job submitted, a person asked): this output is
    /// its status, and the result comes later. An agent run pauses on it until the caller
    /// supplies the result (ADK's long-running function tools).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
}

impl ToolOutput {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            for_llm: Payload::Text(text.into()),
            ..Self::default()
        }
    }

    /// A JSON result.
    pub fn json(value: Value) -> Self {
        Self {
            for_llm: Payload::Json(value),
            ..Self::default()
        }
    }

    /// A long-running call's status (`ticket 42 opened; the build takes an hour`): the
    /// result comes later (see [`ToolOutput::pending`](field@ToolOutput::pending)).
    pub fn pending(status: impl Into<String>) -> Self {
        Self {
            pending: true,
            ..Self::text(status)
        }
    }

    /// A result-level failure with a message for the model.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(message)
        }
    }

    /// Sets what the user sees.
    pub fn with_user(mut self, payload: Payload) -> Self {
        self.for_user = Some(payload);
        self
    }

    /// Sets what the user sees, as text.
    pub fn with_user_text(self, text: impl Into<String>) -> Self {
        self.with_user(Payload::Text(text.into()))
    }

    /// Hides the result from the user.
    pub fn silent(mut self) -> Self {
        self.silent = true;
        self
    }

    /// Adds a content block.
    pub fn with_block(mut self, block: ContentBlock) -> Self {
        self.blocks.push(block);
        self
    }

    /// Sets the structured result.
    pub fn with_structured(mut self, value: Value) -> Self {
        self.structured = Some(value);
        self
    }

    /// What the model reads, as text.
    pub fn llm_text(&self) -> String {
        self.for_llm.to_text()
    }

    /// What the user sees, as text (the model's text when no user form was set).
    pub fn user_text(&self) -> String {
        self.for_user.as_ref().unwrap_or(&self.for_llm).to_text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn user_view_defaults_to_the_model_view() {
        let out = ToolOutput::json(json!({"a": 1}));
        assert_eq!(out.user_text(), r#"{"a":1}"#);
        assert_eq!(out.llm_text(), out.user_text());
    }

    #[test]
    fn json_strings_render_without_quotes() {
        assert_eq!(Payload::Json(json!("hi")).to_text(), "hi");
    }

    #[test]
    fn outputs_round_trip_through_json() {
        let out = ToolOutput::error("nope")
            .with_block(ContentBlock::image("image/png", "AAAA"))
            .silent();
        let back: ToolOutput = serde_json::from_value(serde_json::to_value(&out).unwrap()).unwrap();
        assert_eq!(back, out);
    }
}
