//! The Edit tool: exact string replacement in a file that was Read, with a unified diff.
//!
//! Matching is exact first. If that finds nothing, two tolerances are tried, each keeping the
//! file's own style: in a CRLF file an `old_string` written with LF line breaks matches its
//! CRLF lines (and the replacement is written with CRLF); and curly quotes (‘ ’ “ ”) match
//! straight ones (' "), the replacement then getting the curly style of the text it replaces.

use std::ops::Range;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::diff;
use super::read_state::read_modify_write;
use super::text::{self, Encoding};
use crate::BuiltinEnv;

const DESCRIPTION: &str = "Performs an exact string replacement in a file. The file must have \
been read with the Read tool first (in full), and must not have changed since. old_string must \
match the file exactly (whitespace and indentation included; do not include the line-number \
prefix Read shows) and must match exactly once, unless replace_all is true, which replaces \
every occurrence (useful for renaming). An empty old_string creates a file that does not exist \
yet. Line endings and the final newline of the file are kept.";

/// Arguments of Edit.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditArgs {
    /// The path of the file to modify (absolute, or relative to the working directory).
    pub file_path: String,
    /// The text to replace; it must match exactly once unless replace_all is true. Empty to
    /// create a new file.
    pub old_string: String,
    /// The text to replace it with (must differ from old_string).
    pub new_string: String,
    /// Replace every occurrence of old_string (default false).
    #[serde(default)]
    pub replace_all: bool,
}

/// The Edit tool over `env`'s file backend.
pub fn edit_tool(env: &BuiltinEnv) -> Result<DynTool, ToolError> {
    let env = env.clone();
    let tool = FunctionTool::returning_output(
        "Edit",
        DESCRIPTION,
        move |ctx: ToolContext, args: EditArgs| {
            let env = env.for_call(&ctx);
            async move { Ok::<_, ToolError>(edit(&env, args).await) }
        },
    )?
    .map_declaration(|d| d.destructive().closed_world().concurrency_safe(false));
    Ok(Arc::new(tool))
}

/// Runs Edit; failures are result-level errors.
pub async fn edit(env: &BuiltinEnv, args: EditArgs) -> ToolOutput {
    match try_edit(env, args).await {
        Ok(out) => out,
        Err(message) => ToolOutput::error(message),
    }
}

async fn try_edit(env: &BuiltinEnv, args: EditArgs) -> Result<ToolOutput, String> {
    if args.old_string == args.new_string {
        return Err("old_string and new_string are the same; there is nothing to change".into());
    }
    let ops = &env.files;
    let path = ops.resolve(&args.file_path).map_err(|e| e.to_string())?;
    let shown = ops.display_path(&path);
    let name = shown.clone();
    // The change runs under the file's lock; it hands back what the report needs.
    let (old_text, new_text, replacements) =
        read_modify_write(env, path, shown.clone(), move |current| {
            let (old_text, encoding) = match current {
                None if args.old_string.is_empty() => (None, Encoding::Utf8 { bom: false }),
                None => {
                    return Err(format!(
                        "file does not exist: {name}; pass an empty old_string to create it"
                    ));
                }
                Some(current) => {
                    let decoded = text::decode(&current.bytes)
                        .map_err(|e| format!("cannot edit {name}: {e}"))?;
                    (Some(decoded.text), decoded.encoding)
                }
            };
            let (new_text, replacements) = edited(old_text.as_deref(), &args, &name)?;
            let bytes = text::encode(&new_text, encoding);
            Ok((bytes, (old_text, new_text, replacements)))
        })
        .await?;
    let diff = diff::unified(&shown, old_text.as_deref().unwrap_or(""), &new_text);
    let message = match &old_text {
        None => format!("File created successfully at: {shown}"),
        Some(_) if replacements == 1 => format!("The file {shown} has been edited."),
        Some(_) => format!("The file {shown} has been edited ({replacements} replacements)."),
    };
    Ok(ToolOutput::text(message.clone())
        .with_user_text(format!("{message}\n{diff}"))
        .with_structured(json!({
            "file_path": shown,
            "replacements": replacements,
            "created": old_text.is_none(),
        })))
}

/// The text after the edit and the number of replacements; `current` is `None` for a file
/// being created.
fn edited(current: Option<&str>, args: &EditArgs, shown: &str) -> Result<(String, usize), String> {
    match current {
        None => Ok((args.new_string.clone(), 1)),
        Some(current) if args.old_string.is_empty() => {
            if !current.is_empty() {
                return Err(format!(
                    "old_string is empty but {shown} already exists and is not empty; give the \
                     text to replace, or use Write to replace the whole file"
                ));
            }
            Ok((args.new_string.clone(), 1))
        }
        Some(current) => replace(
            current,
            &args.old_string,
            &args.new_string,
            args.replace_all,
        )
        .map_err(|e| e.message(shown)),
    }
}

/// Why a replacement could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaceError {
    /// `old_string` is not in the text.
    NotFound,
    /// `old_string` is in the text this many times, and `replace_all` was not set.
    Ambiguous(usize),
}

impl ReplaceError {
    fn message(&self, shown: &str) -> String {
        match self {
            ReplaceError::NotFound => format!(
                "old_string was not found in {shown}; it must match the file exactly, including \
                 whitespace and indentation (Read the file again to check)"
            ),
            ReplaceError::Ambiguous(n) => format!(
                "old_string matches {n} places in {shown}; pass replace_all: true to replace \
                 all of them, or give a longer old_string that matches exactly once"
            ),
        }
    }
}

/// Replaces `old` by `new` in `text` (exactly once, or everywhere with `all`), with the
/// line-ending and quote tolerances described in the module documentation. Returns the new
/// text and the number of replacements.
pub fn replace(
    text: &str,
    old: &str,
    new: &str,
    all: bool,
) -> Result<(String, usize), ReplaceError> {
    let mut candidates: Vec<(String, String)> = vec![(old.to_string(), new.to_string())];
    if text.contains("\r\n") && old.contains('\n') {
        let to_crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
        candidates.push((to_crlf(old), to_crlf(new)));
    }
    for (old, new) in &candidates {
        let ranges: Vec<Range<usize>> = text
            .match_indices(old.as_str())
            .map(|(at, m)| at..at + m.len())
            .collect();
        if !ranges.is_empty() {
            return apply(text, &ranges, |_| new.clone(), all);
        }
    }
    for (old, new) in &candidates {
        let ranges = find_quote_tolerant(text, old);
        if !ranges.is_empty() {
            return apply(text, &ranges, |matched| restyle_quotes(new, matched), all);
        }
    }
    Err(ReplaceError::NotFound)
}

fn apply(
    text: &str,
    ranges: &[Range<usize>],
    replacement: impl Fn(&str) -> String,
    all: bool,
) -> Result<(String, usize), ReplaceError> {
    if ranges.len() > 1 && !all {
        return Err(ReplaceError::Ambiguous(ranges.len()));
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for range in ranges {
        out.push_str(&text[last..range.start]);
        out.push_str(&replacement(&text[range.clone()]));
        last = range.end;
    }
    out.push_str(&text[last..]);
    Ok((out, ranges.len()))
}

fn straight(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
        other => other,
    }
}

/// Non-overlapping matches of `needle` in `haystack` when curly quotes count as straight.
fn find_quote_tolerant(haystack: &str, needle: &str) -> Vec<Range<usize>> {
    let mut normalized = String::with_capacity(haystack.len());
    // Byte offset in `haystack` of each byte of `normalized` (and of its end).
    let mut origin = Vec::with_capacity(haystack.len() + 1);
    for (at, c) in haystack.char_indices() {
        let s = straight(c);
        for _ in 0..s.len_utf8() {
            origin.push(at);
        }
        normalized.push(s);
    }
    origin.push(haystack.len());
    let needle: String = needle.chars().map(straight).collect();
    if needle.is_empty() {
        return Vec::new();
    }
    normalized
        .match_indices(needle.as_str())
        .map(|(at, m)| origin[at]..origin[at + m.len()])
        .collect()
}

/// `new` with its straight quotes turned curly where the replaced text used curly quotes.
fn restyle_quotes(new: &str, replaced: &str) -> String {
    let curly_double = replaced.contains(['\u{201C}', '\u{201D}']);
    let curly_single = replaced.contains(['\u{2018}', '\u{2019}']);
    let mut out = String::with_capacity(new.len());
    let mut previous: Option<char> = None;
    let chars: Vec<char> = new.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let opening = previous.is_none_or(|p| p.is_whitespace() || "([{<—–-".contains(p));
        let styled = match c {
            '"' if curly_double => {
                if opening {
                    '\u{201C}'
                } else {
                    '\u{201D}'
                }
            }
            '\'' if curly_single => {
                let next_is_letter = chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
                if opening && next_is_letter {
                    '\u{2018}'
                } else {
                    '\u{2019}'
                }
            }
            other => other,
        };
        out.push(styled);
        previous = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curly_quotes_match_straight_ones_and_keep_the_file_style() {
        let text = "say \u{201C}hi\u{201D} and it\u{2019}s done\n";
        let (out, n) = replace(text, "\"hi\" and it's", "\"bye\" and it's", false).unwrap();
        assert_eq!(n, 1);
        assert_eq!(out, "say \u{201C}bye\u{201D} and it\u{2019}s done\n");
    }

    #[test]
    fn lf_old_strings_match_crlf_files() {
        let (out, _) = replace("a\r\nb\r\nc\r\n", "a\nb", "x\ny", false).unwrap();
        assert_eq!(out, "x\r\ny\r\nc\r\n");
    }
}
