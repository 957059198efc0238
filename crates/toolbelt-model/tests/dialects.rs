//! The OpenAI Responses, Anthropic Messages and Gemini clients against the scripted
//! server's strict routes for each dialect: every scenario runs for every provider,
//! streamed and not.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use toolbelt_core::Declaration;
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{
    ContentPart, FinishReason, GenerationConfig, Message, MessageAssembler, Model, ModelError,
    OpenAiConfig, Provider, ProviderModel, Request, Response, RetryPolicy,
};

const PROVIDERS: [Provider; 3] = [
    Provider::OpenAiResponses,
    Provider::Anthropic,
    Provider::Gemini,
];

fn model(server: &ScriptedServer, provider: Provider) -> ProviderModel {
    let retry = RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(5),
        ..RetryPolicy::default()
    };
    let config = OpenAiConfig::new(server.base_url_for(provider), "scripted-model")
        .with_api_key("test-key")
        .with_retry(retry)
        .with_idle_timeout(Duration::from_secs(2));
    ProviderModel::new(provider, config).unwrap()
}

/// The name `fs.read` has on `provider`'s wire (Gemini allows dots, the others do not).
fn read_on(provider: Provider) -> &'static str {
    if provider == Provider::Gemini {
        "fs.read"
    } else {
        "fs_read"
    }
}

fn tools() -> Vec<Declaration> {
    let read = Declaration::new("fs.read", "Reads a file")
        .unwrap()
        .with_input_schema(json!({"type": "object", "properties": {
            "path": {"type": "string", "minLength": 1},
            "mode": {"oneOf": [{"const": "text"}, {"const": "bytes"}]},
            "limit": {"type": "integer", "minimum": 1}},
            "required": ["path"]}))
        .unwrap();
    let add = Declaration::new("add", "Adds")
        .unwrap()
        .with_input_schema(json!({"type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"],
            "additionalProperties": false}))
        .unwrap();
    vec![read, add]
}

fn request(messages: Vec<Message>, stream: bool) -> Request {
    let config = if stream {
        GenerationConfig::streaming()
    } else {
        GenerationConfig::default()
    };
    Request::new(messages)
        .with_tools(tools())
        .with_config(config)
}

/// Runs one call; for a stream, also checks that the deltas add up to the final message.
async fn call(model: &ProviderModel, request: Request) -> Result<Response, ModelError> {
    let stream = request.config.stream;
    let mut responses = model.generate(request).await?;
    let mut assembler = MessageAssembler::new();
    let mut partials = 0;
    while let Some(item) = responses.next().await {
        let response = item?;
        if response.partial {
            partials += 1;
            assembler.push(&response.delta);
            continue;
        }
        let message = response.message.clone().expect("a final message");
        if stream {
            assert!(partials > 0, "a stream yields deltas");
            let assembled = assembler.finish();
            assert_eq!(assembled.content, message.content);
            assert_eq!(assembled.reasoning, message.reasoning);
            let names: Vec<_> = assembled
                .tool_calls
                .iter()
                .map(|c| c.name.clone())
                .collect();
            let final_names: Vec<_> = message.tool_calls.iter().map(|c| c.name.clone()).collect();
            assert_eq!(names, final_names);
        }
        assert!(
            responses.next().await.is_none(),
            "nothing after the final response"
        );
        return Ok(response);
    }
    panic!("the stream ended without a final response");
}

/// The results of every call of `message`, in order.
fn answer_all(message: &Message, text: &str) -> Vec<Message> {
    message
        .tool_calls
        .iter()
        .map(|c| Message::tool(&c.id, &c.name, format!("{text} {}", c.name.as_str())))
        .collect()
}

#[tokio::test]
async fn two_tool_rounds_then_an_answer_streamed_and_not() {
    for provider in PROVIDERS {
        for stream in [false, true] {
            let server = ScriptedServer::start([
                Reply::tool_call(
                    "call_a",
                    read_on(provider),
                    r#"{"path":"a.txt","mode":null,"limit":null}"#,
                ),
                Reply::tool_call("call_b", "add", r#"{"a":1,"b":2}"#),
                Reply::text("done: 3"),
            ])
            .await
            .unwrap();
            let model = model(&server, provider);
            let mut messages = vec![Message::system("be brief"), Message::user("read and add")];
            for round in 0..2 {
                let response = call(&model, request(messages.clone(), stream))
                    .await
                    .unwrap();
                assert_eq!(
                    response.finish_reason,
                    Some(FinishReason::ToolCalls),
                    "{provider}"
                );
                let message = response.message.unwrap();
                assert_eq!(message.tool_calls.len(), 1);
                if round == 0 {
                    // The wire name (Gemini keeps dots, the others cannot) maps back.
                    assert_eq!(
                        message.tool_calls[0].name.as_str(),
                        "fs.read",
                        "{provider} {stream}"
                    );
                    if provider == Provider::OpenAiResponses {
                        // Strict mode's nulls for optional properties are taken back out.
                        assert_eq!(message.tool_calls[0].arguments, r#"{"path":"a.txt"}"#);
                    }
                }
                messages.push(message.clone());
                messages.extend(answer_all(&message, "result of"));
            }
            let response = call(&model, request(messages, stream)).await.unwrap();
            assert_eq!(response.message.unwrap().content, "done: 3", "{provider}");
            assert_eq!(response.finish_reason, Some(FinishReason::Stop));
            assert_eq!(
                response.usage.unwrap().total_tokens,
                18,
                "{provider} {stream}"
            );
            let requests = server.requests();
            assert_eq!(requests.len(), 3, "{provider}: no request refused");
            // System text is a field of its own everywhere here.
            let body = &requests[2].body;
            match provider {
                Provider::Anthropic => assert_eq!(body["system"], "be brief"),
                Provider::Gemini => {
                    assert_eq!(body["systemInstruction"]["parts"][0]["text"], "be brief")
                }
                _ => assert_eq!(body["instructions"], "be brief"),
            }
        }
    }
}

#[tokio::test]
async fn parallel_calls_are_answered_together() {
    for provider in PROVIDERS {
        for stream in [false, true] {
            let server = ScriptedServer::start([
                Reply::tool_calls([
                    ("c1", "add", r#"{"a":1,"b":2}"#),
                    ("c2", "add", r#"{"a":3,"b":4}"#),
                ]),
                Reply::text("3 and 7"),
            ])
            .await
            .unwrap();
            let model = model(&server, provider);
            let mut messages = vec![Message::user("two sums")];
            let response = call(&model, request(messages.clone(), stream))
                .await
                .unwrap();
            let message = response.message.unwrap();
            assert_eq!(message.tool_calls.len(), 2, "{provider}");
            assert_eq!(message.tool_calls[1].arguments, r#"{"a":3,"b":4}"#);
            assert_ne!(message.tool_calls[0].id, message.tool_calls[1].id);
            messages.push(message.clone());
            messages.extend(answer_all(&message, "sum"));
            let response = call(&model, request(messages, stream)).await.unwrap();
            assert_eq!(
                response.message.unwrap().content,
                "3 and 7",
                "{provider} {stream}"
            );
            let body = &server.requests()[1].body;
            match provider {
                // Both results in one user message.
                Provider::Anthropic => {
                    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
                    assert_eq!(last["content"].as_array().unwrap().len(), 2);
                }
                Provider::Gemini => {
                    let last = body["contents"].as_array().unwrap().last().unwrap().clone();
                    assert_eq!(last["parts"].as_array().unwrap().len(), 2);
                }
                _ => {}
            }
        }
    }
}

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[tokio::test]
async fn an_image_result_and_an_error_result_go_out_in_each_dialects_shape() {
    for provider in PROVIDERS {
        let server = ScriptedServer::start([
            Reply::tool_calls([
                ("c1", "add", r#"{"a":1,"b":2}"#),
                ("c2", read_on(provider), r#"{"path":"x"}"#),
            ]),
            Reply::text("seen"),
        ])
        .await
        .unwrap();
        let model = model(&server, provider);
        let mut messages = vec![Message::user("look")];
        let message = call(&model, request(messages.clone(), false))
            .await
            .unwrap()
            .message
            .unwrap();
        messages.push(message.clone());
        let mut picture = Message::tool(&message.tool_calls[0].id, "add", "a chart");
        picture.parts = vec![ContentPart::image_data("image/png", PNG)];
        let mut failed = Message::tool(&message.tool_calls[1].id, "fs.read", "Error: no such file");
        failed.is_error = true;
        messages.extend([picture, failed]);
        let response = call(&model, request(messages, true)).await.unwrap();
        assert_eq!(response.message.unwrap().content, "seen");
        let body = server.requests()[1].body.clone();
        let text = body.to_string();
        assert!(text.contains(PNG), "{provider}: the image is sent");
        match provider {
            Provider::Anthropic => {
                let results = body["messages"][2]["content"].as_array().unwrap().clone();
                assert_eq!(results[0]["content"][1]["type"], "image");
                assert_eq!(
                    results[0]["content"][1]["source"]["media_type"],
                    "image/png"
                );
                assert_eq!(results[1]["is_error"], true);
            }
            Provider::Gemini => {
                let parts = body["contents"][2]["parts"].as_array().unwrap().clone();
                assert_eq!(
                    parts[0]["functionResponse"]["response"]["result"],
                    "a chart"
                );
                assert_eq!(parts[1]["functionResponse"]["name"], "fs.read");
                assert_eq!(
                    parts[1]["functionResponse"]["response"]["error"],
                    "Error: no such file"
                );
                assert_eq!(parts[2]["inlineData"]["mimeType"], "image/png");
            }
            _ => {
                let output = &body["input"][3]["output"];
                assert_eq!(output[1]["type"], "input_image");
                assert_eq!(body["input"][4]["output"], "Error: no such file");
            }
        }
    }
}

#[tokio::test]
async fn rate_limits_and_overload_are_retried_with_retry_after() {
    for provider in PROVIDERS {
        for first in [
            Reply::rate_limited("0"),
            Reply::status(529, "Overloaded"),
            Reply::status(503, "busy"),
        ] {
            let server = ScriptedServer::start([first.clone(), Reply::text("hi")])
                .await
                .unwrap();
            let model = model(&server, provider);
            let response = call(&model, request(vec![Message::user("hi")], true))
                .await
                .unwrap();
            assert_eq!(
                response.message.unwrap().content,
                "hi",
                "{provider} {first:?}"
            );
            assert_eq!(server.requests().len(), 2);
        }
        // A refused request is not retried, and its message is the provider's.
        let server = ScriptedServer::start([Reply::status(400, "bad thing")])
            .await
            .unwrap();
        let error = call(
            &model(&server, provider),
            request(vec![Message::user("hi")], false),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&error, ModelError::Status { status: 400, message } if message == "bad thing"),
            "{error}"
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn an_overloaded_error_event_mid_stream_is_retryable() {
    let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{}}}\n\n\
                event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let server = ScriptedServer::start([Reply::raw("text/event-stream", body)])
        .await
        .unwrap();
    let error = call(
        &model(&server, Provider::Anthropic),
        request(vec![Message::user("hi")], true),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, ModelError::Status { status: 529, .. }),
        "{error}"
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn malformed_and_cut_streams_are_errors_never_answers() {
    for provider in PROVIDERS {
        let garbage = Reply::raw(
            "text/event-stream",
            "data: {\"type\": \"message_start\", nope\n\n",
        );
        let cut = match provider {
            Provider::Anthropic => {
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{}}}\n\n\
                event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
                event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"
            }
            Provider::Gemini => {
                "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]}}]}\n\n"
            }
            _ => "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hel\"}\n\n",
        };
        for reply in [garbage, Reply::raw("text/event-stream", cut)] {
            let server = ScriptedServer::start([reply]).await.unwrap();
            let error = call(
                &model(&server, provider),
                request(vec![Message::user("hi")], true),
            )
            .await
            .unwrap_err();
            assert!(
                matches!(error, ModelError::Decode(_)),
                "{provider}: {error}"
            );
        }
        // A stall past the idle timeout is the idle timeout, named.
        let server = ScriptedServer::start([Reply::Stall {
            content: "wait".into(),
            pause: Duration::from_secs(5),
        }])
        .await
        .unwrap();
        let error = call(
            &model(&server, provider),
            request(vec![Message::user("hi")], true),
        )
        .await
        .unwrap_err();
        assert!(
            error.to_string().contains("idle timeout"),
            "{provider}: {error}"
        );
    }
}

#[tokio::test]
async fn a_length_stop_is_a_length_finish_reason() {
    for provider in PROVIDERS {
        for stream in [false, true] {
            let server = ScriptedServer::start([Reply::truncated("cut sh")])
                .await
                .unwrap();
            let response = call(
                &model(&server, provider),
                request(vec![Message::user("hi")], stream),
            )
            .await
            .unwrap();
            assert_eq!(
                response.finish_reason,
                Some(FinishReason::Length),
                "{provider}"
            );
        }
    }
}

#[tokio::test]
async fn reasoning_comes_back_with_the_calls_it_led_to() {
    for provider in PROVIDERS {
        for stream in [false, true] {
            let server = ScriptedServer::start([
                Reply::reasoned("I should add", [("c1", "add", r#"{"a":1,"b":2}"#)]),
                Reply::text("3"),
            ])
            .await
            .unwrap();
            let model = model(&server, provider);
            let mut messages = vec![Message::user("add")];
            let message = call(&model, request(messages.clone(), stream))
                .await
                .unwrap()
                .message
                .unwrap();
            if provider != Provider::Gemini {
                assert_eq!(message.reasoning, "I should add", "{provider}");
            }
            assert!(
                message
                    .replay
                    .iter()
                    .all(|r| r.provider == provider.as_str())
            );
            assert!(
                !message.replay.is_empty(),
                "{provider}: something to replay"
            );
            // Through a stored session (serde) and back.
            let stored: Message =
                serde_json::from_str(&serde_json::to_string(&message).unwrap()).unwrap();
            assert_eq!(stored, message);
            messages.push(stored.clone());
            messages.extend(answer_all(&stored, "="));
            let response = call(&model, request(messages.clone(), stream))
                .await
                .unwrap();
            assert_eq!(response.message.unwrap().content, "3");
            // Without the replay items the server refuses, as the real APIs do.
            let mut stripped = messages.clone();
            let replay = &mut stripped[1].replay;
            match provider {
                Provider::Anthropic => replay.clear(),
                // The calls' item ids stay, their reasoning item goes.
                Provider::OpenAiResponses => replay.retain(|r| r.tool_call.is_some()),
                _ => replay[0].item = json!({"thoughtSignature": "Ym9ndXM="}),
            }
            server.push([Reply::text("never")]);
            let error = call(&model, request(stripped, stream)).await.unwrap_err();
            assert!(
                matches!(error, ModelError::Status { status: 400, .. }),
                "{provider}: {error}"
            );
        }
    }
}

#[tokio::test]
async fn a_session_begun_on_one_provider_goes_on_with_any_other() {
    for first in PROVIDERS {
        for second in PROVIDERS {
            let server = ScriptedServer::start([
                Reply::reasoned("think", [("c1", "add", r#"{"a":1,"b":2}"#)]),
                Reply::text("3"),
            ])
            .await
            .unwrap();
            let mut messages = vec![Message::user("add")];
            let message = call(&model(&server, first), request(messages.clone(), true))
                .await
                .unwrap()
                .message
                .unwrap();
            messages.push(message.clone());
            messages.extend(answer_all(&message, "="));
            let response = call(&model(&server, second), request(messages, true)).await;
            assert_eq!(
                response.unwrap().message.unwrap().content,
                "3",
                "{first} -> {second}"
            );
        }
    }
}

#[tokio::test]
async fn the_servers_refuse_what_the_real_apis_refuse() {
    let server = ScriptedServer::start([]).await.unwrap();
    let http = reqwest::Client::new();
    // No anthropic-version header.
    let response = http
        .post(format!("{}/messages", server.base_url()))
        .header("x-api-key", "k")
        .json(&json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("anthropic-version")
    );

    for provider in PROVIDERS {
        let model = model(&server, provider);
        // A tool result that answers no call.
        let orphan = vec![Message::user("hi"), Message::tool("nope", "add", "3")];
        let error = call(&model, request(orphan, false)).await.unwrap_err();
        assert!(
            matches!(error, ModelError::Status { status: 400, .. }),
            "{provider}: {error}"
        );
        // An unknown top-level field.
        let mut config = model.config().clone();
        config.extra_body.insert("surprise".into(), json!(1));
        let odd = ProviderModel::new(provider, config).unwrap();
        let error = call(&odd, request(vec![Message::user("hi")], false))
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("surprise"),
            "{provider}: {error}"
        );
    }
    // Schema keywords each refuses, sent unshaped.
    let raw_gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "t", "parameters":
            {"type": "object", "properties": {"k": {"const": "x"}}}}]}]});
    let response = http
        .post(format!(
            "{}/models/m:generateContent",
            server.gemini_base_url()
        ))
        .header("x-goog-api-key", "k")
        .json(&raw_gemini)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("Unknown name \\\"const\\\"")
    );
    let raw_responses = json!({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "t",
        "parameters": {"type": "object", "properties": {"k": {"type": "string"}}}}]});
    let response = http
        .post(format!("{}/responses", server.base_url()))
        .bearer_auth("k")
        .json(&raw_responses)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("additionalProperties")
    );
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn a_fallback_chain_moves_a_retryable_failure_to_the_next_provider() {
    use std::sync::{Arc, Mutex};
    use toolbelt_model::{DynModel, FallbackModel, FallbackNotice};
    // The first keeps answering 429 past its retry budget (2 retries), the second answers.
    let busy = ScriptedServer::start([
        Reply::rate_limited("0"),
        Reply::rate_limited("0"),
        Reply::rate_limited("0"),
    ])
    .await
    .unwrap();
    let ok = ScriptedServer::start([Reply::text("from gemini")])
        .await
        .unwrap();
    let notices: Arc<Mutex<Vec<FallbackNotice>>> = Arc::default();
    let seen = notices.clone();
    let chain = FallbackModel::new(vec![
        Arc::new(model(&busy, Provider::Anthropic)) as DynModel,
        Arc::new(model(&ok, Provider::Gemini)) as DynModel,
    ])
    .unwrap()
    .with_observer(Arc::new(move |n| seen.lock().unwrap().push(n.clone())));
    let mut stream = chain
        .generate(request(vec![Message::user("hi")], false))
        .await
        .unwrap();
    let response = stream.next().await.unwrap().unwrap();
    assert_eq!(response.warnings.len(), 1, "{:?}", response.warnings);
    assert!(
        response.warnings[0].starts_with("model scripted-model failed")
            && response.warnings[0].contains("429")
            && response.warnings[0].ends_with("this turn goes on with scripted-model"),
        "the answer says the turn moved on: {:?}",
        response.warnings
    );
    assert_eq!(response.message.unwrap().content, "from gemini");
    assert_eq!(
        busy.requests().len(),
        3,
        "the first model's budget was spent"
    );
    let notices = notices.lock().unwrap().clone();
    assert_eq!(notices.len(), 1);
    assert!(notices[0].error.contains("429"), "{:?}", notices[0]);

    // A refused request is not moved on: the next would be sent the same.
    let refused = ScriptedServer::start([Reply::status(400, "bad thing")])
        .await
        .unwrap();
    let untouched = ScriptedServer::start([Reply::text("never")]).await.unwrap();
    let chain = FallbackModel::new(vec![
        Arc::new(model(&refused, Provider::OpenAiResponses)) as DynModel,
        Arc::new(model(&untouched, Provider::Anthropic)) as DynModel,
    ])
    .unwrap();
    let error = chain
        .generate(request(vec![Message::user("hi")], false))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(error, ModelError::Status { status: 400, .. }),
        "{error}"
    );
    assert!(untouched.requests().is_empty());
    assert!(FallbackModel::new(Vec::new()).is_err());
}

/// A tool declared freeform (apply_patch's shape: one string argument, `input`, in a grammar).
fn patch_tool() -> Declaration {
    Declaration::new("patch", "Applies a patch")
        .unwrap()
        .with_input_schema(json!({"type": "object", "properties": {
            "input": {"type": "string"}}, "required": ["input"]}))
        .unwrap()
        .with_freeform(toolbelt_core::FreeformInput {
            argument: "input".into(),
            syntax: "lark".into(),
            definition: "start: /.+/s".into(),
        })
}

#[tokio::test]
async fn a_freeform_tool_is_a_custom_tool_on_responses_and_a_function_elsewhere() {
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+\"quoted\" {braces}\n*** End Patch\n";
    for provider in PROVIDERS {
        for stream in [false, true] {
            let server = ScriptedServer::start([
                Reply::tool_call("call_p", "patch", &json!({"input": patch}).to_string()),
                Reply::text("patched"),
            ])
            .await
            .unwrap();
            let model = model(&server, provider);
            let ask = |messages: Vec<Message>| {
                let config = if stream {
                    GenerationConfig::streaming()
                } else {
                    GenerationConfig::default()
                };
                Request::new(messages)
                    .with_tools(vec![patch_tool()])
                    .with_config(config)
            };
            let mut messages = vec![Message::user("add a.txt")];
            let response = call(&model, ask(messages.clone())).await.unwrap();
            let message = response.message.unwrap();
            // Whichever way the model wrote it, the tool gets `{"input": <the text>}`.
            let arguments: Value = serde_json::from_str(&message.tool_calls[0].arguments).unwrap();
            assert_eq!(arguments, json!({"input": patch}), "{provider} {stream}");
            messages.push(message.clone());
            messages.extend(answer_all(&message, "applied"));
            let response = call(&model, ask(messages)).await.unwrap();
            assert_eq!(response.message.unwrap().content, "patched");

            let requests = server.requests();
            assert_eq!(requests.len(), 2, "{provider} {stream}: no request refused");
            let body = &requests[1].body;
            if provider != Provider::OpenAiResponses {
                let text = body.to_string();
                assert!(!text.contains("custom"), "{provider}: {text}");
                continue;
            }
            let tool = &body["tools"][0];
            assert_eq!(tool["type"], "custom");
            assert_eq!(tool["format"]["type"], "grammar");
            assert_eq!(tool["format"]["syntax"], "lark");
            assert_eq!(tool["format"]["definition"], "start: /.+/s");
            assert!(tool.get("parameters").is_none(), "{tool}");
            // The call goes back as the custom call it was, with its text, and its result
            // as a custom output (the server refuses a function output for it).
            let items = body["input"].as_array().unwrap();
            let call = items
                .iter()
                .find(|i| i["type"] == "custom_tool_call")
                .expect("the custom call is replayed");
            assert_eq!(call["input"], patch);
            assert_eq!(call["call_id"], "call_p");
            let output = items
                .iter()
                .find(|i| i["type"] == "custom_tool_call_output")
                .expect("its output is a custom output");
            assert_eq!(output["call_id"], "call_p");
        }
    }
}

#[tokio::test]
async fn a_function_output_for_a_custom_call_is_refused_by_the_scripted_server() {
    // The scripted server is as strict as the API: the test above passes because the client
    // answers in kind, not because the server takes anything.
    let server = ScriptedServer::start([Reply::text("unused")])
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let response = client
        .post(format!(
            "{}/responses",
            server.base_url_for(Provider::OpenAiResponses)
        ))
        .bearer_auth("k")
        .json(&json!({"model": "m", "input": [
            {"type": "custom_tool_call", "call_id": "c1", "name": "patch", "input": "x"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let text = response.text().await.unwrap();
    assert!(text.contains("does not answer the call"), "{text}");
}
