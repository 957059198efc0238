//! Generated schemas are portable: only standard `format`s, and optional properties typed as
//! their value (no `null` union) so that clients coercing arguments by type can; decoding still
//! takes an explicit `null` for them.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolbelt_core::schema::schema_for;
use toolbelt_core::{FunctionTool, Tool, ToolContext, ToolOutput};

/// How to sort.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Order {
    /// Smallest first.
    Ascending,
    /// Largest first.
    Descending,
}

/// A nested optional object.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)] // Read through Debug only.
struct Window {
    /// Where it starts.
    start: u64,
    /// Where it ends, if anywhere.
    end: Option<u64>,
}

/// Arguments that exercise every shape schemars gives a number or an option.
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)] // Only the schema and the decoding of some fields are under test.
struct Args {
    /// Unsigned and required.
    count: u32,
    /// Unsigned and optional.
    offset: Option<usize>,
    /// Signed and optional.
    timeout: Option<i64>,
    /// A float.
    ratio: Option<f64>,
    /// An optional string.
    path: Option<String>,
    /// An optional enum.
    order: Option<Order>,
    /// An optional object.
    window: Option<Window>,
    /// Required, and `null` is a meaningful value.
    #[schemars(required, schema_with = "nullable_string")]
    #[serde(deserialize_with = "nullable")]
    parent: Option<String>,
    /// A property that happens to be called `format`.
    format: Option<String>,
    /// Optional with a default.
    #[serde(default)]
    tags: Vec<String>,
    /// A standard format stays.
    #[schemars(url)]
    link: Option<String>,
}

fn nullable<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

fn nullable_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["string", "null"], "description": "May be null."})
}

fn schema() -> Value {
    Value::Object(schema_for::<Args>())
}

/// Every `format` value anywhere in the schema, with its path.
fn formats(schema: &Value, path: &str, found: &mut Vec<(String, String)>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "format"
                    && let Value::String(format) = value
                {
                    found.push((path.to_owned(), format.clone()));
                }
                formats(value, &format!("{path}/{key}"), found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                formats(item, &format!("{path}/{i}"), found);
            }
        }
        _ => {}
    }
}

#[test]
fn only_standard_formats_remain_and_unsigned_integers_keep_their_minimum() {
    let schema = schema();
    let mut found = Vec::new();
    formats(&schema, "", &mut found);
    assert_eq!(
        found,
        vec![("/properties/link".to_owned(), "uri".to_owned())],
        "{schema:#}"
    );
    let props = &schema["properties"];
    assert_eq!(props["count"]["minimum"], 0, "{schema:#}");
    assert_eq!(props["offset"]["minimum"], 0, "{schema:#}");
    assert_eq!(
        props["window"]["properties"]["end"]["minimum"], 0,
        "{schema:#}"
    );
    assert!(props["timeout"].get("minimum").is_none(), "{schema:#}");
}

#[test]
fn optional_properties_are_typed_as_their_value_without_null() {
    let schema = schema();
    let props = &schema["properties"];
    for (name, ty) in [
        ("offset", "integer"),
        ("timeout", "integer"),
        ("ratio", "number"),
        ("path", "string"),
        ("format", "string"),
        ("link", "string"),
    ] {
        assert_eq!(props[name]["type"], ty, "{name}: {schema:#}");
        assert!(
            props[name].get("default").is_none(),
            "a null default would not match the type: {name}: {schema:#}"
        );
    }
    // `anyOf: [inner, {type: null}]` becomes the inner schema, with the field's description.
    let order = &props["order"];
    assert!(order.get("anyOf").is_none(), "{schema:#}");
    assert_eq!(order["description"], "An optional enum.", "{schema:#}");
    let variants: Vec<&Value> = order["oneOf"]
        .as_array()
        .or(order["enum"].as_array())
        .expect("the enum's variants")
        .iter()
        .collect();
    assert_eq!(variants.len(), 2, "{schema:#}");
    let window = &props["window"];
    assert_eq!(window["type"], "object", "{schema:#}");
    assert_eq!(window["description"], "An optional object.", "{schema:#}");
    assert_eq!(window["properties"]["end"]["type"], "integer", "{schema:#}");
    assert_eq!(window["required"], json!(["start"]), "{schema:#}");
    // No `null` is left anywhere except the required, nullable property.
    let text = schema.to_string();
    assert_eq!(text.matches("\"null\"").count(), 1, "{schema:#}");
    assert_eq!(
        props["parent"]["type"],
        json!(["string", "null"]),
        "{schema:#}"
    );
    let required = schema["required"].as_array().unwrap();
    assert!(required.contains(&json!("parent")) && required.contains(&json!("count")));
    assert!(!required.contains(&json!("offset")));
}

#[tokio::test]
async fn decoding_still_accepts_an_explicit_null_for_optional_properties() {
    let tool = FunctionTool::new(
        "probe",
        "Echo what was decoded.",
        |_ctx: ToolContext, args: Args| async move {
            Ok::<_, toolbelt_core::ToolError>(format!(
                "{:?} {:?} {:?} {:?} {:?}",
                args.offset, args.timeout, args.order, args.window, args.parent
            ))
        },
    )
    .unwrap();
    let out = tool
        .call(
            ToolContext::new(),
            &json!({
                "count": 1, "offset": null, "timeout": null, "ratio": null, "path": null,
                "order": null, "window": {"start": 2, "end": null}, "parent": null,
                "format": null, "link": null
            })
            .to_string(),
        )
        .await
        .expect("explicit nulls decode");
    assert_eq!(
        text(&out),
        "None None None Some(Window { start: 2, end: None }) None"
    );
    let out = tool
        .call(
            ToolContext::new(),
            r#"{"count": 1, "offset": 2, "order": "descending", "parent": "p"}"#,
        )
        .await
        .expect("values decode");
    assert_eq!(text(&out), "Some(2) None Some(Descending) None Some(\"p\")");
}

fn text(out: &ToolOutput) -> String {
    out.llm_text()
}
