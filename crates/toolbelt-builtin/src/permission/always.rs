//! "Always allow": the allow rules that would let calls like one a person approved run
//! without asking, as Claude Code offers ("don't ask again for `git push` commands").
//!
//! A command line gives one `Bash(words:*)` rule per command it runs (the program, and its
//! subcommand for tools that have them: `git push`, `cargo test`, `npm run`), a file tool one
//! `Edit(./path)` rule for the file, WebFetch a `WebFetch(domain:host)` rule, any other tool
//! its name. Only rules that parse are given. An ask rule still beats them: a call asked
//! about because a rule says so is asked again.

use serde_json::Value;

use super::PermissionRules;
use super::rule::{Rule, Subject, commands_of, host_of};

/// Programs whose second word names what they do (`git push`, not just `git`).
const SUBCOMMAND_TOOLS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "npx",
    "go",
    "docker",
    "kubectl",
    "pip",
    "uv",
    "make",
    "gh",
    "apt",
    "brew",
    "systemctl",
];

impl PermissionRules {
    /// The allow rules that would let calls like this one (`tool` with the JSON text
    /// `arguments`) run without asking; empty when none can be written.
    pub fn allow_rules_for(&self, tool: &str, arguments: &str) -> Vec<String> {
        let arguments: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let subject = Subject {
            tool,
            set: None,
            arguments,
        };
        let candidates = match tool {
            "Bash" | "exec_command" => command_rules(&subject),
            "Write" | "Edit" | "NotebookEdit" => {
                let key = if tool == "NotebookEdit" {
                    "notebook_path"
                } else {
                    "file_path"
                };
                let path = subject.arguments.get(key).and_then(Value::as_str);
                path.map(|p| vec![format!("Edit({})", self.rule_path(p))])
                    .unwrap_or_default()
            }
            "WebFetch" => host_of(&subject)
                .map(|host| vec![format!("WebFetch(domain:{host})")])
                .unwrap_or_default(),
            other => vec![other.to_string()],
        };
        let mut rules: Vec<String> = Vec::new();
        for rule in candidates {
            let parses = Rule::parse(&rule, &self.base, self.home.as_deref()).is_ok();
            if parses && !rules.contains(&rule) {
                rules.push(rule);
            }
        }
        rules
    }

    /// `path` as a rule writes it: `./relative` inside the base, `//absolute` outside.
    fn rule_path(&self, path: &str) -> String {
        let full = self.base.join(path);
        match full.strip_prefix(&self.base) {
            Ok(relative) if !relative.as_os_str().is_empty() && !path.contains("..") => {
                format!("./{}", relative.display())
            }
            _ => format!("/{}", full.display()),
        }
    }
}

/// One `Bash(words:*)` per command the line runs (wrappers that only run others left out).
fn command_rules(subject: &Subject<'_>) -> Vec<String> {
    let Ok(commands) = commands_of(subject) else {
        return Vec::new();
    };
    commands
        .into_iter()
        .filter(|c| !c.only_runs_others)
        .filter_map(|c| {
            let first = c.words.first()?;
            let words = match c.words.get(1) {
                Some(second)
                    if SUBCOMMAND_TOOLS.contains(&first.as_str()) && !second.starts_with('-') =>
                {
                    format!("{first} {second}")
                }
                _ => first.clone(),
            };
            Some(format!("Bash({words}:*)"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::Fallback;
    use toolbelt_core::{Declaration, Permission, PermissionCheck, PermissionRequest};

    fn decide(rules: &PermissionRules, tool: &str, arguments: &str) -> Permission {
        let declaration = Declaration::new(tool, "t").unwrap();
        rules.check(&PermissionRequest {
            declaration: &declaration,
            set: None,
            arguments,
        })
    }

    #[test]
    fn the_rules_for_a_call_let_it_and_its_kind_run_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let base = PermissionRules::new(dir.path()).fallback(Fallback::Ask);
        let call = r#"{"command":"git push origin main && cargo test -q"}"#;
        let rules = base.allow_rules_for("Bash", call);
        assert_eq!(rules, ["Bash(git push:*)", "Bash(cargo test:*)"]);
        let mut allowed = PermissionRules::new(dir.path()).fallback(Fallback::Ask);
        for rule in &rules {
            allowed = allowed.allow(rule).unwrap();
        }
        assert!(matches!(decide(&allowed, "Bash", call), Permission::Allow));
        let other = r#"{"command":"git push --force origin main; rm -rf /"}"#;
        assert!(!matches!(
            decide(&allowed, "Bash", other),
            Permission::Allow
        ));

        let write = r#"{"file_path":"src/lib.rs","content":""}"#;
        assert_eq!(base.allow_rules_for("Write", write), ["Edit(./src/lib.rs)"]);
        let fetch = r#"{"url":"https://docs.rs/serde"}"#;
        assert_eq!(
            base.allow_rules_for("WebFetch", fetch),
            ["WebFetch(domain:docs.rs)"]
        );
        assert_eq!(base.allow_rules_for("TaskStop", "{}"), ["TaskStop"]);
        // Nothing parseable to allow: no rule, never a broader one.
        assert!(
            base.allow_rules_for("Bash", r#"{"command":"for x in *; do :; done"}"#)
                .is_empty()
        );
    }
}
