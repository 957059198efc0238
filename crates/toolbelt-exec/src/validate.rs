//! Argument validation against a tool's input schema, with compiled validators cached per
//! tool.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};

use serde_json::Value;
use toolbelt_core::{DynTool, JsonObject, Tool, ToolError};

/// A compiled validator and the tool it was compiled for.
struct Entry {
    /// Identifies the tool instance. Holding a `Weak` keeps the allocation's address from
    /// being reused, so a pointer comparison cannot mistake a new tool for the old one.
    tool: Weak<dyn Tool>,
    schema: Arc<JsonObject>,
    validator: Arc<jsonschema::Validator>,
}

/// Compiled validators, one per tool name, recompiled when the tool behind a name changes.
///
/// The cache is keyed by name and checked against the tool's identity (the `Arc` it was
/// compiled for) and, failing that, the schema itself: a tool replaced in the registry gets
/// a fresh validator, and a tool set that hands out new `Arc`s with the same schema on every
/// listing does not pay for a recompilation.
#[derive(Default)]
pub struct ValidatorCache {
    entries: RwLock<HashMap<String, Entry>>,
}

impl std::fmt::Debug for ValidatorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.entries.read().map(|e| e.len()).unwrap_or(0);
        write!(f, "ValidatorCache({len} validators)")
    }
}

impl ValidatorCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `args` against `tool`'s input schema.
    ///
    /// On failure the error is [`ToolError::SchemaViolation`] listing every violation, each
    /// prefixed with its JSON pointer (`/address/zip: ...`; the root is `/`). A schema that
    /// does not compile is [`ToolError::InvalidDeclaration`].
    pub fn validate(&self, tool: &DynTool, args: &Value) -> Result<(), ToolError> {
        self.validate_without_nulls(tool, args).map(drop)
    }

    /// [`Self::validate`], and the arguments the tool is to see: `Some` with the `null`s of
    /// optional properties removed when only their removal made `args` valid (OpenAI strict
    /// mode makes every optional property required and nullable, so a model sends `null` for
    /// "not given"; the tool sees the arguments it declared), `None` when `args` are valid
    /// as they are.
    pub(crate) fn validate_without_nulls(
        &self,
        tool: &DynTool,
        args: &Value,
    ) -> Result<Option<Value>, ToolError> {
        let validator = self.validator_for(tool)?;
        if validator.is_valid(args) {
            return Ok(None);
        }
        // An explicit `null` for an optional property means "not given": models send it often,
        // and typed tools decode it as `None`, though portable schemas type optional properties
        // without a `null` union (see `toolbelt_core::schema::schema_for`).
        let schema = Value::Object(tool.declaration().input_schema.clone());
        let mut without_nulls = args.clone();
        if drop_optional_nulls(&schema, &mut without_nulls, 0) && validator.is_valid(&without_nulls)
        {
            return Ok(Some(without_nulls));
        }
        let violations = validator
            .iter_errors(args)
            .map(|error| {
                let path = error.instance_path().to_string();
                let path = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                format!("{path}: {error}")
            })
            .collect();
        Err(ToolError::SchemaViolation { violations })
    }

    /// How many validators are cached.
    pub fn len(&self) -> usize {
        self.entries.read().map(|e| e.len()).unwrap_or(0)
    }

    /// Whether no validator is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn validator_for(&self, tool: &DynTool) -> Result<Arc<jsonschema::Validator>, ToolError> {
        let name = tool.name();
        let schema = &tool.declaration().input_schema;
        if let Ok(entries) = self.entries.read()
            && let Some(entry) = entries.get(name)
        {
            if std::ptr::addr_eq(entry.tool.as_ptr(), Arc::as_ptr(tool)) {
                return Ok(entry.validator.clone());
            }
            if *entry.schema == *schema {
                let validator = entry.validator.clone();
                drop(entries);
                self.store(name, tool, entry_schema(schema), validator.clone());
                return Ok(validator);
            }
        }
        let compiled =
            jsonschema::validator_for(&Value::Object(schema.clone())).map_err(|err| {
                ToolError::InvalidDeclaration {
                    tool: name.to_string(),
                    reason: format!("its input schema does not compile: {err}"),
                }
            })?;
        let validator = Arc::new(compiled);
        self.store(name, tool, entry_schema(schema), validator.clone());
        Ok(validator)
    }

    fn store(
        &self,
        name: &str,
        tool: &DynTool,
        schema: Arc<JsonObject>,
        validator: Arc<jsonschema::Validator>,
    ) {
        if let Ok(mut entries) = self.entries.write() {
            entries.insert(
                name.to_string(),
                Entry {
                    tool: Arc::downgrade(tool),
                    schema,
                    validator,
                },
            );
        }
    }
}

fn entry_schema(schema: &JsonObject) -> Arc<JsonObject> {
    Arc::new(schema.clone())
}

/// Removes the `null` values of properties that `schema` does not require, following nested
/// `properties` and `items` (to a bounded depth); whether any were removed.
fn drop_optional_nulls(schema: &Value, value: &mut Value, depth: usize) -> bool {
    const MAX_DEPTH: usize = 32;
    if depth > MAX_DEPTH {
        return false;
    }
    let mut dropped = false;
    match value {
        Value::Object(object) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return false;
            };
            let required = schema.get("required").and_then(Value::as_array);
            let is_required = |name: &str| required.is_some_and(|r| r.iter().any(|n| n == name));
            object.retain(|name, v| {
                let drop = v.is_null() && properties.contains_key(name) && !is_required(name);
                dropped |= drop;
                !drop
            });
            for (name, v) in object.iter_mut() {
                if let Some(sub) = properties.get(name) {
                    dropped |= drop_optional_nulls(sub, v, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for item in items {
                    dropped |= drop_optional_nulls(sub, item, depth + 1);
                }
            }
        }
        _ => {}
    }
    dropped
}
