//! Catalog files: OpenAI function declarations and MCP tools/list results, and the errors
//! for entries that are not tools.

use serde_json::json;
use toolbelt_search::{SearchError, parse_catalog};

fn error_of(text: &str) -> String {
    match parse_catalog(text) {
        Err(SearchError::Catalog(message)) => message,
        other => panic!("expected a catalog error for {text}, got {other:?}"),
    }
}

#[test]
fn openai_functions_and_tools_both_parse_with_names_as_given() {
    let text = json!([
        {"name": "math.factorial", "description": "Factorial of n",
         "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        {"type": "function", "function": {"name": "get_weather",
         "description": "Weather", "parameters": {"type": "object"}}},
        {"type": "function", "name": "flat.form", "parameters": {"type": "object"}},
        {"name": "no_params"}
    ])
    .to_string();
    let docs = parse_catalog(&text).unwrap();
    let names: Vec<_> = docs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["math.factorial", "get_weather", "flat.form", "no_params"]
    );
    assert_eq!(docs[0].description, "Factorial of n");
    assert_eq!(docs[0].parameters["properties"]["n"]["type"], "integer");
    assert_eq!(docs[3].description, "");
    assert_eq!(docs[3].parameters, json!({}));
}

#[test]
fn mcp_tools_list_parses_bare_or_inside_a_jsonrpc_response() {
    let tools = json!({"tools": [
        {"name": "read_file", "description": "Read a file",
         "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
         "annotations": {"readOnlyHint": true}},
        {"name": "server/tool.v2", "inputSchema": {"type": "object"}}
    ], "nextCursor": null});
    for text in [
        tools.to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "result": tools}).to_string(),
    ] {
        let docs = parse_catalog(&text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].parameters["properties"]["path"]["type"], "string");
        assert_eq!(docs[1].name, "server/tool.v2");
    }
}

#[test]
fn malformed_entries_are_errors_naming_the_entry() {
    let cases = [
        (json!([{"name": "a"}, 42]), "entry 1: not a JSON object"),
        (
            json!([{"description": "no name"}]),
            "entry 0: missing \"name\"",
        ),
        (json!([{"name": ""}]), "entry 0: \"name\" is empty"),
        (json!([{"name": 7}]), "entry 0: \"name\" is not a string"),
        (
            json!([{"name": "a", "description": ["x"]}]),
            "entry 0: \"description\" is not a string",
        ),
        (
            json!([{"name": "a", "parameters": "string"}]),
            "entry 0: \"parameters\" is not a JSON Schema object",
        ),
        (
            json!({"tools": [{"name": "a", "inputSchema": 3}]}),
            "entry 0: \"inputSchema\" is not a JSON Schema object",
        ),
        (
            json!([{"type": "function", "function": "x"}]),
            "entry 0: \"function\" is not an object",
        ),
        (
            json!([{"type": "function"}]),
            "entry 0: \"type\": \"function\" without a \"function\" object",
        ),
        (
            json!([{"type": "web_search"}]),
            "entry 0: unsupported tool type \"web_search\"",
        ),
        (
            json!([{"name": "a"}, {"name": "b"}, {"type": "function", "function": {"name": "a"}}]),
            "entry 2: duplicate name \"a\" (first at entry 0)",
        ),
    ];
    for (value, want) in cases {
        let message = error_of(&value.to_string());
        assert!(
            message.starts_with(want),
            "{value}: got {message:?}, want {want:?}"
        );
    }
}

#[test]
fn files_that_are_not_catalogs_are_clear_errors() {
    assert!(error_of("{not json").starts_with("not valid JSON"));
    assert!(error_of("{\"tools\": {}}").contains("\"tools\" is not an array"));
    assert!(error_of("{\"functions\": []}").contains("expected a JSON array"));
    assert!(error_of("\"hello\"").contains("expected a JSON array"));
    // Deep nesting is refused by the parser's recursion limit, not a stack overflow.
    let deep = format!("[{}{}]", "[".repeat(100_000), "]".repeat(100_000));
    assert!(error_of(&deep).starts_with("not valid JSON"));
    assert_eq!(parse_catalog("[]").unwrap().len(), 0);
}
