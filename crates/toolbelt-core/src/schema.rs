//! JSON Schema generation for typed tools, with schemars.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::JsonObject;

/// The JSON Schema of `T`, shaped for a model and portable to other validators.
///
/// - Subschemas are inlined (no `$ref`/`$defs` for non-recursive types): models follow inline
///   schemas more reliably.
/// - The root's `$schema` and `title` (the Rust type's name, meaningless to a model) are
///   removed; doc comments on the type and its fields stay as `description`s.
/// - `Option<T>` and `#[serde(default)]` fields are not `required`; unit-variant enums become
///   `enum` lists.
/// - Only standard `format`s remain (schemars' `uint`, `int64`, `double`, ... are dropped;
///   unsigned integers keep their `minimum: 0`), since strict validators such as Ajv refuse
///   unknown formats.
/// - An optional property is typed as its value (`"type": "integer"`, not
///   `["integer", "null"]`), so clients that coerce arguments by type (the MCP inspector) can;
///   `null` stays only where a property is required and nullable. Decoding into `Option<T>`
///   still accepts an explicit `null`.
pub fn schema_for<T: JsonSchema>() -> JsonObject {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut root = Value::from(schema);
    make_portable(&mut root);
    let mut object = match root {
        Value::Object(map) => map,
        // `true`/`false` schemas (for `Value` and friends) accept anything or nothing.
        Value::Bool(_) => JsonObject::new(),
        _ => JsonObject::new(),
    };
    object.remove("$schema");
    object.remove("title");
    object
}

/// Whether a schema describes a JSON object (its `type` is `"object"`).
pub fn is_object_schema(schema: &JsonObject) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    }
}

/// The `format` values JSON Schema (draft 2020-12) defines; validators know these.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose value is one subschema.
const SUBSCHEMA_KEYWORDS: &[&str] = &[
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];

/// Keywords whose value is an array of subschemas.
const SUBSCHEMA_LIST_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords whose value maps names to subschemas.
const SUBSCHEMA_MAP_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Rewrites every schema in `root` for portability (see [`schema_for`]).
///
/// The walk uses an explicit stack, so a deeply nested schema cannot overflow the call stack,
/// and it descends only through subschema keywords: data such as `enum`, `const`, `default`
/// and `examples`, and property *names* (a property may well be called `format`), are left
/// alone.
pub(crate) fn make_portable(root: &mut Value) {
    let mut stack: Vec<&mut Value> = vec![root];
    while let Some(node) = stack.pop() {
        let Value::Object(schema) = node else {
            continue;
        };
        if let Some(Value::String(format)) = schema.get("format")
            && !STANDARD_FORMATS.contains(&format.as_str())
        {
            schema.remove("format");
        }
        let required: Vec<String> = match schema.get("required") {
            Some(Value::Array(names)) => names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if !required.contains(name) {
                    drop_null(property);
                }
            }
        }
        for (keyword, value) in schema.iter_mut() {
            let keyword = keyword.as_str();
            if SUBSCHEMA_KEYWORDS.contains(&keyword) {
                stack.push(value);
            } else if SUBSCHEMA_LIST_KEYWORDS.contains(&keyword) {
                if let Value::Array(list) = value {
                    stack.extend(list.iter_mut());
                }
            } else if SUBSCHEMA_MAP_KEYWORDS.contains(&keyword)
                && let Value::Object(map) = value
            {
                stack.extend(map.values_mut());
            }
        }
    }
}

/// Makes an optional property's schema describe only its value: `null` leaves a `type`
/// union, an `enum` list and an `anyOf` of two, and a `null` default goes.
///
/// Left unchanged when taking `null` out would leave nothing (a schema that is only `null`).
fn drop_null(property: &mut Value) {
    let Value::Object(schema) = property else {
        return;
    };
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        let others: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        match others.len() {
            0 => return,
            1 => {
                schema.insert(
                    "type".to_owned(),
                    others.into_iter().next().unwrap_or_default(),
                );
            }
            _ => *types = others,
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum")
        && values.iter().any(Value::is_null)
        && values.iter().any(|v| !v.is_null())
    {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(branches)) = schema.get("anyOf")
        && branches.len() == 2
        && let Some(null_at) = branches.iter().position(is_null_schema)
        && let Value::Object(inner) = &branches[1 - null_at]
    {
        // The outer keywords (the field's own description, its default) win over the inner
        // schema's (the type's description): they say more about this property.
        let mut merged = inner.clone();
        schema.remove("anyOf");
        for (keyword, value) in std::mem::take(schema) {
            merged.insert(keyword, value);
        }
        *schema = merged;
    }
    if schema.get("default").is_some_and(Value::is_null) {
        schema.remove("default");
    }
}

/// Whether a schema accepts only `null` (`{"type": "null"}`, possibly with a description).
fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").is_some_and(|t| t == "null")
        && schema
            .as_object()
            .is_some_and(|s| s.keys().all(|k| k == "type" || k == "description"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::make_portable;

    #[test]
    fn a_deeply_nested_schema_is_rewritten_without_recursion() {
        // Far deeper than any type schemars produces; a recursive walk would overflow here.
        let depth = 100_000;
        let mut schema = json!({"type": "integer", "format": "uint64", "minimum": 0});
        for _ in 0..depth {
            // Built by hand: `json!` would serialize (recursively copy) the inner value.
            let mut array = crate::JsonObject::new();
            array.insert("type".to_owned(), json!("array"));
            array.insert("items".to_owned(), schema);
            schema = serde_json::Value::Object(array);
        }
        make_portable(&mut schema);
        let mut node = &schema;
        for _ in 0..depth {
            node = &node["items"];
        }
        assert_eq!(node, &json!({"type": "integer", "minimum": 0}));
        // serde_json's own drop is recursive and would overflow; that is not under test.
        std::mem::forget(schema);
    }

    #[test]
    fn data_and_property_names_are_not_mistaken_for_schemas() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "format": {"type": ["string", "null"], "format": "int64"},
                "mode": {"type": "string", "default": {"format": "uint"}, "enum": ["a"]}
            },
            "examples": [{"format": "uint"}]
        });
        make_portable(&mut schema);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "format": {"type": "string"},
                    "mode": {"type": "string", "default": {"format": "uint"}, "enum": ["a"]}
                },
                "examples": [{"format": "uint"}]
            })
        );
    }
}
