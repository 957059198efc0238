//! Chat messages: what the conversation sent to a model is made of.
//!
//! The shapes follow the OpenAI chat completions wire format (roles `system`, `user`,
//! `assistant` with `tool_calls`, and `tool` with `tool_call_id`) because every provider this
//! crate talks to accepts it; they serialize to exactly that format.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the application.
    System,
    /// The human (or the calling program).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering one of the assistant's `tool_calls`.
    Tool,
}

impl Role {
    /// The wire name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

pub use toolbelt_core::ToolCall;

/// One message of a conversation.
///
/// ```
/// use toolbelt_model::{Message, Role, ToolCall};
/// let call = ToolCall::new("call_1", "calculator", r#"{"a":1}"#);
/// let asked = Message::assistant_tool_calls("", vec![call]);
/// let answer = Message::tool("call_1", "calculator", "2");
/// assert_eq!(asked.role, Role::Assistant);
/// assert_eq!(answer.tool_call_id.as_deref(), Some("call_1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text. Assistant messages that only call tools have an empty content (the client
    /// sends it as `null`, which some servers require).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// Reasoning text some providers return separately (`reasoning_content`); kept for display
    /// and history, never sent back to the model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// The tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool's name on a `tool` message (some providers want it), or a participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Parts sent after [`Message::content`]: images, more text. A message with parts goes
    /// on the wire as an array of OpenAI content parts, its text first; a model that does
    /// not take images gets a text note in place of each image (see
    /// [`crate::Model::accepts_images`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<ContentPart>,
    /// What a provider needs sent back with this assistant message on later turns
    /// (Anthropic's thinking blocks, OpenAI Responses' reasoning items, Gemini's thought
    /// signatures), kept verbatim and tagged with the provider that wrote it, so a stored
    /// session can go on with that provider or with any other (which skips it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay: Vec<ReplayItem>,
    /// On a `tool` message: the tool failed. Providers with a field for it (Anthropic's
    /// `is_error`) are told; chat completions only see the text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// One piece of provider state an assistant message carries for later requests.
///
/// ```
/// use toolbelt_model::ReplayItem;
/// let item = ReplayItem::new("gemini", Some(0), serde_json::json!({"thoughtSignature": "c2ln"}));
/// assert_eq!(item.tool_call, Some(0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayItem {
    /// The provider that wrote it ([`crate::Provider::as_str`]: `anthropic`, `gemini`,
    /// `openai-responses`); the others skip it.
    pub provider: String,
    /// The tool call (its position in [`Message::tool_calls`]) the item belongs to, or
    /// `None` for an item of the message as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<usize>,
    /// The provider's data, verbatim (a reasoning item, a thinking block, a signature).
    pub item: serde_json::Value,
}

impl ReplayItem {
    /// An item of `provider`, for tool call `tool_call` or the whole message.
    pub fn new(provider: &str, tool_call: Option<usize>, item: serde_json::Value) -> Self {
        Self {
            provider: provider.to_string(),
            tool_call,
            item,
        }
    }
}

/// One part of a message besides its text.
///
/// Stored as `{"type": "text", "text": …}` or `{"type": "image_url", "url": …}`; the client
/// writes OpenAI's wire shape (`{"type": "image_url", "image_url": {"url": …}}`) itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// More text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, by URL: `https://…` or a `data:image/png;base64,…` URL.
    ImageUrl {
        /// The URL.
        url: String,
    },
}

impl ContentPart {
    /// An image given as base64 data of a media type (`image/png`), as a `data:` URL.
    pub fn image_data(media_type: &str, base64: &str) -> Self {
        ContentPart::ImageUrl {
            url: format!("data:{media_type};base64,{base64}"),
        }
    }

    /// The text that stands in for this part when images cannot be sent: the text itself,
    /// or a note naming the image's media type.
    pub fn as_text(&self) -> String {
        match self {
            ContentPart::Text { text } => text.clone(),
            ContentPart::ImageUrl { url } => {
                let kind = url
                    .strip_prefix("data:")
                    .and_then(|rest| rest.split([';', ',']).next())
                    .filter(|kind| !kind.is_empty())
                    .unwrap_or("image");
                format!("[{kind} not shown: this model does not take images]")
            }
        }
    }
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(de)?.unwrap_or_default())
}

impl Message {
    fn with_role(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            parts: Vec::new(),
            replay: Vec::new(),
            is_error: false,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::with_role(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::with_role(Role::User, content)
    }

    /// A user message with text and more parts (images); the text comes first on the wire.
    ///
    /// ```
    /// use toolbelt_model::{ContentPart, Message};
    /// let message = Message::user_with_parts(
    ///     "What is in this picture?",
    ///     vec![ContentPart::image_data("image/png", "iVBORw0KGgo=")],
    /// );
    /// assert!(message.has_images());
    /// ```
    pub fn user_with_parts(content: impl Into<String>, parts: Vec<ContentPart>) -> Self {
        Self {
            parts,
            ..Self::with_role(Role::User, content)
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::with_role(Role::Assistant, content)
    }

    /// An assistant message that calls tools (the text may be empty).
    pub fn assistant_tool_calls(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::with_role(Role::Assistant, content)
        }
    }

    /// The result of the tool call `tool_call_id` of tool `name`.
    pub fn tool(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.into()),
            name: Some(name.into()),
            ..Self::with_role(Role::Tool, content)
        }
    }

    /// Whether any part is an image.
    pub fn has_images(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, ContentPart::ImageUrl { .. }))
    }

    /// The replay items `provider` wrote, with the tool call each belongs to.
    pub fn replay_of<'a>(&'a self, provider: &'a str) -> impl Iterator<Item = &'a ReplayItem> + 'a {
        self.replay.iter().filter(move |r| r.provider == provider)
    }

    /// Whether this is an assistant message that calls at least one tool.
    pub fn has_tool_calls(&self) -> bool {
        self.role == Role::Assistant && !self.tool_calls.is_empty()
    }
}
