//! SKILL.md: YAML front matter between `---` lines, then the body (Markdown).
//!
//! Checked as the Agent Skills format says, so a skill written for another agent works here
//! and a mistake is named with its file and field:
//! - `name`: required, 1–64 characters, lowercase letters, digits and hyphens, not starting
//!   or ending with a hyphen, no `--`, equal to the skill's folder name;
//! - `description`: required, 1–1024 characters after trimming;
//! - `allowed-tools`: optional, a list or a string of names separated by spaces or commas;
//! - `license`, `compatibility` (at most 500 characters), `metadata` (a map): optional,
//!   kept as documentation;
//! - `mcp`: Toolbelt's own, optional: `{server: {url | command, ...}}`, each entry as in an
//!   `mcpServers` file, without `${VAR}` expansion; server names of lowercase letters,
//!   digits, hyphens and underscores; a `command` only in a trusted skills folder.
//!
//! Any other key is a warning, not an error (agents add their own keys; a typo such as
//! `descripton` still fails, because `description` is then missing).

use std::path::Path;

use serde_norway::{Mapping, Value};

use super::SkillError;

/// The longest name the format allows.
pub const MAX_NAME_LEN: usize = 64;
/// The longest description the format allows.
pub const MAX_DESCRIPTION_LEN: usize = 1024;
/// The longest `compatibility` the format allows.
const MAX_COMPATIBILITY_LEN: usize = 500;

const KNOWN_KEYS: [&str; 7] = [
    "name",
    "description",
    "allowed-tools",
    "license",
    "compatibility",
    "metadata",
    "mcp",
];

/// A checked front matter and the body after it.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) allowed_tools: Option<Vec<String>>,
    /// The `mcp` map as JSON, for the `mcpServers` parser.
    pub(crate) mcp: Option<serde_json::Value>,
    pub(crate) body: String,
    pub(crate) warnings: Vec<String>,
}

/// Parses and checks `text`, the contents of `file` in the folder named `folder`.
pub(crate) fn parse(file: &Path, folder: &str, text: &str) -> Result<Parsed, SkillError> {
    let error = |field: &str, problem: String| SkillError::new(file, field, problem);
    let (yaml, body) = split(text).ok_or_else(|| {
        error(
            "front matter",
            "SKILL.md must start with a YAML front matter block between two `---` lines".into(),
        )
    })?;
    let value: Value =
        crate::yaml::from_str_bounded(yaml).map_err(|problem| error("front matter", problem))?;
    let map: Mapping = match value {
        Value::Mapping(map) => map,
        Value::Null => Mapping::new(),
        _ => return Err(error("front matter", "must be a YAML mapping".into())),
    };
    let mut warnings = Vec::new();
    for key in map.keys() {
        match key.as_str() {
            Some(k) if KNOWN_KEYS.contains(&k) => {}
            Some(k) => warnings.push(format!(
                "{}: unknown front matter key `{k}` ignored",
                file.display()
            )),
            None => return Err(error("front matter", "keys must be strings".into())),
        }
    }
    let text_field = |field: &str| -> Result<Option<String>, SkillError> {
        match map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(error(field, "must be a string".into())),
        }
    };

    let name = text_field("name")?.ok_or_else(|| error("name", "is required".into()))?;
    check_name(&name).map_err(|problem| error("name", problem))?;
    if name != folder {
        return Err(error(
            "name",
            format!("`{name}` must equal the skill's folder name `{folder}`"),
        ));
    }
    let description = text_field("description")?
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .ok_or_else(|| error("description", "is required and must not be empty".into()))?;
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_LEN {
        return Err(error(
            "description",
            format!("is {chars} characters; at most {MAX_DESCRIPTION_LEN} are allowed"),
        ));
    }
    text_field("license")?;
    if let Some(c) = text_field("compatibility")?
        && c.chars().count() > MAX_COMPATIBILITY_LEN
    {
        return Err(error(
            "compatibility",
            format!("at most {MAX_COMPATIBILITY_LEN} characters are allowed"),
        ));
    }
    if let Some(metadata) = map.get("metadata")
        && !matches!(metadata, Value::Mapping(_) | Value::Null)
    {
        return Err(error("metadata", "must be a mapping".into()));
    }
    let allowed_tools = match map.get("allowed-tools") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            s.split(|c: char| c.is_whitespace() || c == ',')
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        ),
        Some(Value::Sequence(items)) => Some(
            items
                .iter()
                .map(|item| {
                    item.as_str().map(|s| s.trim().to_string()).ok_or_else(|| {
                        error("allowed-tools", "every entry must be a string".into())
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(error(
                "allowed-tools",
                "must be a list or a string of tool names".into(),
            ));
        }
    };
    let mcp = match map.get("mcp") {
        None | Some(Value::Null) => None,
        Some(value @ Value::Mapping(_)) => Some(
            serde_json::to_value(value)
                .map_err(|e| error("mcp", format!("cannot be read as JSON: {e}")))?,
        ),
        Some(_) => {
            return Err(error(
                "mcp",
                "must be a mapping of server names to {url | command, ...}".into(),
            ));
        }
    };
    Ok(Parsed {
        name,
        description,
        allowed_tools,
        mcp,
        body: body.trim_start_matches(['\r', '\n']).to_string(),
        warnings,
    })
}

/// The name rule of the Agent Skills format.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let len = name.chars().count();
    if len == 0 || len > MAX_NAME_LEN {
        return Err(format!(
            "must be 1 to {MAX_NAME_LEN} characters (it is {len})"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(format!(
            "`{name}` may hold only lowercase letters, digits and hyphens"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err(format!(
            "`{name}` must not start or end with a hyphen or hold `--`"
        ));
    }
    Ok(())
}

/// The YAML between the first two `---` lines, and what follows.
fn split(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_format() {
        assert!(check_name("pdf-tools").is_ok());
        assert!(check_name("a1").is_ok());
        for bad in ["", "PDF", "-a", "a-", "a--b", "a_b", "é", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn front_matter_is_split_from_the_body() {
        let (yaml, body) = split("---\nname: x\n---\n# Body\n").unwrap();
        assert_eq!(yaml, "name: x\n");
        assert_eq!(body, "# Body\n");
        assert!(split("name: x\n").is_none());
        assert!(split("---\nname: x\n").is_none());
    }
}
