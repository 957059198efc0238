//! Tools and probes shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use toolbelt_core::{
    Declaration, DynTool, Tool, ToolContext, ToolError, ToolMeta, ToolOutput, async_trait,
};

type Behaviour =
    dyn Fn(ToolContext, String) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;

/// A tool whose behaviour is a closure over (context, raw arguments).
pub struct TestTool {
    declaration: Declaration,
    behaviour: Arc<Behaviour>,
}

#[async_trait]
impl Tool for TestTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }
    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        (self.behaviour)(ctx, args.to_string()).await
    }
}

/// A tool named `name` with `schema` and `meta`, running `f`.
pub fn tool<F, Fut>(name: &str, schema: Value, meta: ToolMeta, f: F) -> DynTool
where
    F: Fn(ToolContext, String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    let declaration = Declaration::new(name, format!("test tool {name}"))
        .and_then(|d| d.with_input_schema(schema))
        .expect("valid test declaration")
        .with_meta(meta);
    Arc::new(TestTool {
        declaration,
        behaviour: Arc::new(move |ctx, args| Box::pin(f(ctx, args))),
    })
}

/// A schema accepting any object.
pub fn any_object() -> Value {
    json!({"type": "object"})
}

/// A tool that echoes its arguments as text.
pub fn echo(name: &str) -> DynTool {
    tool(
        name,
        any_object(),
        ToolMeta::default(),
        |_, args| async move { Ok(ToolOutput::text(args)) },
    )
}

/// A shared, ordered log of events.
#[derive(Clone, Default)]
pub struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    pub fn push(&self, event: impl Into<String>) {
        self.0.lock().unwrap().push(event.into());
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Counts calls running at once, and the most seen while each call ran.
#[derive(Default)]
pub struct Probe {
    active: AtomicUsize,
    max_overall: AtomicUsize,
    /// (tool name, the most calls active at any point while it ran)
    seen: Mutex<Vec<(String, usize)>>,
    /// tool names in the order they started
    started: Mutex<Vec<String>>,
}

impl Probe {
    /// Runs one probed call: enters, yields a few times so siblings can start, leaves.
    pub async fn run(&self, name: &str) {
        self.started.lock().unwrap().push(name.to_string());
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_overall.fetch_max(now, Ordering::SeqCst);
        let mut most = now;
        for _ in 0..8 {
            tokio::task::yield_now().await;
            most = most.max(self.active.load(Ordering::SeqCst));
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push((name.to_string(), most));
    }

    pub fn max_overall(&self) -> usize {
        self.max_overall.load(Ordering::SeqCst)
    }

    /// The most calls active while `name` ran.
    pub fn seen_by(&self, name: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, m)| *m)
            .unwrap_or_else(|| panic!("{name} never ran"))
    }

    pub fn started(&self) -> Vec<String> {
        self.started.lock().unwrap().clone()
    }
}

/// A probed tool with the given concurrency declaration.
pub fn probed(name: &str, safe: Option<bool>, probe: &Arc<Probe>) -> DynTool {
    let probe = probe.clone();
    let tool_name = name.to_string();
    let meta = ToolMeta {
        concurrency_safe: safe,
        ..ToolMeta::default()
    };
    tool(name, any_object(), meta, move |_, _| {
        let probe = probe.clone();
        let tool_name = tool_name.clone();
        async move {
            probe.run(&tool_name).await;
            Ok(ToolOutput::text(format!("{tool_name} done")))
        }
    })
}

/// An executor over a registry of `tools`, configured by `build`.
pub fn executor_with(
    tools: impl IntoIterator<Item = DynTool>,
    build: impl FnOnce(toolbelt_exec::ExecutorBuilder) -> toolbelt_exec::ExecutorBuilder,
) -> toolbelt_exec::Executor {
    let registry = Arc::new(toolbelt_exec::Registry::new());
    registry.register_all(tools).unwrap();
    build(toolbelt_exec::Executor::builder(registry)).build()
}

/// A tool set named `broken` whose listing always fails (its server is unreachable).
pub struct BrokenSet;

#[async_trait]
impl toolbelt_core::ToolSet for BrokenSet {
    fn name(&self) -> &str {
        "broken"
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Err(ToolError::failed("server not reachable"))
    }
}
