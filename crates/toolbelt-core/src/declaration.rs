//! What a model is told about a tool: its name, purpose, argument schema and behaviour hints.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{JsonObject, ToolError, ToolName};

/// Behaviour hints about a tool, used for scheduling, retry, approval and MCP annotations.
///
/// Hints are promises made by the tool's author; they are not enforced. The executor trusts
/// `concurrency_safe` to decide what may overlap and `idempotent` to decide what may be retried.
///
/// Each hint is `None` until the author declares it, so "not declared" and "declared false"
/// stay apart: MCP gives an absent `destructiveHint` and `openWorldHint` the cautious default
/// `true`, and a relay that turned an absent hint into `false` would invite clients to
/// auto-approve a tool nobody vouched for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolMeta {
    /// The tool does not change its environment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The tool may destroy or overwrite data (a UI may ask for approval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Calling it twice with the same arguments has the effect of calling it once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// The tool talks to an open world (the web, a third-party API), not a closed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
    /// Whether calls may overlap with other calls. `None` means "not declared": the
    /// `Parallel` mode pools it, the `Mixed` mode runs it alone; either way the executor
    /// never runs two calls not declared `Some(true)` of one tool set at once.
    pub concurrency_safe: Option<bool>,
    /// The largest result, in bytes, the model should see before it is offloaded or cut.
    pub max_result_size: Option<usize>,
}

impl ToolMeta {
    /// Whether the tool is declared read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only == Some(true)
    }

    /// Whether the tool is declared idempotent (safe to retry).
    pub fn is_idempotent(&self) -> bool {
        self.idempotent == Some(true)
    }
}

/// A tool's declaration: everything a model (or an MCP client) sees about it.
///
/// ```
/// use serde_json::json;
/// use toolbelt_core::Declaration;
///
/// let decl = Declaration::new("greet", "Greets someone by name")?
///     .with_input_schema(json!({
///         "type": "object",
///         "properties": { "name": { "type": "string" } },
///         "required": ["name"]
///     }))?
///     .read_only();
/// assert_eq!(decl.required_properties(), vec!["name"]);
/// # Ok::<(), toolbelt_core::ToolError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Declaration {
    /// The name the model calls the tool by.
    pub name: ToolName,
    /// A short human-readable name for user interfaces (MCP's `title`), when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, when to use it and its constraints (empty when none was given).
    pub description: String,
    /// A JSON Schema object describing the arguments.
    pub input_schema: JsonObject,
    /// A JSON Schema object describing the structured result, when the tool declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Behaviour hints.
    #[serde(default)]
    pub meta: ToolMeta,
    /// Metadata for clients, not the model (MCP's `_meta` on a tool), carried unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_meta: Option<JsonObject>,
    /// Set when the model may write the tool's one string argument as plain text in a
    /// grammar, without JSON around it (a freeform, `custom`, tool in the OpenAI Responses
    /// API). Dialects without freeform tools use `input_schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeform: Option<FreeformInput>,
}

/// A tool whose input is one string the model writes as text: which argument receives it and
/// the grammar it follows.
///
/// A dialect that declares freeform tools sends the grammar in place of the input schema and
/// turns the text the model writes back into `{argument: text}`, so the tool itself sees the
/// same arguments whichever way the model called it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeformInput {
    /// The string argument of `input_schema` the text goes to.
    pub argument: String,
    /// The grammar's notation: `lark` or `regex`.
    pub syntax: String,
    /// The grammar itself.
    pub definition: String,
}

/// The schema of a tool that takes no arguments.
pub fn empty_object_schema() -> JsonObject {
    match json!({"type": "object", "properties": {}}) {
        Value::Object(map) => map,
        _ => unreachable!("a json! object literal is an object"),
    }
}

/// Checks that `schema` is a JSON object and returns it as one.
pub fn schema_object(tool: &str, schema: Value) -> Result<JsonObject, ToolError> {
    match schema {
        Value::Object(map) => Ok(map),
        other => Err(ToolError::InvalidDeclaration {
            tool: tool.to_string(),
            reason: format!("a schema must be a JSON object, got {other}"),
        }),
    }
}

impl Declaration {
    /// A declaration with a checked name and an empty-object input schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Result<Self, ToolError> {
        Ok(Self {
            name: ToolName::new(name)?,
            title: None,
            description: description.into(),
            input_schema: empty_object_schema(),
            output_schema: None,
            meta: ToolMeta::default(),
            client_meta: None,
            freeform: None,
        })
    }

    /// Replaces the input schema; it must be a JSON object.
    pub fn with_input_schema(mut self, schema: Value) -> Result<Self, ToolError> {
        self.input_schema = schema_object(&self.name, schema)?;
        Ok(self)
    }

    /// Sets (or with `None` removes) the output schema; it must be a JSON object.
    pub fn with_output_schema(mut self, schema: Option<Value>) -> Result<Self, ToolError> {
        self.output_schema = schema.map(|s| schema_object(&self.name, s)).transpose()?;
        Ok(self)
    }

    /// Sets (or with `None` removes) the human-readable title.
    pub fn with_title(mut self, title: Option<String>) -> Self {
        self.title = title;
        self
    }

    /// Lets the model write argument `freeform.argument` as plain text in its grammar where
    /// the dialect allows it (see [`FreeformInput`]).
    pub fn with_freeform(mut self, freeform: FreeformInput) -> Self {
        self.freeform = Some(freeform);
        self
    }

    /// Replaces all behaviour hints.
    pub fn with_meta(mut self, meta: ToolMeta) -> Self {
        self.meta = meta;
        self
    }

    /// Marks the tool read-only (and therefore not destructive).
    pub fn read_only(mut self) -> Self {
        self.meta.read_only = Some(true);
        self.meta.destructive = Some(false);
        self
    }

    /// Marks the tool destructive (and therefore not read-only).
    pub fn destructive(mut self) -> Self {
        self.meta.read_only = Some(false);
        self.meta.destructive = Some(true);
        self
    }

    /// Marks the tool idempotent (safe to retry).
    pub fn idempotent(mut self) -> Self {
        self.meta.idempotent = Some(true);
        self
    }

    /// Marks the tool as talking to an open world.
    pub fn open_world(mut self) -> Self {
        self.meta.open_world = Some(true);
        self
    }

    /// Marks the tool as working in a closed world (its own machine, not the web).
    pub fn closed_world(mut self) -> Self {
        self.meta.open_world = Some(false);
        self
    }

    /// Declares whether calls may overlap with others.
    pub fn concurrency_safe(mut self, safe: bool) -> Self {
        self.meta.concurrency_safe = Some(safe);
        self
    }

    /// Sets the largest result the model should see in full.
    pub fn max_result_size(mut self, bytes: usize) -> Self {
        self.meta.max_result_size = Some(bytes);
        self
    }

    /// The names in the input schema's top-level `required` array.
    pub fn required_properties(&self) -> Vec<&str> {
        required_properties(&self.input_schema)
    }
}

/// The names in a schema's top-level `required` array.
pub fn required_properties(schema: &JsonObject) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_object_schemas_are_refused() {
        let d = Declaration::new("t", "d").unwrap();
        let err = d.with_input_schema(json!("string")).unwrap_err();
        assert!(matches!(err, ToolError::InvalidDeclaration { .. }));
    }

    #[test]
    fn read_only_clears_destructive() {
        let d = Declaration::new("t", "d")
            .unwrap()
            .destructive()
            .read_only();
        assert_eq!(
            (d.meta.read_only, d.meta.destructive),
            (Some(true), Some(false))
        );
    }

    #[test]
    fn undeclared_hints_stay_undeclared_in_json() {
        let d = Declaration::new("t", "d").unwrap();
        assert_eq!(d.meta, ToolMeta::default());
        let hints = |d: &Declaration| {
            let json = serde_json::to_value(d).unwrap();
            ["read_only", "destructive", "idempotent", "open_world"]
                .map(|hint| json["meta"].get(hint).cloned())
        };
        assert_eq!(hints(&d), [None, None, None, None]);
        assert!(serde_json::to_value(&d).unwrap().get("title").is_none());
        let d = d.idempotent().closed_world();
        assert_eq!(
            hints(&d),
            [None, None, Some(json!(true)), Some(json!(false))]
        );
        let back: Declaration = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn declarations_round_trip_through_json() {
        let d = Declaration::new("t", "d")
            .unwrap()
            .concurrency_safe(true)
            .with_output_schema(Some(json!({"type": "object"})))
            .unwrap();
        let back: Declaration = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(back, d);
    }
}
