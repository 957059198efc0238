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
        (
            "empty.toml",
            "agents = []\n",
            &["defines no agents and no graphs"],
        ),
        (
            "twice.toml",
            "[[agents]]\nname = \"a\"\n[[agents]]\nname = \"a\"\n",
            &["two agents or graphs are named \"a\""],
        ),
        (
            "root.toml",
            "root = \"boss\"\n[[agents]]\nname = \"a\"\n",
            &["root names no agent or graph: \"boss\""],
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
        (
            "external_name.toml",
            "[[agents]]\nname = \"a\"\n[[external_tools]]\nname = \"ask finance\"\n\
             description = \"d\"\n",
            &["external tool \"ask finance\""],
        ),
        (
            "external_twice.toml",
            "[[agents]]\nname = \"a\"\n[[external_tools]]\nname = \"x\"\ndescription = \"d\"\n\
             [[external_tools]]\nname = \"x\"\ndescription = \"d\"\n",
            &["two external tools are named \"x\""],
        ),
        (
            "external_agent.toml",
            "[[agents]]\nname = \"a\"\n[[external_tools]]\nname = \"a\"\ndescription = \"d\"\n",
            &["external tool \"a\" is named like an agent or graph"],
        ),
        (
            "external_schema.toml",
            "[[agents]]\nname = \"a\"\n[[external_tools]]\nname = \"x\"\ndescription = \"d\"\n\
             parameters = { type = 5 }\n",
            &["external tool \"x\""],
        ),
        (
            "external_builtin.toml",
            "[[agents]]\nname = \"a\"\n[[external_tools]]\nname = \"Read\"\ndescription = \"d\"\n",
            &["external tool \"Read\" is named like a tool the tool sets offer"],
        ),
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

/// The graph example the README shows.
fn release_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/release.toml")
}

/// `toolbelt run --agents release.toml --session FILE --session-id s1 PROMPT` in `dir`.
fn release_run(server: &ScriptedServer, dir: &Path, prompt: &str) -> std::process::Command {
    let mut command = toolbelt(server, dir);
    command
        .args(["run", prompt, "--agents"])
        .arg(release_file())
        .arg("--session")
        .arg(dir.join("release.db"))
        .args(["--session-id", "s1", "--approval", "never", "--dir"])
        .arg(dir);
    command
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graph_file_drafts_asks_a_person_and_resumes_in_a_later_process_with_the_answer() {
    let dir = project();
    let write = format!(
        r#"{{"file_path":"{}","content":"v2: graphs in files\n"}}"#,
        dir.path().join("RELEASE.md").display()
    );
    let server = ScriptedServer::start([
        Reply::text("v2: graphs in files"),
        Reply::tool_call("w1", "Write", &write),
        Reply::text("Wrote the notes to RELEASE.md."),
    ])
    .await
    .unwrap();

    // The first run drafts and stops at the question.
    let out = output(release_run(&server, dir.path(), "Notes for v2"), "").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "stderr:\n{stderr}");
    assert_eq!(stdout, "", "a step's answer is not the run's answer");
    assert!(stderr.contains("step 0: draft"), "{stderr}");
    assert!(
        stderr.contains("v2: graphs in files"),
        "the draft is shown: {stderr}"
    );
    assert!(
        stderr.contains("approve asks: Write these notes to RELEASE.md? (yes/no)"),
        "{stderr}"
    );
    assert!(stderr.contains("--session-id s1 \"ANSWER\""), "{stderr}");
    assert_eq!(server.requests().len(), 1);
    assert!(!dir.path().join("RELEASE.md").exists());

    // A later process answers; the graph goes on from its checkpoint, not from the start.
    let out = output(release_run(&server, dir.path(), "yes"), "").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(
        stdout, "Wrote the notes to RELEASE.md.\n",
        "stderr:\n{stderr}"
    );
    assert!(
        !stderr.contains("draft"),
        "the draft is not redone: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("RELEASE.md")).unwrap(),
        "v2: graphs in files\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the writer was asked once");
    // The model node offers the tools node's tools only, and sees the whole conversation.
    assert_eq!(offered(&requests[1]), ["Write"]);
    assert!(system(&requests[1]).starts_with("Write the approved notes"));
    let contents: Vec<&str> = requests[1].messages()[1..]
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        contents,
        [
            "Notes for v2",
            "v2: graphs in files",
            "Write these notes to RELEASE.md? (yes/no)",
            "yes"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_no_ends_the_graph_and_a_graph_without_a_session_says_how_to_answer() {
    let dir = project();
    let server = ScriptedServer::start([Reply::text("draft one"), Reply::text("draft two")])
        .await
        .unwrap();
    let out = output(release_run(&server, dir.path(), "Notes"), "").await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let out = output(release_run(&server, dir.path(), "no"), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(server.requests().len(), 1, "no model node ran after a no");
    assert!(!dir.path().join("RELEASE.md").exists());

    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "Notes", "--agents"])
        .arg(release_file())
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("run it with --session FILE"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graph_s_tools_node_runs_only_its_own_tools_and_a_graph_can_be_an_agent_tool() {
    let dir = project();
    let file = dir.path().join("graph.yaml");
    std::fs::write(
        &file,
        "root: boss\n\
         agents:\n  - name: boss\n    agent_tools: [reader]\n\
         graphs:\n  - name: reader\n    description: Reads files\n    nodes:\n\
         \x20     - { name: think, kind: model, instruction: Read., tools_node: act }\n\
         \x20     - { name: act, kind: tools, tools: [Read], parallel: true }\n    edges:\n\
         \x20     - { from: START, to: think }\n\
         \x20     - { from: think, when: tool_calls, to: act }\n\
         \x20     - { from: act, to: think }\n",
    )
    .unwrap();
    let bash = r#"{"command":"touch pwned"}"#;
    let server = ScriptedServer::start([
        Reply::tool_call("b1", "reader", r#"{"request":"notes.txt"}"#),
        Reply::tool_calls([
            ("r1", "Read", read_file(dir.path(), "notes.txt").as_str()),
            ("x1", "Bash", bash),
        ]),
        Reply::text("alpha and beta"),
        Reply::text("The notes say alpha and beta."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "What is in notes.txt?", "--agents"])
        .arg(&file)
        .args(["--approval", "never", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(
        stdout, "The notes say alpha and beta.\n",
        "stderr:\n{stderr}"
    );
    let requests = server.requests();
    assert_eq!(offered(&requests[0]), ["reader"]);
    assert_eq!(offered(&requests[1]), ["Read"]);
    let results = tool_contents(&requests[2]);
    assert!(results[0].contains("alpha"), "{results:?}");
    assert!(
        results[1].contains("Bash"),
        "a tool the node does not run is refused: {results:?}"
    );
    assert!(!dir.path().join("pwned").exists(), "Bash never ran");
    assert_eq!(tool_contents(&requests[3]), ["alpha and beta"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_mistake_in_a_graph_is_named_before_the_model_is_asked() {
    let graph = |nodes: &str, edges: &str| {
        format!("[[graphs]]\nname = \"g\"\nnodes = [{nodes}]\nedges = [{edges}]\n")
    };
    let model = "{ name = \"m\", kind = \"model\" }";
    let start = "{ from = \"START\", to = \"m\" }, { from = \"m\", to = \"END\" }";
    let cases = [
        (
            graph(
                "{ name = \"m\", kind = \"model\", tools = [\"Read\"] }",
                start,
            ),
            vec!["node \"m\" is a Model node, which takes no tools"],
        ),
        (
            graph(
                "{ name = \"m\", kind = \"agent\", agent = \"ghost\" }",
                start,
            ),
            vec!["node \"m\": agent names no agent: \"ghost\""],
        ),
        (
            graph(
                "{ name = \"m\", kind = \"tools\", tools = [\"Raed\"] }",
                start,
            ),
            vec!["node \"m\": tools: no tool is named \"Raed\""],
        ),
        (
            graph(
                "{ name = \"m\", kind = \"model\", tools_node = \"m\" }",
                start,
            ),
            vec!["tools_node names no tools node of this graph: \"m\""],
        ),
        (
            graph(
                &format!("{model}, {{ name = \"lost\", kind = \"model\" }}"),
                start,
            ),
            vec!["graph g:", "lost is unreachable from START"],
        ),
        (
            graph(
                model,
                "{ from = \"START\", to = \"m\" }, { from = \"m\", to = \"nowhere\" }",
            ),
            vec!["nowhere, which is not a node"],
        ),
        (
            graph(
                model,
                "{ from = \"START\", to = \"m\" }, { from = \"m\", to = \"END\", when = \"sometimes\" }",
            ),
            vec!["unknown variant `sometimes`"],
        ),
        (
            format!(
                "[[agents]]\nname = \"a\"\nagent_tools = [\"g\"]\n{}",
                graph(
                    "{ name = \"n\", kind = \"agent\", agent = \"a\" }",
                    "{ from = \"START\", to = \"n\" }, { from = \"n\", to = \"END\" }"
                )
            ),
            vec!["cycle: a -> g -> a"],
        ),
        (
            graph("{ name = \"q\", kind = \"ask\" }", start),
            vec!["an ask node has a question"],
        ),
    ];
    for (i, (contents, expected)) in cases.iter().enumerate() {
        let name = format!("graph{i}.toml");
        let (code, stderr) = refused(&name, contents, &[]).await;
        assert_eq!(code, Some(2), "{name}: {stderr}");
        for part in expected {
            assert!(stderr.contains(part), "{name}: {part:?} not in:\n{stderr}");
        }
    }
}
