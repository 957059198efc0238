//! Building the final assistant message out of streamed deltas.
//!
//! Tool calls stream as fragments keyed by `index`: the first fragment of a call usually
//! carries its id and name, later ones pieces of the arguments. Providers differ in the
//! details (some repeat the id on every fragment, some send the whole call in one fragment,
//! some omit `index` and send calls one after another), so fragments are merged by index, an
//! id or name is taken from whichever fragment has it, and a repeated identical name is not
//! appended twice.

use crate::{Delta, Message, ToolCall, ToolCallDelta};

/// Accumulates deltas into the final message.
#[derive(Debug, Default)]
pub struct MessageAssembler {
    content: String,
    reasoning: String,
    calls: Vec<(usize, ToolCall)>,
}

impl MessageAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one delta.
    pub fn push(&mut self, delta: &Delta) {
        self.content.push_str(&delta.content);
        self.reasoning.push_str(&delta.reasoning);
        for fragment in &delta.tool_calls {
            self.push_tool_call(fragment);
        }
    }

    fn push_tool_call(&mut self, fragment: &ToolCallDelta) {
        let position = match self.calls.iter().position(|(i, _)| *i == fragment.index) {
            Some(position) => position,
            None => {
                self.calls.push((fragment.index, ToolCall::new("", "", "")));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[position].1;
        if let Some(id) = fragment.id.as_deref().filter(|id| !id.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(name) = fragment.name.as_deref().filter(|n| !n.is_empty()) {
            // Most servers send the name once; a few send it whole on every fragment, and
            // a few in pieces. Appending unless it repeats handles all three.
            if call.name != name {
                call.name.push_str(name);
            }
        }
        call.arguments.push_str(&fragment.arguments);
    }

    /// The text so far.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The complete assistant message, tool calls in index order. Calls without an id get a
    /// generated one (`call_<index>`) because the tool's result must quote one.
    pub fn finish(mut self) -> Message {
        self.calls.sort_by_key(|(index, _)| *index);
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{index}");
                }
                call
            })
            .collect();
        let mut message = Message::assistant_tool_calls(self.content, tool_calls);
        message.reasoning = self.reasoning;
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> Delta {
        Delta {
            tool_calls: vec![ToolCallDelta {
                index,
                id: id.map(str::to_string),
                name: name.map(str::to_string),
                arguments: args.to_string(),
            }],
            ..Delta::default()
        }
    }

    #[test]
    fn interleaved_fragments_are_assembled_by_index() {
        let mut asm = MessageAssembler::new();
        asm.push(&fragment(1, Some("b"), Some("second"), ""));
        asm.push(&fragment(0, Some("a"), Some("first"), "{\"x\":"));
        asm.push(&fragment(1, None, None, "{}"));
        asm.push(&fragment(0, None, None, "1}"));
        let message = asm.finish();
        assert_eq!(
            message.tool_calls[0],
            ToolCall::new("a", "first", "{\"x\":1}")
        );
        assert_eq!(message.tool_calls[1], ToolCall::new("b", "second", "{}"));
    }

    #[test]
    fn a_name_repeated_on_every_fragment_is_not_doubled() {
        let mut asm = MessageAssembler::new();
        asm.push(&fragment(0, Some("a"), Some("read"), "{"));
        asm.push(&fragment(0, Some("a"), Some("read"), "}"));
        assert_eq!(asm.finish().tool_calls[0].name, "read");
    }

    #[test]
    fn calls_without_ids_get_one() {
        let mut asm = MessageAssembler::new();
        asm.push(&fragment(0, None, Some("read"), "{}"));
        assert_eq!(asm.finish().tool_calls[0].id, "call_0");
    }
}
