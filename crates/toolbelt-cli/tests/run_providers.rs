//! `toolbelt run --provider …`: the agent on the OpenAI Responses API, Anthropic Messages and
//! Gemini, each against the scripted server's strict route for its dialect, the key read from
//! the provider's own variable.

use crate::run_support;

use run_support::{output, path_arg, project, text, toolbelt};
use toolbelt_model::Provider;
use toolbelt_model::testing::{Reply, ScriptedServer};

#[tokio::test(flavor = "multi_thread")]
async fn run_reads_a_file_and_answers_on_every_provider() {
    for (provider, by_env) in [
        (Provider::OpenAiResponses, false),
        (Provider::Anthropic, false),
        (Provider::Gemini, true),
    ] {
        let dir = project();
        let args = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
        let server = ScriptedServer::start([
            Reply::tool_call("call_1", "Read", &args),
            Reply::text("alpha, then beta."),
        ])
        .await
        .unwrap();
        let mut command = toolbelt(&server, dir.path());
        command
            .env(provider.key_variable(), "provider-key")
            .args(["run", "What do my notes say?", "--base-url"])
            .arg(server.base_url_for(provider));
        if by_env {
            command.env("TOOLBELT_PROVIDER", provider.as_str());
        } else {
            command.args(["--provider", provider.as_str()]);
        }
        let out = output(command, "").await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{provider}: {stderr}");
        assert_eq!(text(&out.stdout), "alpha, then beta.\n", "{provider}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{provider}: no request refused");
        let key_header = match provider {
            Provider::Anthropic => "x-api-key",
            Provider::Gemini => "x-goog-api-key",
            _ => "authorization",
        };
        let sent = requests[0].headers.get(key_header).cloned();
        assert!(
            sent.is_some_and(|v| v.ends_with("provider-key")),
            "{provider}: {:?}",
            requests[0].headers
        );
        assert!(
            requests[1].body.to_string().contains("beta"),
            "{provider}: the tool result went back"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_provider_is_a_usage_error_naming_the_known_ones() {
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["run", "hi", "--provider", "cohere"]);
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("anthropic"),
        "{}",
        text(&out.stderr)
    );
    let mut command = toolbelt(&server, dir.path());
    command
        .env("TOOLBELT_PROVIDER", "cohere")
        .args(["run", "hi"]);
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("TOOLBELT_PROVIDER"),
        "{}",
        text(&out.stderr)
    );
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn several_models_fall_back_to_the_next_on_a_retryable_failure() {
    let dir = project();
    let busy = ScriptedServer::start([Reply::rate_limited("0"), Reply::rate_limited("0")])
        .await
        .unwrap();
    let ok = ScriptedServer::start([Reply::text("answered by the fallback")])
        .await
        .unwrap();
    let mut command = toolbelt(&ok, dir.path());
    command
        .env("ANTHROPIC_BASE_URL", busy.base_url_for(Provider::Anthropic))
        .env("GOOGLE_GEMINI_BASE_URL", ok.base_url_for(Provider::Gemini))
        .env("ANTHROPIC_API_KEY", "a-key")
        .env("GEMINI_API_KEY", "g-key")
        .args([
            "run",
            "hi",
            "--max-retries",
            "1",
            "--model",
            "anthropic:claude-x, gemini:gemini-y",
        ]);
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "answered by the fallback\n");
    assert_eq!(busy.requests().len(), 2, "the first model's retry budget");
    assert!(busy.requests()[0].body["model"] == "claude-x");
    assert_eq!(
        stderr.matches("warning: model claude-x failed").count(),
        1,
        "one warning event for the move: {stderr}"
    );
    assert!(stderr.contains("goes on with gemini-y"), "{stderr}");
    assert!(ok.requests()[0].path.contains("gemini-y"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_without_its_key_is_a_usage_error_naming_the_variable() {
    let dir = project();
    let server = ScriptedServer::start([Reply::text("never asked")])
        .await
        .unwrap();
    for provider in [
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ] {
        let mut command = toolbelt(&server, dir.path());
        command
            .env_remove(provider.key_variable())
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("GOOGLE_GEMINI_BASE_URL")
            .args(["run", "hi", "--provider", provider.as_str()]);
        let out = output(command, "").await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{provider}: {stderr}");
        assert!(
            stderr.contains(&format!("no API key for {provider}"))
                && stderr.contains(provider.key_variable()),
            "{provider}: {stderr}"
        );
    }
    assert!(server.requests().is_empty(), "no request went out");
}

#[tokio::test(flavor = "multi_thread")]
async fn on_the_responses_api_apply_patch_is_a_freeform_tool_the_model_writes_as_text() {
    // The model writes the patch itself (a custom tool call's `input`), the agent reads the
    // file first as the tool requires, and the patch lands; the answer goes back as a
    // custom output, which the scripted server requires of a custom call.
    let dir = project();
    let read = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
    let patch =
        "*** Begin Patch\n*** Update File: notes.txt\n alpha\n-beta\n+gamma\n*** End Patch\n";
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &read),
        Reply::tool_call("call_2", "apply_patch", patch),
        Reply::text("patched."),
    ])
    .await
    .unwrap();
    let provider = Provider::OpenAiResponses;
    let mut command = toolbelt(&server, dir.path());
    command
        .env(provider.key_variable(), "provider-key")
        .args([
            "run",
            "Make beta gamma",
            "--yes",
            "--provider",
            provider.as_str(),
        ])
        .arg("--base-url")
        .arg(server.base_url_for(provider));
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "patched.\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "no request refused");
    let tools = requests[0].body["tools"].as_array().unwrap();
    let declared = tools.iter().find(|t| t["name"] == "apply_patch").unwrap();
    assert_eq!(declared["type"], "custom", "{declared}");
    let last = requests[2].body["input"].as_array().unwrap();
    let output_item = last
        .iter()
        .find(|i| i["type"] == "custom_tool_call_output")
        .expect("the patch's result went back as a custom output");
    assert!(
        output_item["output"].to_string().contains("notes.txt"),
        "{output_item}"
    );
}
