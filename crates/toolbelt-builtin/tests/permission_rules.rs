//! Permission rules through the executor, as every front end runs them: a Read deny on a
//! folder refuses Read there and keeps Grep and Glob (both backends) out of it; Bash rules
//! decide before the command runs; an approver sees what was asked and may edit the call.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;
use toolbelt_builtin::permission::{Fallback, PermissionRules};
use toolbelt_builtin::search::{ExternalSearch, LocalSearch};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{ToolContext, ToolError, ToolSet};
use toolbelt_exec::{
    ApprovalDecision, ApprovalRequest, Approver, Executor, Registry, ToolSetRefresh,
};

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("secrets/deep")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("secrets/deep/key.txt"), "needle in the secrets\n").unwrap();
    std::fs::write(root.join("secrets/top.txt"), "needle on top\n").unwrap();
    std::fs::write(root.join("src/lib.txt"), "needle in src\n").unwrap();
    std::fs::write(root.join(".env"), "needle=token\n").unwrap();
    std::fs::write(root.join("src/.env"), "needle=token\n").unwrap();
    dir
}

async fn executor(
    root: &Path,
    rules: PermissionRules,
    external: bool,
    approver: Option<Arc<dyn Approver>>,
) -> Executor {
    let backend: toolbelt_builtin::search::DynSearchBackend = if external {
        Arc::new(
            ExternalSearch::detect(root).expect("rg and fd must be installed (.ci/install-peers)"),
        )
    } else {
        Arc::new(LocalSearch::new(root).unwrap())
    };
    let options = BuiltinOptions::new(root)
        .with_search_backend(backend)
        .with_hidden_paths(rules.hidden_paths());
    let set: Arc<dyn ToolSet> = Arc::new(BuiltinToolSet::new(options).unwrap());
    let registry = Arc::new(Registry::new());
    registry.add_tool_set(set, ToolSetRefresh::Cached).unwrap();
    registry
        .refresh_tool_set(&ToolContext::new(), "builtin")
        .await
        .unwrap();
    let mut builder = Executor::builder(registry).permissions(Arc::new(rules));
    if let Some(approver) = approver {
        builder = builder.approver(approver);
    }
    builder.build()
}

async fn text(
    executor: &Executor,
    tool: &str,
    args: serde_json::Value,
) -> Result<String, ToolError> {
    executor
        .invoke_tool(ToolContext::for_call("c1"), tool, &args.to_string())
        .await
        .map(|out| out.llm_text())
}

fn secret_rules(root: &Path) -> PermissionRules {
    PermissionRules::new(root)
        .fallback(Fallback::AskUnlessReadOnly)
        .deny("Read(./secrets)")
        .unwrap()
        .deny("Read(.env)")
        .unwrap()
}

#[tokio::test]
async fn a_read_deny_keeps_read_grep_and_glob_out_with_both_backends() {
    let dir = tree();
    let root = dir.path();
    for external in [false, true] {
        let exec = executor(root, secret_rules(root), external, None).await;
        let error = text(&exec, "Read", json!({"file_path": "secrets/top.txt"}))
            .await
            .unwrap_err();
        assert!(matches!(error, ToolError::Rejected { .. }), "{error:?}");
        assert!(error.to_string().contains("Read(./secrets)"), "{error}");

        let found = text(&exec, "Grep", json!({"pattern": "needle"}))
            .await
            .unwrap();
        assert_eq!(
            found.lines().filter(|l| l.ends_with(".txt")).count(),
            1,
            "{found}"
        );
        assert!(
            found.contains("src/lib.txt"),
            "external={external}: {found}"
        );
        assert!(
            !found.contains("secret") && !found.contains(".env"),
            "external={external}: {found}"
        );

        let content = text(
            &exec,
            "Grep",
            json!({"pattern": "needle", "output_mode": "content"}),
        )
        .await
        .unwrap();
        assert!(
            !content.contains("secrets") && !content.contains("token"),
            "{content}"
        );

        let listed = text(&exec, "Glob", json!({"pattern": "**/*"}))
            .await
            .unwrap();
        assert!(listed.contains("src/lib.txt"), "{listed}");
        assert!(
            !listed.contains("secrets") && !listed.contains(".env"),
            "external={external}: {listed}"
        );

        // A search rooted inside the denied folder is refused outright.
        let error = text(
            &exec,
            "Grep",
            json!({"pattern": "needle", "path": "secrets/deep"}),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, ToolError::Rejected { .. }), "{error:?}");
    }
}

#[tokio::test]
async fn bash_rules_decide_before_the_command_runs() {
    let dir = tree();
    let root = dir.path();
    let rules = PermissionRules::new(root)
        .allow("Bash(touch:*)")
        .unwrap()
        .deny("Bash(rm:*)")
        .unwrap();
    let exec = executor(root, rules, false, None).await;
    text(&exec, "Bash", json!({"command": "touch made"}))
        .await
        .unwrap();
    assert!(root.join("made").exists());
    let error = text(&exec, "Bash", json!({"command": "env X=1 sh -c 'rm made'"}))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("Bash(rm:*)"), "{error}");
    assert!(root.join("made").exists(), "a denied command never runs");
    // No allow rule and nobody to ask: refused, and the model reads why.
    let error = text(&exec, "Bash", json!({"command": "mkdir other"}))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("nobody could be asked"),
        "{error}"
    );
    assert!(!root.join("other").exists());
}

/// Records what it was asked and answers from a script.
struct Scripted {
    asked: Mutex<Vec<(String, String, String)>>,
    answer: ApprovalDecision,
}

#[toolbelt_core::async_trait]
impl Approver for Scripted {
    async fn decide(&self, _ctx: &ToolContext, request: &ApprovalRequest<'_>) -> ApprovalDecision {
        self.asked.lock().unwrap().push((
            request.tool_name().to_string(),
            request.arguments.to_string(),
            request.reason.to_string(),
        ));
        self.answer.clone()
    }
}

#[tokio::test]
async fn an_approver_decides_what_the_rules_ask_about() {
    let dir = tree();
    let root = dir.path();
    let rules = || {
        PermissionRules::new(root)
            .ask("Bash(git push:*)")
            .unwrap()
            .allow("Bash(touch:*)")
            .unwrap()
    };

    let edit = Arc::new(Scripted {
        asked: Mutex::default(),
        answer: ApprovalDecision::ApproveWith(json!({"command": "touch edited"}).to_string()),
    });
    let exec = executor(root, rules(), false, Some(edit.clone())).await;
    text(&exec, "Bash", json!({"command": "git push"}))
        .await
        .unwrap();
    assert!(root.join("edited").exists(), "the edited call ran");
    let asked = edit.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, "Bash");
    assert!(asked[0].1.contains("git push"));
    assert!(asked[0].2.contains("Bash(git push:*)"), "{}", asked[0].2);
    // Allowed calls are not asked about.
    text(&exec, "Bash", json!({"command": "touch quiet"}))
        .await
        .unwrap();
    assert_eq!(edit.asked.lock().unwrap().len(), 1);

    // Edited arguments are validated like the model's.
    let bad = Arc::new(Scripted {
        asked: Mutex::default(),
        answer: ApprovalDecision::ApproveWith(json!({"command": 5}).to_string()),
    });
    let exec = executor(root, rules(), false, Some(bad)).await;
    let error = text(&exec, "Bash", json!({"command": "git push"}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ToolError::SchemaViolation { .. } | ToolError::InvalidArguments { .. }
        ),
        "{error:?}"
    );

    let deny = Arc::new(Scripted {
        asked: Mutex::default(),
        answer: ApprovalDecision::Deny("not today".into()),
    });
    let exec = executor(root, rules(), false, Some(deny)).await;
    let error = text(&exec, "Bash", json!({"command": "git push"}))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("not today"), "{error}");
}

/// A run that can pause (an agent run with nobody to ask now) gets the call back as
/// awaiting approval, with the diff a person decides on, and the file untouched; once the
/// call's id is approved it runs, and a deny rule still wins over an approval.
#[tokio::test]
async fn a_pausing_run_gets_the_edit_back_with_its_diff_and_runs_it_once_approved() {
    let dir = tree();
    let root = dir.path();
    let rules = secret_rules(root).deny("Bash(rm:*)").unwrap();
    let executor = executor(root, rules, false, None).await;
    let edit = json!({"file_path": "src/lib.txt", "old_string": "needle", "new_string": "pin"});
    let run = |approvals: toolbelt_exec::RunApprovals| {
        ToolContext::for_call("c1").with_extension(approvals)
    };
    let paused = executor
        .invoke_tool(
            run(toolbelt_exec::RunApprovals::pausing()),
            "Edit",
            &edit.to_string(),
        )
        .await;
    match paused {
        Err(ToolError::AwaitingApproval { reason, preview }) => {
            assert!(reason.contains("Edit may change files"), "{reason}");
            let preview = preview.expect("an Edit has a diff to show");
            assert!(
                preview.contains("-needle in src\n+pin in src\n"),
                "{preview}"
            );
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    let untouched = std::fs::read_to_string(root.join("src/lib.txt")).unwrap();
    assert_eq!(untouched, "needle in src\n");

    text(&executor, "Read", json!({"file_path": "src/lib.txt"}))
        .await
        .unwrap();
    let approved = toolbelt_exec::RunApprovals::pausing().approve("c1");
    let output = executor
        .invoke_tool(run(approved.clone()), "Edit", &edit.to_string())
        .await
        .expect("the approved call runs");
    assert!(!output.is_error, "{}", output.llm_text());
    let edited = std::fs::read_to_string(root.join("src/lib.txt")).unwrap();
    assert_eq!(edited, "pin in src\n");

    let denied = executor
        .invoke_tool(
            run(approved),
            "Bash",
            &json!({"command": "rm -rf src"}).to_string(),
        )
        .await;
    assert!(
        matches!(&denied, Err(ToolError::Rejected { reason }) if reason.contains("Bash(rm:*)")),
        "{denied:?}"
    );
    assert!(root.join("src").exists());
}
