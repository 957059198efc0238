//! Applying an Update's chunks to a file's text, finding each chunk's lines as leniently as
//! Codex does.
//!
//! Each chunk's old lines are looked for after the previous chunk (and after its `@@`
//! context line, when it has one), in four passes of decreasing strictness: exactly, then
//! ignoring trailing whitespace, then ignoring whitespace at both ends, then also counting
//! Unicode dashes, quotes and spaces as their ASCII forms. An `*** End of File` chunk is
//! looked for at the end of the file first. Lines are compared without their line break, so
//! a CRLF file matches a patch written with LF, and keeps CRLF.
//!
//! The cost is at most four scans of the file per chunk, each comparing at most the chunk's
//! length per position; files are bounded by the file tools' size limit.

use super::parse::{Chunk, Line};

/// Why a chunk could not be placed: which chunk (1-based) and what was not found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaced {
    /// The chunk's number in its Update, from 1.
    pub chunk: usize,
    /// What was looked for, for the model to compare with the file.
    pub message: String,
}

/// The text after applying `chunks` to `text`. Context lines keep the file's own version
/// (a context line matched leniently is not rewritten to the patch's spelling). The result
/// ends with a line break, as Codex's does.
pub fn apply_chunks(text: &str, chunks: &[Chunk]) -> Result<String, Unplaced> {
    let crlf = super::super::text::uses_crlf(text);
    let lines: Vec<&str> = super::super::text::lines(text).collect();
    // (where, how many file lines, the chunk's lines that replace them)
    let mut replacements: Vec<(usize, usize, &[Line])> = Vec::new();
    let mut cursor = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        let unplaced = |message: String| Unplaced {
            chunk: i + 1,
            message,
        };
        if let Some(context) = &chunk.context {
            let Some(at) = seek(&lines, &[context.as_str()], cursor, false) else {
                return Err(unplaced(format!(
                    "the context line '{context}' was not found"
                )));
            };
            cursor = at + 1;
        }
        let mut ops: &[Line] = &chunk.lines;
        let mut old = chunk.old();
        if old.is_empty() {
            // Only added lines: after the context line when one was given, else at the end.
            let at = if chunk.context.is_some() {
                cursor
            } else {
                lines.len()
            };
            replacements.push((at, 0, ops));
            continue;
        }
        let mut found = seek(&lines, &old, cursor, chunk.end_of_file);
        // A trailing empty context line usually stands for the file's final line break.
        if found.is_none() && matches!(ops.last(), Some(Line::Context(s)) if s.is_empty()) {
            ops = &ops[..ops.len() - 1];
            old.pop();
            found = seek(&lines, &old, cursor, chunk.end_of_file);
        }
        let Some(at) = found else {
            return Err(unplaced(format!(
                "these lines were not found{}:\n{}",
                if cursor > 0 {
                    format!(" after line {cursor}")
                } else {
                    String::new()
                },
                chunk.old().join("\n")
            )));
        };
        replacements.push((at, old.len(), ops));
        cursor = at + old.len();
    }
    let mut out: Vec<&str> = Vec::with_capacity(lines.len());
    let mut next = 0;
    for (at, len, ops) in replacements {
        out.extend_from_slice(&lines[next..at]);
        let mut from = at;
        for op in ops {
            match op {
                Line::Context(_) => {
                    out.push(lines[from]);
                    from += 1;
                }
                Line::Removed(_) => from += 1,
                Line::Added(s) => out.push(s),
            }
        }
        next = at + len;
    }
    out.extend_from_slice(&lines[next..]);
    let newline = if crlf { "\r\n" } else { "\n" };
    let mut text = out.join(newline);
    text.push_str(newline);
    Ok(text)
}

/// Where `pattern` starts in `lines` at or after `from` (from the end first with `eof`),
/// under the passes described in the module documentation.
fn seek(lines: &[&str], pattern: &[&str], from: usize, eof: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(from);
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    let passes: [fn(&str) -> std::borrow::Cow<'_, str>; 4] = [
        |s| s.into(),
        |s| s.trim_end().into(),
        |s| s.trim().into(),
        |s| normalise(s).into(),
    ];
    let starts = |start: usize| start..=last;
    for pass in passes {
        let pattern: Vec<_> = pattern.iter().map(|p| pass(p)).collect();
        let matches_at = |i: usize| {
            lines[i..i + pattern.len()]
                .iter()
                .zip(&pattern)
                .all(|(line, want)| pass(line) == *want)
        };
        if eof && matches_at(last) {
            return Some(last);
        }
        if from <= last
            && let Some(at) = starts(from).find(|&i| matches_at(i))
        {
            return Some(at);
        }
    }
    None
}

/// A line trimmed, with typographic dashes, quotes and spaces as ASCII.
fn normalise(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}'..='\u{201B}' => '\'',
            '\u{201C}'..='\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk removing `old` and adding `new`.
    fn chunk(context: Option<&str>, old: &[&str], new: &[&str], eof: bool) -> Chunk {
        let removed = old.iter().map(|s| Line::Removed(s.to_string()));
        let added = new.iter().map(|s| Line::Added(s.to_string()));
        Chunk {
            context: context.map(str::to_string),
            lines: removed.chain(added).collect(),
            end_of_file: eof,
        }
    }

    #[test]
    fn chunks_apply_in_order_after_their_context() {
        let text = "fn a() {\n    x\n}\nfn b() {\n    x\n}\n";
        let out = apply_chunks(
            text,
            &[chunk(Some("fn b() {"), &["    x"], &["    y"], false)],
        )
        .unwrap();
        assert_eq!(out, "fn a() {\n    x\n}\nfn b() {\n    y\n}\n");
    }

    #[test]
    fn whitespace_and_unicode_punctuation_are_forgiven() {
        let text = "let s = \u{201C}a \u{2014} b\u{201D};   \n";
        let out = apply_chunks(
            text,
            &[chunk(None, &["let s = \"a - b\";"], &["s()"], false)],
        )
        .unwrap();
        assert_eq!(out, "s()\n");
    }

    #[test]
    fn end_of_file_chunks_match_the_last_lines_and_crlf_is_kept() {
        let text = "x\r\ny\r\nx\r\n";
        let out = apply_chunks(text, &[chunk(None, &["x"], &["z"], true)]).unwrap();
        assert_eq!(out, "x\r\ny\r\nz\r\n");
    }

    #[test]
    fn a_missing_line_names_the_chunk() {
        let err = apply_chunks(
            "a\nb\n",
            &[
                chunk(None, &["a"], &["A"], false),
                chunk(None, &["zzz"], &[], false),
            ],
        )
        .unwrap_err();
        assert_eq!(err.chunk, 2);
        assert!(err.message.contains("zzz"), "{}", err.message);
    }
}
