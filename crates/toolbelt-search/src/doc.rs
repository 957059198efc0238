//! [`ToolDoc`]: what the index knows about one tool, and [`Hit`]: one search result.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::tokenize;

/// How deep the parameter schema is walked for names and descriptions.
///
/// Real tools nest two or three levels (an object of options, an array of items); a bound keeps
/// a hostile schema from costing more than its size, and the walk is a loop, so no depth can
/// overflow the stack.
pub(crate) const MAX_SCHEMA_DEPTH: usize = 6;
/// How many parameters are taken from one schema, so one giant tool cannot dominate the index.
pub(crate) const MAX_PARAMETERS: usize = 256;

/// One tool as the search index sees it: its name, description and JSON Schema parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDoc {
    /// The name the model calls the tool by, kept exactly as given (dots included).
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON Schema of the arguments (`Value::Null` or `{}` when there are none).
    pub parameters: Value,
}

/// One search result: a tool name and its score (higher is better; scales differ by method).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// The tool's name.
    pub name: String,
    /// The score under the method that produced it.
    pub score: f32,
}

/// A parameter found in a schema: its property name and its description (possibly empty).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Param<'a> {
    pub(crate) name: &'a str,
    pub(crate) description: &'a str,
}

impl ToolDoc {
    /// A document with the given name, description and parameter schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolDoc {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }

    /// The document for a tool declaration (name, description and input schema).
    pub fn from_declaration(d: &toolbelt_core::Declaration) -> Self {
        ToolDoc {
            name: d.name.as_str().to_owned(),
            description: d.description.clone(),
            parameters: Value::Object(d.input_schema.clone()),
        }
    }

    /// Stable hex hash of name+description+canonical parameters: the embedding cache key.
    ///
    /// SHA-256 over length-prefixed fields, with object keys sorted, so the same declaration
    /// hashes the same in every process and key order in the schema does not matter.
    pub fn content_hash(&self) -> String {
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(self.name.as_bytes());
        field(self.description.as_bytes());
        let mut canonical = String::new();
        toolbelt_core::write_canonical_json(&mut canonical, &self.parameters);
        field(canonical.as_bytes());
        let digest = hasher.finalize();
        let mut hex = String::with_capacity(digest.len() * 2);
        for byte in digest {
            hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
            hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
        }
        hex
    }

    /// The text embedded for this tool (name split into words, description, parameter names and descriptions).
    pub fn embedding_text(&self) -> String {
        let mut text = tokenize::name_words(&self.name).join(" ");
        if !self.description.trim().is_empty() {
            text.push_str(": ");
            text.push_str(self.description.trim());
        }
        let params = self.params();
        if !params.is_empty() {
            text.push_str("\nParameters:");
            for (i, p) in params.iter().enumerate() {
                text.push_str(if i == 0 { " " } else { "; " });
                text.push_str(&tokenize::name_words(p.name).join(" "));
                if !p.description.trim().is_empty() {
                    text.push_str(" (");
                    text.push_str(p.description.trim());
                    text.push(')');
                }
            }
        }
        text
    }

    /// The parameters named in the schema: `properties` of objects, walked into nested
    /// objects, array `items` and `anyOf`/`oneOf`/`allOf` branches, breadth first, at most
    /// [`MAX_SCHEMA_DEPTH`] levels and [`MAX_PARAMETERS`] entries.
    pub(crate) fn params(&self) -> Vec<Param<'_>> {
        let mut out = Vec::new();
        let mut queue: std::collections::VecDeque<(&Value, usize)> =
            std::collections::VecDeque::new();
        queue.push_back((&self.parameters, 0));
        while let Some((schema, depth)) = queue.pop_front() {
            if depth >= MAX_SCHEMA_DEPTH || out.len() >= MAX_PARAMETERS {
                continue;
            }
            let Some(obj) = schema.as_object() else {
                continue;
            };
            if let Some(props) = obj.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    if out.len() >= MAX_PARAMETERS {
                        break;
                    }
                    let description = sub.get("description").and_then(Value::as_str).unwrap_or("");
                    out.push(Param { name, description });
                    queue.push_back((sub, depth + 1));
                }
            }
            if let Some(items) = obj.get("items") {
                queue.push_back((items, depth + 1));
            }
            for key in ["anyOf", "oneOf", "allOf"] {
                if let Some(branches) = obj.get(key).and_then(Value::as_array) {
                    for b in branches {
                        queue.push_back((b, depth + 1));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_hash_ignores_key_order_and_sees_every_field() {
        let a = ToolDoc::new("t", "d", json!({"a": 1, "b": {"x": [1, 2], "y": null}}));
        let b = ToolDoc::new("t", "d", json!({"b": {"y": null, "x": [1, 2]}, "a": 1}));
        assert_eq!(a.content_hash(), b.content_hash());
        assert_eq!(a.content_hash().len(), 64);
        let c = ToolDoc::new("t", "d", json!({"a": 1, "b": {"x": [2, 1], "y": null}}));
        assert_ne!(a.content_hash(), c.content_hash());
        // Length prefixes: moving text between name and description changes the hash.
        let d = ToolDoc::new("td", "", json!({}));
        let e = ToolDoc::new("t", "d", json!({}));
        assert_ne!(d.content_hash(), e.content_hash());
    }

    #[test]
    fn params_walk_nested_schemas_and_stop_at_the_depth_bound() {
        let doc = ToolDoc::new(
            "t",
            "",
            json!({"type": "object", "properties": {
                "filter": {"type": "object", "description": "what to keep",
                    "properties": {"min_size": {"type": "integer"}}},
                "tags": {"type": "array", "items": {"type": "object",
                    "properties": {"label": {"description": "tag label"}}}}
            }}),
        );
        let names: Vec<_> = doc.params().iter().map(|p| p.name).collect();
        assert_eq!(names, ["filter", "tags", "min_size", "label"]);

        let mut deep = json!({"type": "string"});
        for i in 0..1_000 {
            deep = json!({"type": "object", "properties": {format!("p{i}"): deep}});
        }
        let doc = ToolDoc::new("deep", "", deep);
        assert_eq!(doc.params().len(), MAX_SCHEMA_DEPTH);
        // Hashing a deep schema does not recurse either.
        assert_eq!(doc.content_hash().len(), 64);
    }
}
