//! `toolbelt run --agents FILE` end to end: the built binary runs agents composed in a TOML or
//! YAML file against the scripted OpenAI-compatible server on 127.0.0.1, with the built-in
//! tools on a real temp directory; every mistake in the file is refused before the model is
//! asked anything.

use crate::run_support;

use std::path::{Path, PathBuf};

use run_support::{output, project, read_file, text, tool_contents, toolbelt};
use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};

/// The example file the README shows.
fn example_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/agents.toml")
}

/// The system message of a request.
fn system(request: &RecordedRequest) -> String {
    request.messages()[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The offered tool names of a request, sorted.
fn offered(request: &RecordedRequest) -> Vec<String> {
    let mut names = request.tool_names();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_coordinator_asks_its_files_agent_which_reads_the_file() {
    let dir = project();
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "files", r#"{"request":"What does notes.txt say?"}"#),
        Reply::tool_call("r1", "Read", &read_file(dir.path(), "notes.txt")),
        Reply::text("notes.txt lists alpha and beta."),
        Reply::text("Your notes list alpha, then beta."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "What do my notes say?", "--agents"])
        .arg(example_file())
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    // Only the coordinator's answer is the answer; the child's is a tool result.
    assert_eq!(
        stdout, "Your notes list alpha, then beta.\n",
        "stderr:\n{stderr}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    // The coordinator: its instruction, its agents as tools and the transfer tool only.
    assert!(system(&requests[0]).starts_with("Answer the user's question."));
    assert_eq!(
        offered(&requests[0]),
        ["files", "math", "transfer_to_agent"]
    );
    // The files agent: its own instruction and tools, only the request as input.
    assert!(system(&requests[1]).starts_with("Look at the files needed"));
    assert_eq!(offered(&requests[1]), ["Glob", "Grep", "Read"]);
    let child_input: Vec<&str> = requests[1].messages()[1..]
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(child_input, ["What does notes.txt say?"]);
    // It read the real file, and its answer is the coordinator's tool result.
    assert!(tool_contents(&requests[2])[0].contains("alpha"));
    assert_eq!(
        tool_contents(&requests[3]),
        ["notes.txt lists alpha and beta."]
    );
    // stream_inner: the child's Read shows as an indented line under the call.
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("  ✓ Read(") && l.contains("notes.txt")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_yaml_file_s_coordinator_transfers_to_a_sub_agent_on_its_own_model() {
    let dir = project();
    let file = dir.path().join("agents.yaml");
    std::fs::write(
        &file,
        "agents:\n\
         \x20 - name: coordinator\n\
         \x20   instruction: Route the user.\n\
         \x20   sub_agents: [writer]\n\
         \x20 - name: writer\n\
         \x20   description: Writes poems.\n\
         \x20   instruction: Write poems.\n\
         \x20   model: poet-model\n\
         \x20   tools: [Read]\n",
    )
    .unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call("t1", "transfer_to_agent", r#"{"agent_name":"writer"}"#),
        Reply::text("Roses are red."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "A poem, please", "--agents"])
        .arg(&file)
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(text(&out.stdout), "Roses are red.\n");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(system(&requests[0]), "Route the user.");
    assert_eq!(requests[0].body["model"], "scripted");
    assert_eq!(offered(&requests[0]), ["transfer_to_agent"]);
    // The writer answers, with its instruction, tools and model.
    assert_eq!(system(&requests[1]), "Write poems.");
    assert_eq!(requests[1].body["model"], "poet-model");
    assert_eq!(offered(&requests[1]), ["Read"]);
}

/// Runs `toolbelt run` with an agents file `name` holding `contents`; returns the exit code
/// and stderr, after checking that nothing was asked of the model.
async fn refused(name: &str, contents: &str, extra: &[&str]) -> (Option<i32>, String) {
    let dir = project();
    let file = dir.path().join(name);
    std::fs::write(&file, contents).unwrap();
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hello", "--agents"])
        .arg(&file)
        .args(extra)
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert!(
        server.requests().is_empty(),
        "{name}: the model was asked:\n{stderr}"
    );
    assert!(out.stdout.is_empty(), "{name}");
    (out.status.code(), stderr)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_mistake_in_an_agents_file_is_named_before_the_model_is_asked() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "keys.toml",
            "[[agents]]\nname = \"a\"\ninstructions = \"typo\"\n",
            &["unknown field `instructions`", "line 3"],
        ),
        (
            "keys.yaml",
            "agents:\n  - name: a\n    tool: [Read]\n",
            &["unknown field `tool`", "line 3"],
        ),
        (
            "options.toml",
            "[[agents]]\nname = \"a\"\nagent_tools = [{ agent = \"b\", stream = true }]\n\
             [[agents]]\nname = \"b\"\n",
            &["unknown field `stream`", "line 3"],
        ),
        (
            "mode.toml",
            "[[agents]]\nname = \"a\"\nagent_tools = [{ agent = \"b\", history = \"all\" }]\n\
             [[agents]]\nname = \"b\"\n",
            &["unknown variant `all`", "parent_branch"],
        ),
        ("empty.toml", "agents = []\n", &["defines no agents"]),
        (
            "twice.toml",
            "[[agents]]\nname = \"a\"\n[[agents]]\nname = \"a\"\n",
            &["two agents are named \"a\""],
        ),
        (
            "root.toml",
            "root = \"boss\"\n[[agents]]\nname = \"a\"\n",
            &["root names no agent: \"boss\""],
        ),
        (
            "sub.toml",
            "[[agents]]\nname = \"a\"\nsub_agents = [\"ghost\"]\n",
            &["agent \"a\": sub_agents names no agent: \"ghost\""],
        ),
        (
            "tool_agent.yml",
            "agents:\n  - name: a\n    agent_tools: [ghost]\n",
            &["agent \"a\": agent_tools names no agent: \"ghost\""],
        ),
        (
            "tool.toml",
            "[[agents]]\nname = \"a\"\ntools = [\"Read\", \"Raed\"]\n",
            &[
                "agent \"a\": tools: no tool is named \"Raed\"",
                "offered: ",
                "Read",
            ],
        ),
        (
            "pattern.toml",
            "[[agents]]\nname = \"a\"\ntools = [\"mcp_*\"]\n",
            &["no tool is named \"mcp_*\""],
        ),
        (
            "cycle.toml",
            "[[agents]]\nname = \"a\"\nagent_tools = [\"b\"]\n\
             [[agents]]\nname = \"b\"\nsub_agents = [\"c\"]\n\
             [[agents]]\nname = \"c\"\nagent_tools = [\"b\"]\n",
            &["cycle: b -> c -> b"],
        ),
        (
            "self.toml",
            "[[agents]]\nname = \"a\"\nagent_tools = [\"a\"]\n",
            &["cycle: a -> a"],
        ),
        (
            "bad name.toml",
            "[[agents]]\nname = \"a\"\nagent_tools = [\"my helper\"]\n\
             [[agents]]\nname = \"my helper\"\n",
            &["agent \"a\": agent_tools: \"my helper\""],
        ),
        (
            "clash.toml",
            "[[agents]]\nname = \"a\"\ntools = [\"Read\"]\nagent_tools = [\"Read\"]\n\
             [[agents]]\nname = \"Read\"\n",
            &["agent \"a\": agent_tools: \"Read\" is also the name of a tool"],
        ),
        ("agents.json", "{}", &["must end in .toml, .yaml or .yml"]),
    ];
    for (name, contents, expected) in cases {
        let (code, stderr) = refused(name, contents, &[]).await;
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(stderr.contains("--agents "), "{name}: {stderr}");
        for part in *expected {
            assert!(stderr.contains(part), "{name}: {part:?} not in:\n{stderr}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_and_instruction_cannot_be_given_together() {
    let (code, stderr) = refused(
        "agents.toml",
        "[[agents]]\nname = \"a\"\n",
        &["--instruction", "be brief"],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_agents_file_is_named() {
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hello", "--agents", "nowhere.toml", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--agents nowhere.toml"), "{stderr}");
    assert!(server.requests().is_empty());
}
