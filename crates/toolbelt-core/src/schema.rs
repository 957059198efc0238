//! JSON Schema generation for typed tools, with schemars.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::JsonObject;

/// The JSON Schema of `T`, shaped for a model.
///
/// - Subschemas are inlined (no `$ref`/`$defs` for non-recursive types): models follow inline
///   schemas more reliably.
/// - The root's `$schema` and `title` (the Rust type's name, meaningless to a model) are
///   removed; doc comments on the type and its fields stay as `description`s.
/// - `Option<T>` and `#[serde(default)]` fields are not `required`; unit-variant enums become
///   `enum` lists.
pub fn schema_for<T: JsonSchema>() -> JsonObject {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut object = match Value::from(schema) {
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
