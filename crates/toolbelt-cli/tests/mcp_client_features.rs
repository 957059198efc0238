//! What `toolbelt mcp` offers a server and shows of it, run as a user runs it: elicitation
//! (`--elicitation`), sampling routed to the configured model (`--sampling`), `--dir` as the
//! root, progress on stderr, and the hints printed when an HTTP server refuses us. The server
//! is written with the Python `mcp` SDK (crates/toolbelt-mcp/tests/fixtures/
//! client_features_server.py) and answers with what the client sent back.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolbelt_model::testing::{Reply, ScriptedServer};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `python3 <fixture> stdio`, as one `--stdio` command line.
fn features_stdio() -> String {
    let fixture = workspace().join("crates/toolbelt-mcp/tests/fixtures/client_features_server.py");
    format!("{} {} stdio", toolbelt_testkit::python(), fixture.display())
}

/// `toolbelt mcp call --stdio <fixture> TOOL ARGS EXTRA…` with no model configured and
/// stdin not a terminal.
fn call(tool: &str, args: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    let stdio = features_stdio();
    command
        .args(["mcp", "call", "--stdio", stdio.as_str(), tool, args])
        .args(extra)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLBELT_MODEL")
        .stdin(Stdio::null());
    command
}

fn run(mut command: Command) -> (Output, String, String) {
    let out = command.output().expect("run toolbelt");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// Runs a call that must succeed and parses its JSON answer.
fn answer(command: Command) -> (Value, String) {
    let (out, stdout, stderr) = run(command);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: stdout:\n{stdout}\nstderr:\n{stderr}"));
    (value, stderr)
}

#[test]
fn accept_defaults_answers_the_form_with_its_defaults() {
    let (answer, _) = answer(call(
        "ask_profile",
        "{}",
        &["--elicitation", "accept-defaults"],
    ));
    assert_eq!(answer["action"], "accept");
    assert_eq!(
        answer["content"],
        json!({"name": "Ann", "age": 30, "score": 9.5, "plan": "pro", "subscribe": true})
    );
}

#[test]
fn decline_declines_and_asking_without_a_terminal_declines_with_a_note() {
    let (declined, stderr) = answer(call("ask_profile", "{}", &["--elicitation", "decline"]));
    assert_eq!(declined["action"], "decline");
    assert!(!stderr.contains("asked for input"), "{stderr}");

    // The default is to ask; stdin is not a terminal here.
    let (asked, stderr) = answer(call("ask_profile", "{}", &[]));
    assert_eq!(asked["action"], "decline");
    assert!(
        stderr.contains("Who are you?") && stderr.contains("--elicitation accept-defaults"),
        "{stderr}"
    );
}

#[test]
fn a_call_shows_the_servers_progress_on_stderr() {
    let (out, stdout, stderr) = run(call("count_slowly", r#"{"steps":3}"#, &[]));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "counted");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress:"))
        .collect();
    assert_eq!(
        lines,
        [
            "progress: 1/3: step 1 of 3",
            "progress: 2/3: step 2 of 3",
            "progress: 3/3: step 3 of 3"
        ],
        "{stderr}"
    );
}

#[test]
fn dir_is_offered_as_the_root_and_no_roots_are_declared_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let (roots, _) = answer(call("list_client_roots", "{}", &["--dir", dir_arg]));
    let uri = format!("file://{}/", dir.path().display());
    assert_eq!(roots, json!([{"uri": uri, "name": null}]));

    let (declared, _) = answer(call(
        "client_capabilities",
        "{}",
        &["--elicitation", "decline"],
    ));
    assert!(declared.get("roots").is_none(), "{declared}");
    assert!(
        declared.get("sampling").is_none(),
        "no model configured: {declared}"
    );
    assert!(
        declared.get("elicitation").is_none(),
        "decline declares none: {declared}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sampling_goes_to_the_configured_model_and_its_answer_reaches_the_server() {
    let model = ScriptedServer::start([Reply::text("A short summary.")])
        .await
        .unwrap();
    let mut command = call("summarize", r#"{"text":"a long text"}"#, &[]);
    command
        .env("OPENAI_BASE_URL", model.base_url())
        .env("TOOLBELT_MODEL", "scripted");
    let (answer, stderr) = tokio::task::spawn_blocking(move || answer(command))
        .await
        .unwrap();
    assert_eq!(answer["text"], "A short summary.", "{stderr}");
    assert_eq!(answer["stop"], "endTurn");
    assert!(
        stderr.contains("asked the model for a completion"),
        "{stderr}"
    );
    let sent = &model.requests()[0].body;
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(sent["messages"][0]["content"], "You summarize.");
    assert_eq!(sent["messages"][1]["content"], "a long text");
    assert_eq!(sent["max_tokens"], 77, "{sent}");

    // --sampling decline refuses even with a model configured; the server reports it.
    let mut command = call("summarize", r#"{"text":"x"}"#, &["--sampling", "decline"]);
    command
        .env("OPENAI_BASE_URL", model.base_url())
        .env("TOOLBELT_MODEL", "scripted");
    let (out, _, stderr) = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("does not offer sampling"), "{stderr}");
    assert_eq!(model.requests().len(), 1);
}

/// A server's sampling tool loop through `toolbelt mcp`: the request's tool reaches the
/// model as a function, the model's call goes back to the server as `tool_use` with stop
/// reason `toolUse`, and the server's result reaches the model as a tool message.
#[tokio::test(flavor = "multi_thread")]
async fn sampling_with_tools_gives_the_model_the_tools_and_the_server_its_calls() {
    let model = ScriptedServer::start([
        Reply::tool_call("call_7", "get_weather", r#"{"city":"Paris"}"#),
        Reply::text("Cloudy, 18 C."),
    ])
    .await
    .unwrap();
    let mut command = call("weather_agent", r#"{"question":"Weather in Paris?"}"#, &[]);
    command
        .env("OPENAI_BASE_URL", model.base_url())
        .env("TOOLBELT_MODEL", "scripted");
    let (answer, stderr) = tokio::task::spawn_blocking(move || answer(command))
        .await
        .unwrap();
    let rounds = answer["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{answer}\n{stderr}");
    assert_eq!(rounds[0]["stop"], "toolUse", "{answer}");
    assert_eq!(
        rounds[0]["content"],
        json!([{"type": "tool_use", "id": "call_7", "name": "get_weather",
                "input": {"city": "Paris"}}]),
        "{answer}"
    );
    assert_eq!(rounds[1]["stop"], "endTurn", "{answer}");
    assert_eq!(rounds[1]["content"][0]["text"], "Cloudy, 18 C.", "{answer}");
    assert!(stderr.contains("1 tool(s)"), "{stderr}");
    assert!(
        stderr.contains(r#"the model called ["get_weather"]"#),
        "{stderr}"
    );

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0].body;
    assert_eq!(
        first["tools"][0]["function"]["name"], "get_weather",
        "{first}"
    );
    assert_eq!(
        first["tools"][0]["function"]["parameters"]["required"],
        json!(["city"]),
        "{first}"
    );
    assert_eq!(first["tool_choice"], "auto", "{first}");
    let second = &requests[1].body;
    let sent = second["messages"].as_array().unwrap();
    let call = sent
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("the model's call is replayed: {second}"));
    assert_eq!(call["tool_calls"][0]["id"], "call_7", "{second}");
    let result = sent
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("the server's result reaches the model: {second}"));
    assert_eq!(result["tool_call_id"], "call_7", "{second}");
    assert_eq!(result["content"], "Paris: 18 C, cloudy", "{second}");
}

/// An HTTP server that answers everything with `status` and a long HTML page; killed when
/// dropped.
struct StatusServer {
    child: Child,
    port: u16,
}

impl StatusServer {
    fn start(status: u16) -> Self {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/status_server.py");
        let child = Command::new(toolbelt_testkit::python())
            .arg(script)
            .args([port.to_string(), status.to_string()])
            .stdin(Stdio::null())
            .spawn()
            .expect("start python3");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(Instant::now() < deadline, "the status server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tools(flag: &str, url: &str) -> (Output, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .args(["mcp", "tools", flag, url, "--connect-timeout", "20"])
        .stdin(Stdio::null());
    let (out, _, stderr) = run(command);
    (out, stderr)
}

#[test]
fn a_404_page_is_clipped_to_one_line_and_the_other_transport_is_suggested() {
    let server = StatusServer::start(404);
    let (out, stderr) = tools("--http", &server.url("/mcp"));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.to_ascii_lowercase().contains("<html"), "{stderr}");
    assert!(!stderr.contains("filler line"), "{stderr}");
    assert!(stderr.lines().count() <= 3, "{stderr}");
    assert!(
        stderr.contains("404") && stderr.contains("--sse"),
        "{stderr}"
    );

    let (out, stderr) = tools("--sse", &server.url("/sse"));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("404") && stderr.contains("--http"),
        "{stderr}"
    );
}

#[test]
fn a_401_suggests_passing_a_header() {
    let server = StatusServer::start(401);
    for (flag, path) in [("--http", "/mcp"), ("--sse", "/sse")] {
        let (out, stderr) = tools(flag, &server.url(path));
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("--header 'Authorization: Bearer"),
            "{flag}: {stderr}"
        );
    }
}
