//! OpenTelemetry export (`--features otel`): `toolbelt run` against the scripted model server,
//! with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver started here (axum on
//! 127.0.0.1, decoding the protobuf export requests). The run's `invoke_agent` span, its
//! `chat` model spans and `execute_tool` tool spans arrive in one trace, linked parent to child,
//! with the GenAI attributes; also after a failed model call and after SIGINT.

use crate::run_support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use run_support::{output, path_arg, project, text, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// An OTLP/HTTP trace receiver: keeps every span it is sent, with its resource's attributes.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let got: Arc<Mutex<Vec<ExportTraceServiceRequest>>> = Arc::default();
        let app = axum::Router::new()
            .route("/v1/traces", post(receive))
            .with_state(got.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, got }
    }

    /// Every span received, whatever batch it came in.
    fn spans(&self) -> Vec<Span> {
        let got = self.got.lock().unwrap();
        got.iter()
            .flat_map(|request| &request.resource_spans)
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| scope.spans.clone())
            .collect()
    }

    /// The `service.name` of every batch's resource.
    fn service_names(&self) -> Vec<String> {
        let got = self.got.lock().unwrap();
        got.iter()
            .flat_map(|request| &request.resource_spans)
            .filter_map(|resource| resource.resource.as_ref())
            .filter_map(|resource| string_in(&resource.attributes, "service.name"))
            .collect()
    }
}

async fn receive(
    State(got): State<Arc<Mutex<Vec<ExportTraceServiceRequest>>>>,
    body: Bytes,
) -> ([(&'static str, &'static str); 1], Vec<u8>) {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    got.lock().unwrap().push(request);
    // An empty ExportTraceServiceResponse: everything accepted.
    ([("content-type", "application/x-protobuf")], Vec::new())
}

fn value<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn string_in(attributes: &[KeyValue], key: &str) -> Option<String> {
    match value(attributes, key) {
        Some(AnyValue::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A string attribute of `span`, or a panic naming what the span has.
fn attr(span: &Span, key: &str) -> String {
    string_in(&span.attributes, key).unwrap_or_else(|| {
        let keys: Vec<&str> = span.attributes.iter().map(|kv| kv.key.as_str()).collect();
        panic!("span {:?} has no string {key}; it has {keys:?}", span.name)
    })
}

fn int_attr(span: &Span, key: &str) -> i64 {
    match value(&span.attributes, key) {
        Some(AnyValue::IntValue(n)) => *n,
        other => panic!("span {:?}: {key} is {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

/// `toolbelt run` exporting to `receiver`.
fn traced_run(
    server: &ScriptedServer,
    receiver: &Receiver,
    dir: &std::path::Path,
) -> std::process::Command {
    let mut command = toolbelt(server, dir);
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL");
    command
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_exports_its_agent_model_and_tool_spans_linked_with_genai_attributes() {
    let dir = project();
    let receiver = Receiver::start().await;
    let args = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
    let server = ScriptedServer::start([
        Reply::tool_call("call_read_1", "Read", &args),
        Reply::text("The notes say alpha, then beta."),
    ])
    .await
    .unwrap();
    let mut command = traced_run(&server, &receiver, dir.path());
    command
        .args(["run", "What do my notes say?", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Flushed before the process exited: nothing to wait for.
    let spans = receiver.spans();
    let run = named(&spans, "invoke_agent toolbelt");
    let chats = named(&spans, "chat scripted");
    let tools = named(&spans, "execute_tool Read");
    assert_eq!(run.len(), 1, "{:?}", names(&spans));
    assert_eq!(
        chats.len(),
        2,
        "one span per model call: {:?}",
        names(&spans)
    );
    assert_eq!(tools.len(), 1, "{:?}", names(&spans));
    let run = run[0];
    let tool = tools[0];
    assert_eq!(receiver.service_names(), vec!["toolbelt".to_string()]);

    // One trace: the run is its root, the model and tool calls its children.
    assert!(run.parent_span_id.is_empty(), "the run span is the root");
    for child in chats.iter().chain([&tool]) {
        assert_eq!(child.trace_id, run.trace_id, "{}", child.name);
        assert_eq!(
            child.parent_span_id, run.span_id,
            "{} under the run",
            child.name
        );
    }

    assert_eq!(attr(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(run, "gen_ai.agent.name"), "toolbelt");
    assert_eq!(attr(run, "gen_ai.request.model"), "scripted");
    assert_eq!(run.kind, SpanKind::Internal as i32);

    for chat in &chats {
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.provider.name"), "openai");
        assert_eq!(attr(chat, "gen_ai.request.model"), "scripted");
        // The scripted server reports 11 prompt and 7 completion tokens per call.
        assert_eq!(int_attr(chat, "gen_ai.usage.input_tokens"), 11);
        assert_eq!(int_attr(chat, "gen_ai.usage.output_tokens"), 7);
        assert_eq!(chat.kind, SpanKind::Client as i32);
    }
    // Model calls in order: the first asked for the tool, the second answered.
    let mut reasons: Vec<(u64, String)> = chats
        .iter()
        .map(|c| {
            (
                c.start_time_unix_nano,
                attr(c, "gen_ai.response.finish_reasons"),
            )
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons[0].1, "tool_calls");
    assert_eq!(reasons[1].1, "stop");

    assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(tool, "gen_ai.tool.name"), "Read");
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), "call_read_1");
    assert!(
        string_in(&tool.attributes, "error.type").is_none(),
        "a successful call has no error.type"
    );
    // The tool ran between the two model calls.
    assert!(tool.start_time_unix_nano >= reasons[0].0 && tool.end_time_unix_nano <= reasons[1].0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_model_call_is_exported_with_its_error_type_before_the_error_exit() {
    let dir = project();
    let receiver = Receiver::start().await;
    // 400 is not retried: the run fails at once.
    let server = ScriptedServer::start([Reply::status(400, "bad request, says the model")])
        .await
        .unwrap();
    let mut command = traced_run(&server, &receiver, dir.path());
    command.args(["run", "hello", "--dir"]).arg(dir.path());
    let out = output(command, "").await;
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let spans = receiver.spans();
    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 1, "{:?}", names(&spans));
    assert_eq!(attr(chats[0], "error.type"), "400");
    assert_eq!(
        named(&spans, "invoke_agent toolbelt").len(),
        1,
        "{:?}",
        names(&spans)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_of_a_run_stopped_by_sigint_are_still_exported() {
    let dir = project();
    let receiver = Receiver::start().await;
    let server = ScriptedServer::start([Reply::tool_call(
        "call_sleep",
        "Bash",
        r#"{"command":"echo $$ > sleeper.pid && exec sleep 30"}"#,
    )])
    .await
    .unwrap();
    let mut command = traced_run(&server, &receiver, dir.path());
    command
        .args(["run", "sleep a while", "--yes", "--dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let pid_file = dir.path().join("sleeper.pid");
    let out = tokio::task::spawn_blocking(move || {
        let child = command.spawn().expect("start toolbelt");
        toolbelt_testkit::eventually(
            "the tool's command starting",
            std::time::Duration::from_secs(30),
            || toolbelt_testkit::pids_in(&pid_file, 1),
        );
        // SAFETY: sending a signal to the child we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        child.wait_with_output().expect("wait")
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));

    let spans = receiver.spans();
    let tool = named(&spans, "execute_tool Bash");
    assert_eq!(tool.len(), 1, "{:?}", names(&spans));
    assert_eq!(attr(tool[0], "gen_ai.tool.call.id"), "call_sleep");
    assert_eq!(attr(tool[0], "error.type"), "cancelled");
    assert_eq!(
        named(&spans, "invoke_agent toolbelt").len(),
        1,
        "{:?}",
        names(&spans)
    );
}
