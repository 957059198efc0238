//! One-line tool signatures such as `search(query: string, limit?: number) -> {hits: object[]}`,
//! derived from a tool's schemas so a model can scan a catalogue without reading full schemas.

use serde_json::{Map, Value};

/// How deep nested objects are spelled out; deeper ones render as `object` so a signature
/// stays one readable line.
const MAX_DEPTH: usize = 2;

/// Renders `name(params) -> result` from an input schema and an optional output schema.
///
/// Required parameters come first, in the order of the schema's `required` list; optional ones
/// follow (marked `?`) in the schema's property order. Without an output schema there is no
/// `->` part.
pub fn render_signature(
    name: &str,
    input_schema: &Map<String, Value>,
    output_schema: Option<&Map<String, Value>>,
) -> String {
    let params = render_fields(input_schema, 0);
    match output_schema {
        Some(output) => format!("{name}({params}) -> {}", render_type(output, 0)),
        None => format!("{name}({params})"),
    }
}

/// `a: T, b?: U` for an object schema's properties, required ones first.
fn render_fields(schema: &Map<String, Value>, depth: usize) -> String {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return String::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let required_fields = required
        .iter()
        .filter_map(|name| properties.get(*name).map(|p| (*name, p, "")));
    let optional_fields = properties
        .iter()
        .filter(|(name, _)| !required.contains(&name.as_str()))
        .map(|(name, p)| (name.as_str(), p, "?"));
    let parts: Vec<String> = required_fields
        .chain(optional_fields)
        .map(|(name, property, mark)| {
            format!("{name}{mark}: {}", render_property(property, depth + 1))
        })
        .collect();
    parts.join(", ")
}

fn render_property(property: &Value, depth: usize) -> String {
    match property {
        Value::Object(schema) => render_type(schema, depth),
        _ => "any".to_string(),
    }
}

/// A compact type: `string`, `number`, `"a"|"b"`, `string[]`, `{x: number}`, `string|null`.
fn render_type(schema: &Map<String, Value>, depth: usize) -> String {
    if let Some(Value::Array(values)) = schema.get("enum") {
        let shown: Vec<String> = values.iter().map(Value::to_string).collect();
        return shown.join("|");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(combinator) {
            let shown: Vec<String> = options.iter().map(|o| render_property(o, depth)).collect();
            return shown.join("|");
        }
    }
    match schema.get("type") {
        Some(Value::String(kind)) => render_kind(kind, schema, depth),
        Some(Value::Array(kinds)) => {
            let shown: Vec<String> = kinds
                .iter()
                .filter_map(Value::as_str)
                .map(|kind| render_kind(kind, schema, depth))
                .collect();
            shown.join("|")
        }
        _ if schema.contains_key("properties") => render_kind("object", schema, depth),
        _ => "any".to_string(),
    }
}

fn render_kind(kind: &str, schema: &Map<String, Value>, depth: usize) -> String {
    match kind {
        "array" => match schema.get("items") {
            Some(Value::Object(items)) => {
                let inner = render_type(items, depth);
                if inner.contains('|') {
                    format!("({inner})[]")
                } else {
                    format!("{inner}[]")
                }
            }
            _ => "any[]".to_string(),
        },
        "object" if depth < MAX_DEPTH && schema.contains_key("properties") => {
            format!("{{{}}}", render_fields(schema, depth))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn signatures_render_required_then_optional_parameters_and_the_result() {
        let table: &[(Value, Option<Value>, &str)] = &[
            (
                json!({"type":"object","properties":{"limit":{"type":"number"},"query":{"type":"string"}},"required":["query"]}),
                None,
                "search(query: string, limit?: number)",
            ),
            (json!({"type":"object","properties":{}}), None, "search()"),
            (json!({"type":"object"}), None, "search()"),
            (
                json!({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}),
                Some(
                    json!({"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"]}),
                ),
                "search(a: integer, b: integer) -> {sum: integer}",
            ),
            (
                json!({"type":"object","properties":{
                    "mode":{"type":"string","enum":["fast","slow"]},
                    "tags":{"type":"array","items":{"type":"string"}},
                    "when":{"type":["string","null"]},
                    "either":{"anyOf":[{"type":"string"},{"type":"number"}]},
                    "any":{}
                },"required":["mode"]}),
                Some(
                    json!({"type":"object","properties":{"hits":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"}}}}}}),
                ),
                "search(mode: \"fast\"|\"slow\", any?: any, either?: string|number, tags?: string[], when?: string|null) -> {hits?: {url?: string}[]}",
            ),
        ];
        for (input, output, expected) in table {
            let output = output.clone().map(obj);
            assert_eq!(
                render_signature("search", &obj(input.clone()), output.as_ref()),
                *expected
            );
        }
    }

    #[test]
    fn deep_objects_collapse_to_keep_one_line() {
        let input = obj(json!({"type":"object","properties":{
            "outer":{"type":"object","properties":{"inner":{"type":"object","properties":{"x":{"type":"number"}}}}}
        },"required":["outer"]}));
        assert_eq!(
            render_signature("deep", &input, None),
            "deep(outer: {inner?: object})"
        );
    }
}
