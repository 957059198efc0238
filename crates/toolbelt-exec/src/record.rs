//! A model's tool calls made fit to record, replay and run, in one step.
//!
//! Providers reject a replayed conversation whose calls share an id or whose arguments are not
//! a JSON object, and models produce both. The agent (and a graph's model node) therefore
//! passes every response's calls through [`record_calls`] before storing them, and runs
//! exactly what it recorded: the arguments are repaired here once, and the executor's own
//! repair step finds valid JSON and leaves it alone. Arguments beyond repair are recorded as
//! `{"_malformed_arguments": "<the first 200 characters>"}`; the executor refuses that
//! placeholder as invalid arguments, so the model is told its JSON was broken.

use std::collections::HashSet;

use serde_json::Value;
use toolbelt_core::{ToolCall, ToolError};

use crate::repair::repair_arguments;

/// The key of the object recorded in place of arguments that were not valid JSON.
pub const MALFORMED_ARGUMENTS_KEY: &str = "_malformed_arguments";

/// How much of malformed arguments is kept in the recorded call, in characters.
const MALFORMED_PREFIX_CHARS: usize = 200;

/// Makes `calls` fit to record and run, in place: ids unique and non-empty (`call_1`, a
/// repeated `x` becomes `x_2`), arguments a JSON object (empty ones are `{}`; others are
/// repaired when `repair` is on, else, or when repair fails, replaced by the placeholder
/// object named by [`MALFORMED_ARGUMENTS_KEY`]). Returns the ids of the calls whose
/// arguments repair changed, so a caller can say so.
///
/// ```
/// use toolbelt_exec::{ToolCall, record_calls};
/// let mut calls = vec![ToolCall::new("x", "Read", "{path: 'a.txt'}"), ToolCall::new("x", "Read", "")];
/// let repaired = record_calls(&mut calls, true);
/// assert_eq!(serde_json::from_str::<serde_json::Value>(&calls[0].arguments)?["path"], "a.txt");
/// assert_eq!((calls[1].id.as_str(), calls[1].arguments.as_str()), ("x_2", "{}"));
/// assert!(repaired.contains("x"));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn record_calls(calls: &mut [ToolCall], repair: bool) -> HashSet<String> {
    let mut taken = HashSet::new();
    let mut repaired = HashSet::new();
    for (index, call) in calls.iter_mut().enumerate() {
        call.id = unique_id(&call.id, index, &mut taken);
        if let Some(fixed) = recorded_arguments(&call.arguments, repair) {
            if fixed.repaired {
                repaired.insert(call.id.clone());
            }
            call.arguments = fixed.text;
        }
    }
    repaired
}

/// `id`, or `call_{index + 1}` when empty, made unique among `taken` with a `_2`, `_3`, ...
/// suffix.
fn unique_id(id: &str, index: usize, taken: &mut HashSet<String>) -> String {
    let base = if id.trim().is_empty() {
        format!("call_{}", index + 1)
    } else {
        id.to_string()
    };
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{base}_{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// New argument text, or `None` when `arguments` is already a JSON object.
struct Recorded {
    text: String,
    repaired: bool,
}

fn recorded_arguments(arguments: &str, repair: bool) -> Option<Recorded> {
    if arguments.trim().is_empty() {
        return Some(Recorded {
            text: "{}".to_string(),
            repaired: false,
        });
    }
    if is_json_object(arguments) {
        return None;
    }
    if repair
        && let Ok(fixed) = repair_arguments(arguments)
        && fixed.value.is_object()
    {
        return Some(Recorded {
            text: fixed.text,
            repaired: true,
        });
    }
    let prefix = toolbelt_core::text::char_prefix(arguments, MALFORMED_PREFIX_CHARS);
    Some(Recorded {
        text: serde_json::json!({ MALFORMED_ARGUMENTS_KEY: prefix }).to_string(),
        repaired: false,
    })
}

fn is_json_object(text: &str) -> bool {
    matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(_)))
}

/// The executor's refusal of recorded arguments that stand for malformed ones, saying what
/// was wrong with what the model wrote; `None` for any other arguments.
pub(crate) fn refuse_placeholder(arguments: &str) -> Option<ToolError> {
    // Cheap test first: this runs for every call.
    if !arguments.contains(MALFORMED_ARGUMENTS_KEY) {
        return None;
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(arguments) else {
        return None;
    };
    let [(key, Value::String(kept))] = object.iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    if key != MALFORMED_ARGUMENTS_KEY {
        return None;
    }
    let problem = match serde_json::from_str::<Value>(kept) {
        Err(error) => format!("arguments are not valid JSON: {error}"),
        Ok(_) => "arguments must be a JSON object".to_string(),
    };
    Some(ToolError::invalid_arguments(format!(
        "{problem} (the call began: {kept}); send the arguments again as one JSON object"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_arguments_keep_only_a_prefix_and_are_refused_with_the_parse_error() {
        let long = format!("{{\"text\": \"{}", "é".repeat(500));
        let mut calls = vec![ToolCall::new("a", "t", long)];
        assert!(record_calls(&mut calls, false).is_empty());
        let value: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        let kept = value[MALFORMED_ARGUMENTS_KEY].as_str().unwrap();
        assert_eq!(kept.chars().count(), MALFORMED_PREFIX_CHARS);
        let refused = refuse_placeholder(&calls[0].arguments).expect("refused");
        assert!(refused.to_string().contains("not valid JSON"), "{refused}");
    }

    #[test]
    fn a_json_array_is_recorded_as_malformed_and_refused_as_not_an_object() {
        let mut calls = vec![ToolCall::new("a", "t", "[1, 2]")];
        record_calls(&mut calls, true);
        let refused = refuse_placeholder(&calls[0].arguments).expect("refused");
        assert!(
            refused.to_string().contains("must be a JSON object"),
            "{refused}"
        );
    }

    #[test]
    fn valid_objects_are_kept_byte_for_byte_and_not_refused() {
        let text = r#"{ "path" : "a.txt", "_malformed_arguments_note": 1 }"#;
        let mut calls = vec![ToolCall::new("", "t", text)];
        assert!(record_calls(&mut calls, true).is_empty());
        assert_eq!(calls[0].arguments, text);
        assert_eq!(calls[0].id, "call_1");
        assert!(refuse_placeholder(text).is_none());
    }
}
