//! Tool declarations as each provider accepts them, generated from the one
//! [`Declaration`]: the `tools` array of a request, the names the provider allows, and the
//! schema subset it takes.
//!
//! - **OpenAI strict mode** ([`ToolDialect::OpenAiStrict`], and the Responses API, which is
//!   strict by default): every object gets `additionalProperties: false` and lists all its
//!   properties in `required`; a property that was optional becomes nullable (the client
//!   turns a `null` the model sends for it back into "absent", see [`strip_added_nulls`]);
//!   `oneOf` becomes `anyOf`, `allOf` of objects is merged; keywords strict mode refuses are
//!   removed and stated in the description.
//! - **Gemini**: its `Schema` subset: upper-case types, `anyOf` for `oneOf` and type arrays,
//!   `enum` of strings for `const`, `nullable` for a `null` type, `$ref` inlined (recursion
//!   cut with a note), no `additionalProperties`, `patternProperties`, `allOf`; what is
//!   dropped is stated in the description.
//! - **Anthropic**: `input_schema` as written below the root; the root is one object (a
//!   root `allOf` merged).
//! - **Freeform tools** ([`Declaration::freeform`]): the Responses API gets a `custom` tool
//!   with the grammar, and the text the model writes comes back as `{argument: text}`; every
//!   other dialect gets the JSON schema.
//!
//! A name a provider refuses (a `.` for OpenAI and Anthropic, a leading digit or `-` for
//! Gemini) is rewritten, kept unique, and mapped back on the call ([`WireTools::original`]).
//! Every dialect wants the arguments as one object: a root `anyOf`/`oneOf` of objects (the
//! usual "either `path` or `url`") is joined into one, its alternatives stated in the
//! description. What cannot be expressed is simplified and explained; a tool whose
//! arguments cannot be one object at all is left out. Each rename and each tool left out
//! is a line of [`WireTools::warnings`], which the agent shows as a warning event: one tool
//! (an MCP server's, say) never makes every request of a run fail.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};
use toolbelt_core::Declaration;

/// The shapes a `tools` array can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolDialect {
    /// OpenAI chat completions, schemas as written.
    OpenAi,
    /// OpenAI chat completions with `strict: true`.
    OpenAiStrict,
    /// The OpenAI Responses API (strict function tools).
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini `generateContent` (`functionDeclarations`).
    Gemini,
}

impl ToolDialect {
    /// Every dialect, in the order `--dialect` lists them.
    pub const ALL: [ToolDialect; 5] = [
        ToolDialect::OpenAi,
        ToolDialect::OpenAiStrict,
        ToolDialect::OpenAiResponses,
        ToolDialect::Anthropic,
        ToolDialect::Gemini,
    ];

    /// The dialect's name (`openai`, `openai-strict`, `openai-responses`, `anthropic`,
    /// `gemini`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolDialect::OpenAi => "openai",
            ToolDialect::OpenAiStrict => "openai-strict",
            ToolDialect::OpenAiResponses => "openai-responses",
            ToolDialect::Anthropic => "anthropic",
            ToolDialect::Gemini => "gemini",
        }
    }
}

impl std::str::FromStr for ToolDialect {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|d| d.as_str() == name.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|d| d.as_str()).collect();
                format!("unknown dialect {name:?}: use one of {}", names.join(", "))
            })
    }
}

/// A request's tools in one dialect, with the way back from wire names.
#[derive(Debug, Clone, Default)]
pub struct WireTools {
    /// The `tools` entries (for Gemini, the `functionDeclarations` entries).
    pub tools: Vec<Value>,
    /// Wire name → declared name, for the names that were rewritten.
    renamed: HashMap<String, String>,
    /// Each tool renamed or left out, one line each (what a warning event says).
    pub warnings: Vec<String>,
    /// Wire name → the argument that receives the text, for tools declared freeform.
    freeform: HashMap<String, String>,
    /// Declared name → input schema, for a strict dialect (its calls' added `null`s are
    /// removed against it); empty otherwise.
    strict_schemas: HashMap<String, Value>,
}

impl WireTools {
    /// The declared name of the tool the provider calls `wire` (itself when not renamed).
    pub fn original<'a>(&'a self, wire: &'a str) -> &'a str {
        self.renamed.get(wire).map_or(wire, String::as_str)
    }

    /// The argument that receives the text the model writes for freeform tool `wire`, or
    /// `None` when the tool was declared with a JSON schema.
    pub fn freeform_argument(&self, wire: &str) -> Option<&str> {
        self.freeform.get(wire).map(String::as_str)
    }

    /// Maps a response's tool names back to the declared ones and, for a strict dialect,
    /// removes the `null`s strict mode made the model send for optional properties (see
    /// [`strip_added_nulls`]); a final response also carries the declarations' warnings.
    pub(crate) fn fix(&self, response: &mut crate::Response) {
        for fragment in &mut response.delta.tool_calls {
            if let Some(name) = &mut fragment.name
                && let Some(declared) = self.renamed.get(name.as_str())
            {
                *name = declared.clone();
            }
        }
        if !response.partial {
            response.warnings.extend(self.warnings.iter().cloned());
        }
        let Some(message) = &mut response.message else {
            return;
        };
        for call in &mut message.tool_calls {
            if let Some(declared) = self.renamed.get(&call.name) {
                call.name = declared.clone();
            }
            if let Some(schema) = self.strict_schemas.get(&call.name) {
                call.arguments = strip_added_nulls(&call.arguments, schema);
            }
        }
    }

    /// The wire name of declared tool `name`.
    pub fn wire_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.renamed
            .iter()
            .find(|(_, declared)| declared.as_str() == name)
            .map_or(name, |(wire, _)| wire.as_str())
    }
}

/// The tools of a request as `dialect` carries them.
pub fn wire_tools(dialect: ToolDialect, declarations: &[Declaration]) -> WireTools {
    let mut out = WireTools::default();
    let mut taken = HashSet::new();
    for declaration in declarations {
        let declared = declaration.name.as_str();
        let name = unique_name(dialect, declared, &mut taken);
        if name != declared {
            out.warnings.push(format!(
                "tool {declared} is sent to {} as {name}: the provider refuses the name \
                 as written (calls to {name} run {declared})",
                dialect.as_str()
            ));
            out.renamed.insert(name.clone(), declared.to_string());
        }
        let description = declaration.description.as_str();
        if let (ToolDialect::OpenAiResponses, Some(freeform)) = (dialect, &declaration.freeform) {
            out.tools.push(json!({"type": "custom", "name": name,
                "description": format!("{description}\n\nThis is a freeform tool: write the {} \
                    itself as the call's input, not JSON.", freeform.argument),
                "format": {"type": "grammar", "syntax": freeform.syntax,
                    "definition": freeform.definition}}));
            out.freeform.insert(name, freeform.argument.clone());
            continue;
        }
        let schema = Value::Object(declaration.input_schema.clone());
        if matches!(
            dialect,
            ToolDialect::OpenAiStrict | ToolDialect::OpenAiResponses
        ) {
            out.strict_schemas
                .insert(declared.to_string(), schema.clone());
        }
        let shaped = match dialect {
            ToolDialect::OpenAi => Ok(json!({"type": "function", "function": {
                "name": name, "description": description, "parameters": schema}})),
            ToolDialect::OpenAiStrict => strict_schema(&schema).map(|(parameters, notes)| {
                json!({"type": "function", "function": {"name": name,
                    "description": with_notes(description, &notes),
                    "parameters": parameters, "strict": true}})
            }),
            ToolDialect::OpenAiResponses => strict_schema(&schema).map(|(parameters, notes)| {
                json!({"type": "function", "name": name,
                    "description": with_notes(description, &notes),
                    "parameters": parameters, "strict": true})
            }),
            ToolDialect::Anthropic => anthropic_schema(&schema).map(|(schema, notes)| {
                json!({"name": name, "description": with_notes(description, &notes),
                    "input_schema": schema})
            }),
            ToolDialect::Gemini => gemini_schema(&schema).map(|(parameters, notes)| {
                json!({"name": name, "description": with_notes(description, &notes),
                    "parameters": parameters})
            }),
        };
        match shaped {
            Ok(tool) => out.tools.push(tool),
            // Sent with an empty schema the tool could only ever be called without
            // arguments: leaving it out is the honest choice, said once per request.
            Err(why) => out.warnings.push(format!(
                "tool {declared} is left out of requests to {}: {why}",
                dialect.as_str()
            )),
        }
    }
    out
}

fn with_notes(description: &str, notes: &[String]) -> String {
    if notes.is_empty() {
        return description.to_string();
    }
    format!(
        "{description}\n\nRules the schema above cannot state: {}.",
        notes.join("; ")
    )
}

/// A name within the dialect's rules, distinct from those already `taken`.
fn unique_name(dialect: ToolDialect, name: &str, taken: &mut HashSet<String>) -> String {
    let max = match dialect {
        ToolDialect::Anthropic => 128,
        _ => 64,
    };
    let mut base: String = name
        .chars()
        .map(|c| match (dialect, c) {
            (_, 'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-') => c,
            (ToolDialect::Gemini, '.') => c,
            _ => '_',
        })
        .collect();
    if dialect == ToolDialect::Gemini
        && !base.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    {
        base.insert(0, '_');
    }
    if base.is_empty() {
        base.push_str("tool");
    }
    base.truncate(max);
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        let suffix = format!("_{n}");
        let mut stem = base.clone();
        stem.truncate(max - suffix.len());
        candidate = stem + &suffix;
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// How deep `$ref`s are inlined before a recursive schema is cut.
const MAX_INLINE_DEPTH: usize = 6;

/// Resolves a local `$ref` (`#/$defs/X`, `#/definitions/X`) against `root`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let path = reference.strip_prefix('#')?;
    if path.is_empty() {
        return Some(root);
    }
    root.pointer(path)
}

/// The keywords OpenAI strict mode refuses (its documented unsupported list, taken
/// conservatively): they are removed and stated in the description.
const STRICT_REFUSED: &[&str] = &[
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "dependentRequired",
    "dependentSchemas",
    "not",
    "if",
    "then",
    "else",
    "default",
    "examples",
    "prefixItems",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
    "$schema",
    "$id",
    "$comment",
    "title",
];

/// The keywords strict mode keeps.
const STRICT_KEPT: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
];

/// A schema strict mode accepts, and the notes of what it could not keep; an error saying
/// why when the arguments cannot be described as one object.
pub(crate) fn strict_schema(schema: &Value) -> Result<(Value, Vec<String>), String> {
    let mut notes = Vec::new();
    let schema = join_root_alternatives(schema, &mut notes);
    let out = strict_node(&schema, &schema, 0, "", &mut notes);
    // The root must be a plain object schema.
    if out.get("type") != Some(&json!("object")) || out.get("anyOf").is_some() {
        return Err(not_an_object(&schema));
    }
    Ok((out, notes))
}

/// A schema Anthropic accepts: its own as written below the root, whose root must be an
/// object without `anyOf`, `oneOf` or `allOf` (the API refuses them "at the top level"),
/// so alternatives are joined and an `allOf` merged, with notes.
pub(crate) fn anthropic_schema(schema: &Value) -> Result<(Value, Vec<String>), String> {
    let mut notes = Vec::new();
    let joined = join_root_alternatives(schema, &mut notes);
    let Value::Object(mut root) = joined.clone() else {
        return Err(not_an_object(schema));
    };
    merge_all_of(&mut root, &joined, &mut notes, "");
    if root.get("type").is_some_and(|t| t != "object")
        || ["anyOf", "oneOf", "allOf"]
            .iter()
            .any(|k| root.contains_key(*k))
    {
        return Err(not_an_object(schema));
    }
    root.insert("type".into(), json!("object"));
    Ok((Value::Object(root), notes))
}

/// Why a root schema cannot be sent (what providers require of it).
fn not_an_object(schema: &Value) -> String {
    format!(
        "its arguments' schema {} is not one object, which the provider requires",
        compact(schema)
    )
}

/// A root `anyOf`/`oneOf` of object alternatives (the usual way to say "either `path` or
/// `url`") joined into one object, since providers want a plain object at the root: every
/// alternative's properties, required only what all of them require, and a note naming the
/// alternatives. Anything else comes back as it was.
fn join_root_alternatives(schema: &Value, notes: &mut Vec<String>) -> Value {
    let Some(root) = schema.as_object() else {
        return schema.clone();
    };
    let Some((key, Value::Array(alternatives))) = ["anyOf", "oneOf"]
        .into_iter()
        .find_map(|k| root.get(k).map(|v| (k, v)))
    else {
        return schema.clone();
    };
    let resolved: Vec<&Map<String, Value>> = alternatives
        .iter()
        .filter_map(
            |alternative| match alternative.get("$ref").and_then(Value::as_str) {
                Some(reference) => resolve(schema, reference),
                None => Some(alternative),
            },
        )
        .filter_map(Value::as_object)
        .filter(|a| {
            a.get("type").is_none_or(|t| t == "object")
                && (a.contains_key("properties") || a.contains_key("required"))
        })
        .collect();
    if resolved.is_empty() || resolved.len() != alternatives.len() {
        return schema.clone();
    }
    let names = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut joined = root.clone();
    joined.remove(key);
    joined.insert("type".into(), json!("object"));
    let mut properties = root
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut required = names(root.get("required"));
    let mut shared: Option<Vec<String>> = None;
    let mut shown = Vec::new();
    for alternative in &resolved {
        if let Some(own) = alternative.get("properties").and_then(Value::as_object) {
            for (name, property) in own {
                properties
                    .entry(name.clone())
                    .or_insert_with(|| property.clone());
            }
        }
        let needs = names(alternative.get("required"));
        // An alternative that requires nothing is named by its properties.
        let keys: Vec<String> = if needs.is_empty() {
            alternative
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        } else {
            needs.clone()
        };
        shown.push(format!("({})", keys.join(", ")));
        shared = Some(match shared {
            None => needs,
            Some(before) => before.into_iter().filter(|n| needs.contains(n)).collect(),
        });
    }
    for name in shared.unwrap_or_default() {
        if !required.contains(&name) {
            required.push(name);
        }
    }
    joined.insert("properties".into(), Value::Object(properties));
    joined.insert("required".into(), json!(required));
    let which = if key == "oneOf" {
        "exactly one"
    } else {
        "at least one"
    };
    notes.push(format!(
        "give the arguments of {which} of these sets: {}",
        shown.join(" or ")
    ));
    Value::Object(joined)
}

fn strict_node(
    root: &Value,
    node: &Value,
    depth: usize,
    path: &str,
    notes: &mut Vec<String>,
) -> Value {
    let Some(object) = node.as_object() else {
        // `true`/`{}`: anything. Strict mode has no "any"; a string is the closest.
        notes.push(format!(
            "{} takes any JSON value; send it as JSON text",
            label(path)
        ));
        return json!({"type": "string"});
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if depth >= MAX_INLINE_DEPTH {
            notes.push(format!(
                "{} is recursive; deeper levels are JSON text",
                label(path)
            ));
            return json!({"type": "string"});
        }
        let mut merged = resolve(root, reference).cloned().unwrap_or(json!({}));
        if let (Some(target), Some(_)) = (merged.as_object_mut(), Some(())) {
            for (k, v) in object {
                if k != "$ref" {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
        return strict_node(root, &merged, depth + 1, path, notes);
    }
    let mut object = object.clone();
    merge_all_of(&mut object, root, notes, path);
    if let Some(one_of) = object.remove("oneOf") {
        object.insert("anyOf".into(), one_of);
    }
    // Type arrays other than [T, "null"] become anyOf.
    if let Some(Value::Array(types)) = object.get("type").cloned() {
        let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if non_null.len() > 1 {
            object.remove("type");
            let mut variants: Vec<Value> = non_null.iter().map(|t| json!({"type": t})).collect();
            if non_null.len() < types.len() {
                variants.push(json!({"type": "null"}));
            }
            object.insert("anyOf".into(), Value::Array(variants));
        }
    }
    let mut out = Map::new();
    let mut dropped = Vec::new();
    for (key, value) in &object {
        if STRICT_KEPT.contains(&key.as_str()) {
            out.insert(key.clone(), value.clone());
        } else if (STRICT_REFUSED.contains(&key.as_str()) || !key.starts_with('$'))
            && !matches!(
                key.as_str(),
                "title" | "$schema" | "$id" | "$comment" | "examples"
            )
        {
            dropped.push(format!("{key} {}", compact(value)));
        }
    }
    if !dropped.is_empty() {
        notes.push(format!("{}: {}", label(path), dropped.join(", ")));
    }
    if let Some(Value::Array(variants)) = out.get("anyOf").cloned() {
        let variants = variants
            .iter()
            .map(|v| strict_node(root, v, depth, path, notes))
            .collect();
        out.insert("anyOf".into(), Value::Array(variants));
    }
    if let Some(items) = out.get("items").cloned() {
        out.insert(
            "items".into(),
            strict_node(root, &items, depth, &format!("{path}[]"), notes),
        );
    }
    let is_object = out.get("type") == Some(&json!("object")) || out.contains_key("properties");
    if is_object {
        out.insert("type".into(), json!("object"));
        let properties = out
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let required: HashSet<String> = out
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(extra) = out.get("additionalProperties")
            && extra != &json!(false)
        {
            notes.push(format!(
                "{} takes no keys beyond its named properties here",
                label(path)
            ));
        }
        let mut shaped = Map::new();
        for (name, property) in &properties {
            let child = format!("{path}.{name}");
            let mut property = strict_node(root, property, depth, &child, notes);
            if !required.contains(name) {
                property = nullable(property);
            }
            shaped.insert(name.clone(), property);
        }
        out.insert(
            "required".into(),
            Value::Array(properties.keys().map(|k| json!(k)).collect()),
        );
        out.insert("properties".into(), Value::Object(shaped));
        out.insert("additionalProperties".into(), json!(false));
    }
    Value::Object(out)
}

/// `schema` that also accepts `null`.
fn nullable(mut schema: Value) -> Value {
    let Some(object) = schema.as_object_mut() else {
        return schema;
    };
    match object.get("type").cloned() {
        Some(Value::String(t)) if t != "null" && !object.contains_key("enum") => {
            object.insert("type".into(), json!([t, "null"]));
            schema
        }
        Some(Value::Array(mut types)) => {
            if !types.contains(&json!("null")) {
                types.push(json!("null"));
            }
            object.insert("type".into(), Value::Array(types));
            schema
        }
        _ if object.len() == 1 && object.get("anyOf").is_some_and(Value::is_array) => {
            if let Some(Value::Array(variants)) = object.get_mut("anyOf")
                && !variants.contains(&json!({"type": "null"}))
            {
                variants.push(json!({"type": "null"}));
            }
            schema
        }
        _ => {
            let description = object.remove("description");
            let mut wrapped = json!({"anyOf": [schema, {"type": "null"}]});
            if let Some(description) = description {
                wrapped["description"] = description;
            }
            wrapped
        }
    }
}

/// Merges an `allOf` of object schemas into `object` (properties and required united); other
/// `allOf`s keep their first member and state the rest.
fn merge_all_of(
    object: &mut Map<String, Value>,
    root: &Value,
    notes: &mut Vec<String>,
    path: &str,
) {
    let Some(Value::Array(members)) = object.remove("allOf") else {
        return;
    };
    for member in members {
        let member = match member.get("$ref").and_then(Value::as_str) {
            Some(reference) => resolve(root, reference).cloned().unwrap_or(json!({})),
            None => member,
        };
        let Some(member) = member.as_object() else {
            continue;
        };
        for (key, value) in member {
            match (key.as_str(), object.get_mut(key)) {
                ("properties", Some(Value::Object(mine))) => {
                    if let Some(theirs) = value.as_object() {
                        mine.extend(theirs.clone());
                    }
                }
                ("required", Some(Value::Array(mine))) => {
                    if let Some(theirs) = value.as_array() {
                        mine.extend(theirs.iter().cloned());
                    }
                }
                ("description", Some(_)) => {}
                (_, Some(existing)) if existing != value => {
                    notes.push(format!(
                        "{} must also satisfy {key} {}",
                        label(path),
                        compact(value)
                    ));
                }
                _ => {
                    object.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

fn label(path: &str) -> String {
    if path.is_empty() {
        "the arguments".to_string()
    } else {
        format!("`{}`", path.trim_start_matches('.'))
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 120 {
        let mut end = 120;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    } else {
        text
    }
}

/// The `Schema` fields Gemini's function declarations take.
const GEMINI_KEPT: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "items",
    "minimum",
    "maximum",
    "title",
];

/// A schema in Gemini's subset, and the notes of what it could not keep; an error saying
/// why when the arguments cannot be described as one object.
pub(crate) fn gemini_schema(schema: &Value) -> Result<(Value, Vec<String>), String> {
    let mut notes = Vec::new();
    let schema = join_root_alternatives(schema, &mut notes);
    let out = gemini_node(&schema, &schema, 0, "", &mut notes);
    if out.get("type") != Some(&json!("OBJECT")) {
        return Err(not_an_object(&schema));
    }
    Ok((out, notes))
}

fn gemini_type(name: &str) -> Option<&'static str> {
    Some(match name {
        "string" => "STRING",
        "number" => "NUMBER",
        "integer" => "INTEGER",
        "boolean" => "BOOLEAN",
        "array" => "ARRAY",
        "object" => "OBJECT",
        _ => return None,
    })
}

fn gemini_node(
    root: &Value,
    node: &Value,
    depth: usize,
    path: &str,
    notes: &mut Vec<String>,
) -> Value {
    let Some(object) = node.as_object() else {
        notes.push(format!(
            "{} takes any JSON value; send it as JSON text",
            label(path)
        ));
        return json!({"type": "STRING"});
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if depth >= MAX_INLINE_DEPTH {
            notes.push(format!(
                "{} is recursive; deeper levels are JSON text",
                label(path)
            ));
            return json!({"type": "STRING"});
        }
        let mut merged = resolve(root, reference).cloned().unwrap_or(json!({}));
        if let Some(target) = merged.as_object_mut() {
            for (k, v) in object {
                if k != "$ref" {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
        return gemini_node(root, &merged, depth + 1, path, notes);
    }
    let mut object = object.clone();
    merge_all_of(&mut object, root, notes, path);
    if let Some(one_of) = object.remove("oneOf") {
        object.insert("anyOf".into(), one_of);
    }
    let mut out = Map::new();
    let mut dropped = Vec::new();
    // type: a name, or an array of names (null → nullable, several → anyOf).
    match object.remove("type") {
        Some(Value::String(t)) if t == "null" => {
            out.insert("type".into(), json!("STRING"));
            out.insert("nullable".into(), json!(true));
            dropped.push("is always null".to_string());
        }
        Some(Value::String(t)) => match gemini_type(&t) {
            Some(t) => {
                out.insert("type".into(), json!(t));
            }
            None => dropped.push(format!("type {t}")),
        },
        Some(Value::Array(types)) => {
            let names: Vec<&'static str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter_map(gemini_type)
                .collect();
            if types.contains(&json!("null")) {
                out.insert("nullable".into(), json!(true));
            }
            match names.as_slice() {
                [one] => {
                    out.insert("type".into(), json!(one));
                }
                [] => {}
                several => {
                    let variants: Vec<Value> = several.iter().map(|t| json!({"type": t})).collect();
                    object.insert("anyOf".into(), Value::Array(variants));
                }
            }
        }
        _ => {}
    }
    if let Some(constant) = object.remove("const") {
        object.insert("enum".into(), json!([constant]));
    }
    if let Some(Value::Array(values)) = object.remove("enum") {
        if values.iter().all(Value::is_string) {
            out.insert("type".into(), json!("STRING"));
            out.insert("enum".into(), Value::Array(values));
        } else {
            dropped.push(format!("one of {}", compact(&Value::Array(values))));
        }
    }
    for (key, value) in &object {
        match key.as_str() {
            "properties" | "items" | "anyOf" | "required" => {}
            "format" => {
                // Gemini knows few formats; others would be refused.
                if matches!(
                    value.as_str(),
                    Some("enum" | "date-time" | "int32" | "int64" | "float" | "double")
                ) {
                    out.insert(key.clone(), value.clone());
                } else {
                    dropped.push(format!("format {}", compact(value)));
                }
            }
            k if GEMINI_KEPT.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            "additionalProperties" if value == &json!(false) => {}
            "$defs" | "definitions" | "$schema" | "$id" | "$comment" | "examples" | "default" => {}
            _ => dropped.push(format!("{key} {}", compact(value))),
        }
    }
    if !dropped.is_empty() {
        notes.push(format!("{}: {}", label(path), dropped.join(", ")));
    }
    if let Some(Value::Array(variants)) = object.get("anyOf") {
        let variants: Vec<Value> = variants
            .iter()
            .map(|v| gemini_node(root, v, depth, path, notes))
            .collect();
        out.insert("anyOf".into(), Value::Array(variants));
    }
    if let Some(items) = object.get("items") {
        let child = format!("{path}[]");
        out.insert(
            "items".into(),
            gemini_node(root, items, depth, &child, notes),
        );
    }
    if let Some(Value::Object(properties)) = object.get("properties") {
        out.insert("type".into(), json!("OBJECT"));
        let mut shaped = Map::new();
        for (name, property) in properties {
            let child = format!("{path}.{name}");
            shaped.insert(
                name.clone(),
                gemini_node(root, property, depth, &child, notes),
            );
        }
        let required: Vec<Value> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter(|n| n.as_str().is_some_and(|n| shaped.contains_key(n)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        out.insert("properties".into(), Value::Object(shaped));
        if !required.is_empty() {
            out.insert("required".into(), Value::Array(required));
        }
    }
    if out.get("type") == Some(&json!("ARRAY")) && !out.contains_key("items") {
        out.insert("items".into(), json!({"type": "STRING"}));
        notes.push(format!(
            "{}: items of any type are sent as JSON text",
            label(path)
        ));
    }
    Value::Object(out)
}

/// Removes from tool-call `arguments` the `null`s strict mode made the model send for
/// properties the tool declared optional (and not nullable), so the tool sees them absent,
/// as it declared. Arguments that are not a JSON object are returned unchanged.
pub fn strip_added_nulls(arguments: &str, schema: &Value) -> String {
    let Ok(mut value) = serde_json::from_str::<Value>(arguments) else {
        return arguments.to_string();
    };
    if strip(&mut value, schema, schema, 0) {
        value.to_string()
    } else {
        arguments.to_string()
    }
}

fn allows_null(schema: &Value) -> bool {
    let Some(object) = schema.as_object() else {
        return schema == &json!(true);
    };
    if let Some(constant) = object.get("const") {
        return constant.is_null();
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return values.contains(&Value::Null);
    }
    match object.get("type") {
        Some(Value::String(t)) => return t == "null",
        Some(Value::Array(types)) => return types.contains(&json!("null")),
        _ => {}
    }
    let variants: Vec<&Value> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| object.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    if !variants.is_empty() {
        return variants.into_iter().any(allows_null);
    }
    // A `$ref` or `allOf` is taken as not nullable; a schema without any type keyword
    // takes anything, null included.
    !(object.contains_key("$ref") || object.contains_key("allOf"))
}

/// Whether anything was removed.
fn strip(value: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > 32 {
        return false;
    }
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => resolve(root, reference).unwrap_or(schema),
        None => schema,
    };
    let mut changed = false;
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return false;
            };
            let required: HashSet<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            map.retain(|key, v| {
                let keep = !(v.is_null()
                    && !required.contains(key.as_str())
                    && properties.get(key).is_some_and(|p| !allows_null(p)));
                changed |= !keep;
                keep
            });
            for (key, v) in map.iter_mut() {
                if let Some(property) = properties.get(key) {
                    changed |= strip(v, property, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    changed |= strip(item, item_schema, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declaration(name: &str, schema: Value) -> Declaration {
        Declaration::new(name, "a tool")
            .unwrap()
            .with_input_schema(schema)
            .unwrap()
    }

    #[test]
    fn strict_makes_optional_properties_required_and_nullable() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1},
            "mode": {"oneOf": [{"const": "a"}, {"const": "b"}]}},
            "required": ["path"]});
        let (out, notes) = strict_schema(&schema).unwrap();
        assert_eq!(out["required"], json!(["limit", "mode", "path"]));
        assert_eq!(out["additionalProperties"], json!(false));
        assert_eq!(
            out["properties"]["limit"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(out["properties"]["path"]["type"], json!("string"));
        assert!(out["properties"]["mode"]["anyOf"].as_array().unwrap().len() == 3);
        assert!(notes.iter().any(|n| n.contains("minimum 1")), "{notes:?}");
        let args = strip_added_nulls(r#"{"path":"a","limit":null,"mode":null}"#, &schema);
        assert_eq!(args, r#"{"path":"a"}"#);
    }

    #[test]
    fn gemini_inlines_refs_and_maps_const_and_type_arrays() {
        let schema = json!({"type": "object", "$defs": {"node": {"type": "object",
            "properties": {"child": {"$ref": "#/$defs/node"}, "v": {"type": ["string", "null"]}}}},
            "properties": {"root": {"$ref": "#/$defs/node"}, "k": {"const": "x"},
            "extra": {"type": "object", "patternProperties": {"^a": {"type": "string"}}}}});
        let (out, notes) = gemini_schema(&schema).unwrap();
        let text = out.to_string();
        assert!(!text.contains("$ref") && !text.contains("const") && !text.contains("pattern"));
        assert_eq!(out["properties"]["k"]["enum"], json!(["x"]));
        assert_eq!(
            out["properties"]["root"]["properties"]["v"]["nullable"],
            json!(true)
        );
        assert!(notes.iter().any(|n| n.contains("recursive")), "{notes:?}");
    }

    #[test]
    fn names_are_rewritten_uniquely_and_mapped_back() {
        let tools = [
            declaration("fs.read", json!({"type": "object"})),
            declaration("fs_read", json!({"type": "object"})),
            declaration("9lives", json!({"type": "object"})),
        ];
        let anthropic = wire_tools(ToolDialect::Anthropic, &tools);
        let names: Vec<_> = anthropic
            .tools
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["fs_read", "fs_read_2", "9lives"]);
        assert_eq!(anthropic.original("fs_read"), "fs.read");
        assert_eq!(anthropic.original("fs_read_2"), "fs_read");
        let gemini = wire_tools(ToolDialect::Gemini, &tools);
        assert_eq!(gemini.tools[2]["name"], "_9lives");
        assert_eq!(gemini.original("_9lives"), "9lives");
        assert_eq!(gemini.wire_name("9lives"), "_9lives");
    }
}
