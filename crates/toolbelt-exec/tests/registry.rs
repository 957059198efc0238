//! The registry: registration, tool sets, snapshots, and readers that never wait.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{any_object, echo, tool};
use toolbelt_core::{
    DynTool, ToolContext, ToolError, ToolFilter, ToolMeta, ToolOutput, ToolSet, async_trait,
};
use toolbelt_exec::{Executor, Registry, RegistryError, ToolSetRefresh};

#[test]
fn names_are_sorted_and_duplicates_are_refused_unless_replacing() {
    let registry = Registry::new();
    registry.register_arc(echo("write")).unwrap();
    registry.register_arc(echo("Read")).unwrap();
    registry.register_arc(echo("grep")).unwrap();
    assert_eq!(registry.tool_names(), ["Read", "grep", "write"]);
    assert_eq!(
        registry.register_arc(echo("grep")),
        Err(RegistryError::DuplicateTool("grep".into()))
    );
    // register_all is all or nothing.
    assert!(
        registry
            .register_all([echo("new_one"), echo("Read")])
            .is_err()
    );
    assert!(!registry.contains("new_one"));

    let old = registry
        .replace(echo("grep"))
        .expect("replaced the old grep");
    assert_eq!(old.name(), "grep");
    assert!(registry.unregister("grep").is_some());
    assert!(registry.unregister("grep").is_none());
    assert_eq!(registry.tool_names(), ["Read", "write"]);
    assert!(registry.get("Read").is_some());
    assert!(registry.get("grep").is_none());
}

/// A set whose listing changes every time: `dyn_1`, then `dyn_2`, ...
struct CountingSet {
    name: &'static str,
    listings: AtomicUsize,
}

#[async_trait]
impl ToolSet for CountingSet {
    fn name(&self) -> &str {
        self.name
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        let n = self.listings.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(vec![echo(&format!("dyn_{n}"))])
    }
}

fn counting(name: &'static str) -> Arc<CountingSet> {
    Arc::new(CountingSet {
        name,
        listings: AtomicUsize::new(0),
    })
}

#[tokio::test]
async fn cached_tool_sets_are_listed_once_and_on_run_sets_every_snapshot() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    let cached = counting("cached");
    registry
        .add_tool_set(cached.clone(), ToolSetRefresh::Cached)
        .unwrap();
    assert_eq!(
        registry.snapshot(&ctx).await.names().collect::<Vec<_>>(),
        ["dyn_1"]
    );
    assert_eq!(
        registry.snapshot(&ctx).await.names().collect::<Vec<_>>(),
        ["dyn_1"]
    );
    assert_eq!(cached.listings.load(Ordering::SeqCst), 1);
    // An explicit refresh re-lists.
    assert_eq!(registry.refresh_tool_set(&ctx, "cached").await.unwrap(), 1);
    assert_eq!(registry.tool_names(), ["dyn_2"]);

    let registry = Registry::new();
    let live = counting("live");
    registry
        .add_tool_set(live.clone(), ToolSetRefresh::OnRun)
        .unwrap();
    assert_eq!(
        registry.snapshot(&ctx).await.names().collect::<Vec<_>>(),
        ["dyn_1"]
    );
    assert_eq!(
        registry.snapshot(&ctx).await.names().collect::<Vec<_>>(),
        ["dyn_2"]
    );
    assert_eq!(live.listings.load(Ordering::SeqCst), 2);
    // The latest listing is what the executor can call.
    let executor = Executor::new(Arc::new(registry));
    assert!(
        executor
            .invoke_tool(ctx.clone(), "dyn_2", "{}")
            .await
            .is_ok()
    );
    assert!(
        executor
            .invoke_tool(ctx.clone(), "dyn_1", "{}")
            .await
            .is_err()
    );
}

#[tokio::test]
async fn set_tools_whose_names_are_taken_get_the_set_name_as_prefix() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    registry.register_arc(echo("dyn_1")).unwrap();
    registry
        .add_tool_set(counting("srv"), ToolSetRefresh::Cached)
        .unwrap();
    let snapshot = registry.snapshot(&ctx).await;
    assert_eq!(snapshot.names().collect::<Vec<_>>(), ["dyn_1", "srv_dyn_1"]);
    assert_eq!(
        snapshot.get("srv_dyn_1").unwrap().declaration().name,
        "srv_dyn_1"
    );
    let executor = Executor::new(Arc::new(registry));
    let out = executor
        .invoke_tool(ctx, "srv_dyn_1", r#"{"x":1}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), r#"{"x":1}"#);
}

struct BrokenSet;

#[async_trait]
impl ToolSet for BrokenSet {
    fn name(&self) -> &str {
        "broken"
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Err(ToolError::failed("server not reachable"))
    }
}

#[tokio::test]
async fn a_set_that_fails_to_list_is_reported_and_the_rest_stays_usable() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    registry.register_arc(echo("echo")).unwrap();
    registry
        .add_tool_set(Arc::new(BrokenSet), ToolSetRefresh::OnRun)
        .unwrap();
    assert!(matches!(
        registry.add_tool_set(Arc::new(BrokenSet), ToolSetRefresh::OnRun),
        Err(RegistryError::DuplicateToolSet(_))
    ));
    let snapshot = registry.snapshot(&ctx).await;
    assert_eq!(snapshot.names().collect::<Vec<_>>(), ["echo"]);
    assert_eq!(snapshot.errors().len(), 1);
    assert_eq!(snapshot.errors()[0].0, "broken");
    assert_eq!(registry.tool_set_names(), ["broken"]);
    assert!(registry.remove_tool_set("broken").is_some());
    assert!(registry.snapshot(&ctx).await.errors().is_empty());
}

#[tokio::test]
async fn snapshots_are_filtered_per_run_and_list_declarations_sorted() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    registry
        .register_all(["Write", "Bash", "Read", "Grep"].map(echo))
        .unwrap();
    let snapshot = registry.snapshot(&ctx).await;
    let read_only = snapshot.filtered(
        &ctx,
        &ToolFilter::include_names(["Read", "Grep", "Bash"])
            .and(ToolFilter::exclude_names(["Bash"])),
    );
    let names: Vec<String> = read_only
        .declarations()
        .into_iter()
        .map(|d| d.name.to_string())
        .collect();
    assert_eq!(names, ["Grep", "Read"]);
    assert_eq!(snapshot.len(), 4, "filtering makes a new snapshot");
}

#[tokio::test]
async fn a_long_call_never_blocks_readers_or_writers_and_keeps_its_tool() {
    let release = Arc::new(tokio::sync::Notify::new());
    let started = Arc::new(tokio::sync::Notify::new());
    let long = {
        let release = release.clone();
        let started = started.clone();
        tool("long", any_object(), ToolMeta::default(), move |_, _| {
            let release = release.clone();
            let started = started.clone();
            async move {
                started.notify_one();
                release.notified().await;
                Ok(ToolOutput::text("long done"))
            }
        })
    };
    let registry = Arc::new(Registry::new());
    registry.register_arc(long).unwrap();
    let executor = Executor::new(registry.clone());

    let call = executor.invoke_tool(ToolContext::new(), "long", "{}");
    let meanwhile = async {
        started.notified().await;
        // The call is in progress: every registry operation still completes.
        registry.register_arc(echo("added_meanwhile")).unwrap();
        assert!(registry.get("long").is_some());
        assert!(registry.unregister("long").is_some());
        assert_eq!(registry.snapshot(&ToolContext::new()).await.len(), 1);
        release.notify_one();
    };
    let (result, ()) = tokio::join!(call, meanwhile);
    assert_eq!(
        result.unwrap().llm_text(),
        "long done",
        "the running call kept its tool"
    );
    assert!(
        executor
            .invoke_tool(ToolContext::new(), "long", "{}")
            .await
            .is_err()
    );
}

#[tokio::test]
async fn concurrent_registrations_from_many_threads_are_all_kept() {
    let registry = Arc::new(Registry::new());
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let registry = registry.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    registry.register_arc(echo(&format!("t{t}_{i}"))).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(registry.tool_names().len(), 200);
}
