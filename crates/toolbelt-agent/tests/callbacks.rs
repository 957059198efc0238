//! Callbacks on an agent and plugins on a runner, against the scripted model server.

use crate::agent_support;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agent_support::*;
use toolbelt_agent::{
    CallbackError, Callbacks, ErrorKind, Invocation, LlmAgent, Plugin, RunOptions, Runner,
};
use toolbelt_core::{FunctionTool, ToolContext, ToolError, ToolFilter, ToolOutput};
use toolbelt_exec::{AfterAction, BeforeAction, Executor, HookCall, Registry};
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{Message, Request};

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::default()
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// Callbacks that record every stage in `log` as `{label}:{stage}:{agent}`.
fn logging(label: &str, log: &Log) -> Callbacks {
    let entry = |stage: &'static str| {
        let (label, log) = (label.to_string(), log.clone());
        move |agent: &str| log.lock().unwrap().push(format!("{label}:{stage}:{agent}"))
    };
    let (before_agent, after_agent) = (entry("before_agent"), entry("after_agent"));
    let (before_model, after_model) = (entry("before_model"), entry("after_model"));
    let (before_tool, after_tool) = (entry("before_tool"), entry("after_tool"));
    Callbacks::new()
        .before_agent(move |inv: &Invocation| {
            before_agent(inv.agent_name());
            Ok(None)
        })
        .after_agent(move |inv: &Invocation| {
            after_agent(inv.agent_name());
            Ok(None)
        })
        .before_model(move |inv: &Invocation, _: &mut Request| {
            before_model(inv.agent_name());
            Ok(None)
        })
        .after_model(move |inv: &Invocation, _: &mut Message| {
            after_model(inv.agent_name());
            Ok(())
        })
        .before_tool(move |ctx: &ToolContext, _: &HookCall<'_>| {
            before_tool(Invocation::from_context(ctx).unwrap().agent_name());
            BeforeAction::Continue
        })
        .after_tool(
            move |ctx: &ToolContext, _: &HookCall<'_>, _: &Result<ToolOutput, ToolError>| {
                after_tool(Invocation::from_context(ctx).unwrap().agent_name());
                AfterAction::Keep
            },
        )
}

fn clock() -> FunctionTool {
    FunctionTool::new(
        "clock",
        "Tells the time",
        |_ctx: ToolContext, _args: Args| async move { Ok::<_, ToolError>("noon".to_string()) },
    )
    .unwrap()
}

#[tokio::test]
async fn a_before_model_callback_that_removes_the_tools_sends_a_request_without_tools() {
    let (server, _, runner) = calculator([Reply::text("no tools today")], false, |agent| {
        agent.callbacks(
            Callbacks::new().before_model(|_: &Invocation, request: &mut Request| {
                request.tools.clear();
                Ok(None)
            }),
        )
    })
    .await;
    let events = run(&runner, "s", "hello", RunOptions::new()).await;
    no_errors(&events);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].tool_names().is_empty(),
        "{:?}",
        requests[0].tool_names()
    );
}

#[tokio::test]
async fn a_before_model_callback_can_answer_instead_of_the_model() {
    let log = log();
    let (server, _, runner) = calculator([], false, |agent| {
        let seen = log.clone();
        agent.callbacks(
            Callbacks::new()
                .before_model(|_: &Invocation, _: &mut Request| {
                    Ok(Some(Message::assistant("from the cache")))
                })
                .after_model(move |_: &Invocation, message: &mut Message| {
                    seen.lock().unwrap().push(message.content.clone());
                    Ok(())
                }),
        )
    })
    .await;
    let events = run(&runner, "s", "hello", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(final_answer(&events), "from the cache");
    assert!(server.requests().is_empty(), "the model was called");
    assert_eq!(
        entries(&log),
        ["from the cache"],
        "after_model sees the answer"
    );
}

#[tokio::test]
async fn an_after_model_callback_replaces_the_answer_in_the_events_and_the_history() {
    let (server, _, runner) = calculator(
        [Reply::text("raw answer"), Reply::text("second")],
        false,
        |agent| {
            agent.callbacks(Callbacks::new().after_model(
                |_: &Invocation, message: &mut Message| {
                    message.content = message.content.replace("raw", "edited");
                    Ok(())
                },
            ))
        },
    )
    .await;
    let events = run(&runner, "s", "hello", RunOptions::new()).await;
    assert_eq!(final_answer(&events), "edited answer");
    run(&runner, "s", "again", RunOptions::new()).await;
    let second = &server.requests()[1];
    let assistant: Vec<&str> = second
        .messages()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(assistant, ["edited answer"]);
}

#[tokio::test]
async fn tool_callbacks_rewrite_the_agents_calls_through_the_executor() {
    let seen = log();
    let (server, calls, runner) = calculator(
        [
            Reply::tool_call("call_1", "multiply", r#"{"a":2,"b":3}"#),
            Reply::text("done"),
        ],
        false,
        |agent| {
            let seen = seen.clone();
            agent.callbacks(
                Callbacks::new()
                    .before_tool(move |ctx: &ToolContext, call: &HookCall<'_>| {
                        let inv = Invocation::from_context(ctx).expect("an invocation");
                        seen.lock().unwrap().push(format!(
                            "{} {} {}",
                            inv.agent_name(),
                            call.call_id,
                            call.arguments
                        ));
                        BeforeAction::ReplaceArguments(r#"{"a":5,"b":7}"#.into())
                    })
                    .after_tool(
                        |_: &ToolContext,
                         _: &HookCall<'_>,
                         result: &Result<ToolOutput, ToolError>| {
                            let text = result.as_ref().unwrap().llm_text();
                            AfterAction::Replace(Ok(ToolOutput::text(format!("checked {text}"))))
                        },
                    ),
            )
        },
    )
    .await;
    let events = run(&runner, "s", "2 times 3?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(entries(&seen), [r#"calc call_1 {"a":2,"b":3}"#]);
    assert_eq!(results(&events)[0].content, "checked 35.0");
    assert_eq!(
        tool_messages(&server.requests()[1]),
        [("call_1".to_string(), "checked 35.0".to_string())]
    );
}

#[tokio::test]
async fn a_before_agent_callback_ends_the_run_with_its_message() {
    let log = log();
    let (server, _, runner) = calculator([], false, |agent| {
        let after = log.clone();
        agent.callbacks(
            Callbacks::new()
                .before_agent(|_: &Invocation| Ok(Some(Message::assistant("closed today"))))
                .after_agent(move |inv: &Invocation| {
                    after.lock().unwrap().push(inv.agent_name().to_string());
                    Ok(None)
                }),
        )
    })
    .await;
    let events = run(&runner, "s", "hello", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(final_answer(&events), "closed today");
    assert!(server.requests().is_empty(), "the model was called");
    assert_eq!(entries(&log), ["calc"], "after_agent still runs");
}

#[tokio::test]
async fn a_failing_callback_ends_the_run_with_a_callback_error() {
    let (server, calls, runner) = calculator(
        [Reply::tool_call("call_1", "multiply", r#"{"a":2,"b":3}"#)],
        false,
        |agent| {
            agent.callbacks(
                Callbacks::new().after_model(|_: &Invocation, _: &mut Message| {
                    Err(CallbackError::new("the answer breaks policy"))
                }),
            )
        },
    )
    .await;
    let events = run(&runner, "s", "hello", RunOptions::new()).await;
    assert_eq!(
        errors(&events),
        [(
            ErrorKind::Callback,
            "after_model callback: the answer breaks policy".to_string()
        )]
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the rejected turn's calls ran"
    );
    assert!(
        of(&events, "model_response").is_empty(),
        "the rejected answer was shown"
    );
}

#[tokio::test]
async fn plugins_run_in_registration_order_before_the_agents_own_callbacks() {
    let log = log();
    let (_server, _, runner) = calculator(
        [
            Reply::tool_call("call_1", "multiply", r#"{"a":2,"b":3}"#),
            Reply::text("6"),
        ],
        false,
        |agent| agent.callbacks(logging("agent", &log)),
    )
    .await;
    let runner = runner
        .with_plugin(Plugin::new("first").callbacks(logging("first", &log)))
        .with_plugin(Plugin::new("second").callbacks(logging("second", &log)));
    let events = run(&runner, "s", "2 times 3?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(
        entries(&log),
        one_tool_turn_logged_by(["first", "second", "agent"])
    );
}

#[tokio::test]
async fn a_plugin_applies_to_the_sub_agent_a_transfer_hands_over_to() {
    let server = ScriptedServer::start([
        Reply::tool_call("t1", "transfer_to_agent", r#"{"agent_name":"helper"}"#),
        Reply::text("helped"),
    ])
    .await
    .unwrap();
    let helper = agent("helper", &server, false).build().unwrap();
    let root = agent("root", &server, false)
        .sub_agent(Arc::new(helper))
        .build()
        .unwrap();
    let seen = log();
    let noted = seen.clone();
    let plugin = Plugin::new("audit").callbacks(Callbacks::new().before_model(
        move |inv: &Invocation, _: &mut Request| {
            noted.lock().unwrap().push(inv.agent_name().to_string());
            Ok(None)
        },
    ));
    let runner = Runner::new("app", Arc::new(root)).with_plugin(plugin);
    let events = run(&runner, "s", "help me", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(final_answer(&events), "helped");
    assert_eq!(entries(&seen), ["root", "helper"]);
}

#[tokio::test]
async fn a_plugins_tool_is_offered_to_every_agent_and_kept_by_tool_filters() {
    let server = ScriptedServer::start([
        Reply::tool_call("t1", "transfer_to_agent", r#"{"agent_name":"helper"}"#),
        Reply::tool_call("c1", "clock", "{}"),
        Reply::text("it is noon"),
    ])
    .await
    .unwrap();
    let helper = agent("helper", &server, false).build().unwrap();
    let calls = Arc::default();
    let root = agent("root", &server, false)
        .tool(multiply(calls))
        .sub_agent(Arc::new(helper))
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(root)).with_plugin(Plugin::new("time").tool(clock()));
    let options = RunOptions::new().tool_filter(ToolFilter::include_names(["nothing"]));
    let events = run(&runner, "s", "what time is it?", options).await;
    no_errors(&events);
    let requests = server.requests();
    assert_eq!(requests[0].tool_names(), ["clock", "transfer_to_agent"]);
    assert_eq!(requests[1].tool_names(), ["clock"]);
    let clock_result = results(&events)
        .into_iter()
        .find(|r| r.name == "clock")
        .expect("the clock ran");
    assert_eq!(clock_result.content, "noon");
    assert_eq!(final_answer(&events), "it is noon");
}

#[tokio::test]
async fn tool_callbacks_with_an_executor_of_ones_own_are_a_configuration_error() {
    let server = ScriptedServer::start([]).await.unwrap();
    let executor = Executor::new(Arc::new(Registry::new()));
    let callbacks =
        Callbacks::new().before_tool(|_: &ToolContext, _: &HookCall<'_>| BeforeAction::Continue);
    let built = LlmAgent::builder("calc")
        .model(model(&server))
        .executor(executor)
        .callbacks(callbacks)
        .build();
    let error = built.expect_err("tool callbacks need the agent's executor");
    assert!(error.to_string().contains("tool callbacks"), "{error}");
}

#[tokio::test]
async fn an_agents_own_plugin_runs_after_the_runners_and_before_the_agents_callbacks() {
    let log = log();
    let own = Plugin::new("own").callbacks(logging("own", &log));
    let (_server, _, runner) = calculator(
        [
            Reply::tool_call("call_1", "multiply", r#"{"a":2,"b":3}"#),
            Reply::text("6"),
        ],
        false,
        |agent| agent.callbacks(logging("agent", &log)).plugin(own),
    )
    .await;
    let runner = runner.with_plugin(Plugin::new("runner").callbacks(logging("runner", &log)));
    let events = run(&runner, "s", "2 times 3?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(
        entries(&log),
        one_tool_turn_logged_by(["runner", "own", "agent"])
    );
}

/// What `logging` callbacks labelled `labels` (in the order they run) record for a `calc`
/// run with one tool turn: each stage once per label, stage after stage.
fn one_tool_turn_logged_by(labels: [&str; 3]) -> Vec<String> {
    [
        "before_agent",
        "before_model",
        "after_model",
        "before_tool",
        "after_tool",
        "before_model",
        "after_model",
        "after_agent",
    ]
    .iter()
    .flat_map(|stage| labels.map(|label| format!("{label}:{stage}:calc")))
    .collect()
}
