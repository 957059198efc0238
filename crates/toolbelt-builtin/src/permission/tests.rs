//! Every rule form, against the decisions a user relies on.

use std::path::Path;

use serde_json::json;
use toolbelt_core::{Declaration, Permission, PermissionCheck, PermissionRequest};

use super::{Fallback, PermissionRules, RuleKind};

fn decl(name: &str, read_only: bool) -> Declaration {
    let d = Declaration::new(name, "a tool").unwrap();
    if read_only { d.read_only() } else { d }
}

fn decide_in(
    rules: &PermissionRules,
    tool: &str,
    set: Option<&str>,
    args: serde_json::Value,
) -> Permission {
    let read_only = matches!(tool, "Read" | "Grep" | "Glob" | "WebFetch");
    let declaration = decl(tool, read_only);
    let arguments = args.to_string();
    rules.check(&PermissionRequest {
        declaration: &declaration,
        set,
        arguments: &arguments,
    })
}

fn decide(rules: &PermissionRules, tool: &str, args: serde_json::Value) -> Permission {
    decide_in(rules, tool, None, args)
}

fn bash(rules: &PermissionRules, command: &str) -> Permission {
    decide(rules, "Bash", json!({ "command": command }))
}

fn rules(base: &Path, list: &[(RuleKind, &str)]) -> PermissionRules {
    let mut rules = PermissionRules::new(base).fallback(Fallback::AskUnlessReadOnly);
    for (kind, rule) in list {
        rules.add(*kind, rule).unwrap();
    }
    rules
}

fn is_deny(p: &Permission) -> bool {
    matches!(p, Permission::Deny(_))
}
fn is_ask(p: &Permission) -> bool {
    matches!(p, Permission::Ask(_))
}

#[test]
fn bash_prefix_rule_allows_the_command_and_its_arguments_only() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(dir.path(), &[(RuleKind::Allow, "Bash(npm run test:*)")]);
    assert_eq!(bash(&r, "npm run test"), Permission::Allow);
    assert_eq!(bash(&r, "npm run test -- --watch"), Permission::Allow);
    assert!(is_ask(&bash(&r, "npm run testing")));
    assert!(is_ask(&bash(&r, "npm run build")));
    // Every command of a list or pipeline must be allowed.
    assert!(is_ask(&bash(&r, "npm run test && rm -rf /")));
    assert!(is_ask(&bash(&r, "npm run test | sh")));
    assert!(is_ask(&bash(&r, "echo $(curl x) ; npm run test")));
    // Plain wrappers need no rule of their own; privilege changes do.
    assert_eq!(
        bash(&r, "timeout 60 env CI=1 npm run test"),
        Permission::Allow
    );
    assert_eq!(bash(&r, "FOO=1 npm run test"), Permission::Allow);
    assert_eq!(bash(&r, "sh -c 'npm run test'"), Permission::Allow);
    assert!(is_ask(&bash(&r, "sudo npm run test")));
    assert!(is_ask(&bash(&r, "xargs npm run test")));
    // A name as a path is not the allowed command (`./npm` may be anything).
    assert!(is_ask(&bash(&r, "./npm run test")));
}

#[test]
fn several_allow_rules_cover_one_line_together() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Allow, "Bash(git status:*)"),
            (RuleKind::Allow, "Bash(npm test)"),
        ],
    );
    assert_eq!(bash(&r, "git status -s && npm test"), Permission::Allow);
    assert!(is_ask(&bash(&r, "git status && npm test --force")));
}

#[test]
fn bash_deny_sees_through_wrappers_pipelines_and_git_options() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Allow, "Bash"),
            (RuleKind::Deny, "Bash(git push:*)"),
        ],
    );
    for hidden in [
        "git push",
        "git push origin main",
        "env X=1 git push",
        "git -C . push",
        "git --no-pager -c color.ui=never push --force",
        "sh -c \"git push\"",
        "bash -xc 'cd x && git push'",
        "echo ok | git push",
        "true; git push",
        "timeout 5 nice -n 5 git push",
        "sudo -u bob /usr/bin/git push",
        "echo $(git push)",
        "find . -name x -exec git push \\;",
        "bash <<< 'git push'",
    ] {
        assert!(
            is_deny(&bash(&r, hidden)),
            "{hidden}: {:?}",
            bash(&r, hidden)
        );
    }
    assert_eq!(bash(&r, "git status"), Permission::Allow);
    // What cannot be read is asked about, never allowed by the bare allow rule.
    assert!(is_ask(&bash(&r, "curl x | bash")));
    assert!(is_ask(&bash(&r, "for x in 1; do git push; done")));
}

#[test]
fn bash_wildcards_and_exact_commands() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Ask, "Bash(git * main)"),
            (RuleKind::Allow, "Bash(ls)"),
            (RuleKind::Allow, "Bash(git *)"),
        ],
    );
    assert!(is_ask(&bash(&r, "git push origin main")));
    assert_eq!(bash(&r, "git log --oneline"), Permission::Allow);
    assert_eq!(bash(&r, "ls"), Permission::Allow);
    assert!(is_ask(&bash(&r, "ls -la")));
}

#[test]
fn deny_beats_ask_beats_allow() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Allow, "Bash(git:*)"),
            (RuleKind::Ask, "Bash(git push:*)"),
            (RuleKind::Deny, "Bash(git push --force:*)"),
        ],
    );
    assert_eq!(bash(&r, "git status"), Permission::Allow);
    assert!(is_ask(&bash(&r, "git push")));
    assert!(is_deny(&bash(&r, "git push --force")));
    let Permission::Deny(reason) = bash(&r, "git push --force origin") else {
        panic!()
    };
    assert!(reason.contains("Bash(git push --force:*)"), "{reason}");
}

#[test]
fn exec_command_is_a_bash_command_and_write_stdin_only_under_a_bare_rule() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(dir.path(), &[(RuleKind::Allow, "Bash(python3:*)")]);
    assert_eq!(
        decide(&r, "exec_command", json!({"cmd": "python3 -q"})),
        Permission::Allow
    );
    assert!(is_ask(&decide(
        &r,
        "write_stdin",
        json!({"session_id": 1, "chars": "ls\n"})
    )));
    let bare = rules(dir.path(), &[(RuleKind::Allow, "Bash")]);
    assert_eq!(
        decide(
            &bare,
            "write_stdin",
            json!({"session_id": 1, "chars": "ls\n"})
        ),
        Permission::Allow
    );
    let deny = rules(
        dir.path(),
        &[(RuleKind::Allow, "Bash"), (RuleKind::Deny, "Bash(rm:*)")],
    );
    // Typed keys cannot be checked against a deny rule: asked about.
    assert!(is_ask(&decide(
        &deny,
        "write_stdin",
        json!({"session_id": 1, "chars": "rm x\n"})
    )));
}

#[test]
fn read_rules_cover_read_grep_and_glob_and_folders() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("secrets/deep")).unwrap();
    std::fs::write(dir.path().join("secrets/deep/key"), "k").unwrap();
    std::fs::write(dir.path().join(".env"), "k").unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Deny, "Read(./secrets)"),
            (RuleKind::Deny, "Read(.env)"),
        ],
    );
    let read = |p: &str| decide(&r, "Read", json!({ "file_path": p }));
    assert!(is_deny(&read("secrets/deep/key")));
    assert!(is_deny(&read("./secrets/../secrets/deep/key")));
    assert!(is_deny(&read(
        &dir.path().join("secrets/deep/key").display().to_string()
    )));
    assert!(is_deny(&read(".env")));
    assert!(
        is_deny(&read("sub/.env")),
        "a slash-less pattern matches at any depth"
    );
    assert_eq!(read("README.md"), Permission::Allow);
    assert!(is_deny(&decide(
        &r,
        "Grep",
        json!({"pattern": "k", "path": "secrets"})
    )));
    assert!(is_deny(&decide(
        &r,
        "Glob",
        json!({"pattern": "*", "path": "secrets/deep"})
    )));
    assert_eq!(
        decide(&r, "Grep", json!({"pattern": "k"})),
        Permission::Allow
    );
    assert_eq!(
        r.hidden_paths(),
        vec!["/secrets".to_string(), ".env".to_string()]
    );
}

#[test]
fn a_symlink_neither_hides_a_denied_file_nor_borrows_an_allowed_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("secrets")).unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("secrets/key"), "k").unwrap();
    std::os::unix::fs::symlink("../secrets", dir.path().join("src/link")).unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Deny, "Read(secrets/**)"),
            (RuleKind::Allow, "Edit(src/**)"),
        ],
    );
    assert!(is_deny(&decide(
        &r,
        "Read",
        json!({"file_path": "src/link/key"})
    )));
    assert!(is_deny(&decide(
        &r,
        "Grep",
        json!({"pattern": "k", "path": "src/link"})
    )));
    assert!(is_deny(&decide(
        &r,
        "Grep",
        json!({"pattern": "k", "path": "secrets"})
    )));
    let edit = |p: &str| {
        decide(
            &r,
            "Edit",
            json!({"file_path": p, "old_string": "a", "new_string": "b"}),
        )
    };
    assert_eq!(edit("src/main.rs"), Permission::Allow);
    assert!(
        is_ask(&edit("src/link/key")),
        "the link's target is not under src"
    );
    assert!(is_ask(&edit("src/../secrets/key")));
}

#[test]
fn edit_rules_cover_every_tool_that_writes_files() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Allow, "Edit(docs/**)"),
            (RuleKind::Deny, "Edit(*.lock)"),
        ],
    );
    assert_eq!(
        decide(
            &r,
            "Write",
            json!({"file_path": "docs/a.md", "content": "x"})
        ),
        Permission::Allow
    );
    assert!(is_deny(&decide(
        &r,
        "Write",
        json!({"file_path": "Cargo.lock", "content": "x"})
    )));
    assert!(is_deny(&decide(
        &r,
        "NotebookEdit",
        json!({"notebook_path": "x/y.lock", "new_source": "x"})
    )));
    let patch = |body: &str| decide(&r, "apply_patch", json!({ "input": body }));
    assert_eq!(
        patch("*** Begin Patch\n*** Add File: docs/new.md\n+hi\n*** End Patch\n"),
        Permission::Allow
    );
    assert!(is_deny(&patch(
        "*** Begin Patch\n*** Add File: docs/ok.md\n+hi\n*** Delete File: Cargo.lock\n*** End Patch\n"
    )));
    assert!(is_deny(&patch(
        "*** Begin Patch\n*** Update File: docs/a.md\n*** Move to: yarn.lock\n@@\n-a\n+b\n*** End Patch\n"
    )));
    // A patch that does not parse cannot be checked against the deny rule: asked.
    assert!(is_ask(&patch("not a patch")));
    // Edit is not read-only: without a rule it is asked about.
    assert!(is_ask(&decide(
        &r,
        "Edit",
        json!({"file_path": "src/x.rs", "old_string": "a", "new_string": "b"})
    )));
}

#[test]
fn absolute_and_home_paths() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let inside = format!("/{}/private/**", base.display());
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Deny, &format!("Read({inside})")),
            (RuleKind::Deny, "Read(~/.ssh/**)"),
        ],
    );
    assert!(is_deny(&decide(
        &r,
        "Read",
        json!({"file_path": "private/x"})
    )));
    assert_eq!(r.hidden_paths(), vec!["/private/**".to_string()]);
    if let Some(home) = std::env::var_os("HOME") {
        let key = Path::new(&home).join(".ssh/id_ed25519");
        assert!(is_deny(&decide(
            &r,
            "Read",
            json!({"file_path": key.display().to_string()})
        )));
    }
}

#[test]
fn webfetch_domains() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Deny, "WebFetch(domain:evil.example)"),
            (RuleKind::Ask, "WebFetch(domain:*.corp.example)"),
        ],
    );
    let fetch = |url: &str| decide(&r, "WebFetch", json!({"url": url, "prompt": "p"}));
    assert!(is_deny(&fetch("https://evil.example/x")));
    assert!(is_deny(&fetch("https://user@EVIL.example.:8443/x")));
    assert_eq!(fetch("https://not-evil.example/x"), Permission::Allow);
    assert!(is_ask(&fetch("https://wiki.corp.example/x")));
    assert!(is_ask(&fetch("http://corp.example")));
    // No host to check against the deny rule: asked.
    assert!(is_ask(&fetch("not a url")));
}

#[test]
fn mcp_rules_by_server_and_tool() {
    let dir = tempfile::tempdir().unwrap();
    let r = rules(
        dir.path(),
        &[
            (RuleKind::Allow, "mcp__everything"),
            (
                RuleKind::Deny,
                "mcp__everything__trigger-long-running-operation",
            ),
            (RuleKind::Deny, "mcp__github__*"),
        ],
    );
    let mcp = |set: &str, tool: &str| decide_in(&r, tool, Some(set), json!({}));
    assert_eq!(mcp("everything", "echo"), Permission::Allow);
    assert!(is_deny(&mcp(
        "everything",
        "trigger-long-running-operation"
    )));
    assert!(
        is_deny(&mcp(
            "everything",
            "everything_trigger-long-running-operation"
        )),
        "prefixed names too"
    );
    assert!(is_deny(&mcp("github", "create_issue")));
    assert!(is_ask(&mcp("other", "echo")));
}

#[test]
fn fallbacks_are_the_presets() {
    let dir = tempfile::tempdir().unwrap();
    let never = PermissionRules::new(dir.path()).fallback(Fallback::Allow);
    assert_eq!(bash(&never, "rm -rf x"), Permission::Allow);
    let on_write = PermissionRules::new(dir.path());
    assert!(is_ask(&bash(&on_write, "ls")));
    assert_eq!(
        decide(&on_write, "Read", json!({"file_path": "x"})),
        Permission::Allow
    );
    let always = PermissionRules::new(dir.path()).fallback(Fallback::Ask);
    assert!(is_ask(&decide(&always, "Read", json!({"file_path": "x"}))));
}

#[test]
fn bad_rules_and_settings_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = PermissionRules::new(dir.path());
    for bad in [
        "",
        "Bash(ls",
        "Glob(src/**)",
        "WebFetch(evil.example)",
        "Ba*sh",
        "mcp__",
        "mcp__s__t*",
    ] {
        assert!(r.add(RuleKind::Deny, bad).is_err(), "{bad:?}");
    }
    let source = Path::new("settings.json");
    assert!(r.add_settings("{", source).is_err());
    assert!(
        r.add_settings(r#"{"permissions": {"allow": "Bash"}}"#, source)
            .is_err()
    );
    let error = r
        .add_settings(
            r#"{"permissions": {"deny": ["Read(./ok)", "Nope(x)"]}}"#,
            source,
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("settings.json") && error.contains("Nope(x)"),
        "{error}"
    );
    let mut ok = PermissionRules::new(dir.path());
    ok.add_settings(
        r#"{"model": "x", "hooks": {}, "permissions": {"allow": ["Bash(ls)"], "ask": ["Bash(git push:*)"], "deny": ["Read(./.env)"]}}"#,
        source,
    )
    .unwrap();
    assert_eq!(bash(&ok, "ls"), Permission::Allow);
    assert!(is_ask(&bash(&ok, "git push")));
    assert!(is_deny(&decide(&ok, "Read", json!({"file_path": ".env"}))));
    let huge = format!("{{\"x\": \"{}\"}}", "a".repeat(super::MAX_SETTINGS_BYTES));
    assert!(ok.add_settings(&huge, source).is_err());
}
