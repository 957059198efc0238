//! What is asked of a model: the conversation, the tools it may call and how to generate.

use serde::{Deserialize, Serialize};
use toolbelt_core::Declaration;

use crate::Message;

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the provider's default when tools are given).
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// How to generate: sampling, limits and streaming.
///
/// Unset fields are not sent, so each provider's own default applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenerationConfig {
    /// Stream the answer as deltas (server-sent events) instead of one response.
    pub stream: bool,
    /// The most tokens to generate (`max_tokens`).
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Sequences that stop generation.
    pub stop: Vec<String>,
    /// Presence penalty.
    pub presence_penalty: Option<f32>,
    /// Frequency penalty.
    pub frequency_penalty: Option<f32>,
    /// Seed for providers that support reproducible sampling.
    pub seed: Option<i64>,
    /// Reasoning effort for reasoning models (`low`, `medium`, `high`).
    pub reasoning_effort: Option<String>,
}

impl GenerationConfig {
    /// A configuration that streams.
    pub fn streaming() -> Self {
        Self {
            stream: true,
            ..Self::default()
        }
    }
}

/// One request to a model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<Declaration>,
    /// Whether and which tool must be called.
    pub tool_choice: ToolChoice,
    /// Whether the model may call several tools in one turn (`None`: the provider's default;
    /// some servers reject the field, so it is only sent when set).
    pub parallel_tool_calls: Option<bool>,
    /// Sampling, limits and streaming.
    pub config: GenerationConfig,
}

impl Request {
    /// A request with these messages and nothing else set.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// Sets the tools.
    pub fn with_tools(mut self, tools: Vec<Declaration>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the generation configuration.
    pub fn with_config(mut self, config: GenerationConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the tool choice.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Allows or forbids parallel tool calls.
    pub fn with_parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.parallel_tool_calls = Some(parallel);
        self
    }
}
