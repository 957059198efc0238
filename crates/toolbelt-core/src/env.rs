//! [`EnvPolicy`]: which environment variables a child process started on a model's behalf
//! may see.
//!
//! A process that runs Toolbelt usually holds secrets in its environment (an API key for the
//! model, the bearer token of `toolbelt serve`, cloud credentials). A command the model writes,
//! or an MCP server from a registry, should not inherit them: one `env` or one `printenv` in a
//! tool result puts them in front of the model, and from there anywhere. So every child process
//! Toolbelt starts (the `Bash` tool, background tasks, MCP stdio servers) gets its environment
//! from one policy:
//!
//! 1. **Inherit** from the parent: by default only a small allow-list of variables that
//!    programs need to behave ([`CORE_VARS`]: `PATH`, `HOME`, `LANG`, `LC_*`, `TERM`, …);
//!    [`Inherit::All`] passes every variable, [`Inherit::None`] none.
//! 2. **Never** pass, whatever the inheritance, a name that looks like a secret
//!    ([`SECRET_PATTERNS`]: `*TOKEN*`, `*KEY*`, `*SECRET*`, `*PASSWORD*`, …, case-insensitive)
//!    or that a [`deny`](EnvPolicy::deny) pattern names, unless an [`allow`](EnvPolicy::allow)
//!    pattern names it explicitly.
//! 3. **Set** what the configuration says ([`set`](EnvPolicy::set)): always passed, over the
//!    parent's value. This is how an MCP server gets the one token it needs.
//!
//! Patterns are names with `*` as a wildcard (`AWS_*`), compared without regard to case.
//!
//! ```
//! use std::ffi::OsString;
//! use toolbelt_core::EnvPolicy;
//!
//! let parent = [("PATH", "/usr/bin"), ("OPENAI_API_KEY", "sk-1"), ("AWS_PROFILE", "dev"),
//!     ("EDITOR", "vi")]
//!     .map(|(k, v)| (OsString::from(k), OsString::from(v)));
//! let policy = EnvPolicy::new().allow("AWS_PROFILE").set("MODE", "test");
//! let vars = policy.resolve_from(parent);
//! let names: Vec<_> = vars.iter().map(|(k, _)| k.to_str().unwrap()).collect();
//! assert_eq!(names, ["AWS_PROFILE", "MODE", "PATH"]);
//! ```

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// The variables inherited by default ([`Inherit::Core`]): what shells, compilers and package
/// managers need to find programs, the home directory, the locale and the terminal. A trailing
/// `*` matches any suffix.
pub const CORE_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "USERNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
];

/// Names that never pass from the parent unless allowed explicitly: the usual spellings of
/// credentials (`OPENAI_API_KEY`, `GITHUB_TOKEN`, `TOOLBELT_SERVE_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
/// `PGPASSWORD`, …).
pub const SECRET_PATTERNS: &[&str] = &[
    "*TOKEN*",
    "*KEY*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
];

/// Which of the parent's variables a child may inherit before exclusions apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Inherit {
    /// Only [`CORE_VARS`] (the default).
    #[default]
    Core,
    /// Every variable of the parent.
    All,
    /// None: the child sees only what is [`set`](EnvPolicy::set) or [`allow`](EnvPolicy::allow)ed.
    None,
}

/// The environment policy for a child process. See the [module docs](self) for the rules and
/// their order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    inherit: Inherit,
    allow: Vec<String>,
    deny: Vec<String>,
    set: BTreeMap<String, String>,
}

impl EnvPolicy {
    /// The default policy: inherit [`CORE_VARS`], never a secret, set nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Chooses what is inherited from the parent (exclusions still apply).
    pub fn inherit(mut self, inherit: Inherit) -> Self {
        self.inherit = inherit;
        self
    }

    /// Passes parent variables whose names match `pattern` (`*` is a wildcard), even when they
    /// look like secrets or are denied. Use it for the one credential a child needs.
    pub fn allow(mut self, pattern: impl Into<String>) -> Self {
        self.allow.push(pattern.into());
        self
    }

    /// Never passes parent variables whose names match `pattern` (unless also allowed).
    pub fn deny(mut self, pattern: impl Into<String>) -> Self {
        self.deny.push(pattern.into());
        self
    }

    /// Sets a variable in the child, over the parent's value. Set variables always pass.
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set.insert(name.into(), value.into());
        self
    }

    /// Whether a parent variable of this name passes (set variables aside).
    pub fn passes(&self, name: &OsStr) -> bool {
        // A name that is not UTF-8 cannot be checked against the secret patterns: never pass it.
        let Some(name) = name.to_str() else {
            return false;
        };
        if matches_any(&self.allow, name) {
            return true;
        }
        let inherited = match self.inherit {
            Inherit::Core => matches_any(CORE_VARS, name),
            Inherit::All => true,
            Inherit::None => false,
        };
        inherited && !matches_any(SECRET_PATTERNS, name) && !matches_any(&self.deny, name)
    }

    /// The child's environment, from this process's environment, sorted by name.
    pub fn resolve(&self) -> Vec<(OsString, OsString)> {
        self.resolve_from(std::env::vars_os())
    }

    /// The child's environment, from the given parent variables, sorted by name.
    pub fn resolve_from(
        &self,
        parent: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let mut vars: BTreeMap<OsString, OsString> = parent
            .into_iter()
            .filter(|(name, _)| self.passes(name))
            .collect();
        for (name, value) in &self.set {
            vars.insert(name.into(), value.into());
        }
        vars.into_iter().collect()
    }

    /// Replaces a command's environment with this policy's (`env_clear` then the resolved
    /// variables). For `tokio::process::Command`, use
    /// `cmd.env_clear().envs(policy.resolve())`.
    pub fn apply_to(&self, command: &mut std::process::Command) {
        command.env_clear().envs(self.resolve());
    }
}

pub(crate) fn matches_any<S: AsRef<str>>(patterns: &[S], name: &str) -> bool {
    patterns.iter().any(|p| wildcard_match(p.as_ref(), name))
}

/// `*`-wildcard match, ASCII case-insensitive. Only the last `*` is ever revisited, so the cost
/// is bounded by the product of the lengths (no exponential backtracking).
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and which name position it is currently absorbing up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi].eq_ignore_ascii_case(&n[ni]) {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(policy: &EnvPolicy, parent: &[(&str, &str)]) -> Vec<String> {
        policy
            .resolve_from(vars(parent))
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect()
    }

    const PARENT: &[(&str, &str)] = &[
        ("PATH", "/bin"),
        ("HOME", "/root"),
        ("LC_ALL", "C"),
        ("EDITOR", "vi"),
        ("OPENAI_API_KEY", "sk"),
        ("TOOLBELT_SERVE_TOKEN", "t"),
        ("github_token", "g"),
        ("PGPASSWORD", "p"),
        ("AWS_SECRET_ACCESS_KEY", "a"),
        ("MY_CREDENTIALS_FILE", "c"),
    ];

    #[test]
    fn the_default_passes_only_core_variables() {
        assert_eq!(names(&EnvPolicy::new(), PARENT), ["HOME", "LC_ALL", "PATH"]);
    }

    #[test]
    fn inheriting_everything_still_keeps_secrets_out() {
        let policy = EnvPolicy::new().inherit(Inherit::All);
        assert_eq!(names(&policy, PARENT), ["EDITOR", "HOME", "LC_ALL", "PATH"]);
    }

    #[test]
    fn an_explicit_allow_lets_one_secret_through_and_deny_removes_a_core_variable() {
        let policy = EnvPolicy::new().allow("PGPASSWORD").deny("home");
        assert_eq!(names(&policy, PARENT), ["LC_ALL", "PATH", "PGPASSWORD"]);
    }

    #[test]
    fn set_variables_override_and_always_pass() {
        let policy = EnvPolicy::new()
            .inherit(Inherit::None)
            .set("PATH", "/opt/bin")
            .set("API_TOKEN", "given");
        let resolved = policy.resolve_from(vars(PARENT));
        assert_eq!(
            resolved,
            vars(&[("API_TOKEN", "given"), ("PATH", "/opt/bin")])
        );
    }

    #[test]
    fn wildcards_match_anywhere_and_ignore_case() {
        assert!(wildcard_match("*TOKEN*", "github_token"));
        assert!(wildcard_match("*TOKEN*", "TOKEN"));
        assert!(wildcard_match("AWS_*", "AWS_PROFILE"));
        assert!(wildcard_match("LC_*", "LC_"));
        assert!(!wildcard_match("LC_*", "XLC_ALL"));
        assert!(!wildcard_match("PATH", "PATHS"));
        assert!(wildcard_match("a*b*c", "aXXbYYbc"));
        // A pattern built to make a recursive backtracking matcher take exponential time.
        let long = "a".repeat(10_000);
        assert!(wildcard_match(&"*a".repeat(50), &long));
        assert!(!wildcard_match(&format!("{}*b", "*a".repeat(50)), &long));
    }
}
