//! Elicitation: a server asks the user for input in the middle of a call
//! (`elicitation/create`), either as a form (a flat object schema of primitive fields) or by
//! sending the user to a URL.
//!
//! The client declares the `elicitation` capability only when a handler is set
//! ([`McpToolSetBuilder::on_elicitation`](super::McpToolSetBuilder::on_elicitation)); a
//! server then sends requests, which reach the handler as an [`ElicitationRequest`].

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use toolbelt_core::JsonObject;

/// Answers a server's request for user input; set with
/// [`McpToolSetBuilder::on_elicitation`](super::McpToolSetBuilder::on_elicitation).
pub type ElicitationHandler =
    Arc<dyn Fn(ElicitationRequest) -> BoxFuture<'static, ElicitationResponse> + Send + Sync>;

/// One `elicitation/create` request from a server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// The tool set's name (which server asks).
    pub server: String,
    /// What the server says it needs, for the user.
    pub message: String,
    /// A form to fill in, or a URL to visit.
    pub kind: ElicitationKind,
}

/// The two kinds of elicitation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElicitationKind {
    /// Fill in a form: `schema` is the requested JSON Schema, an object whose properties are
    /// strings, numbers, integers, booleans or enums (see [`ElicitationRequest::fields`]).
    Form {
        /// The requested schema, as the server sent it.
        schema: JsonObject,
    },
    /// Visit `url` (declared only with
    /// [`McpToolSetBuilder::url_elicitation`](super::McpToolSetBuilder::url_elicitation)).
    /// The user's data goes to the server's page, never through the client.
    Url {
        /// The page to open.
        url: String,
        /// The server's id for this request (empty when the protocol has none).
        elicitation_id: String,
    },
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationResponse {
    /// The user accepted; the form's values (empty for a URL elicitation).
    Accept(JsonObject),
    /// The user said no; the server may go on without the data.
    Decline,
    /// The user dismissed the request without choosing.
    Cancel,
}

/// The type of one form field.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FieldKind {
    /// Free text (possibly with a `format` such as `email`, left to the server to check).
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// Yes or no.
    Boolean,
    /// One of `options` (or several, with `multiple`).
    Choice {
        /// The values the server accepts.
        options: Vec<String>,
        /// Whether several may be chosen (an array answer).
        multiple: bool,
    },
}

/// One field of a form elicitation, read from the requested schema.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ElicitationField {
    /// The property name (the key of the answer).
    pub name: String,
    /// A title, when the schema gives one.
    pub title: Option<String>,
    /// A description, when the schema gives one.
    pub description: Option<String>,
    /// Its type.
    pub kind: FieldKind,
    /// The schema's default value, if any.
    pub default: Option<Value>,
    /// Whether the server requires it.
    pub required: bool,
}

impl ElicitationRequest {
    /// The form's fields in the schema's order; empty for a URL elicitation.
    pub fn fields(&self) -> Vec<ElicitationField> {
        let ElicitationKind::Form { schema } = &self.kind else {
            return Vec::new();
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        properties
            .iter()
            .filter_map(|(name, property)| {
                let property = property.as_object()?;
                let text = |key: &str| property.get(key).and_then(Value::as_str).map(String::from);
                Some(ElicitationField {
                    name: name.clone(),
                    title: text("title"),
                    description: text("description"),
                    kind: field_kind(property),
                    default: property.get("default").cloned(),
                    required: required.contains(&name.as_str()),
                })
            })
            .collect()
    }

    /// The schema's default values, field by field (fields without one are left out): what
    /// a user who accepts every default answers.
    pub fn defaults(&self) -> JsonObject {
        self.fields()
            .into_iter()
            .filter_map(|field| Some((field.name, field.default?)))
            .collect()
    }
}

impl ElicitationField {
    /// Reads a user's typed answer as this field's value: a number for numbers, `true` for
    /// `y`/`yes`/`true`, one of the options (or a comma-separated list of them) for a choice.
    /// The error says what was expected.
    pub fn value_from_text(&self, text: &str) -> Result<Value, String> {
        let text = text.trim();
        match &self.kind {
            FieldKind::String => Ok(Value::String(text.to_string())),
            FieldKind::Integer => text
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("{:?} is not a whole number", text)),
            FieldKind::Number => text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{:?} is not a number", text)),
            FieldKind::Boolean => match text.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => Ok(Value::Bool(true)),
                "n" | "no" | "false" => Ok(Value::Bool(false)),
                _ => Err(format!("{:?}: answer yes or no", text)),
            },
            FieldKind::Choice { options, multiple } => {
                let pick = |word: &str| {
                    options
                        .iter()
                        .find(|option| option.as_str() == word)
                        .map(|option| Value::String(option.clone()))
                        .ok_or_else(|| format!("{word:?} is not one of {}", options.join(", ")))
                };
                if *multiple {
                    text.split(',')
                        .map(str::trim)
                        .filter(|word| !word.is_empty())
                        .map(pick)
                        .collect::<Result<Vec<_>, _>>()
                        .map(Value::Array)
                } else {
                    pick(text)
                }
            }
        }
    }
}

/// The field type a property schema declares; anything unrecognised is text.
fn field_kind(property: &JsonObject) -> FieldKind {
    let options = |schema: &JsonObject| -> Option<Vec<String>> {
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return Some(
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect(),
            );
        }
        // The titled form: `oneOf`/`anyOf` of `{const, title}`.
        let choices = schema
            .get("oneOf")
            .or_else(|| schema.get("anyOf"))?
            .as_array()?;
        Some(
            choices
                .iter()
                .filter_map(|choice| choice.get("const")?.as_str().map(String::from))
                .collect(),
        )
    };
    match property.get("type").and_then(Value::as_str) {
        Some("integer") => FieldKind::Integer,
        Some("number") => FieldKind::Number,
        Some("boolean") => FieldKind::Boolean,
        Some("array") => {
            let items = property.get("items").and_then(Value::as_object);
            match items.and_then(options) {
                Some(options) => FieldKind::Choice {
                    options,
                    multiple: true,
                },
                None => FieldKind::String,
            }
        }
        _ => match options(property) {
            Some(options) => FieldKind::Choice {
                options,
                multiple: false,
            },
            None => FieldKind::String,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(schema: Value) -> ElicitationRequest {
        ElicitationRequest {
            server: "s".into(),
            message: "m".into(),
            kind: ElicitationKind::Form {
                schema: schema.as_object().unwrap().clone(),
            },
        }
    }

    #[test]
    fn fields_read_types_defaults_and_required_names() {
        let request = form(serde_json::json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "default": "Ann"},
                "age": {"type": "integer", "default": 30},
                "status": {"type": "string", "enum": ["on", "off"]},
                "tags": {"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}]}},
                "ok": {"type": "boolean"}
            },
            "required": ["age"]
        }));
        let fields = request.fields();
        let by_name = |n: &str| fields.iter().find(|f| f.name == n).unwrap();
        assert_eq!(by_name("name").title.as_deref(), Some("Name"));
        assert_eq!(by_name("age").kind, FieldKind::Integer);
        assert!(by_name("age").required && !by_name("name").required);
        assert_eq!(
            by_name("tags").kind,
            FieldKind::Choice {
                options: vec!["a".into(), "b".into()],
                multiple: true
            }
        );
        assert_eq!(
            Value::Object(request.defaults()),
            serde_json::json!({"name": "Ann", "age": 30})
        );
    }

    #[test]
    fn typed_answers_become_values_of_the_field_type_or_say_what_was_expected() {
        let request = form(serde_json::json!({"type": "object", "properties": {
            "n": {"type": "number"}, "b": {"type": "boolean"},
            "c": {"type": "string", "enum": ["x", "y"]}
        }}));
        let fields = request.fields();
        let field = |n: &str| fields.iter().find(|f| f.name == n).unwrap();
        assert_eq!(
            field("n").value_from_text(" 2.5 ").unwrap(),
            serde_json::json!(2.5)
        );
        assert!(field("n").value_from_text("two").is_err());
        assert_eq!(
            field("b").value_from_text("Yes").unwrap(),
            Value::Bool(true)
        );
        assert!(
            field("c")
                .value_from_text("z")
                .unwrap_err()
                .contains("x, y")
        );
    }
}
