//! `toolbelt ui` over HTTP: the sessions and a run's events as JSON, the event stream
//! delivering what another process commits, the chat endpoint, the token and address rules,
//! and `serve --ui`'s list of calls.

use crate::ui_support;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use toolbelt_model::testing::{Reply, ScriptedServer};
use ui_support::{TOKEN, Ui, path_arg, project, run_in_session, session_file, toolbelt};

fn types(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sessions_and_a_runs_events_are_served_as_json() {
    let dir = project();
    let file = session_file(&dir);
    let read = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &read),
        Reply::text("The notes say alpha."),
    ])
    .await
    .unwrap();
    let (code, stderr) = run_in_session(
        &server,
        dir.path(),
        &file,
        "What do my notes say?",
        &["--session-id", "s1"],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");

    let ui = Ui::start(&server, dir.path(), &file, &[]);
    let sessions = ui.get_json("/api/sessions").await;
    let listed = &sessions["sessions"][0];
    assert_eq!(listed["session_id"], "s1", "{sessions}");
    assert_eq!(listed["app"], "toolbelt");
    assert_eq!(listed["user_id"], "local");
    assert_eq!(listed["events"], 5, "{sessions}");
    assert!(sessions["last_seq"].as_i64().unwrap() >= 5, "{sessions}");

    let body = ui
        .get_json("/api/events?app=toolbelt&user=local&session=s1")
        .await;
    let events = &body["events"];
    assert_eq!(
        types(events),
        [
            "user_input",
            "model_response",
            "tool_result",
            "model_response",
            "run_completed"
        ]
    );
    assert_eq!(events[0]["message"]["content"], "What do my notes say?");
    assert_eq!(events[2]["result"]["name"], "Read");
    assert!(
        events[2]["result"]["content"]
            .as_str()
            .unwrap()
            .contains("alpha"),
        "{events}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_list_carries_each_sessions_first_prompt_escaped() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([Reply::text("one"), Reply::text("two")])
        .await
        .unwrap();
    for (id, prompt) in [
        ("plain", "Where are the tests?"),
        ("sly", "\x1b[2Kred\u{202e}\nnext"),
    ] {
        let (code, stderr) =
            run_in_session(&server, dir.path(), &file, prompt, &["--session-id", id]).await;
        assert_eq!(code, Some(0), "{stderr}");
    }
    let ui = Ui::start(&server, dir.path(), &file, &[]);
    let sessions = ui.get_json("/api/sessions").await;
    let title = |id: &str| {
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["session_id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {sessions}"))["title"]
            .clone()
    };
    assert_eq!(title("plain"), "Where are the tests?", "{sessions}");
    // On one line, its escape sequence and override written out as the terminal shows them.
    assert_eq!(title("sly"), r"\x1b[2Kred\u{202e} next", "{sessions}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_carries_its_first_paint_data_and_a_title_cannot_end_the_block() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([Reply::text("Hello")]).await.unwrap();
    let prompt = "</script><script>alert(1)</script> & <!-- more";
    let (code, stderr) =
        run_in_session(&server, dir.path(), &file, prompt, &["--session-id", "s1"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let ui = Ui::start(&server, dir.path(), &file, &[]);
    let response = ui.client().get(ui.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self';"), "{csp}");
    assert!(!csp.contains("unsafe"), "{csp}");
    let page = response.text().await.unwrap();
    let open = r#"<script type="application/json" id="initial-data">"#;
    let start = page.find(open).expect("the page carries its data") + open.len();
    let len = page[start..].find("</script>").unwrap();
    let block = &page[start..start + len];
    // The title's markup is in the block only as JSON escapes: nothing ends it early.
    assert!(!block.contains('<') && !block.contains('>'), "{block}");
    let data: Value = serde_json::from_str(block).unwrap();
    assert_eq!(data["config"]["mode"], "sessions", "{data}");
    assert_eq!(
        data["sessions"]["sessions"][0]["session_id"], "s1",
        "{data}"
    );
    assert_eq!(data["sessions"]["sessions"][0]["title"], prompt, "{data}");
    assert_eq!(
        types(&data["events"]),
        ["user_input", "model_response", "run_completed"]
    );
    assert_eq!(data["events"][1]["message"]["content"], "Hello");
    // The page has one script that runs, the module, plus the data block.
    assert_eq!(page.matches("<script").count(), 2, "{page}");
}

/// Reads server-sent events until one satisfies `wanted`, for at most a minute.
async fn wait_for_item<B: AsRef<[u8]>>(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<B>> + Unpin),
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let mut buffer = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            for line in frame.lines() {
                if let Some(data) = line.strip_prefix("data:") {
                    let item: Value = serde_json::from_str(data.trim()).unwrap();
                    if wanted(&item) {
                        return item;
                    }
                }
            }
        }
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("no such event within a minute")
            .expect("the stream ended")
            .expect("the stream failed");
        buffer.push_str(&String::from_utf8_lossy(chunk.as_ref()));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stream_delivers_an_event_another_process_commits() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([Reply::text("first"), Reply::text("second answer")])
        .await
        .unwrap();
    let (code, stderr) = run_in_session(&server, dir.path(), &file, "first question", &[]).await;
    assert_eq!(code, Some(0), "{stderr}");

    let ui = Ui::start(&server, dir.path(), &file, &[]);
    let last_seq = ui.get_json("/api/sessions").await["last_seq"]
        .as_i64()
        .unwrap();
    let response = ui
        .client()
        .get(ui.url(&format!("/api/stream?after={last_seq}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut stream = response.bytes_stream();

    let (code, stderr) = run_in_session(&server, dir.path(), &file, "second question", &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let item = wait_for_item(&mut stream, |item| {
        item["kind"] == "stored" && item["event"]["type"] == "user_input"
    })
    .await;
    // Only what came after `after`: the first run's input is not sent again.
    assert_eq!(item["event"]["message"]["content"], "second question");
    assert!(item["seq"].as_i64().unwrap() > last_seq);
    let item = wait_for_item(&mut stream, |item| {
        item["kind"] == "stored" && item["event"]["type"] == "model_response"
    })
    .await;
    assert_eq!(item["event"]["message"]["content"], "second answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chat_endpoint_runs_the_agent_in_a_session() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([Reply::text("Hello from the chat endpoint")])
        .await
        .unwrap();
    let ui = Ui::start(&server, dir.path(), &file, &[]);
    let client = ui.client();

    let refused = client
        .post(ui.url("/api/runs"))
        .body(r#"{"message":"hi"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 415, "a body that is not declared JSON");
    let empty = client
        .post(ui.url("/api/runs"))
        .json(&json!({"message": "  "}))
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), 400);
    // A session id the page could not load again (a 100 KB one answered 414 there) or one
    // with characters for a URL or a page to interpret is refused before any run starts.
    for id in ["x".repeat(100_000), "a/../b".into(), "<img src=x>".into()] {
        let refused = client
            .post(ui.url("/api/runs"))
            .json(&json!({"message": "hi", "session_id": id}))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{}", &id[..id.len().min(20)]);
        let body: Value = refused.json().await.unwrap();
        assert!(body.to_string().contains("session id"), "{body}");
    }

    let started = client
        .post(ui.url("/api/runs"))
        .json(&json!({"message": "say hello", "session_id": "chat-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    let body: Value = started.json().await.unwrap();
    assert_eq!(body["session_id"], "chat-1");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let events = loop {
        let body = ui
            .get_json("/api/events?app=toolbelt&user=local&session=chat-1")
            .await;
        if types(&body["events"]).last().map(String::as_str) == Some("run_completed") {
            break body["events"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never completed: {body}\n{}",
            ui.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        types(&events),
        ["user_input", "model_response", "run_completed"]
    );
    assert_eq!(
        events[1]["message"]["content"],
        "Hello from the chat endpoint"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_is_required_and_traded_once_for_a_cookie() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([]).await.unwrap();
    let ui = Ui::start(&server, dir.path(), &file, &[]);
    let bare = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    for path in ["/", "/api/sessions", "/assets/app.js", "/api/stream"] {
        let response = bare.get(ui.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 401, "{path} without the token");
    }
    let wrong = bare
        .get(ui.url("/api/sessions"))
        .bearer_auth("ui-test-token-5f2d")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let wrong_query = bare.get(ui.url("/?token=nope")).send().await.unwrap();
    assert_eq!(wrong_query.status(), 401);

    // The printed URL: the token in the query becomes a cookie, and leaves the address bar.
    let traded = bare
        .get(ui.url(&format!("/?token={TOKEN}")))
        .send()
        .await
        .unwrap();
    assert_eq!(traded.status(), 303);
    assert_eq!(traded.headers()["location"], "/");
    let cookie = traded.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();

    let page = bare
        .get(ui.url("/"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert!(page.text().await.unwrap().contains("/assets/app.js"));

    // A DNS-rebinding page reaches the port under its own host name: refused, token or not.
    let rebound = ui
        .client()
        .get(ui.url("/api/sessions"))
        .header("host", "attacker.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    // A cross-site page cannot start a run, even where the browser would send the cookie.
    let cross = ui
        .client()
        .post(ui.url("/api/runs"))
        .header("origin", "http://attacker.example")
        .json(&json!({"message": "rm -rf"}))
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    assert_eq!(server.requests().len(), 0, "no run was started");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_address_other_machines_reach_needs_a_token() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([]).await.unwrap();
    let run = |args: &[&str]| {
        let mut command = toolbelt(&server, dir.path());
        command.arg("ui").args(args).stdin(Stdio::null());
        command.output().unwrap()
    };
    let file_arg = file.to_str().unwrap();
    let out = run(&["--session", file_arg, "--http", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without a token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["--session", file_arg, "--http", "0.0.0.0:0", "--no-auth"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["--http", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2), "no --session");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--session FILE"));
    assert!(!file.exists() || std::fs::metadata(&file).unwrap().len() == 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn on_loopback_without_a_token_one_is_generated_and_printed_in_the_url() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["ui", "--http", "127.0.0.1:0", "--session"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let ui = Ui::spawn(command, "toolbelt: web UI on ");
    let printed = ui
        .stderr()
        .lines()
        .find_map(|l| l.strip_prefix("toolbelt: web UI on ").map(String::from))
        .unwrap();
    let token = printed.split_once("?token=").expect(&printed).1.to_string();
    assert_eq!(token.len(), 64, "{printed}");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let open = client.get(ui.url("/api/sessions")).send().await.unwrap();
    assert_eq!(open.status(), 401);
    let with = client
        .get(ui.url("/api/sessions"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(with.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_ui_lists_each_mcp_call_with_its_result() {
    let dir = project();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .args(["serve", "--dir"])
        .arg(dir.path())
        .args(["--ui", "127.0.0.1:0"])
        .env("TOOLBELT_UI_TOKEN", TOKEN)
        .env_remove("TOOLBELT_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut ui = Ui::spawn(command, "toolbelt: web UI of the calls on ");
    let mut stdin = ui.child_stdin();
    let mut stdout = BufReader::new(ui.child_stdout());
    let read = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
    let messages = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Read","arguments":serde_json::from_str::<Value>(&read).unwrap()}}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Read","arguments":{"file_path":"missing.txt"}}}),
    ];
    // One request at a time: serve runs concurrent calls concurrently, and the order of the
    // list is what this test checks.
    let mut line = String::new();
    for message in &messages {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
        let Some(id) = message.get("id") else {
            continue;
        };
        loop {
            line.clear();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "serve closed stdout"
            );
            if serde_json::from_str::<Value>(&line).unwrap().get("id") == Some(id) {
                break;
            }
        }
    }

    let calls = ui.get_json("/api/calls").await;
    let calls = calls["calls"].as_array().unwrap().clone();
    let kinds: Vec<&str> = calls.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["call_start", "call_end", "call_start", "call_end"]);
    assert_eq!(calls[0]["name"], "Read");
    assert!(
        calls[0]["arguments"]
            .as_str()
            .unwrap()
            .contains("notes.txt")
    );
    assert_eq!(calls[1]["result"]["is_error"], false);
    assert!(
        calls[1]["result"]["content"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );
    assert_eq!(calls[3]["result"]["is_error"], true, "{:?}", calls[3]);
    drop(stdin);
    assert_eq!(ui.stop(), Some(0), "{}", ui.stderr());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chat_endpoint_runs_the_prompt_and_stop_hooks() {
    let dir = project();
    let file = session_file(&dir);
    std::fs::create_dir_all(dir.path().join(".toolbelt")).unwrap();
    std::fs::write(
        dir.path().join(".toolbelt/settings.json"),
        r#"{"hooks": {
            "UserPromptSubmit": [{"hooks": [{"type": "command",
                "command": "if grep -q secret; then echo 'no <b>secrets</b> in prompts' >&2; exit 2; fi"}]}],
            "Stop": [{"hooks": [{"type": "command",
                "command": "if grep -q '\"stop_hook_active\":false'; then echo 'run the tests first' >&2; exit 2; fi"}]}]}}"#,
    )
    .unwrap();
    let server = ScriptedServer::start([Reply::text("Done."), Reply::text("Tests pass.")])
        .await
        .unwrap();
    let ui = Ui::start(&server, dir.path(), &file, &["--project-hooks"]);
    let client = ui.client();
    let refused = client
        .post(ui.url("/api/runs"))
        .json(&json!({"message": "my secret is 42", "session_id": "hooks-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 422);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body.to_string().contains("no <b>secrets</b> in prompts"),
        "the hook's reason, as text for the page: {body}"
    );
    assert!(
        server.requests().is_empty(),
        "a refused prompt reached the model"
    );

    let started = client
        .post(ui.url("/api/runs"))
        .json(&json!({"message": "fix it", "session_id": "hooks-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    let runs = toolbelt_testkit::eventually_await(
        "the Stop hook's second run completing",
        Duration::from_secs(60),
        async || {
            let body = ui
                .get_json("/api/events?app=toolbelt&user=local&session=hooks-1")
                .await;
            let kinds = types(&body["events"]);
            let completed = kinds.iter().filter(|k| *k == "run_completed").count();
            (completed == 2).then_some(kinds)
        },
    )
    .await;
    assert_eq!(server.requests().len(), 2, "{runs:?}");
    let last = server.requests()[1].messages().last().cloned().unwrap();
    assert_eq!(last["content"], "run the tests first");
}

/// The events of `session` once its runs completed `runs` times.
async fn completed_runs(ui: &Ui, session: &str, runs: usize) -> Vec<String> {
    let path = format!("/api/events?app=toolbelt&user=local&session={session}");
    toolbelt_testkit::eventually_await(
        format!("{runs} completed runs of {session}"),
        Duration::from_secs(60),
        async || {
            let kinds = types(&ui.get_json(&path).await["events"]);
            let completed = kinds.iter().filter(|k| *k == "run_completed").count();
            (completed >= runs).then_some(kinds)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn always_approves_a_paused_call_and_allows_its_kind_from_then_on() {
    let dir = project();
    let file = session_file(&dir);
    let d = dir.path();
    let write = |content: &str| {
        json!({"file_path": path_arg(d, "out.txt"), "content": content}).to_string()
    };
    let server = ScriptedServer::start([
        Reply::tool_call("call_a", "Write", &write("one")),
        Reply::text("Wrote it."),
        // The next run, in a new session: the same kind of call is not asked about.
        Reply::tool_call("call_b", "Write", &write("two")),
        Reply::text("Wrote it again."),
    ])
    .await
    .unwrap();
    let (code, stderr) = ui_support::run_asking_in_session(
        &server,
        d,
        &file,
        "Write out.txt",
        &["--session-id", "s1"],
    )
    .await;
    assert_eq!(code, Some(3), "{stderr}");
    let ui = Ui::start_asking(&server, d, &file, &[]);
    let client = ui.client();
    let session = "s1";
    let decide = |body: Value| client.post(ui.url("/api/decisions")).json(&body).send();

    // "always" must name a call the request approves, and one the session waits for.
    let refused = decide(json!({"session_id": session, "decisions": {"call_a": {"decision": "deny"}}, "always": ["call_a"]}))
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let refused = decide(json!({"session_id": session, "decisions": {"call_a": {"decision": "approve"}}, "always": ["call_a", "call_zz"]}))
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert!(refused.to_string().contains("call_zz"), "{refused}");
    assert!(
        !d.join(".toolbelt/settings.json").exists(),
        "a refused request wrote no rule"
    );

    let started = decide(json!({"session_id": session, "decisions": {"call_a": {"decision": "approve"}}, "always": ["call_a"]}))
        .await
        .unwrap();
    let status = started.status();
    assert_eq!(status, 202, "{}", started.text().await.unwrap());
    completed_runs(&ui, session, 2).await;
    assert_eq!(std::fs::read_to_string(d.join("out.txt")).unwrap(), "one");
    let settings = std::fs::read_to_string(d.join(".toolbelt/settings.json")).unwrap();
    assert!(
        settings.contains("\"Edit(./out.txt)\""),
        "the rule is kept for later commands: {settings}"
    );

    // The UI's own next run checks with the added rule at once.
    let started = client
        .post(ui.url("/api/runs"))
        .json(&json!({"message": "Write it again", "session_id": "after"}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    let kinds = completed_runs(&ui, "after", 1).await;
    assert!(
        !kinds.iter().any(|k| k == "approval_requested"),
        "asked again: {kinds:?}"
    );
    assert_eq!(std::fs::read_to_string(d.join("out.txt")).unwrap(), "two");
}
