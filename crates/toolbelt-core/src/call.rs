//! A model's tool call: the one shape every layer passes around.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One tool call as a model emits it: its `tool_call_id`, the tool's name and the raw JSON
/// arguments (which may be empty, or not quite JSON: the executor repairs them).
///
/// The model clients read it from their wire formats, the agent stores it in the
/// conversation, and the executor runs it, all with this one type; each wire format maps to
/// and from it at its own edge.
///
/// As JSON it takes the chat completions shape, which stored sessions, event streams and
/// most tools already speak: `{"id", "type": "function", "function": {"name",
/// "arguments"}}`. The flat `{"id", "name", "arguments"}` is read as well.
///
/// ```
/// use toolbelt_core::ToolCall;
/// let call = ToolCall::new("call_1", "Read", r#"{"file_path":"notes.txt"}"#);
/// assert_eq!(call.name, "Read");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ToolCall {
    /// The `tool_call_id` the model gave the call; the result must carry it back.
    pub id: String,
    /// The name of the tool the model asked for (it may not exist).
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
}

impl ToolCall {
    /// A call with this id, tool name and raw arguments.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// The JSON shape written: chat completions' nested `function`.
#[derive(Serialize)]
struct Written<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WrittenFunction<'a>,
}

#[derive(Serialize)]
struct WrittenFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// The JSON shapes read: nested under `function`, or flat.
#[derive(Deserialize)]
struct Read {
    #[serde(default)]
    id: String,
    #[serde(default)]
    function: Option<ReadFunction>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct ReadFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        Written {
            id: &self.id,
            kind: "function",
            function: WrittenFunction {
                name: &self.name,
                arguments: &self.arguments,
            },
        }
        .serialize(out)
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        let read = Read::deserialize(input)?;
        Ok(match read.function {
            Some(function) => ToolCall::new(read.id, function.name, function.arguments),
            None => ToolCall::new(read.id, read.name, read.arguments),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_nested_and_read_in_both_shapes() {
        let call = ToolCall::new("c1", "Read", "{}");
        let text = serde_json::to_string(&call).unwrap();
        assert_eq!(
            text,
            r#"{"id":"c1","type":"function","function":{"name":"Read","arguments":"{}"}}"#
        );
        assert_eq!(serde_json::from_str::<ToolCall>(&text).unwrap(), call);
        let flat = r#"{"id":"c1","name":"Read","arguments":"{}"}"#;
        assert_eq!(serde_json::from_str::<ToolCall>(flat).unwrap(), call);
    }
}
