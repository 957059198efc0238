//! The OpenAI-compatible client against the scripted server on 127.0.0.1.

use std::time::Duration;

use futures::StreamExt;
use toolbelt_core::Declaration;
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{
    ContentPart, FinishReason, GenerationConfig, Message, Model, ModelError, OpenAiConfig,
    OpenAiModel, Request, Response, RetryObserver, RetryPolicy, ToolCall, ToolChoice,
};

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(5),
        ..RetryPolicy::default()
    }
}

fn client(server: &ScriptedServer) -> OpenAiModel {
    let config = OpenAiConfig::new(server.base_url(), "scripted-model").with_retry(fast_retries());
    OpenAiModel::new(config).unwrap()
}

async fn collect(model: &OpenAiModel, request: Request) -> Result<Vec<Response>, ModelError> {
    let mut stream = model.generate(request).await?;
    let mut out = Vec::new();
    while let Some(item) = stream.next().await {
        out.push(item?);
    }
    Ok(out)
}

fn streaming(messages: Vec<Message>) -> Request {
    Request::new(messages).with_config(GenerationConfig::streaming())
}

#[tokio::test]
async fn streamed_deltas_concatenated_equal_the_final_message() {
    let server = ScriptedServer::start([Reply::text("The answer is forty-two, ünïcode included.")])
        .await
        .unwrap();
    let responses = collect(&client(&server), streaming(vec![Message::user("q")]))
        .await
        .unwrap();
    let (last, partials) = responses.split_last().unwrap();
    assert!(
        partials.len() > 3,
        "the text should arrive in several deltas"
    );
    assert!(partials.iter().all(|r| r.partial));
    let concatenated: String = partials.iter().map(|r| r.delta.content.as_str()).collect();
    let message = last.message.as_ref().unwrap();
    assert!(!last.partial);
    assert_eq!(concatenated, message.content);
    assert_eq!(
        message.content,
        "The answer is forty-two, ünïcode included."
    );
    assert_eq!(last.finish_reason, Some(FinishReason::Stop));
    assert_eq!(last.usage.unwrap().total_tokens, 18);
    assert_eq!(last.model, "scripted-model");
}

#[tokio::test]
async fn streamed_tool_call_arguments_are_assembled_by_index() {
    let server = ScriptedServer::start([Reply::tool_calls([
        ("call_a", "read", r#"{"path":"src/lib.rs","limit":20}"#),
        ("call_b", "grep", r#"{"pattern":"fn main"}"#),
        ("call_c", "glob", "{}"),
    ])])
    .await
    .unwrap();
    let responses = collect(&client(&server), streaming(vec![Message::user("q")]))
        .await
        .unwrap();
    let last = responses.last().unwrap();
    assert_eq!(
        last.tool_calls(),
        &[
            ToolCall::new("call_a", "read", r#"{"path":"src/lib.rs","limit":20}"#),
            ToolCall::new("call_b", "grep", r#"{"pattern":"fn main"}"#),
            ToolCall::new("call_c", "glob", "{}"),
        ]
    );
    assert_eq!(last.finish_reason, Some(FinishReason::ToolCalls));
    let fragments: usize = responses.iter().map(|r| r.delta.tool_calls.len()).sum();
    assert!(fragments > 3, "arguments should arrive in pieces");
}

#[tokio::test]
async fn non_streaming_yields_one_final_response_with_usage() {
    let server = ScriptedServer::start([
        Reply::text("plain"),
        Reply::tool_call("c1", "read", r#"{"path":"a"}"#),
    ])
    .await
    .unwrap();
    let model = client(&server);
    let responses = collect(&model, Request::new(vec![Message::user("q")]))
        .await
        .unwrap();
    assert_eq!(responses.len(), 1);
    assert!(!responses[0].partial);
    assert_eq!(responses[0].message.as_ref().unwrap().content, "plain");
    assert_eq!(responses[0].usage.unwrap().prompt_tokens, 11);

    let responses = collect(&model, Request::new(vec![Message::user("q")]))
        .await
        .unwrap();
    assert_eq!(
        responses[0].tool_calls(),
        &[ToolCall::new("c1", "read", r#"{"path":"a"}"#)]
    );
    assert_eq!(server.requests()[0].body["stream"], false);
}

#[tokio::test]
async fn a_429_is_retried_after_the_servers_retry_after() {
    let server = ScriptedServer::start([Reply::rate_limited("0"), Reply::text("made it")])
        .await
        .unwrap();
    // The computed backoff is an hour: finishing at all shows Retry-After replaced it.
    let retry = RetryPolicy {
        max_retries: 1,
        min_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
        max_retry_after: Duration::from_secs(5),
        ..RetryPolicy::default()
    };
    let model =
        OpenAiModel::new(OpenAiConfig::new(server.base_url(), "m").with_retry(retry)).unwrap();
    let call = collect(&model, streaming(vec![Message::user("q")]));
    let responses = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("Retry-After: 0 should have been honoured")
        .unwrap();
    assert_eq!(
        responses.last().unwrap().message.as_ref().unwrap().content,
        "made it"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn the_retry_observer_hears_each_retry_with_its_reason_and_wait() {
    let server = ScriptedServer::start([
        Reply::rate_limited("0.2"),
        Reply::status(503, "overloaded"),
        Reply::text("made it"),
    ])
    .await
    .unwrap();
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = heard.clone();
    let observer = RetryObserver::new(move |notice| {
        let status = match notice.error {
            ModelError::Status { status, .. } => *status,
            _ => 0,
        };
        let entry = (notice.attempt, notice.max_attempts, status, notice.delay);
        log.lock().unwrap().push(entry);
    });
    let config = OpenAiConfig::new(server.base_url(), "m").with_retry(fast_retries());
    let model = OpenAiModel::new(config)
        .unwrap()
        .with_retry_observer(observer);
    let responses = collect(&model, streaming(vec![Message::user("q")]))
        .await
        .unwrap();
    assert_eq!(
        responses.last().unwrap().message.as_ref().unwrap().content,
        "made it"
    );
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 2, "{heard:?}");
    // The first wait is the server's Retry-After; the second is the policy's backoff.
    assert_eq!(heard[0], (1, 3, 429, Duration::from_millis(200)));
    assert_eq!((heard[1].0, heard[1].1, heard[1].2), (2, 3, 503));
    assert!(heard[1].3 <= Duration::from_millis(5), "{heard:?}");
}

#[tokio::test]
async fn server_errors_are_retried_up_to_the_limit_then_reported() {
    let server = ScriptedServer::start([
        Reply::status(503, "overloaded"),
        Reply::status(502, "bad gateway"),
        Reply::status(500, "still broken"),
        Reply::text("never reached"),
    ])
    .await
    .unwrap();
    let err = collect(&client(&server), Request::new(vec![Message::user("q")]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Status { status: 500, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("still broken"), "{err}");
    assert_eq!(server.requests().len(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server =
        ScriptedServer::start([Reply::status(400, "tools[0] is invalid"), Reply::text("x")])
            .await
            .unwrap();
    let err = collect(&client(&server), Request::new(vec![Message::user("q")]))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Status { status: 400, .. }));
    assert!(!err.is_retryable());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn api_key_and_extra_headers_are_sent() {
    let server = ScriptedServer::start([Reply::text("ok")]).await.unwrap();
    let config = OpenAiConfig::new(format!("{}/", server.base_url()), "m")
        .with_api_key("sk-test")
        .with_header("X-Project", "toolbelt");
    collect(
        &OpenAiModel::new(config).unwrap(),
        Request::new(vec![Message::user("q")]),
    )
    .await
    .unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.headers["authorization"], "Bearer sk-test");
    assert_eq!(request.headers["x-project"], "toolbelt");
}

#[tokio::test]
async fn the_request_carries_tools_choice_parallelism_and_generation_config() {
    let server = ScriptedServer::start([Reply::text("ok")]).await.unwrap();
    let declaration = Declaration::new("read", "Reads a file")
        .unwrap()
        .with_input_schema(serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }))
        .unwrap();
    let request = Request::new(vec![Message::system("be brief"), Message::user("q")])
        .with_tools(vec![declaration])
        .with_tool_choice(ToolChoice::Tool("read".into()))
        .with_parallel_tool_calls(false)
        .with_config(GenerationConfig {
            stream: true,
            max_tokens: Some(64),
            temperature: Some(0.5),
            stop: vec!["END".into()],
            ..GenerationConfig::default()
        });
    collect(&client(&server), request).await.unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "scripted-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"][0],
        "path"
    );
    assert_eq!(body["tool_choice"]["function"]["name"], "read");
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["stop"][0], "END");
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn a_stream_that_goes_quiet_ends_with_an_idle_timeout() {
    let server = ScriptedServer::start([Reply::Stall {
        content: "partial".into(),
        pause: Duration::from_secs(30),
    }])
    .await
    .unwrap();
    let config = OpenAiConfig::new(server.base_url(), "m")
        .with_retry(RetryPolicy::none())
        .with_idle_timeout(Duration::from_millis(200));
    let model = OpenAiModel::new(config).unwrap();
    let mut stream = model
        .generate(streaming(vec![Message::user("q")]))
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first.delta.content, "partial");
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(matches!(err, ModelError::Timeout { .. }), "{err}");
    assert!(
        stream.next().await.is_none(),
        "the stream ends after its error"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config =
        OpenAiConfig::new(format!("http://{addr}/v1"), "m").with_retry(RetryPolicy::none());
    let err = collect(&OpenAiModel::new(config).unwrap(), Request::new(vec![]))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Transport(_)), "{err}");
}

#[test]
fn missing_configuration_names_the_variables_to_set() {
    let err = OpenAiConfig::from_values(None, None, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no model configured: set OPENAI_BASE_URL and TOOLBELT_MODEL (or pass them as options)"
    );
    let err =
        OpenAiConfig::from_values(Some("http://127.0.0.1:1/v1".into()), None, None).unwrap_err();
    assert!(
        matches!(err, ModelError::NotConfigured { ref missing } if missing == &["TOOLBELT_MODEL"])
    );
    let only_key = OpenAiConfig::from_values(None, Some("k".into()), Some("m".into())).unwrap();
    assert_eq!(only_key.base_url, toolbelt_model::OPENAI_DEFAULT_BASE_URL);
}

#[test]
fn bad_base_urls_and_headers_are_configuration_errors() {
    let err = OpenAiModel::new(OpenAiConfig::new("127.0.0.1:8000", "m")).unwrap_err();
    assert!(matches!(err, ModelError::InvalidConfig(_)));
    let config = OpenAiConfig::new("http://127.0.0.1:1", "m").with_header("bad header", "v");
    assert!(matches!(
        OpenAiModel::new(config),
        Err(ModelError::InvalidConfig(_))
    ));
}

/// Both ways of asking; tests that care run in each.
const MODES: [bool; 2] = [false, true];

fn request(stream: bool) -> Request {
    Request::new(vec![Message::user("q")]).with_config(GenerationConfig {
        stream,
        ..GenerationConfig::default()
    })
}

fn final_message(responses: &[Response]) -> &Message {
    let last = responses.last().expect("a final response");
    assert!(!last.partial);
    last.message.as_ref().expect("the final message")
}

#[tokio::test]
async fn a_json_completion_to_a_streaming_request_is_the_final_response() {
    let server = ScriptedServer::start([
        Reply::json_completion("a proxy ignored stream: true"),
        // The same without a content type: the body's first byte says it is JSON.
        Reply::Raw {
            status: 200,
            content_type: None,
            body:
                r#"{"choices":[{"message":{"content":"no content type"},"finish_reason":"stop"}]}"#
                    .into(),
        },
    ])
    .await
    .unwrap();
    let model = client(&server);
    let responses = collect(&model, request(true)).await.unwrap();
    assert_eq!(responses.len(), 1);
    assert_eq!(
        final_message(&responses).content,
        "a proxy ignored stream: true"
    );
    assert_eq!(responses[0].finish_reason, Some(FinishReason::Stop));
    let responses = collect(&model, request(true)).await.unwrap();
    assert_eq!(final_message(&responses).content, "no content type");
}

#[tokio::test]
async fn an_error_body_under_200_is_an_error_with_its_message() {
    for stream in MODES {
        let body = r#"{"error":{"message":"model qwen3 is still loading","code":503}}"#;
        let server = ScriptedServer::start([Reply::raw("application/json", body)])
            .await
            .unwrap();
        let err = collect(&client(&server), request(stream))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("model qwen3 is still loading"),
            "stream {stream}: {err}"
        );
        assert!(matches!(err, ModelError::Status { status: 200, .. }));
    }
}

#[tokio::test]
async fn an_html_page_is_an_error_naming_text_html_with_a_snippet() {
    let page = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n\
                <body><h1>502 Bad Gateway</h1><hr>nginx</body></html>";
    for stream in MODES {
        let server = ScriptedServer::start([Reply::raw("text/html; charset=utf-8", page)])
            .await
            .unwrap();
        let err = collect(&client(&server), request(stream))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ModelError::UnexpectedBody { ref content_type, .. } if content_type == "text/html"),
            "stream {stream}: {err:?}"
        );
        let message = err.to_string();
        assert!(message.contains("text/html"), "{message}");
        assert!(
            message.contains("<title>502 Bad Gateway</title>"),
            "{message}"
        );
        assert_eq!(server.requests().len(), 1, "a 200 is not retried");
    }
}

#[tokio::test]
async fn plain_text_to_a_streaming_request_is_an_error_naming_its_content_type() {
    let server = ScriptedServer::start([Reply::raw("text/plain", "upstream connect error")])
        .await
        .unwrap();
    let err = collect(&client(&server), request(true)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the model server sent text/plain instead of an event stream: upstream connect error"
    );
}

#[tokio::test]
async fn empty_answers_are_errors_not_blank_successes() {
    for stream in MODES {
        for reply in [Reply::text(""), Reply::EmptyChoices] {
            let server = ScriptedServer::start([reply.clone()]).await.unwrap();
            let err = collect(&client(&server), request(stream))
                .await
                .unwrap_err();
            assert!(
                matches!(err, ModelError::EmptyAnswer { .. }),
                "stream {stream}, {reply:?}: {err}"
            );
        }
    }
}

#[tokio::test]
async fn chunks_with_empty_choices_are_skipped_around_a_real_answer() {
    // The scripted stream already ends with a usage chunk whose choices are empty.
    let server = ScriptedServer::start([Reply::text("fine")]).await.unwrap();
    let responses = collect(&client(&server), request(true)).await.unwrap();
    assert_eq!(final_message(&responses).content, "fine");
    assert_eq!(responses.last().unwrap().usage.unwrap().total_tokens, 18);
}

#[tokio::test]
async fn a_length_finish_reason_is_on_the_response() {
    for stream in MODES {
        let server = ScriptedServer::start([Reply::truncated("It was the best of")])
            .await
            .unwrap();
        let responses = collect(&client(&server), request(stream)).await.unwrap();
        assert_eq!(final_message(&responses).content, "It was the best of");
        assert_eq!(
            responses.last().unwrap().finish_reason,
            Some(FinishReason::Length),
            "stream {stream}"
        );
    }
}

#[tokio::test]
async fn a_complete_answer_on_a_held_connection_finishes_without_done() {
    let server = ScriptedServer::start([Reply::HeldOpen {
        content: "complete, but no [DONE]".into(),
    }])
    .await
    .unwrap();
    // The server sends a keep-alive chunk every 200 ms after the answer, and the idle
    // timeout is far beyond the bound below: finishing shows the answer was taken as
    // complete, not that the stream timed out or waited for the keep-alives to stop.
    let config = OpenAiConfig::new(server.base_url(), "m")
        .with_retry(RetryPolicy::none())
        .with_idle_timeout(Duration::from_secs(600));
    let model = OpenAiModel::new(config).unwrap();
    let responses = tokio::time::timeout(Duration::from_secs(60), collect(&model, request(true)))
        .await
        .expect("the stream should finish well before the idle timeout")
        .unwrap();
    assert_eq!(final_message(&responses).content, "complete, but no [DONE]");
    let last = responses.last().unwrap();
    assert_eq!(last.finish_reason, Some(FinishReason::Stop));
    assert_eq!(
        last.usage.unwrap().total_tokens,
        18,
        "the trailing usage chunk is kept"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_fails_naming_the_request_timeout_after_one_retry() {
    let server = ScriptedServer::start([Reply::NoAnswer, Reply::NoAnswer, Reply::NoAnswer])
        .await
        .unwrap();
    // The policy allows three retries; a timed-out attempt is retried once only.
    let retry = RetryPolicy {
        max_retries: 3,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        ..RetryPolicy::default()
    };
    let config = OpenAiConfig::new(server.base_url(), "m")
        .with_retry(retry)
        .with_request_timeout(Duration::from_secs(1));
    let model = OpenAiModel::new(config).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), collect(&model, request(true)))
        .await
        .expect("the request timeout should have fired")
        .unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                setting: "request timeout",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "no response headers within 1 s (request timeout)"
    );
    assert_eq!(server.requests().len(), 2, "one attempt and one retry");
}

fn picture() -> Message {
    Message::user_with_parts(
        "What is in this picture?",
        vec![
            ContentPart::image_data("image/png", "iVBORw0KGgo="),
            ContentPart::Text {
                text: "Answer briefly.".into(),
            },
        ],
    )
}

#[tokio::test]
async fn image_parts_go_out_as_openai_content_parts_text_first() {
    let server = ScriptedServer::start([Reply::text("a cat")]).await.unwrap();
    let model = client(&server);
    assert!(model.accepts_images());
    let mut tool = Message::tool("c1", "read", "the file");
    tool.parts = vec![ContentPart::image_data("image/jpeg", "/9j/")];
    let call = Message::assistant_tool_calls("", vec![ToolCall::new("c1", "read", "{}")]);
    collect(&model, Request::new(vec![call, tool, picture()]))
        .await
        .unwrap();
    let messages = server.requests()[0].messages().to_vec();
    assert_eq!(
        messages[2]["content"],
        serde_json::json!([
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": "Answer briefly."},
        ])
    );
    // OpenAI's tool role takes text only: the image becomes a note there.
    assert_eq!(
        messages[1]["content"],
        "the file\n\n[image/jpeg not shown: this model does not take images]"
    );
}

#[tokio::test]
async fn a_400_to_images_is_retried_once_as_text_and_later_requests_are_text() {
    let server = ScriptedServer::start([
        Reply::status(400, "image input is not supported by this model"),
        Reply::text("I cannot see images."),
        Reply::text("still text"),
    ])
    .await
    .unwrap();
    let model = client(&server);
    let responses = collect(&model, Request::new(vec![picture()]))
        .await
        .unwrap();
    assert_eq!(final_message(&responses).content, "I cannot see images.");
    assert!(!model.accepts_images(), "the refusal is remembered");
    collect(&model, Request::new(vec![picture()]))
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        3,
        "one refused request, one retry, one later"
    );
    assert!(requests[0].messages()[0]["content"].is_array());
    let as_text = "What is in this picture?\n\n[image/png not shown: this model does not take \
                   images]\n\nAnswer briefly.";
    assert_eq!(requests[1].messages()[0]["content"], as_text);
    assert_eq!(requests[2].messages()[0]["content"], as_text);
}

#[tokio::test]
async fn a_model_configured_without_images_sends_notes_from_the_start() {
    let server = ScriptedServer::start([Reply::text("ok")]).await.unwrap();
    let config = OpenAiConfig::new(server.base_url(), "m").with_images(false);
    let model = OpenAiModel::new(config).unwrap();
    assert!(!model.accepts_images());
    collect(&model, Request::new(vec![picture()]))
        .await
        .unwrap();
    let content = server.requests()[0].messages()[0]["content"].clone();
    assert!(content.as_str().unwrap().contains("[image/png not shown"));
}

#[tokio::test]
async fn a_strict_server_refuses_unparsable_arguments_and_duplicate_ids_in_history() {
    let server = ScriptedServer::start([Reply::text("valid history")])
        .await
        .unwrap();
    server.set_strict(true);
    let model =
        OpenAiModel::new(OpenAiConfig::new(server.base_url(), "m").with_retry(RetryPolicy::none()))
            .unwrap();
    let history = |calls: Vec<ToolCall>| {
        let mut messages = vec![Message::user("q")];
        let answers: Vec<Message> = calls
            .iter()
            .map(|c| Message::tool(c.id.clone(), &c.name, "ok"))
            .collect();
        messages.push(Message::assistant_tool_calls("", calls));
        messages.extend(answers);
        Request::new(messages)
    };
    let broken = history(vec![ToolCall::new("c1", "read", r#"{"path": "a"#)]);
    let err = collect(&model, broken).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Status { status: 400, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("not a JSON object"), "{err}");

    let duplicated = history(vec![
        ToolCall::new("c1", "read", r#"{"path":"a"}"#),
        ToolCall::new("c1", "read", r#"{"path":"b"}"#),
    ]);
    let err = collect(&model, duplicated).await.unwrap_err();
    assert!(err.to_string().contains("duplicate tool call id"), "{err}");
    assert_eq!(server.remaining(), 1, "refused requests leave the script");

    let valid = history(vec![
        ToolCall::new("c1", "read", r#"{"path":"a"}"#),
        ToolCall::new("c2", "read", r#"{"path":"b"}"#),
    ]);
    let responses = collect(&model, valid).await.unwrap();
    assert_eq!(final_message(&responses).content, "valid history");
}

#[tokio::test]
async fn an_event_stream_to_a_non_streaming_request_yields_only_the_final_response() {
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"str\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"eamed\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let server = ScriptedServer::start([Reply::raw("text/event-stream", body)])
        .await
        .unwrap();
    let responses = collect(&client(&server), request(false)).await.unwrap();
    assert_eq!(responses.len(), 1);
    assert_eq!(final_message(&responses).content, "streamed");
}

#[tokio::test]
async fn a_tool_name_the_api_refuses_is_sent_renamed_and_its_calls_map_back() {
    for stream in [false, true] {
        // MCP servers name tools `fs.read`; OpenAI refuses dots in tool names.
        let server = ScriptedServer::start([Reply::tool_call("c1", "fs_read", r#"{"path":"a"}"#)])
            .await
            .unwrap();
        server.set_strict(true);
        let declaration = Declaration::new("fs.read", "Reads a file").unwrap();
        let mut request = Request::new(vec![Message::user("read a")]).with_tools(vec![declaration]);
        request.config.stream = stream;
        let responses = collect(&client(&server), request).await.unwrap();
        let last = responses.last().unwrap();
        let message = last.message.as_ref().unwrap();
        assert_eq!(message.tool_calls[0].name, "fs.read", "stream={stream}");
        assert!(
            last.warnings.iter().any(|w| w.contains("fs_read")),
            "the rename is said: {:?}",
            last.warnings
        );
        if stream {
            let streamed: Vec<&str> = responses
                .iter()
                .flat_map(|r| &r.delta.tool_calls)
                .filter_map(|d| d.name.as_deref())
                .collect();
            assert_eq!(streamed, ["fs.read"]);
        }
        let sent = &server.requests()[0].body;
        assert_eq!(sent["tools"][0]["function"]["name"], "fs_read");
    }
}
