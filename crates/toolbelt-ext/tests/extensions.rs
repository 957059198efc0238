//! The Extension trait end to end: what an extension contributes reaches the model's
//! request and the tool pipeline in the documented order; init and close failures.

use crate::ext_support;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use toolbelt_agent::extension::BoxError;
use toolbelt_agent::{
    Callbacks, EventKind, Extension, ExtensionError, Extensions, Invocation, LlmAgent, Plugin,
    RunOptions, Runner,
};
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError};
use toolbelt_exec::{BeforeAction, BeforeHook, HookCall};
use toolbelt_model::Request;
use toolbelt_model::testing::{Reply, ScriptedServer};

type Log = Arc<Mutex<Vec<String>>>;

/// A tool without arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

fn push(log: &Log, entry: impl Into<String>) {
    log.lock().unwrap().push(entry.into());
}

/// A before hook that records its label.
struct Mark(Log, &'static str);

#[async_trait]
impl BeforeHook for Mark {
    async fn before(&self, _ctx: &ToolContext, call: &HookCall<'_>) -> BeforeAction {
        push(&self.0, format!("{}:{}", self.1, call.tool_name()));
        BeforeAction::Continue
    }
}

/// An extension with one of each part, all recording into `log`.
struct Recorder {
    name: &'static str,
    log: Log,
}

#[async_trait]
impl Extension for Recorder {
    fn name(&self) -> &str {
        self.name
    }

    async fn init(&self) -> Result<(), BoxError> {
        push(&self.log, format!("init {}", self.name));
        Ok(())
    }

    async fn close(&self) -> Result<(), BoxError> {
        push(&self.log, format!("close {}", self.name));
        Ok(())
    }

    fn instructions(&self) -> Vec<String> {
        vec![format!("Rule from {}.", self.name)]
    }

    fn tools(&self) -> Vec<DynTool> {
        let name = format!("{}_tool", self.name.replace('-', "_"));
        let tool = FunctionTool::new(
            &name,
            "Answers ok",
            |_ctx: ToolContext, _args: NoArgs| async { Ok::<_, ToolError>("ok") },
        )
        .unwrap();
        vec![Arc::new(tool)]
    }

    fn before_hooks(&self) -> Vec<Arc<dyn BeforeHook>> {
        vec![Arc::new(Mark(self.log.clone(), self.name))]
    }

    fn callbacks(&self) -> Callbacks {
        let log = self.log.clone();
        let name = self.name;
        Callbacks::new().before_model(move |_inv: &Invocation, _r: &mut Request| {
            push(&log, format!("before_model {name}"));
            Ok(None)
        })
    }
}

fn recorder(name: &'static str, log: &Log) -> Arc<dyn Extension> {
    Arc::new(Recorder {
        name,
        log: log.clone(),
    })
}

fn model_callbacks(log: &Log, label: &'static str) -> Callbacks {
    let log = log.clone();
    Callbacks::new().before_model(move |_inv: &Invocation, _r: &mut Request| {
        push(&log, format!("before_model {label}"));
        Ok(None)
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_extension_adds_its_instruction_tool_hook_and_callbacks_in_the_documented_order() {
    let log: Log = Arc::default();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "first_tool", "{}"),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let extensions = Extensions::init([recorder("first", &log), recorder("second", &log)])
        .await
        .unwrap();
    let own_hook_log = log.clone();
    let agent_log = log.clone();
    let agent = LlmAgent::builder("assistant")
        .instruction("You are the assistant.")
        .model(ext_support::model(server.base_url()))
        .tool(
            FunctionTool::new(
                "own_tool",
                "The agent's own tool",
                |_ctx: ToolContext, _a: NoArgs| async { Ok::<_, ToolError>("own") },
            )
            .unwrap(),
        )
        .configure_executor(move |b| b.before_hook(Mark(own_hook_log, "executor")))
        .callbacks(model_callbacks(&log, "agent").before_tool(Mark(agent_log, "agent")))
        .with_extensions(&extensions)
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent))
        .with_plugin(Plugin::new("plugin").callbacks(model_callbacks(&log, "plugin")));
    let events = runner
        .run("u", "s", "go", RunOptions::new())
        .collect_all()
        .await;
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result } => Some(result.clone()),
            _ => None,
        })
        .expect("a tool result");
    assert!(!result.is_error, "{}", result.content);
    assert_eq!(result.content, "ok");

    let requests = server.requests();
    let system = &requests[0].messages()[0];
    assert_eq!(system["role"], "system");
    assert_eq!(
        system["content"],
        "You are the assistant.\n\nRule from first.\n\nRule from second."
    );
    // The registry lists direct tools by name.
    assert_eq!(
        requests[0].tool_names(),
        ["first_tool", "own_tool", "second_tool"]
    );
    extensions.close().await.unwrap();
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "init first",
            "init second",
            // First model call: plugins, extensions in order, the agent.
            "before_model plugin",
            "before_model first",
            "before_model second",
            "before_model agent",
            // The tool call: the executor's own hook, the extensions' hooks, the agent's.
            "executor:first_tool",
            "first:first_tool",
            "second:first_tool",
            "agent:first_tool",
            "before_model plugin",
            "before_model first",
            "before_model second",
            "before_model agent",
            // Closed in reverse order.
            "close second",
            "close first",
        ]
    );
}

/// An extension whose init or close fails.
struct Failing {
    name: &'static str,
    fail_init: bool,
    fail_close: bool,
    log: Log,
}

#[async_trait]
impl Extension for Failing {
    fn name(&self) -> &str {
        self.name
    }

    async fn init(&self) -> Result<(), BoxError> {
        if self.fail_init {
            return Err("the database is not there".into());
        }
        push(&self.log, format!("init {}", self.name));
        Ok(())
    }

    async fn close(&self) -> Result<(), BoxError> {
        push(&self.log, format!("close {}", self.name));
        if self.fail_close {
            return Err("the socket is gone".into());
        }
        Ok(())
    }
}

fn failing(name: &'static str, fail_init: bool, fail_close: bool, log: &Log) -> Arc<dyn Extension> {
    Arc::new(Failing {
        name,
        fail_init,
        fail_close,
        log: log.clone(),
    })
}

#[tokio::test]
async fn a_failing_init_names_the_extension_and_closes_those_started_before() {
    let log: Log = Arc::default();
    let error = Extensions::init([
        failing("good", false, false, &log),
        failing("memory", true, false, &log),
        failing("never-started", false, false, &log),
    ])
    .await
    .unwrap_err();
    assert!(matches!(&error, ExtensionError::Init { name, .. } if name == "memory"));
    assert_eq!(
        error.to_string(),
        "extension memory: init failed: the database is not there"
    );
    assert_eq!(*log.lock().unwrap(), ["init good", "close good"]);
}

#[tokio::test]
async fn close_runs_for_every_extension_even_when_one_fails() {
    let log: Log = Arc::default();
    let extensions = Extensions::init([
        failing("a", false, true, &log),
        failing("b", false, true, &log),
        failing("c", false, false, &log),
    ])
    .await
    .unwrap();
    let error = extensions.close().await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "extension b: close failed: the socket is gone; extension a: close failed: the socket is gone"
    );
    assert_eq!(
        *log.lock().unwrap(),
        [
            "init a", "init b", "init c", "close c", "close b", "close a"
        ]
    );
    // Closing again does nothing.
    extensions.close().await.unwrap();
    assert_eq!(log.lock().unwrap().len(), 6);
}

#[tokio::test]
async fn two_extensions_with_one_name_are_refused() {
    let log: Log = Arc::default();
    let error = Extensions::init([recorder("same", &log), recorder("same", &log)])
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "extension same is registered twice");
    assert!(log.lock().unwrap().is_empty(), "nothing was started");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_extension_reaches_every_agent_as_a_plugin() {
    let log: Log = Arc::default();
    let server = ScriptedServer::start([Reply::text("hi")]).await.unwrap();
    let extensions = Extensions::init([recorder("house", &log)]).await.unwrap();
    let agent = LlmAgent::builder("assistant")
        .instruction("Be brief.")
        .model(ext_support::model(server.base_url()))
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent))
        .with_extensions(&extensions)
        .unwrap();
    let events = runner
        .run("u", "s", "hello", RunOptions::new())
        .collect_all()
        .await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Error { .. })),
        "{events:?}"
    );
    let request = &server.requests()[0];
    assert_eq!(
        request.messages()[0]["content"],
        "Be brief.\n\nRule from house."
    );
    assert_eq!(request.tool_names(), ["house_tool"]);
    assert_eq!(*log.lock().unwrap(), ["init house", "before_model house"]);
}

/// An extension contributing middleware (which needs an agent's executor).
struct WithMiddleware;

impl Extension for WithMiddleware {
    fn name(&self) -> &str {
        "cache"
    }

    fn middleware(&self) -> Vec<toolbelt_exec::DynMiddleware> {
        vec![Arc::new(toolbelt_exec::ResultCache::new())]
    }
}

#[tokio::test]
async fn middleware_on_a_runner_or_with_a_foreign_executor_is_refused_naming_the_extension() {
    let extensions = Extensions::init([Arc::new(WithMiddleware) as Arc<dyn Extension>])
        .await
        .unwrap();
    let server = ScriptedServer::start([]).await.unwrap();
    let agent = LlmAgent::builder("assistant")
        .model(ext_support::model(server.base_url()))
        .build()
        .unwrap();
    let error = Runner::new("app", Arc::new(agent))
        .with_extensions(&extensions)
        .unwrap_err();
    assert!(error.to_string().contains("extension cache"), "{error}");

    let executor =
        toolbelt_exec::Executor::builder(Arc::new(toolbelt_exec::Registry::new())).build();
    let error = LlmAgent::builder("assistant")
        .model(ext_support::model(server.base_url()))
        .executor(executor)
        .with_extensions(&extensions)
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("extension cache"), "{error}");
}
