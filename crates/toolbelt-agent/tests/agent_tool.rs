//! [`AgentTool`] end to end: an outer agent calls an agent tool whose child agent reads a
//! real file with the built-in Read tool and answers, each agent talking to its own scripted
//! OpenAI-compatible server on 127.0.0.1 (so each server's recorded requests are exactly
//! what that agent sent).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use toolbelt_agent::callbacks::BeforeModel;
use toolbelt_agent::{
    Agent, AgentError, AgentTool, CallbackError, Callbacks, DynAgent, Event, HistoryScope,
    InnerTextMode, Invocation, Plugin, RunOptions, Runner, SessionKey,
};
use toolbelt_core::{DynToolSet, ToolContext};
use toolbelt_exec::{BeforeAction, HookCall, Timeout};
use toolbelt_model::Request;
use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};

use crate::agent_support;

use agent_support::*;

const NOTES: &str = "the meeting moved to Thursday";
const CHILD_ANSWER: &str = "notes.txt says the meeting moved to Thursday";

/// The child: a `files` agent with the built-in tools over `dir` (holding notes.txt).
fn files_agent(server: &ScriptedServer, dir: &std::path::Path, stream: bool) -> DynAgent {
    std::fs::write(dir.join("notes.txt"), NOTES).unwrap();
    let builtin =
        toolbelt_builtin::BuiltinToolSet::new(toolbelt_builtin::BuiltinOptions::new(dir)).unwrap();
    Arc::new(
        agent("files", server, stream)
            .tool_set(Arc::new(builtin) as DynToolSet)
            .build()
            .unwrap(),
    )
}

/// The child's script: read notes.txt, then answer.
async fn child_server() -> ScriptedServer {
    ScriptedServer::start([
        Reply::tool_call("r1", "Read", r#"{"file_path":"notes.txt"}"#),
        Reply::text(CHILD_ANSWER),
    ])
    .await
    .unwrap()
}

/// The outer agent's model: it asks the `files` agent tool, then answers `answer`.
async fn outer_server(answer: &str) -> ScriptedServer {
    ScriptedServer::start([
        Reply::tool_call("c1", "files", ASK_FILES),
        Reply::text(answer),
    ])
    .await
    .unwrap()
}

/// A runner whose `coordinator` agent offers `tool`.
fn coordinator(server: &ScriptedServer, tool: AgentTool, stream: bool) -> Runner {
    let agent = agent("coordinator", server, stream)
        .tool(tool)
        .build()
        .unwrap();
    Runner::new("app", Arc::new(agent))
}

const ASK_FILES: &str = r#"{"request":"What does notes.txt say?"}"#;

/// The contents of the user messages of a recorded request.
fn user_texts(request: &RecordedRequest) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The events forwarded from a child (they carry the call's id).
fn forwarded(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|e| e.tool_call_id.is_some()).collect()
}

#[tokio::test]
async fn the_child_reads_a_file_and_its_answer_is_the_tool_result() {
    for stream in MODES {
        let dir = tempfile::tempdir().unwrap();
        let child = child_server().await;
        let outer = outer_server("The meeting is on Thursday.").await;
        let tool = AgentTool::new(files_agent(&child, dir.path(), stream)).unwrap();
        let runner = coordinator(&outer, tool, stream);
        let events = run(&runner, "s", "When is the meeting?", RunOptions::new()).await;
        no_errors(&events);

        // The outer agent was offered the agent as a tool taking a request.
        let first = &outer.requests()[0];
        assert!(first.tool_names().contains(&"files".to_string()));
        // The tool result is the child's final answer, and it is what the outer model got.
        let results = results(&events);
        assert_eq!(results.len(), 1, "the child's Read is not the outer run's");
        assert_eq!(
            (results[0].name.as_str(), results[0].content.as_str()),
            ("files", CHILD_ANSWER)
        );
        assert_eq!(
            tool_messages(&outer.requests()[1]),
            vec![("c1".to_string(), CHILD_ANSWER.to_string())]
        );
        assert_eq!(final_answer(&events), "The meeting is on Thursday.");
        // The child got only the request (isolated), read the real file and answered.
        let child_requests = child.requests();
        assert_eq!(child_requests.len(), 2);
        assert_eq!(
            user_texts(&child_requests[0]),
            vec!["What does notes.txt say?"]
        );
        let read = tool_messages(&child_requests[1]);
        assert_eq!(read.len(), 1);
        assert!(read[0].1.contains(NOTES), "{read:?}");
        // Nothing of the child is forwarded without stream_inner.
        assert!(forwarded(&events).is_empty());
        assert_eq!(of(&events, "run_completed").len(), 1);
    }
}

#[tokio::test]
async fn skip_summarization_ends_the_turn_after_the_tool_result() {
    let dir = tempfile::tempdir().unwrap();
    let child = child_server().await;
    let outer = ScriptedServer::start([Reply::tool_call("c1", "files", ASK_FILES)])
        .await
        .unwrap();
    let tool = AgentTool::new(files_agent(&child, dir.path(), false))
        .unwrap()
        .skip_summarization(true);
    let runner = coordinator(&outer, tool, false);
    let events = run(&runner, "s", "When is the meeting?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(outer.requests().len(), 1, "no model call after the result");
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(
        kinds,
        [
            "user_input",
            "model_response",
            "tool_result",
            "run_completed"
        ]
    );
    assert_eq!(results(&events)[0].content, CHILD_ANSWER);
}

/// Runs the coordinator with a streaming child forwarded in `mode`; returns the events and
/// the runner (for its session).
async fn streamed_run(mode: InnerTextMode) -> (Vec<Event>, Runner) {
    let dir = tempfile::tempdir().unwrap();
    let child = child_server().await;
    let outer = outer_server("Thursday.").await;
    let tool = AgentTool::new(files_agent(&child, dir.path(), true))
        .unwrap()
        .stream_inner(true)
        .inner_text_mode(mode);
    let runner = coordinator(&outer, tool, true);
    let events = run(&runner, "s", "When is the meeting?", RunOptions::new()).await;
    no_errors(&events);
    (events, runner)
}

/// The index of the first event matching `pred`.
fn position(events: &[Event], pred: impl Fn(&Event) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such event in {events:#?}"))
}

#[tokio::test]
async fn stream_inner_forwards_the_childs_deltas_and_tool_events_in_order_with_parent_ids() {
    let (events, runner) = streamed_run(InnerTextMode::Include).await;
    let outer_id = events[0].invocation_id.clone();
    let inner = forwarded(&events);
    assert!(!inner.is_empty());
    for event in &inner {
        assert_eq!(event.tool_call_id.as_deref(), Some("c1"));
        assert_eq!(
            event.parent_invocation_id.as_deref(),
            Some(outer_id.as_str())
        );
        assert_ne!(event.invocation_id, outer_id, "the child has its own id");
        assert_eq!(event.author, "files");
    }
    let types: Vec<&str> = inner.iter().map(|e| e.kind.type_name()).collect();
    for kind in ["user_input", "error", "run_completed"] {
        assert!(!types.contains(&kind), "{kind} is not forwarded: {types:?}");
    }
    // In order: the outer call, the child's Read call, its result, the child's answer
    // streamed, then the outer tool result and the outer answer.
    let outer_call = position(&events, |e| {
        e.tool_call_id.is_none() && !e.tool_calls().is_empty()
    });
    let child_call = position(&events, |e| {
        e.tool_call_id.is_some() && e.tool_calls().iter().any(|c| c.name == "Read")
    });
    let child_read = position(&events, |e| {
        e.tool_call_id.is_some() && e.tool_result().is_some_and(|r| r.name == "Read")
    });
    let last_child_delta = events
        .iter()
        .rposition(|e| e.tool_call_id.is_some() && !e.delta_text().is_empty())
        .unwrap();
    let outer_result = position(&events, |e| {
        e.tool_call_id.is_none() && e.tool_result().is_some()
    });
    assert!(
        outer_call < child_call && child_call < child_read,
        "{types:?}"
    );
    assert!(child_read < last_child_delta && last_child_delta < outer_result);
    let streamed: String = events[child_read..outer_result]
        .iter()
        .map(Event::delta_text)
        .collect();
    assert_eq!(streamed, CHILD_ANSWER);
    assert_eq!(
        events[outer_result].tool_result().unwrap().content,
        CHILD_ANSWER
    );
    assert_eq!(of(&events, "run_completed").len(), 1);
    // Forwarded events are shown, not stored: the session keeps the call and its result.
    let stored = runner
        .sessions()
        .events(&SessionKey::new("app", "user", "s"))
        .await
        .unwrap();
    assert!(stored.iter().all(|e| e.tool_call_id.is_none()));
    assert!(stored.iter().all(|e| e.author != "files"));
}

#[tokio::test]
async fn exclude_mode_hides_the_childs_text_but_keeps_its_tool_events() {
    let (events, _) = streamed_run(InnerTextMode::Exclude).await;
    let inner = forwarded(&events);
    assert!(
        inner.iter().all(|e| e.delta_text().is_empty()),
        "no child text deltas: {inner:#?}"
    );
    let responses: Vec<&&Event> = inner
        .iter()
        .filter(|e| e.kind.type_name() == "model_response")
        .collect();
    assert_eq!(responses.len(), 1, "only the response that calls Read");
    assert_eq!(responses[0].tool_calls()[0].name, "Read");
    assert!(responses[0].message().unwrap().content.is_empty());
    let read: Vec<_> = inner.iter().filter_map(|e| e.tool_result()).collect();
    assert_eq!(read.len(), 1);
    assert!(read[0].content.contains(NOTES));
    // The aggregated answer still reaches the outer model as the tool result.
    let outer: Vec<_> = events
        .iter()
        .filter(|e| e.tool_call_id.is_none())
        .filter_map(Event::tool_result)
        .collect();
    assert_eq!(outer[0].content, CHILD_ANSWER);
}

#[tokio::test]
async fn parent_branch_history_is_visible_to_the_child_and_isolated_is_not() {
    for scope in [HistoryScope::Isolated, HistoryScope::ParentBranch] {
        let dir = tempfile::tempdir().unwrap();
        let child = child_server().await;
        let outer = ScriptedServer::start([
            Reply::text("Which file?"),
            Reply::tool_call("c1", "files", ASK_FILES),
            Reply::text("Thursday."),
        ])
        .await
        .unwrap();
        let tool = AgentTool::new(files_agent(&child, dir.path(), false))
            .unwrap()
            .history_scope(scope);
        let runner = coordinator(&outer, tool, false);
        no_errors(&run(&runner, "s", "Check my notes", RunOptions::new()).await);
        no_errors(&run(&runner, "s", "notes.txt, please", RunOptions::new()).await);
        let first = &child.requests()[0];
        let users = user_texts(first);
        let assistants: Vec<&str> = first
            .messages()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .filter_map(|m| m["content"].as_str())
            .collect();
        match scope {
            HistoryScope::Isolated => {
                assert_eq!(users, vec!["What does notes.txt say?"]);
                assert!(assistants.is_empty());
            }
            HistoryScope::ParentBranch => {
                assert_eq!(
                    users,
                    vec![
                        "Check my notes",
                        "notes.txt, please",
                        "What does notes.txt say?"
                    ]
                );
                assert_eq!(assistants, vec!["Which file?"]);
                // Only text: no system message of the parent, no tool calls or results.
                assert_eq!(roles(first)[0], "system");
                assert_eq!(
                    first.messages()[0]["content"],
                    "You are files.",
                    "the child's own instruction"
                );
                assert!(tool_messages(first).is_empty());
            }
        }
    }
}

#[tokio::test]
async fn cancelling_the_outer_run_stops_the_childs_tool() {
    let outer = ScriptedServer::start([Reply::tool_call("c1", "waiter", r#"{"request":"wait"}"#)])
        .await
        .unwrap();
    let child = ScriptedServer::start([Reply::tool_call("w1", "wait", "{}")])
        .await
        .unwrap();
    let (wait, started_rx, cancelled) = wait_until_cancelled("stopped");
    let waiter = agent("waiter", &child, false).tool(wait).build().unwrap();
    let runner = coordinator(&outer, AgentTool::new(Arc::new(waiter)).unwrap(), false);
    let events = runner.run("u", "s", "go", RunOptions::new());
    started_rx.await.unwrap();
    events.cancel();
    let rest = events.collect_all().await;
    assert!(
        rest.last().is_some_and(Event::is_run_completed),
        "{rest:#?}"
    );
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        1,
        "the child's tool saw it"
    );
    assert_eq!(outer.requests().len(), 1);
    assert_eq!(
        child.requests().len(),
        1,
        "the child asked its model no more"
    );
}

/// An agent that runs whatever agent is set later: lets an agent offer itself as a tool.
struct Recursive {
    inner: OnceLock<DynAgent>,
}

#[async_trait]
impl Agent for Recursive {
    fn name(&self) -> &str {
        "recurse"
    }

    fn description(&self) -> &str {
        "Asks itself again"
    }

    async fn run(&self, inv: Invocation) -> Result<(), AgentError> {
        self.inner.get().expect("set").run(inv).await
    }
}

#[tokio::test]
async fn recursion_stops_at_the_depth_limit_with_a_tool_error() {
    let again = r#"{"request":"again"}"#;
    let server = ScriptedServer::start([
        Reply::tool_call("a0", "recurse", again), // the root, depth 0
        Reply::tool_call("a1", "recurse", again), // its child, depth 1
        Reply::tool_call("a2", "recurse", again), // depth 2: refused
        Reply::text("gave up at depth 2"),
        Reply::text("depth 1 done"),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let proxy = Arc::new(Recursive {
        inner: OnceLock::new(),
    });
    let tool = AgentTool::new(proxy.clone()).unwrap().max_depth(2);
    let agent = agent("recurse", &server, false).tool(tool).build().unwrap();
    let agent: DynAgent = Arc::new(agent);
    assert!(proxy.inner.set(agent.clone()).is_ok());
    let runner = Runner::new("app", agent);
    let events = run(&runner, "s", "recurse", RunOptions::new()).await;
    no_errors(&events);
    let requests = server.requests();
    assert_eq!(requests.len(), 6, "no deeper child asked its model");
    let refused = tool_messages(&requests[3]);
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].1.starts_with("Error:") && refused[0].1.contains("the limit is 2"),
        "{refused:?}"
    );
    assert_eq!(tool_messages(&requests[4])[0].1, "gave up at depth 2");
    assert_eq!(tool_messages(&requests[5])[0].1, "depth 1 done");
    assert_eq!(final_answer(&events), "done");
    assert_eq!(
        results(&events)
            .iter()
            .map(|r| r.content.as_str())
            .collect::<Vec<_>>(),
        ["depth 1 done"]
    );
}

#[tokio::test]
async fn a_runners_plugin_applies_to_the_agent_tools_child_and_its_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let child = child_server().await;
    let outer = outer_server("Thursday.").await;
    let tool = AgentTool::new(files_agent(&child, dir.path(), false)).unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (models, tools) = (seen.clone(), seen.clone());
    let plugin = Plugin::new("audit").callbacks(
        Callbacks::new()
            .before_model(move |inv: &Invocation, _: &mut Request| {
                models
                    .lock()
                    .unwrap()
                    .push(format!("model:{}", inv.agent_name()));
                Ok(None)
            })
            .before_tool(move |ctx: &ToolContext, call: &HookCall<'_>| {
                let agent = Invocation::from_context(ctx).unwrap().agent_name();
                tools
                    .lock()
                    .unwrap()
                    .push(format!("tool:{agent}:{}", call.declaration.name));
                BeforeAction::Continue
            }),
    );
    let runner = coordinator(&outer, tool, false).with_plugin(plugin);
    let events = run(&runner, "s", "When is the meeting?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "model:coordinator",
            "tool:coordinator:files",
            "model:files",
            "tool:files:Read",
            "model:files",
            "model:coordinator",
        ]
    );
}

#[tokio::test]
async fn the_calls_timeout_stops_the_child_and_its_tools_before_the_result() {
    let outer = ScriptedServer::start([
        Reply::tool_call("c1", "waiter", r#"{"request":"wait"}"#),
        Reply::text("it timed out"),
    ])
    .await
    .unwrap();
    let child = ScriptedServer::start([Reply::tool_call("w1", "wait", "{}")])
        .await
        .unwrap();
    let (wait, _started, stopped) = wait_until_cancelled("stopped");
    let waiter = agent("waiter", &child, false).tool(wait).build().unwrap();
    // A short limit so the call times out; a long grace so the child is waited for, not
    // dropped (the test does not depend on how quickly it stops).
    let limit = Duration::from_millis(200);
    let coordinator = agent("coordinator", &outer, false)
        .tool(AgentTool::new(Arc::new(waiter)).unwrap())
        .configure_executor(move |b| {
            b.middleware(Timeout::new(limit).grace(Duration::from_secs(60)))
        })
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(coordinator));
    let events = run(&runner, "s", "go", RunOptions::new()).await;
    no_errors(&events);
    // The child's tool had stopped when the call's result came back.
    assert_eq!(stopped.load(Ordering::SeqCst), 1);
    let result = results(&events);
    assert_eq!(result.len(), 1);
    assert!(
        result[0].is_error && result[0].content.contains("timed out"),
        "{result:?}"
    );
    assert_eq!(
        child.requests().len(),
        1,
        "the child asked its model no more"
    );
    assert_eq!(final_answer(&events), "it timed out");
}

#[tokio::test]
async fn tool_responses_are_stored_before_the_child_or_the_caller_goes_on() {
    // The spec's "requires completion": an agent goes on only after its tool response
    // event was processed. Each agent's before-model callback looks at its own stored
    // conversation: the child's second model call sees its Read result, the caller's sees
    // the agent tool's aggregated result.
    let dir = tempfile::tempdir().unwrap();
    let child = child_server().await;
    let outer = outer_server("Thursday.").await;
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let plugin = Plugin::new("completion")
        .callbacks(Callbacks::new().before_model(StoredResults(seen.clone())));
    let tool = AgentTool::new(files_agent(&child, dir.path(), true))
        .unwrap()
        .stream_inner(true);
    let runner = coordinator(&outer, tool, true).with_plugin(plugin);
    let events = run(&runner, "s", "When is the meeting?", RunOptions::new()).await;
    no_errors(&events);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(seen[0], "coordinator:[]");
    assert_eq!(seen[1], "files:[]");
    assert!(seen[2].starts_with("files:[Read="), "{seen:?}");
    assert_eq!(
        seen[3],
        format!("coordinator:[files={}]", CHILD_ANSWER.len())
    );
}

/// Notes, before each model call, the tool results stored in the agent's conversation.
struct StoredResults(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl BeforeModel for StoredResults {
    async fn call(
        &self,
        inv: &Invocation,
        _: &mut Request,
    ) -> Result<Option<toolbelt_model::Message>, CallbackError> {
        let history = inv
            .history()
            .await
            .map_err(|e| CallbackError::new(e.to_string()))?;
        let stored: Vec<String> = history
            .iter()
            .filter_map(Event::tool_result)
            .map(|r| format!("{}={}", r.name, r.content.len()))
            .collect();
        self.0
            .lock()
            .unwrap()
            .push(format!("{}:[{}]", inv.agent_name(), stored.join(",")));
        Ok(None)
    }
}

/// What a callback saw: agent (or call), invocation id, parent id, the `tenant` state.
type Seen = (String, String, Option<String>, serde_json::Value);

#[tokio::test]
async fn the_child_is_a_child_invocation_with_a_copy_of_the_state_and_a_declared_input() {
    let outer = ScriptedServer::start([
        Reply::tool_call("c1", "math", r#"{"a":2,"b":3}"#),
        Reply::text("5."),
    ])
    .await
    .unwrap();
    let child = ScriptedServer::start([Reply::text("2 + 3 = 5")])
        .await
        .unwrap();
    let math = agent("math", &child, false).build().unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"]
    });
    let tool = AgentTool::new(Arc::new(math))
        .unwrap()
        .input_schema(schema.clone())
        .unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let (models, calls) = (seen.clone(), seen.clone());
    let plugin = Plugin::new("ids").callbacks(
        Callbacks::new()
            .before_model(move |inv: &Invocation, _: &mut Request| {
                models.lock().unwrap().push((
                    inv.agent_name().to_string(),
                    inv.id().to_string(),
                    inv.parent_id().map(str::to_string),
                    inv.runtime_state()["tenant"].clone(),
                ));
                Ok(None)
            })
            .before_tool(move |ctx: &ToolContext, call: &HookCall<'_>| {
                let inv = Invocation::from_context(ctx).unwrap();
                calls.lock().unwrap().push((
                    format!("call {}", call.call_id),
                    inv.id().to_string(),
                    None,
                    serde_json::Value::Null,
                ));
                BeforeAction::Continue
            }),
    );
    let runner = coordinator(&outer, tool, false).with_plugin(plugin);
    let options = RunOptions::new().state("tenant", serde_json::json!("acme"));
    let events = run(&runner, "s", "2 plus 3?", options).await;
    no_errors(&events);
    let seen = seen.lock().unwrap().clone();
    let [coord, call, math, again] = seen.as_slice() else {
        panic!("{seen:?}");
    };
    assert_eq!(coord.0, "coordinator");
    assert_eq!(call.0, "call c1", "a tool callback sees the call's id");
    assert_eq!(call.1, coord.1, "made in the coordinator's invocation");
    assert_eq!(math.0, "math");
    assert_ne!(math.1, coord.1, "the child has an invocation of its own");
    assert_eq!(
        math.2.as_deref(),
        Some(coord.1.as_str()),
        "its parent is the caller"
    );
    assert_eq!(math.3, "acme", "with a copy of the runtime state");
    assert_eq!(again.1, coord.1);
    // The declared schema is offered, and the arguments are the child's request.
    let offered = &outer.requests()[0].body["tools"][0]["function"]["parameters"];
    assert_eq!(offered["properties"], schema["properties"]);
    let asked: serde_json::Value =
        serde_json::from_str(&user_texts(&child.requests()[0])[0]).unwrap();
    assert_eq!(asked, serde_json::json!({"a": 2, "b": 3}));
    assert_eq!(tool_messages(&outer.requests()[1])[0].1, "2 + 3 = 5");
}

#[tokio::test]
async fn parent_branch_shows_the_child_earlier_tool_rounds_as_text_but_not_its_own_call() {
    let dir = tempfile::tempdir().unwrap();
    let child = ScriptedServer::start([
        Reply::tool_call("r1", "Read", r#"{"file_path":"notes.txt"}"#),
        Reply::text(CHILD_ANSWER),
        Reply::text("Short."),
    ])
    .await
    .unwrap();
    let outer = ScriptedServer::start([
        Reply::tool_call("c1", "files", ASK_FILES),
        Reply::tool_call(
            "c2",
            "files",
            r#"{"request":"Make the last result shorter"}"#,
        ),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let tool = AgentTool::new(files_agent(&child, dir.path(), false))
        .unwrap()
        .history_scope(HistoryScope::ParentBranch);
    let runner = coordinator(&outer, tool, false);
    no_errors(&run(&runner, "s", "Check my notes", RunOptions::new()).await);
    // The second child run (its request is the child's third model call).
    let second = &child.requests()[2];
    let assistants: Vec<&str> = second
        .messages()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let notes = assistants.join("\n");
    assert!(
        notes.contains(&format!("[files returned: {CHILD_ANSWER}]")),
        "the earlier result is visible: {notes}"
    );
    assert!(notes.contains("[called files with "), "{notes}");
    assert!(
        !notes.contains("Make the last result shorter"),
        "the running call is not listed as a note: {notes}"
    );
    assert!(tool_messages(second).is_empty(), "rounds are text only");
    assert_eq!(
        user_texts(second).last().map(String::as_str),
        Some("Make the last result shorter")
    );
}
