//! Permission rules in Claude Code's syntax, decided by the executor before a call runs.
//!
//! The built-in tools on a throwaway folder, with `Bash(touch:*)` allowed, `Bash(rm:*)` and
//! `Read(./secrets)` denied; calls no rule matches fall back to "ask unless read-only", and
//! this program's approver says no to every question. Run with
//! `cargo run -p toolbelt --example permission_rules`.

use std::sync::Arc;

use toolbelt::builtin::permission::{Fallback, PermissionRules};
use toolbelt::builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt::exec::{
    ApprovalDecision, ApprovalRequest, Approver, Executor, Registry, ToolSetRefresh,
};
use toolbelt::{ToolContext, ToolSet};

/// Says no, and shows what it was asked.
struct SaysNo;

#[toolbelt::async_trait]
impl Approver for SaysNo {
    async fn decide(&self, _ctx: &ToolContext, request: &ApprovalRequest<'_>) -> ApprovalDecision {
        println!("  asked about {} ({})", request.tool_name(), request.reason);
        ApprovalDecision::Deny("the user said no".into())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("secrets"))?;
    std::fs::write(dir.path().join("secrets/key.txt"), "needle: a secret\n")?;
    std::fs::write(dir.path().join("notes.txt"), "needle: a note\n")?;

    let rules = PermissionRules::new(dir.path())
        .fallback(Fallback::AskUnlessReadOnly)
        .allow("Bash(touch:*)")?
        .deny("Bash(rm:*)")?
        .deny("Read(./secrets)")?;
    let options = BuiltinOptions::new(dir.path()).with_hidden_paths(rules.hidden_paths());
    let set: Arc<dyn ToolSet> = Arc::new(BuiltinToolSet::new(options)?);
    let registry = Arc::new(Registry::new());
    registry.add_tool_set(set, ToolSetRefresh::Cached)?;
    registry
        .refresh_tool_set(&ToolContext::new(), "builtin")
        .await?;
    let executor = Executor::builder(registry)
        .permissions(Arc::new(rules))
        .approver(Arc::new(SaysNo))
        .build();

    let calls = [
        ("Bash", r#"{"command": "touch made.txt"}"#),
        ("Bash", r#"{"command": "env X=1 sh -c 'rm notes.txt'"}"#),
        ("Bash", r#"{"command": "mkdir build"}"#),
        ("Read", r#"{"file_path": "secrets/key.txt"}"#),
        ("Grep", r#"{"pattern": "needle"}"#),
    ];
    for (tool, arguments) in calls {
        println!("{tool} {arguments}");
        match executor
            .invoke_tool(ToolContext::for_call("call"), tool, arguments)
            .await
        {
            Ok(output) => println!("  ran: {}", output.llm_text().trim()),
            Err(error) => println!("  refused: {error}"),
        }
    }
    assert!(
        dir.path().join("made.txt").exists(),
        "the allowed command ran"
    );
    assert!(
        dir.path().join("notes.txt").exists(),
        "the denied command did not"
    );
    assert!(
        !dir.path().join("build").exists(),
        "the refused question changed nothing"
    );
    Ok(())
}
