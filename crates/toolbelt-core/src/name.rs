//! Tool names: the one identifier a model uses to pick a tool.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::ToolError;

/// The longest name OpenAI's function calling and MCP clients accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// A validated tool name: 1 to 64 characters from `[a-zA-Z0-9_.-]`.
///
/// That alphabet is the intersection of what OpenAI-compatible providers and MCP clients
/// accept, so a name that constructs here is usable everywhere. `snake_case` is recommended;
/// the built-in tools use Claude Code's `PascalCase` names because models are trained on them.
///
/// ```
/// use toolbelt_core::ToolName;
/// assert!(ToolName::new("calculator").is_ok());
/// assert!(ToolName::new("has space").is_err());
/// ```
// An `Arc<str>` inside, so that the executor hands the name to every call's context with a
// reference-count increment instead of a copy.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolName(Arc<str>);

impl ToolName {
    /// Checks `name` and wraps it; a bad name is [`ToolError::InvalidName`], never a panic.
    pub fn new(name: impl Into<String>) -> Result<Self, ToolError> {
        let name = name.into();
        match name_problem(&name) {
            None => Ok(Self(Arc::from(name))),
            Some(reason) => Err(ToolError::InvalidName { name, reason }),
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a shared string: cloning it copies no bytes.
    pub fn shared(&self) -> Arc<str> {
        self.0.clone()
    }
}

impl Serialize for ToolName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Why `name` is not a valid tool name, or `None` when it is.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("a tool name must not be empty");
    }
    if name.len() > MAX_TOOL_NAME_LEN {
        return Some("a tool name must be at most 64 characters");
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    if !name.bytes().all(allowed) {
        return Some("a tool name may only contain ASCII letters, digits, '_', '.' and '-'");
    }
    None
}

impl Deref for ToolName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ToolName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl TryFrom<&str> for ToolName {
    type Error = ToolError;
    fn try_from(value: &str) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl TryFrom<String> for ToolName {
    type Error = ToolError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl PartialEq<str> for ToolName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ToolName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl<'de> Deserialize<'de> for ToolName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        ToolName::new(raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_openai_and_mcp_alphabet() {
        for ok in [
            "a",
            "calculator",
            "Read",
            "mcp.add",
            "web-fetch",
            "x_1",
            &"a".repeat(64),
        ] {
            assert!(ToolName::new(ok).is_ok(), "{ok} should be accepted");
        }
    }

    #[test]
    fn refuses_empty_long_and_foreign_names_with_a_typed_error() {
        for bad in [
            "",
            "has space",
            "tool/slash",
            "émoji",
            "a:b",
            &"a".repeat(65),
        ] {
            match ToolName::new(bad) {
                Err(ToolError::InvalidName { name, reason }) => {
                    assert_eq!(name, bad);
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad:?} should be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn deserializing_checks_the_name() {
        assert!(serde_json::from_str::<ToolName>("\"ok_name\"").is_ok());
        assert!(serde_json::from_str::<ToolName>("\"not ok\"").is_err());
    }
}
