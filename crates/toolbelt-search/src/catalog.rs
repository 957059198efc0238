//! Reading tool catalogs: OpenAI function declarations or an MCP `tools/list` result.
//!
//! Accepted shapes:
//! - a JSON array of `{name, description, parameters}` (OpenAI function declarations) or of
//!   `{"type": "function", "function": {name, description, parameters}}` (OpenAI tools),
//!   mixed freely;
//! - an MCP `tools/list` result `{"tools": [{name, description, inputSchema}]}`, bare or
//!   inside a JSON-RPC response's `result`.
//!
//! Names are taken as given (dots, slashes and all): a catalog describes someone else's
//! tools, and the point is to find them by the names they really have. A missing or empty
//! name, a description that is not a string, a schema that is not an object, or a name seen
//! twice is an error naming the entry's index, and no partial catalog is returned.

use serde_json::{Map, Value};

use crate::SearchError;
use crate::doc::ToolDoc;

/// Parses an OpenAI-function JSON array or an MCP `tools/list` result (names kept as given).
///
/// ```
/// let docs = toolbelt_search::parse_catalog(
///     r#"{"tools": [{"name": "fs.read", "description": "Read a file",
///                    "inputSchema": {"type": "object"}}]}"#,
/// )?;
/// assert_eq!(docs[0].name, "fs.read");
/// # Ok::<(), toolbelt_search::SearchError>(())
/// ```
pub fn parse_catalog(json: &str) -> Result<Vec<ToolDoc>, SearchError> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| SearchError::Catalog(format!("not valid JSON: {e}")))?;
    let (entries, schema_key) = match &value {
        Value::Array(entries) => (entries, "parameters"),
        Value::Object(obj) => {
            let tools = obj
                .get("tools")
                .or_else(|| obj.get("result").and_then(|r| r.get("tools")));
            match tools {
                Some(Value::Array(entries)) => (entries, "inputSchema"),
                Some(_) => return Err(catalog("\"tools\" is not an array")),
                None => {
                    return Err(catalog(
                        "expected a JSON array of function declarations or an MCP tools/list \
                         result ({\"tools\": [...]})",
                    ));
                }
            }
        }
        _ => {
            return Err(catalog(
                "expected a JSON array of function declarations or an MCP tools/list result",
            ));
        }
    };

    let mut docs = Vec::with_capacity(entries.len());
    let mut first_seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        let fields = declaration_fields(entry, i)?;
        let name = match fields.get("name") {
            Some(Value::String(name)) if !name.trim().is_empty() => name.as_str(),
            Some(Value::String(_)) => return Err(entry_error(i, "\"name\" is empty")),
            Some(_) => return Err(entry_error(i, "\"name\" is not a string")),
            None => return Err(entry_error(i, "missing \"name\"")),
        };
        if let Some(first) = first_seen.insert(name, i) {
            return Err(entry_error(
                i,
                &format!("duplicate name {name:?} (first at entry {first})"),
            ));
        }
        let description = match fields.get("description") {
            None | Some(Value::Null) => "",
            Some(Value::String(d)) => d.as_str(),
            Some(_) => return Err(entry_error(i, "\"description\" is not a string")),
        };
        // MCP entries may come in an array too, and OpenAI ones in a tools list: take
        // whichever schema key is present, the shape's own first.
        let other_key = if schema_key == "parameters" {
            "inputSchema"
        } else {
            "parameters"
        };
        let parameters = match fields.get(schema_key).or_else(|| fields.get(other_key)) {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(_) => {
                return Err(entry_error(
                    i,
                    &format!("\"{schema_key}\" is not a JSON Schema object"),
                ));
            }
        };
        docs.push(ToolDoc::new(name, description, parameters));
    }
    Ok(docs)
}

/// The object holding an entry's name, description and schema: the entry itself, or its
/// `function` member when it is an OpenAI tool (`{"type": "function", "function": {..}}`).
fn declaration_fields(entry: &Value, i: usize) -> Result<&Map<String, Value>, SearchError> {
    let Value::Object(obj) = entry else {
        return Err(entry_error(i, "not a JSON object"));
    };
    match obj.get("type") {
        Some(Value::String(t)) if t == "function" => match obj.get("function") {
            Some(Value::Object(function)) => Ok(function),
            Some(_) => Err(entry_error(i, "\"function\" is not an object")),
            // The Responses API's flat form: {"type": "function", "name": .., "parameters": ..}.
            None if obj.contains_key("name") => Ok(obj),
            None => Err(entry_error(
                i,
                "\"type\": \"function\" without a \"function\" object",
            )),
        },
        Some(Value::String(t)) if !obj.contains_key("name") => Err(entry_error(
            i,
            &format!("unsupported tool type {t:?} (expected \"function\")"),
        )),
        _ => Ok(obj),
    }
}

fn catalog(message: &str) -> SearchError {
    SearchError::Catalog(message.to_owned())
}

fn entry_error(i: usize, message: &str) -> SearchError {
    SearchError::Catalog(format!("entry {i}: {message}"))
}
