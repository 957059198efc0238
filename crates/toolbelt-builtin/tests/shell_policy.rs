//! The command policy, applied by the Bash tool.

mod shell_support;

use serde_json::json;
use shell_support::*;
use toolbelt_builtin::shell::{CommandPolicy, ShellConfig, ShellTools};
use toolbelt_core::ToolError;

fn shell_with(dir: &std::path::Path, policy: CommandPolicy) -> ShellTools {
    ShellTools::new(ShellConfig::new(dir).policy(policy)).unwrap()
}

#[tokio::test]
async fn a_denied_command_later_in_a_chain_stops_the_whole_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), "x").unwrap();
    let shell = shell_with(dir.path(), CommandPolicy::new().deny("rm"));
    let err = call(
        &tool(&shell, "Bash"),
        json!({"command": "echo hi > made.txt && ls | grep keep && rm keep.txt"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ToolError::Rejected { .. }), "{err}");
    assert!(err.to_string().contains("\"rm keep.txt\""), "{err}");
    assert!(dir.path().join("keep.txt").exists());
    assert!(
        !dir.path().join("made.txt").exists(),
        "nothing of the line may run"
    );
}

#[tokio::test]
async fn commands_inside_substitutions_and_wrappers_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_with(
        dir.path(),
        CommandPolicy::new().deny("curl").deny("git push"),
    );
    let bash = tool(&shell, "Bash");
    for line in [
        "echo \"$(curl -s x)\"",
        "echo `curl x`",
        "find . | xargs curl",
        "bash -c 'git status; git push'",
        "(cd sub; git push origin main)",
    ] {
        let err = call(&bash, json!({"command": line})).await.unwrap_err();
        assert!(matches!(err, ToolError::Rejected { .. }), "{line}: {err}");
    }
    let ok = call(
        &bash,
        json!({"command": "echo 'git push' | cat && echo \"curl\""}),
    )
    .await
    .unwrap();
    assert_eq!(ok.llm_text(), "git push\ncurl\nExit code: 0");
}

#[tokio::test]
async fn an_allow_list_admits_only_chains_of_allowed_commands() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_with(dir.path(), CommandPolicy::new().allow("echo").allow("wc"));
    let bash = tool(&shell, "Bash");
    let ok = call(&bash, json!({"command": "echo a b | wc -w"}))
        .await
        .unwrap();
    assert!(ok.llm_text().starts_with('2'), "{}", ok.llm_text());
    let err = call(&bash, json!({"command": "echo a | sort"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("\"sort\" is not in the allowed commands (echo, wc)"),
        "{err}"
    );
}

#[tokio::test]
async fn with_a_policy_unparsable_commands_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_with(dir.path(), CommandPolicy::new().deny("rm"));
    let bash = tool(&shell, "Bash");
    for line in ["cat <<EOF\nx\nEOF", "$TOOL -rf /", "echo 'open"] {
        let err = call(&bash, json!({"command": line})).await.unwrap_err();
        assert!(
            err.to_string().contains("cannot check this command"),
            "{line}: {err}"
        );
    }
}

#[tokio::test]
async fn without_a_policy_anything_parses_or_not_runs() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let out = call(
        &tool(&shell, "Bash"),
        json!({"command": "cat <<EOF\nheredoc\nEOF"}),
    )
    .await
    .unwrap();
    assert_eq!(out.llm_text(), "heredoc\nExit code: 0");
}
