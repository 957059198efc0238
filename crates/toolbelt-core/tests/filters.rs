//! Filters on lists of tools and on tool sets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use toolbelt_core::{
    DynTool, DynToolSet, FunctionTool, StaticToolSet, Tool, ToolContext, ToolError, ToolFilter,
    ToolSet, ToolSetExt,
};

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

fn tool(name: &str, read_only: bool) -> DynTool {
    let t = FunctionTool::new(name, "test tool", |_ctx, _a: NoArgs| async move {
        Ok::<_, ToolError>("ok".to_string())
    })
    .unwrap();
    let t = if read_only {
        t.map_declaration(|d| d.read_only())
    } else {
        t
    };
    Arc::new(t)
}

fn names(tools: &[DynTool]) -> Vec<&str> {
    tools.iter().map(|t| t.name()).collect()
}

fn all() -> Vec<DynTool> {
    vec![
        tool("Read", true),
        tool("Write", false),
        tool("Grep", true),
        tool("Bash", false),
    ]
}

struct User(&'static str);

#[test]
fn include_and_exclude_by_name_keep_order() {
    let ctx = ToolContext::new();
    let inc = ToolFilter::include_names(["Grep", "Read", "missing"]);
    assert_eq!(names(&inc.apply(&ctx, all())), ["Read", "Grep"]);
    let exc = ToolFilter::exclude_names(["Write"]);
    assert_eq!(names(&exc.apply(&ctx, all())), ["Read", "Grep", "Bash"]);
}

#[test]
fn predicates_see_the_context_and_the_tool() {
    let read_only = ToolFilter::new(|_ctx, t: &dyn Tool| t.declaration().meta.is_read_only());
    let admin_only_bash = ToolFilter::new(|ctx, t: &dyn Tool| {
        t.name() != "Bash" || ctx.get::<User>().is_some_and(|u| u.0 == "admin")
    });
    let guest = ToolContext::new().with_extension(User("guest"));
    let admin = ToolContext::new().with_extension(User("admin"));
    assert_eq!(names(&read_only.apply(&guest, all())), ["Read", "Grep"]);
    assert_eq!(
        names(&admin_only_bash.apply(&guest, all())),
        ["Read", "Write", "Grep"]
    );
    assert_eq!(
        names(&admin_only_bash.apply(&admin, all())),
        ["Read", "Write", "Grep", "Bash"]
    );
}

#[test]
fn filters_compose_with_and_or_not() {
    let ctx = ToolContext::new();
    let read_only = || ToolFilter::new(|_ctx, t: &dyn Tool| t.declaration().meta.is_read_only());
    let bash = || ToolFilter::include_names(["Bash"]);
    assert_eq!(
        names(&read_only().or(bash()).apply(&ctx, all())),
        ["Read", "Grep", "Bash"]
    );
    assert_eq!(
        names(
            &read_only()
                .and(ToolFilter::exclude_names(["Grep"]))
                .apply(&ctx, all())
        ),
        ["Read"]
    );
    assert_eq!(
        names(&read_only().not().apply(&ctx, all())),
        ["Write", "Bash"]
    );
    assert_eq!(names(&ToolFilter::allow_all().apply(&ctx, all())).len(), 4);
}

/// A set that records whether it was closed, standing in for one that holds resources.
struct Closable {
    inner: StaticToolSet,
    closed: Arc<AtomicBool>,
}

#[async_trait]
impl ToolSet for Closable {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        self.inner.tools(ctx).await
    }
    async fn close(&self) -> Result<(), ToolError> {
        self.closed.store(true, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn a_filtered_tool_set_is_a_tool_set_that_shows_only_allowed_tools() {
    let closed = Arc::new(AtomicBool::new(false));
    let set = Closable {
        inner: StaticToolSet::new("builtin", all()),
        closed: closed.clone(),
    };
    let view: DynToolSet = Arc::new(set.filtered(ToolFilter::exclude_names(["Bash", "Write"])));
    assert_eq!(view.name(), "builtin");
    let tools = view.tools(&ToolContext::new()).await.unwrap();
    assert_eq!(names(&tools), ["Read", "Grep"]);
    // Views nest.
    let narrower = view.clone().filtered(ToolFilter::include_names(["Grep"]));
    assert_eq!(
        names(&narrower.tools(&ToolContext::new()).await.unwrap()),
        ["Grep"]
    );
    // The view owns the set it wraps: closing it closes the set.
    assert!(!closed.load(Ordering::SeqCst));
    view.close().await.unwrap();
    assert!(closed.load(Ordering::SeqCst));
}
