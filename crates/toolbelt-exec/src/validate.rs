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
        let validator = self.validator_for(tool)?;
        if validator.is_valid(args) {
            return Ok(());
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
