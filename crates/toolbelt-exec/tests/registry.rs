//! The registry: registration, tool sets, snapshots, and readers that never wait.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{BrokenSet, any_object, echo, tool};
use toolbelt_core::{Declaration, StaticToolSet};
use toolbelt_core::{
    DynTool, ToolContext, ToolError, ToolFilter, ToolMeta, ToolOutput, ToolSet, async_trait,
};
use toolbelt_exec::{Executor, Registry, RegistryError, ToolSetOptions, ToolSetRefresh};

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

/// A tool named `name` whose description says where it comes from.
fn from(origin: &str, name: &str) -> DynTool {
    struct Labeled(Declaration);
    #[async_trait]
    impl toolbelt_core::Tool for Labeled {
        fn declaration(&self) -> &Declaration {
            &self.0
        }
        async fn call(&self, _ctx: ToolContext, _args: &str) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("called"))
        }
    }
    Arc::new(Labeled(Declaration::new(name, origin).unwrap()))
}

fn static_set(name: &str, tools: &[&str]) -> Arc<StaticToolSet> {
    Arc::new(StaticToolSet::new(
        name,
        tools.iter().map(|tool| from(name, tool)).collect(),
    ))
}

/// Each visible name with the set (description) it comes from.
fn origins(snapshot: &toolbelt_exec::ToolSnapshot) -> Vec<(String, String)> {
    snapshot
        .tools()
        .map(|t| (t.name().to_string(), t.declaration().description.clone()))
        .collect()
}

#[tokio::test]
async fn clash_renaming_follows_registration_order_whatever_order_the_sets_list_in() {
    let ctx = ToolContext::new();
    let mut results = Vec::new();
    for listing_order in [["a", "b"], ["b", "a"]] {
        let registry = Registry::new();
        registry.register_arc(from("direct", "read")).unwrap();
        registry
            .add_tool_set(static_set("a", &["search", "read"]), ToolSetRefresh::Cached)
            .unwrap();
        registry
            .add_tool_set(
                static_set("b", &["search", "fetch"]),
                ToolSetRefresh::Cached,
            )
            .unwrap();
        for set in listing_order {
            registry.refresh_tool_set(&ctx, set).await.unwrap();
        }
        results.push(origins(&registry.current()));
    }
    let expected: Vec<(String, String)> = [
        ("a_read", "a"),
        ("b_search", "b"),
        ("fetch", "b"),
        ("read", "direct"),
        ("search", "a"),
    ]
    .map(|(n, o)| (n.to_string(), o.to_string()))
    .to_vec();
    assert_eq!(results[0], expected);
    assert_eq!(
        results[1], expected,
        "the same names whichever set listed first"
    );
}

#[tokio::test]
async fn a_tool_whose_prefixed_name_is_taken_too_is_left_out_and_reported() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    registry
        .register_all([from("direct", "x"), from("direct", "srv_x")])
        .unwrap();
    registry
        .add_tool_set(static_set("srv", &["x", "y", "y"]), ToolSetRefresh::Cached)
        .unwrap();
    let snapshot = registry.snapshot(&ctx).await;
    assert_eq!(snapshot.names().collect::<Vec<_>>(), ["srv_x", "x", "y"]);
    assert_eq!(
        snapshot.get("srv_x").unwrap().declaration().description,
        "direct"
    );
    let errors: Vec<(String, String)> = snapshot
        .errors()
        .iter()
        .map(|(set, err)| (set.clone(), err.to_string()))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].0, "srv");
    assert!(
        errors[0].1.contains("\"x\"") && errors[0].1.contains("\"srv_x\" is taken"),
        "{}",
        errors[0].1
    );
    assert!(
        errors[1].1.contains("\"y\"") && errors[1].1.contains("twice"),
        "{}",
        errors[1].1
    );
    // The errors stay visible without listing again.
    assert_eq!(registry.current().errors().len(), 2);
}

#[tokio::test]
async fn an_always_prefixed_set_offers_every_tool_under_its_name() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    registry
        .add_tool_set(
            static_set("github", &["search", "issues"]),
            ToolSetOptions::new().always_prefix(true),
        )
        .unwrap();
    registry
        .add_tool_set(static_set("local", &["search"]), ToolSetRefresh::Cached)
        .unwrap();
    let snapshot = registry.snapshot(&ctx).await;
    assert_eq!(
        origins(&snapshot),
        [
            ("github_issues".to_string(), "github".to_string()),
            ("github_search".to_string(), "github".to_string()),
            ("search".to_string(), "local".to_string()),
        ]
    );
    let executor = Executor::new(Arc::new(registry));
    let out = executor
        .invoke_tool(ctx, "github_search", "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "called");
}

/// Lists `hung_tool` once, then never answers again.
struct HangsAfterFirstListing {
    listings: AtomicUsize,
}

#[async_trait]
impl ToolSet for HangsAfterFirstListing {
    fn name(&self) -> &str {
        "hangs"
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        if self.listings.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(vec![echo("hung_tool")])
        } else {
            std::future::pending().await
        }
    }
}

#[tokio::test]
async fn a_set_that_never_answers_times_out_keeps_its_last_listing_and_is_reported() {
    let ctx = ToolContext::new();
    let registry = Registry::new().with_listing_timeout(std::time::Duration::from_millis(200));
    registry
        .add_tool_set(
            Arc::new(HangsAfterFirstListing {
                listings: AtomicUsize::new(0),
            }),
            ToolSetRefresh::OnRun,
        )
        .unwrap();
    registry
        .add_tool_set(counting("fine"), ToolSetRefresh::OnRun)
        .unwrap();
    let first = registry.snapshot(&ctx).await;
    assert_eq!(first.names().collect::<Vec<_>>(), ["dyn_1", "hung_tool"]);
    assert!(first.errors().is_empty());

    // The second listing of `hangs` never ends: the snapshot still does, with the set's
    // last listing, an error entry, and the other set's new listing.
    let second = tokio::time::timeout(std::time::Duration::from_secs(60), registry.snapshot(&ctx))
        .await
        .expect("a hanging set must not stall the snapshot");
    assert_eq!(second.names().collect::<Vec<_>>(), ["dyn_2", "hung_tool"]);
    assert_eq!(second.errors().len(), 1);
    assert_eq!(second.errors()[0].0, "hangs");
    assert!(
        second.errors()[0]
            .1
            .to_string()
            .contains("took longer than 200ms"),
        "{}",
        second.errors()[0].1
    );
}

#[tokio::test]
async fn a_replaced_set_keeps_its_place_in_the_naming_order() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    registry
        .add_tool_set(static_set("first", &["t"]), ToolSetRefresh::Cached)
        .unwrap();
    registry
        .add_tool_set(static_set("second", &["t"]), ToolSetRefresh::Cached)
        .unwrap();
    registry.snapshot(&ctx).await;
    let replacement = Arc::new(StaticToolSet::new("first", vec![from("first, again", "t")]));
    let old = registry.replace_tool_set(replacement, ToolSetRefresh::Cached);
    assert_eq!(old.unwrap().name(), "first");
    assert_eq!(registry.tool_set_names(), ["first", "second"]);
    let snapshot = registry.snapshot(&ctx).await;
    assert_eq!(
        origins(&snapshot),
        [
            ("second_t".to_string(), "second".to_string()),
            ("t".to_string(), "first, again".to_string()),
        ]
    );
    assert!(registry.remove_tool_set("first").is_some());
    assert_eq!(
        origins(&registry.current()),
        [("t".to_string(), "second".to_string())]
    );
    assert!(
        registry
            .replace_tool_set(static_set("third", &[]), ToolSetRefresh::Cached)
            .is_none()
    );
    assert_eq!(registry.tool_set_names(), ["second", "third"]);
}

/// Lists `old_tool` once `release` is notified.
struct SlowSet {
    started: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl ToolSet for SlowSet {
    fn name(&self) -> &str {
        "srv"
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        self.started.notify_one();
        self.release.notified().await;
        Ok(vec![echo("old_tool")])
    }
}

#[tokio::test]
async fn a_listing_that_ends_after_its_set_was_replaced_is_not_stored() {
    let ctx = ToolContext::new();
    let registry = Registry::new();
    let started = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let slow = SlowSet {
        started: started.clone(),
        release: release.clone(),
    };
    registry
        .add_tool_set(Arc::new(slow), ToolSetRefresh::Cached)
        .unwrap();
    let listing = registry.snapshot(&ctx);
    let meanwhile = async {
        started.notified().await;
        // The old set's listing is under way: replace the set by one of the same name.
        let replacement = Arc::new(StaticToolSet::new("srv", vec![echo("new_tool")]));
        registry.replace_tool_set(replacement, ToolSetRefresh::Cached);
        release.notify_one();
    };
    let (stale, ()) = tokio::join!(listing, meanwhile);
    assert!(stale.get("old_tool").is_none(), "{stale:?}");
    assert!(
        !registry.contains("old_tool"),
        "the old set's late listing was dropped"
    );
    let fresh = registry.snapshot(&ctx).await;
    assert_eq!(fresh.names().collect::<Vec<_>>(), ["new_tool"]);
}

/// Lists one tool only once every set sharing `barrier` is listing too.
struct WaitsForTheOthers {
    name: &'static str,
    barrier: Arc<tokio::sync::Barrier>,
}

#[async_trait]
impl ToolSet for WaitsForTheOthers {
    fn name(&self) -> &str {
        self.name
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        self.barrier.wait().await;
        Ok(vec![echo(&format!("{}_tool", self.name))])
    }
}

#[tokio::test]
async fn a_snapshot_lists_the_sets_concurrently() {
    // Each set answers only once all three are being listed: listed one after another,
    // the first would wait until its listing timed out.
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let registry = Registry::new().with_listing_timeout(std::time::Duration::from_secs(30));
    for name in ["one", "two", "three"] {
        let set = WaitsForTheOthers {
            name,
            barrier: barrier.clone(),
        };
        registry
            .add_tool_set(Arc::new(set), ToolSetRefresh::Cached)
            .unwrap();
    }
    let snapshot = registry.snapshot(&ToolContext::new()).await;
    assert!(snapshot.errors().is_empty(), "{:?}", snapshot.errors());
    assert_eq!(
        snapshot.names().collect::<Vec<_>>(),
        ["one_tool", "three_tool", "two_tool"]
    );
}
