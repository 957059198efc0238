//! Layered registries: an agent's tools over shared tools.

use crate::common;

use std::sync::Arc;

use common::{BrokenSet, Probe, any_object, echo, probed, tool};
use toolbelt_core::{
    Declaration, DynTool, StaticToolSet, ToolContext, ToolError, ToolMeta, ToolOutput, async_trait,
};
use toolbelt_exec::{BatchOptions, ExecutionMode, Executor, Registry, ToolCall, ToolSetRefresh};

/// A tool named `name` that answers `answer`.
fn answering(name: &str, answer: &'static str) -> DynTool {
    tool(
        name,
        any_object(),
        ToolMeta::default(),
        move |_, _| async move { Ok(ToolOutput::text(answer)) },
    )
}

#[tokio::test]
async fn an_own_tool_shadows_the_parents_and_the_parents_others_stay_visible() {
    let ctx = ToolContext::new();
    let parent = Arc::new(Registry::new());
    parent
        .register_all([answering("search", "shared search"), echo("read")])
        .unwrap();
    let agent = Arc::new(Registry::layered(parent.clone()));
    agent
        .register_arc(answering("search", "agent search"))
        .unwrap();

    assert_eq!(agent.tool_names(), ["read", "search"]);
    assert!(agent.contains("read") && agent.get("read").is_some());
    assert_eq!(agent.snapshot(&ctx).await.len(), 2);
    assert_eq!(agent.current().len(), 2);

    let through_agent = Executor::new(agent.clone());
    let through_parent = Executor::new(parent.clone());
    let call = |name: &str| ToolCall::new("c1", name, "{}");
    assert_eq!(
        through_agent
            .execute(ctx.clone(), &call("search"))
            .await
            .model_text(),
        "agent search"
    );
    assert_eq!(
        through_parent
            .execute(ctx.clone(), &call("search"))
            .await
            .model_text(),
        "shared search",
        "the parent is not changed by its layer"
    );
    assert_eq!(
        through_agent
            .execute(ctx.clone(), &call("read"))
            .await
            .model_text(),
        "{}"
    );

    // The parent's later changes show at once; the layer's removal uncovers the parent's.
    parent.register_arc(echo("added_later")).unwrap();
    assert!(agent.contains("added_later"));
    assert!(agent.unregister("search").is_some());
    assert_eq!(
        through_agent
            .execute(ctx.clone(), &call("search"))
            .await
            .model_text(),
        "shared search"
    );
    assert!(agent.tool_set_names().is_empty());
}

fn static_set(name: &str, tools: &[&str]) -> Arc<StaticToolSet> {
    let tools = tools
        .iter()
        .map(|tool| {
            let declaration = Declaration::new(*tool, name).unwrap();
            struct Labeled(Declaration);
            #[async_trait]
            impl toolbelt_core::Tool for Labeled {
                fn declaration(&self) -> &Declaration {
                    &self.0
                }
                async fn call(&self, _: ToolContext, _: &str) -> Result<ToolOutput, ToolError> {
                    Ok(ToolOutput::text(self.0.description.clone()))
                }
            }
            Arc::new(Labeled(declaration)) as DynTool
        })
        .collect();
    Arc::new(StaticToolSet::new(name, tools))
}

#[tokio::test]
async fn a_snapshot_lists_the_sets_of_both_layers_and_reports_both_layers_errors() {
    let ctx = ToolContext::new();
    let parent = Arc::new(Registry::new());
    parent
        .add_tool_set(
            static_set("shared", &["grep", "web"]),
            ToolSetRefresh::Cached,
        )
        .unwrap();
    parent
        .add_tool_set(Arc::new(BrokenSet), ToolSetRefresh::OnRun)
        .unwrap();
    let agent = Registry::layered(parent.clone());
    agent
        .add_tool_set(
            static_set("mine", &["web", "notes"]),
            ToolSetRefresh::Cached,
        )
        .unwrap();

    let snapshot = agent.snapshot(&ctx).await;
    let origins: Vec<(&str, &str)> = snapshot
        .tools()
        .map(|t| (t.name(), t.declaration().description.as_str()))
        .collect();
    assert_eq!(
        origins,
        [("grep", "shared"), ("notes", "mine"), ("web", "mine")],
        "the agent's set shadows the shared web tool"
    );
    assert_eq!(snapshot.errors().len(), 1);
    assert_eq!(snapshot.errors()[0].0, "broken");
    assert!(
        parent.contains("grep"),
        "listing through the layer fills the parent too"
    );
}

#[tokio::test]
async fn a_parent_sets_tool_called_through_a_layer_keeps_its_sets_lane() {
    // Two executors, one over the parent and one over an agent's layer, run the same
    // undeclared tool of one parent set at once: the calls must still take turns.
    let probe = Arc::new(Probe::default());
    let parent = Arc::new(Registry::new());
    let set = StaticToolSet::new("files", vec![probed("edit", None, &probe)]);
    parent
        .add_tool_set(Arc::new(set), ToolSetRefresh::Cached)
        .unwrap();
    parent.snapshot(&ToolContext::new()).await;
    let agent = Arc::new(Registry::layered(parent.clone()));
    let shared = Executor::new(parent);
    let own = Executor::new(agent);
    let calls = [
        ToolCall::new("c1", "edit", "{}"),
        ToolCall::new("c2", "edit", "{}"),
    ];
    let options = BatchOptions::new().mode(ExecutionMode::Parallel);
    let ctx = ToolContext::new();
    let (a, b) = tokio::join!(
        shared.execute_batch(&ctx, &calls, &options),
        own.execute_batch(&ctx, &calls, &options)
    );
    for item in a.iter().chain(&b) {
        assert_eq!(item.as_done().unwrap().model_text(), "edit done");
    }
    assert_eq!(
        probe.max_overall(),
        1,
        "four calls of one set's undeclared tool, one at a time"
    );
}
