//! What is asked of a model: the conversation, the tools it may call and how to generate.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use toolbelt_core::Declaration;

use crate::Message;
use crate::declare::{ToolDialect, WireTools, wire_tools};

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
    /// The tools the model may call (a shared list: see [`Tools`]).
    pub tools: Tools,
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

    /// Sets the tools: a `Vec<Declaration>`, or a [`Tools`] shared with other requests.
    pub fn with_tools(mut self, tools: impl Into<Tools>) -> Self {
        self.tools = tools.into();
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

/// The tool declarations of a request, shared: cloning a request, or sending the same tools
/// on every turn of a run, copies no declaration, and each wire format's shape of them
/// (renamed tools, strict-mode schemas) is worked out once and kept with them.
///
/// It reads as a `Vec<Declaration>`; changing it (`request.tools.retain(…)` in a callback)
/// copies the list if another request shares it, and forgets the kept shapes.
///
/// ```
/// use toolbelt_core::Declaration;
/// use toolbelt_model::{Message, Request, Tools};
/// let tools = Tools::new(vec![Declaration::new("Read", "Reads a file")?]);
/// let first = Request::new(vec![Message::user("hi")]).with_tools(tools.clone());
/// let mut second = Request::new(vec![Message::user("again")]).with_tools(tools);
/// second.tools.clear();
/// assert_eq!((first.tools.len(), second.tools.len()), (1, 0));
/// # Ok::<(), toolbelt_core::ToolError>(())
/// ```
#[derive(Clone, Default)]
pub struct Tools {
    declarations: Arc<Vec<Declaration>>,
    /// Each dialect's shape of `declarations`, made on first use.
    shapes: Arc<Mutex<Shapes>>,
}

/// The wire shapes made so far, one per dialect asked for (a handful at most).
type Shapes = Vec<(ToolDialect, Arc<WireTools>)>;

impl Tools {
    /// These declarations, to share between requests.
    pub fn new(declarations: Vec<Declaration>) -> Self {
        Self {
            declarations: Arc::new(declarations),
            shapes: Arc::default(),
        }
    }

    /// The tools as `dialect` carries them, made once per list of declarations.
    pub(crate) fn shaped(&self, dialect: ToolDialect) -> Arc<WireTools> {
        let mut shapes = self.shapes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, shaped)) = shapes.iter().find(|(d, _)| *d == dialect) {
            return shaped.clone();
        }
        let shaped = Arc::new(wire_tools(dialect, &self.declarations));
        shapes.push((dialect, shaped.clone()));
        shaped
    }
}

impl Deref for Tools {
    type Target = Vec<Declaration>;

    fn deref(&self) -> &Vec<Declaration> {
        &self.declarations
    }
}

impl DerefMut for Tools {
    fn deref_mut(&mut self) -> &mut Vec<Declaration> {
        // The kept shapes describe the list before the change.
        self.shapes = Arc::default();
        Arc::make_mut(&mut self.declarations)
    }
}

impl From<Vec<Declaration>> for Tools {
    fn from(declarations: Vec<Declaration>) -> Self {
        Tools::new(declarations)
    }
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.declarations.iter()).finish()
    }
}

impl PartialEq for Tools {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.declarations, &other.declarations)
            || self.declarations == other.declarations
    }
}
