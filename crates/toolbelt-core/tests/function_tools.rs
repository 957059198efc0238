//! Typed function tools: generated schemas, argument decoding, output conversion.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolbelt_core::{DynTool, FunctionTool, Tool, ToolContext, ToolError, ToolOutput};

/// How to greet.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Tone {
    /// Short and friendly.
    Casual,
    /// With titles.
    Formal,
}

/// Arguments of the greeter.
#[derive(Debug, Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet, e.g. "Ada, Countess of Lovelace" (commas are fine here).
    name: String,
    /// How to greet.
    tone: Tone,
    /// How many times; optional.
    times: Option<u32>,
    /// Add an exclamation mark.
    #[serde(default)]
    excited: bool,
}

#[derive(Serialize, JsonSchema)]
struct Greeting {
    text: String,
}

async fn greet(_ctx: ToolContext, args: GreetArgs) -> Result<Greeting, ToolError> {
    let base = match args.tone {
        Tone::Casual => format!("hi {}", args.name),
        Tone::Formal => format!("Good day, {}", args.name),
    };
    let bang = if args.excited { "!" } else { "" };
    let text = vec![format!("{base}{bang}"); args.times.unwrap_or(1) as usize].join(" ");
    Ok(Greeting { text })
}

fn greeter() -> FunctionTool {
    FunctionTool::new("greet", "Greets someone", greet).unwrap()
}

#[test]
fn generated_schema_carries_doc_comments_optional_fields_and_enums() {
    let tool = greeter();
    let schema = Value::Object(tool.declaration().input_schema.clone());
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["description"], "Arguments of the greeter.");
    assert_eq!(
        schema["properties"]["name"]["description"],
        r#"Who to greet, e.g. "Ada, Countess of Lovelace" (commas are fine here)."#
    );
    assert_eq!(
        schema["properties"]["times"]["description"],
        "How many times; optional."
    );
    // The enum is inlined, not a $ref, and lists its variants.
    let tone = &schema["properties"]["tone"];
    let variants: Vec<&str> = tone
        .get("enum")
        .or_else(|| tone.get("oneOf"))
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().or_else(|| e["const"].as_str()).unwrap())
                .collect()
        })
        .expect("tone lists its variants");
    assert_eq!(variants, ["casual", "formal"]);
    assert!(
        schema.get("$defs").is_none(),
        "subschemas are inlined: {schema}"
    );
    // Option<T> and #[serde(default)] fields are not required.
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort();
    assert_eq!(required, ["name", "tone"]);
    assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
}

#[test]
fn output_schema_is_generated_from_the_result_type() {
    let tool = greeter();
    let out = tool.declaration().output_schema.as_ref().expect("declared");
    assert_eq!(out["type"], "object");
    assert_eq!(out["properties"]["text"]["type"], "string");
    assert!(
        greeter()
            .without_output_schema()
            .declaration()
            .output_schema
            .is_none()
    );
}

#[tokio::test]
async fn a_typed_call_decodes_runs_and_encodes_structured_output() {
    let tool: DynTool = std::sync::Arc::new(greeter());
    let out = tool
        .call(
            ToolContext::for_call("c1"),
            r#"{"name":"Ada","tone":"formal","times":2,"excited":true}"#,
        )
        .await
        .unwrap();
    let expected = json!({"text": "Good day, Ada! Good day, Ada!"});
    assert_eq!(out.llm_text(), expected.to_string());
    assert_eq!(out.structured, Some(expected));
    assert!(!out.is_error);
}

#[tokio::test]
async fn decode_errors_name_the_field_and_what_was_expected() {
    let err = greeter()
        .call(
            ToolContext::new(),
            r#"{"name":"Ada","tone":"formal","times":"two"}"#,
        )
        .await
        .unwrap_err();
    let ToolError::InvalidArguments { message } = err else {
        panic!("expected invalid arguments, got {err:?}")
    };
    assert!(
        message.starts_with("times: invalid type: string \"two\""),
        "{message}"
    );
    assert!(message.contains("expected u32"), "{message}");

    let err = greeter()
        .call(ToolContext::new(), r#"{"name":"Ada","tone":"shouty"}"#)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("tone: unknown variant `shouty`"),
        "{err}"
    );

    let err = greeter()
        .call(ToolContext::new(), r#"{"tone":"casual"}"#)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("missing field `name`"), "{err}");

    let err = greeter()
        .call(ToolContext::new(), "{not json")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
}

#[tokio::test]
async fn empty_arguments_need_a_schema_without_required_fields() {
    let err = greeter()
        .call(ToolContext::new(), "  \n")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid arguments: no arguments given; required: name, tone"
    );

    /// Nothing required.
    #[derive(Deserialize, JsonSchema)]
    struct Opts {
        /// Optional limit.
        limit: Option<u32>,
    }
    let tool = FunctionTool::new("opts", "Takes optional args", |_ctx, a: Opts| async move {
        Ok::<_, ToolError>(a.limit.unwrap_or(10))
    })
    .unwrap();
    for empty in ["", "   ", "\t\n"] {
        let out = tool.call(ToolContext::new(), empty).await.unwrap();
        assert_eq!(out.llm_text(), "10");
    }
}

#[tokio::test]
async fn a_replaced_input_schema_is_what_the_model_sees() {
    let custom = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}, "tone": {"type": "string"}},
        "required": ["name", "tone"],
        "additionalProperties": false
    });
    let tool = greeter().with_input_schema(custom.clone()).unwrap();
    assert_eq!(
        Value::Object(tool.declaration().input_schema.clone()),
        custom
    );
    assert!(greeter().with_input_schema(json!([1])).is_err());
}

#[tokio::test]
async fn string_results_are_text_and_errors_keep_their_kind() {
    #[derive(Deserialize, JsonSchema)]
    struct Q {
        q: String,
    }
    let echo = FunctionTool::new("echo", "Echoes", |_ctx, a: Q| async move {
        if a.q == "io" {
            return Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset").into());
        }
        if a.q == "fail" {
            return Err::<String, Box<dyn std::error::Error + Send + Sync>>("it broke".into());
        }
        Ok(a.q)
    })
    .unwrap();
    assert!(
        echo.declaration().output_schema.is_none(),
        "a string is not an object schema"
    );
    let out = echo
        .call(ToolContext::new(), r#"{"q":"hello"}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "hello");
    assert_eq!(out.structured, None);

    let err = echo
        .call(ToolContext::new(), r#"{"q":"io"}"#)
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    let err = echo
        .call(ToolContext::new(), r#"{"q":"fail"}"#)
        .await
        .unwrap_err();
    assert_eq!(err.for_model(), "Error: it broke");
}

#[tokio::test]
async fn the_call_id_is_readable_inside_the_tool() {
    #[derive(Deserialize, JsonSchema)]
    struct None_ {}
    let tool = FunctionTool::new(
        "whoami",
        "Returns the call id",
        |ctx: ToolContext, _: None_| async move {
            Ok::<_, ToolError>(ctx.call_id().unwrap_or("default").to_string())
        },
    )
    .unwrap();
    let out = tool
        .call(ToolContext::for_call("call_42"), "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "call_42");
    let out = tool.call(ToolContext::new(), "").await.unwrap();
    assert_eq!(out.llm_text(), "default");
}

#[tokio::test]
async fn returning_output_keeps_the_tools_own_views() {
    #[derive(Deserialize, JsonSchema)]
    struct P {
        path: String,
    }
    let tool = FunctionTool::returning_output("show", "Shows", |_ctx, p: P| async move {
        Ok::<_, ToolError>(
            ToolOutput::text("1 line").with_user_text(format!("full text of {}", p.path)),
        )
    })
    .unwrap();
    let out = tool
        .call(ToolContext::new(), r#"{"path":"a.txt"}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "1 line");
    assert_eq!(out.user_text(), "full text of a.txt");
}

#[test]
fn non_object_argument_types_are_refused_at_construction() {
    let err = FunctionTool::new(
        "bad",
        "d",
        |_ctx, n: u32| async move { Ok::<_, ToolError>(n) },
    )
    .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidDeclaration { .. }),
        "{err:?}"
    );
    let err = FunctionTool::new("bad name", "d", greet).unwrap_err();
    assert!(matches!(err, ToolError::InvalidName { .. }), "{err:?}");
}
