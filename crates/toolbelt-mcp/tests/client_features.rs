//! The client features servers expect (elicitation, sampling, roots, progress), against a
//! server written with the Python `mcp` SDK (tests/fixtures/client_features_server.py) that
//! reports what the client answered.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use toolbelt_core::{ProgressUpdate, ToolContext, ToolSet};
use toolbelt_mcp::{
    ConnectionConfig, ElicitationKind, ElicitationRequest, ElicitationResponse, McpToolSet,
    McpToolSetBuilder, Root, SamplingError, SamplingRequest, SamplingResponse, SamplingRole,
    SamplingToolChoice, SamplingToolUse, TransportConfig,
};

fn fixture_stdio() -> ConnectionConfig {
    let script = python_fixture().with_file_name("client_features_server.py");
    ConnectionConfig::new(TransportConfig::stdio(
        toolbelt_testkit::python(),
        [script.display().to_string(), "stdio".to_string()],
    ))
    .with_timeout(Duration::from_secs(20))
}

fn builder() -> McpToolSetBuilder {
    McpToolSet::builder("features", fixture_stdio())
}

/// Calls `tool` and parses its text answer as JSON.
async fn call_json(set: &McpToolSet, ctx: &ToolContext, tool: &str, args: Value) -> Value {
    let args = args.as_object().cloned();
    let out = set.call(ctx, tool, args).await.expect(tool);
    assert!(!out.is_error, "{tool} failed: {}", out.llm_text());
    serde_json::from_str(&out.llm_text()).unwrap_or_else(|e| panic!("{tool}: {e}: {out:?}"))
}

#[tokio::test]
async fn capabilities_are_declared_only_for_the_handlers_that_are_set() {
    let ctx = ToolContext::new();
    let bare = builder().build().unwrap();
    let declared = call_json(&bare, &ctx, "client_capabilities", json!({})).await;
    bare.close().await.unwrap();
    for feature in ["elicitation", "sampling", "roots"] {
        assert!(declared.get(feature).is_none(), "{feature} in {declared}");
    }

    let full = builder()
        .on_elicitation(|_| Box::pin(async { ElicitationResponse::Decline }))
        .on_sampling(|_| Box::pin(async { Err(SamplingError::declined("no")) }))
        .roots(vec![])
        .build()
        .unwrap();
    let declared = call_json(&full, &ctx, "client_capabilities", json!({})).await;
    full.close().await.unwrap();
    assert!(declared["elicitation"].is_object(), "{declared}");
    assert!(declared["sampling"].is_object(), "{declared}");
    assert_eq!(declared["roots"]["listChanged"], true, "{declared}");
}

#[tokio::test]
async fn a_form_elicitation_reaches_the_handler_and_its_answer_reaches_the_server() {
    let seen: Arc<Mutex<Vec<ElicitationRequest>>> = Arc::default();
    let record = seen.clone();
    let set = builder()
        .on_elicitation(move |request: ElicitationRequest| {
            record.lock().unwrap().push(request.clone());
            // Accept every default and fill in the one field without a default.
            let mut answer = request.defaults();
            answer.insert("nickname".into(), json!("annie"));
            Box::pin(async move { ElicitationResponse::Accept(answer) })
        })
        .build()
        .unwrap();
    let answer = call_json(&set, &ToolContext::new(), "ask_profile", json!({})).await;
    set.close().await.unwrap();

    assert_eq!(answer["action"], "accept");
    assert_eq!(
        answer["content"],
        json!({"name": "Ann", "age": 30, "score": 9.5, "plan": "pro", "subscribe": true,
               "nickname": "annie"})
    );
    let seen = seen.lock().unwrap();
    let [request] = &seen[..] else {
        panic!("the handler ran {} times", seen.len());
    };
    assert_eq!(
        (request.server.as_str(), request.message.as_str()),
        ("features", "Who are you?")
    );
    let fields = request.fields();
    let age = fields.iter().find(|f| f.name == "age").unwrap();
    assert_eq!(age.description.as_deref(), Some("Age in years"));
    assert!(fields.iter().find(|f| f.name == "name").unwrap().required);
}

#[tokio::test]
async fn declining_and_cancelling_an_elicitation_reach_the_server() {
    for (response, action) in [
        (ElicitationResponse::Decline, "decline"),
        (ElicitationResponse::Cancel, "cancel"),
    ] {
        let set = builder()
            .on_elicitation(move |_| {
                let response = response.clone();
                Box::pin(async move { response })
            })
            .build()
            .unwrap();
        let answer = call_json(&set, &ToolContext::new(), "ask_profile", json!({})).await;
        set.close().await.unwrap();
        assert_eq!(answer["action"], action);
        assert_eq!(answer["content"], Value::Null);
    }
}

#[tokio::test]
async fn a_url_elicitation_reaches_the_handler_only_when_url_mode_is_declared() {
    let urls: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = urls.clone();
    let handler = move |request: ElicitationRequest| {
        if let ElicitationKind::Url { url, .. } = &request.kind {
            record.lock().unwrap().push(url.clone());
        }
        Box::pin(async { ElicitationResponse::Accept(Default::default()) })
            as futures::future::BoxFuture<'static, _>
    };
    let set = builder()
        .on_elicitation(handler.clone())
        .url_elicitation(true)
        .build()
        .unwrap();
    let answer = call_json(&set, &ToolContext::new(), "ask_url", json!({})).await;
    set.close().await.unwrap();
    assert_eq!(answer["action"], "accept");
    assert_eq!(*urls.lock().unwrap(), ["https://example.invalid/login"]);

    // Form mode only: the handler never sees a URL request.
    let set = builder().on_elicitation(handler).build().unwrap();
    let out = set
        .call(&ToolContext::new(), "ask_url", None)
        .await
        .expect("the call itself succeeds or reports an error result");
    set.close().await.unwrap();
    assert_eq!(urls.lock().unwrap().len(), 1, "{out:?}");
}

#[tokio::test]
async fn a_sampling_request_reaches_the_handler_and_its_answer_reaches_the_server() {
    let seen: Arc<Mutex<Vec<SamplingRequest>>> = Arc::default();
    let record = seen.clone();
    let set = builder()
        .on_sampling(move |request: SamplingRequest| {
            record.lock().unwrap().push(request);
            Box::pin(async { Ok(SamplingResponse::new("test-model", "short.")) })
        })
        .build()
        .unwrap();
    let answer = call_json(
        &set,
        &ToolContext::new(),
        "summarize",
        json!({"text": "a long text"}),
    )
    .await;
    assert_eq!(
        answer,
        json!({"model": "test-model", "text": "short.", "stop": "endTurn"})
    );
    // Taken out of the lock, so no guard is held across the close below.
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let request = &seen[0];
    assert_eq!(request.messages.len(), 1);
    assert_eq!(request.messages[0].role, SamplingRole::User);
    assert_eq!(request.messages[0].text, "a long text");
    assert_eq!(request.system_prompt.as_deref(), Some("You summarize."));
    assert_eq!(request.max_tokens, 77);
    assert_eq!(request.temperature, Some(0.25));
    assert_eq!(request.model_hints, ["small-model"]);
    set.close().await.unwrap();
}

#[tokio::test]
async fn a_declined_sampling_request_is_an_error_the_server_sees() {
    let set = builder()
        .on_sampling(|_| Box::pin(async { Err(SamplingError::declined("the user said no")) }))
        .build()
        .unwrap();
    let out = set
        .call(
            &ToolContext::new(),
            "summarize",
            json!({"text": "x"}).as_object().cloned(),
        )
        .await
        .unwrap();
    set.close().await.unwrap();
    assert!(out.is_error, "{out:?}");
    assert!(
        out.llm_text().contains("the user said no"),
        "{}",
        out.llm_text()
    );
}

#[tokio::test]
async fn roots_are_listed_and_a_change_is_announced() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::directory(dir.path()).unwrap().with_name("work");
    assert!(
        root.uri.starts_with("file:///") && root.uri.ends_with('/'),
        "{}",
        root.uri
    );
    let set = builder().roots(vec![root.clone()]).build().unwrap();
    let ctx = ToolContext::new();
    let listed = call_json(&set, &ctx, "list_client_roots", json!({})).await;
    assert_eq!(listed, json!([{"uri": root.uri, "name": "work"}]));

    set.set_roots(vec![Root::new("file:///srv/other/")])
        .await
        .unwrap();
    let counted = set
        .call(&ctx, "roots_changed_count", None)
        .await
        .unwrap()
        .llm_text();
    let listed = call_json(&set, &ctx, "list_client_roots", json!({})).await;
    set.close().await.unwrap();
    assert_eq!(counted, "1");
    assert_eq!(listed, json!([{"uri": "file:///srv/other/", "name": null}]));

    let without = builder().build().unwrap();
    assert!(without.set_roots(vec![]).await.is_err());
}

// Several workers, as in the CLI: rmcp's notification tasks may then run in any order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn progress_of_a_call_reaches_the_context_that_watches_it_in_order_before_the_result() {
    let updates: Arc<Mutex<Vec<ProgressUpdate>>> = Arc::default();
    let record = updates.clone();
    let ctx = ToolContext::for_call("p1").with_progress(Arc::new(move |update| {
        record.lock().unwrap().push(update);
    }));
    let set = builder().build().unwrap();
    // Many reports sent back to back: handled as rmcp hands notifications over (a task
    // each), some would overtake others or the result.
    for steps in [3_u32, 200] {
        updates.lock().unwrap().clear();
        let out = set
            .call(
                &ctx,
                "count_slowly",
                json!({ "steps": steps }).as_object().cloned(),
            )
            .await
            .unwrap();
        assert_eq!(out.llm_text(), "counted");
        let got = std::mem::take(&mut *updates.lock().unwrap());
        let expected: Vec<_> = (1..=steps)
            .map(|s| {
                (
                    f64::from(s),
                    Some(f64::from(steps)),
                    format!("step {s} of {steps}"),
                )
            })
            .collect();
        assert_eq!(
            got.iter()
                .map(|u| (u.progress, u.total, u.message.clone().unwrap_or_default()))
                .collect::<Vec<_>>(),
            expected
        );
    }
    set.close().await.unwrap();
}

#[tokio::test]
async fn elicitation_works_over_streamable_http() {
    let port = free_port();
    let script = python_fixture().with_file_name("client_features_server.py");
    let mut command = std::process::Command::new(toolbelt_testkit::python());
    command
        .arg(&script)
        .args(["streamable-http", &port.to_string()]);
    let _server = HttpServer::start(command, port);
    let set = McpToolSet::builder("remote", remote("streamable_http", port, "/mcp"))
        .on_elicitation(|request| {
            let defaults = request.defaults();
            Box::pin(async move { ElicitationResponse::Accept(defaults) })
        })
        .build()
        .unwrap();
    let answer = call_json(&set, &ToolContext::new(), "ask_profile", json!({})).await;
    set.close().await.unwrap();
    assert_eq!(answer["action"], "accept");
    assert_eq!(answer["content"]["age"], 30);
}

/// A server's sampling tool loop (SEP-1577): the request offers get_weather, the handler's
/// tool call reaches the server as `tool_use` content with stop reason `toolUse`, the server
/// runs the tool and its result comes back to the handler in the next request.
#[tokio::test]
async fn sampling_with_tools_returns_the_models_tool_calls_and_brings_back_their_results() {
    let seen: Arc<Mutex<Vec<SamplingRequest>>> = Arc::default();
    let record = seen.clone();
    let set = builder()
        .sampling_tools(true)
        .on_sampling(move |request: SamplingRequest| {
            let results: Vec<String> = request
                .messages
                .iter()
                .flat_map(|m| m.tool_results.iter().map(|r| r.text.clone()))
                .collect();
            record.lock().unwrap().push(request);
            Box::pin(async move {
                Ok(if results.is_empty() {
                    let input = json!({"city": "Paris"}).as_object().cloned().unwrap();
                    SamplingResponse::tool_uses(
                        "test-model",
                        "Looking it up.",
                        vec![SamplingToolUse {
                            id: "call_1".into(),
                            name: "get_weather".into(),
                            input,
                        }],
                    )
                } else {
                    SamplingResponse::new("test-model", format!("Paris now: {}", results[0]))
                })
            })
        })
        .build()
        .unwrap();
    let declared = call_json(&set, &ToolContext::new(), "client_capabilities", json!({})).await;
    assert!(declared["sampling"]["tools"].is_object(), "{declared}");
    let answer = call_json(
        &set,
        &ToolContext::new(),
        "weather_agent",
        json!({"question": "Weather in Paris?"}),
    )
    .await;
    set.close().await.unwrap();
    let rounds = answer["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{answer}");
    assert_eq!(rounds[0]["stop"], "toolUse", "{answer}");
    assert_eq!(
        rounds[0]["content"],
        json!([
            {"type": "text", "text": "Looking it up."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}
        ])
    );
    assert_eq!(rounds[1]["stop"], "endTurn", "{answer}");
    assert_eq!(
        rounds[1]["content"][0]["text"], "Paris now: Paris: 18 C, cloudy",
        "the tool's result reached the handler: {answer}"
    );

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), 2);
    let first = &seen[0];
    assert_eq!(first.tools.len(), 1);
    assert_eq!(first.tools[0].name, "get_weather");
    assert_eq!(
        first.tools[0].description.as_deref(),
        Some("The weather in a city now")
    );
    assert_eq!(first.tools[0].input_schema["required"], json!(["city"]));
    assert_eq!(first.tool_choice, SamplingToolChoice::Auto);
    // The second request carries the model's call and the server's result, as separate
    // messages.
    let second = &seen[1];
    assert_eq!(second.messages.len(), 3);
    assert_eq!(second.messages[1].role, SamplingRole::Assistant);
    assert_eq!(second.messages[1].text, "Looking it up.");
    assert_eq!(second.messages[1].tool_uses[0].id, "call_1");
    assert_eq!(second.messages[2].role, SamplingRole::User);
    let result = &second.messages[2].tool_results[0];
    assert_eq!(result.tool_use_id, "call_1");
    assert!(!result.is_error);
    assert!(second.messages[2].text.is_empty());
}

/// Without `sampling_tools` the capability says plain sampling only, and the Python SDK
/// refuses to send tools to such a client.
#[tokio::test]
async fn a_client_without_sampling_tools_is_not_sent_tools() {
    let set = builder()
        .on_sampling(|_| Box::pin(async { Ok(SamplingResponse::new("m", "x")) }))
        .build()
        .unwrap();
    let declared = call_json(&set, &ToolContext::new(), "client_capabilities", json!({})).await;
    assert!(declared["sampling"].is_object(), "{declared}");
    assert!(declared["sampling"].get("tools").is_none(), "{declared}");
    let out = set
        .call(
            &ToolContext::new(),
            "weather_agent",
            json!({"question": "?"}).as_object().cloned(),
        )
        .await
        .unwrap();
    set.close().await.unwrap();
    assert!(out.is_error, "{out:?}");
    assert!(
        out.llm_text().contains("sampling tools"),
        "{}",
        out.llm_text()
    );
}

/// A server that sends tools to a client that did not declare `sampling.tools` gets -32602
/// and the handler is not asked; a handler that answers a request without tools with tool
/// calls is not passed on as such.
#[tokio::test]
async fn tools_the_client_did_not_declare_are_refused_and_unoffered_calls_are_an_error() {
    let asked: Arc<Mutex<u32>> = Arc::default();
    let count = asked.clone();
    let set = builder()
        .on_sampling(move |_| {
            *count.lock().unwrap() += 1;
            let input = json!({"city": "Rome"}).as_object().cloned().unwrap();
            Box::pin(async move {
                Ok(SamplingResponse::tool_uses(
                    "m",
                    "",
                    vec![SamplingToolUse {
                        id: "u".into(),
                        name: "get_weather".into(),
                        input,
                    }],
                ))
            })
        })
        .build()
        .unwrap();
    let ctx = ToolContext::new();
    let refused = call_json(&set, &ctx, "sample_tools_unchecked", json!({})).await;
    assert_eq!(refused["code"], -32602, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("did not declare sampling.tools"),
        "{refused}"
    );
    assert_eq!(*asked.lock().unwrap(), 0, "the handler was not asked");

    // A plain request (no tools) answered with a tool call: the server gets an error.
    let out = set
        .call(&ctx, "summarize", json!({"text": "x"}).as_object().cloned())
        .await
        .unwrap();
    set.close().await.unwrap();
    assert!(out.is_error, "{out:?}");
    assert!(
        out.llm_text().contains("the request offered none"),
        "{}",
        out.llm_text()
    );
}
