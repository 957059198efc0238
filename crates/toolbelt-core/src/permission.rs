//! Permission: whether a tool call may run, decided from the call itself before it runs.
//!
//! A [`PermissionCheck`] looks at a validated call and answers [`Permission::Allow`],
//! [`Permission::Ask`] or [`Permission::Deny`]. The executor asks it after validation and
//! before hooks; what happens on `Ask` (a person is asked, or the run pauses) is the
//! executor's and the front end's business. The rule engine most users want, rules in
//! Claude Code's syntax (`Bash(npm run test:*)`, `Read(./.env)`), is
//! `toolbelt_builtin::permission::PermissionRules`; this trait is what it and any other
//! policy (a policy service, an allow-list) implement.

use std::fmt;

use crate::Declaration;

/// What a [`PermissionCheck`] decided for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// The call runs.
    Allow,
    /// A person must decide; the text says why (the rule that asked, or the default).
    Ask(String),
    /// The call does not run; the text is the reason the model sees.
    Deny(String),
}

/// The call a [`PermissionCheck`] decides about.
#[derive(Debug, Clone, Copy)]
pub struct PermissionRequest<'a> {
    /// The tool's declaration (name and hints).
    pub declaration: &'a Declaration,
    /// The name of the tool set that offers the tool (an MCP server's name for its tools),
    /// `None` for a tool registered on its own.
    pub set: Option<&'a str>,
    /// The arguments, repaired and validated.
    pub arguments: &'a str,
}

impl PermissionRequest<'_> {
    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.declaration.name
    }
}

/// Decides whether a call may run. It must be quick and must not block: it runs for every
/// call, inside the executor.
pub trait PermissionCheck: Send + Sync + fmt::Debug {
    /// The decision for `request`.
    fn check(&self, request: &PermissionRequest<'_>) -> Permission;

    /// What a person should see to decide about a call this check asked about: the change
    /// an edit makes as a diff, the command a shell call runs. Called only for calls that
    /// ask, so it may read a file. `None` (the default): the arguments speak for themselves.
    fn preview(&self, request: &PermissionRequest<'_>) -> Option<String> {
        let _ = request;
        None
    }
}
