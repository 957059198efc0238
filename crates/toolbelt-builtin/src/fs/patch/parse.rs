//! The patch language of Codex's `apply_patch`, parsed into hunks.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path        then lines starting with '+'
//! *** Delete File: path
//! *** Update File: path
//! *** Move to: new/path     (optional, right after Update File)
//! @@ optional context line  then ' ' context, '-' removed and '+' added lines
//! *** End of File           (optional: the chunk ends the file)
//! *** End Patch
//! ```
//!
//! As lenient as Codex's parser, because models trained on it write what it accepts: markers
//! may carry surrounding whitespace, the first chunk of an Update needs no `@@`, an empty line
//! inside a chunk is an empty context line, and a patch wrapped in a shell heredoc
//! (`<<'EOF'` … `EOF`) is unwrapped. Parsing is linear in the patch's size, and the tool
//! bounds that size before calling [`parse`].

/// One change to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
    /// Create a file (or replace one) with these contents.
    Add {
        /// The path as written in the patch.
        path: String,
        /// The new file's text, each line ending in `\n`.
        contents: String,
    },
    /// Delete a file.
    Delete {
        /// The path as written in the patch.
        path: String,
    },
    /// Change a file in place, or move it with its changes.
    Update {
        /// The path as written in the patch.
        path: String,
        /// Where the changed file goes instead (`*** Move to:`).
        move_to: Option<String>,
        /// The changes, in file order.
        chunks: Vec<Chunk>,
    },
}

impl Hunk {
    /// The path the hunk names first (the source of a move).
    pub fn path(&self) -> &str {
        match self {
            Hunk::Add { path, .. } | Hunk::Delete { path } | Hunk::Update { path, .. } => path,
        }
    }
}

/// One `@@` section of an Update: lines to find and what replaces them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The text after `@@ `: a line (a function or class header, usually) that comes before
    /// the change and narrows where it is looked for.
    pub context: Option<String>,
    /// The chunk's lines, in order.
    pub lines: Vec<Line>,
    /// `*** End of File` followed: the old lines are looked for at the end first.
    pub end_of_file: bool,
}

/// One line of a chunk, without its marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// ` `: a line that stays (the file's own version of it is kept).
    Context(String),
    /// `-`: a line that goes.
    Removed(String),
    /// `+`: a line that comes.
    Added(String),
}

impl Chunk {
    /// The lines to find: context and removed lines, in order.
    pub fn old(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Removed(s) => Some(s.as_str()),
                Line::Added(_) => None,
            })
            .collect()
    }

    /// The lines as the patch writes them after the change: context and added lines.
    pub fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Added(s) => Some(s.as_str()),
                Line::Removed(_) => None,
            })
            .collect()
    }
}

/// Why a patch could not be parsed; `line` is 1-based in the patch text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid patch at line {line}: {message}")]
pub struct ParseError {
    /// The line of the patch the problem is on.
    pub line: usize,
    /// What is wrong, for the model to fix.
    pub message: String,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Parses a whole patch into its hunks, in patch order.
pub fn parse(patch: &str) -> Result<Vec<Hunk>, ParseError> {
    let all: Vec<&str> = patch.trim().lines().collect();
    let (body, first_line) = body_lines(&all)?;
    let mut hunks = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let line_no = |i: usize| first_line + i;
        let header = body[at].trim();
        if header.is_empty() {
            at += 1;
            continue;
        }
        let path_of = |rest: &str, at: usize| -> Result<String, ParseError> {
            let path = rest.trim();
            if path.is_empty() {
                return Err(ParseError {
                    line: line_no(at),
                    message: format!("'{header}' names no file"),
                });
            }
            Ok(path.to_string())
        };
        if let Some(rest) = header.strip_prefix(ADD) {
            let path = path_of(rest, at)?;
            let start = at;
            at += 1;
            let mut contents = String::new();
            while let Some(line) = body.get(at).and_then(|l| l.strip_prefix('+')) {
                contents.push_str(line);
                contents.push('\n');
                at += 1;
            }
            if at == start + 1 && body.get(at).is_some_and(|l| !is_header(l)) {
                return Err(ParseError {
                    line: line_no(at),
                    message: format!(
                        "every line of an added file starts with '+'; got '{}'",
                        body[at]
                    ),
                });
            }
            hunks.push(Hunk::Add { path, contents });
        } else if let Some(rest) = header.strip_prefix(DELETE) {
            hunks.push(Hunk::Delete {
                path: path_of(rest, at)?,
            });
            at += 1;
        } else if let Some(rest) = header.strip_prefix(UPDATE) {
            let path = path_of(rest, at)?;
            let header_at = at;
            at += 1;
            let mut move_to = None;
            if let Some(rest) = body.get(at).and_then(|l| l.trim().strip_prefix(MOVE_TO)) {
                move_to = Some(path_of(rest, at)?);
                at += 1;
            }
            let mut chunks = Vec::new();
            while at < body.len() {
                let line = body[at];
                if line.trim().is_empty() && !chunk_continues(&body[at..]) {
                    at += 1;
                    continue;
                }
                if is_header(line) {
                    break;
                }
                let (chunk, used) = parse_chunk(&body[at..], chunks.is_empty(), line_no(at))?;
                chunks.push(chunk);
                at += used;
            }
            if chunks.is_empty() {
                return Err(ParseError {
                    line: line_no(header_at),
                    message: format!("the update of '{path}' has no changes"),
                });
            }
            hunks.push(Hunk::Update {
                path,
                move_to,
                chunks,
            });
        } else {
            return Err(ParseError {
                line: line_no(at),
                message: format!(
                    "'{header}' is not a hunk header; a hunk starts with '*** Add File: path', \
                     '*** Delete File: path' or '*** Update File: path'"
                ),
            });
        }
    }
    Ok(hunks)
}

/// The lines between the Begin and End markers, and the 1-based patch line of the first.
fn body_lines<'a>(all: &'a [&'a str]) -> Result<(&'a [&'a str], usize), ParseError> {
    let framed = |lines: &'a [&'a str], first: usize| match lines {
        [begin, body @ .., end] if begin.trim() == BEGIN && end.trim() == END => {
            Ok((body, first + 1))
        }
        [begin, ..] if begin.trim() == BEGIN => Err(ParseError {
            line: first + lines.len().saturating_sub(1),
            message: format!("the last line of the patch must be '{END}'"),
        }),
        _ => Err(ParseError {
            line: first,
            message: format!("the first line of the patch must be '{BEGIN}'"),
        }),
    };
    let plain = framed(all, 1);
    if plain.is_ok() {
        return plain;
    }
    // A heredoc as a shell would have given it: `<<'EOF'` … `EOF` around the patch.
    if let [open, inner @ .., close] = all
        && matches!(open.trim(), "<<EOF" | "<<'EOF'" | "<<\"EOF\"")
        && close.trim_end().ends_with("EOF")
        && inner.len() >= 2
    {
        return framed(inner, 2);
    }
    plain
}

/// Whether a line starts a new hunk or ends the patch (`*** …`, not a chunk's own marker).
fn is_header(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.starts_with("*** ") && trimmed != END_OF_FILE
}

/// Whether blank lines at the start of `lines` are followed by more lines of the same chunk
/// (so they are empty context lines, not separators between chunks or hunks).
fn chunk_continues(lines: &[&str]) -> bool {
    lines
        .iter()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| matches!(l.chars().next(), Some(' ' | '+' | '-')))
}

/// One chunk at the start of `lines`; returns it and how many lines it used. `first` allows
/// the first chunk of an Update to start without `@@`.
fn parse_chunk(lines: &[&str], first: bool, line_no: usize) -> Result<(Chunk, usize), ParseError> {
    let head = lines[0].trim_end();
    let (context, mut at) = if head == "@@" {
        (None, 1)
    } else if let Some(context) = head.strip_prefix("@@ ") {
        (Some(context.to_string()), 1)
    } else if first {
        (None, 0)
    } else {
        return Err(ParseError {
            line: line_no,
            message: format!("expected a chunk to start with '@@' or '@@ context', got '{head}'"),
        });
    };
    let mut chunk = Chunk {
        context,
        lines: Vec::new(),
        end_of_file: false,
    };
    let mut changes = 0;
    while let Some(&line) = lines.get(at) {
        if line.trim() == END_OF_FILE {
            chunk.end_of_file = true;
            at += 1;
            break;
        }
        match line.chars().next() {
            None => {
                // An empty line where a context line was meant (editors strip the space).
                if !chunk_continues(&lines[at..]) {
                    break;
                }
                chunk.lines.push(Line::Context(String::new()));
            }
            Some(' ') => chunk.lines.push(Line::Context(line[1..].to_string())),
            Some('-') => chunk.lines.push(Line::Removed(line[1..].to_string())),
            Some('+') => chunk.lines.push(Line::Added(line[1..].to_string())),
            _ if changes == 0 && !line.starts_with("@@") && !is_header(line) => {
                return Err(ParseError {
                    line: line_no + at,
                    message: format!(
                        "unexpected line in a chunk: '{line}'; every line starts with ' ' \
                         (context), '-' (removed) or '+' (added)"
                    ),
                });
            }
            _ => break,
        }
        changes += 1;
        at += 1;
    }
    if changes == 0 {
        return Err(ParseError {
            line: line_no,
            message: "a chunk has no lines".to_string(),
        });
    }
    Ok((chunk, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_hunk_parses() {
        let hunks = parse(
            "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: b.txt\n\
             *** Update File: c.txt\n*** Move to: d.txt\n@@ fn main\n ctx\n-old\n+new\n\
             *** End of File\n*** End Patch\n",
        )
        .unwrap();
        assert_eq!(
            hunks,
            vec![
                Hunk::Add {
                    path: "a.txt".into(),
                    contents: "one\ntwo\n".into()
                },
                Hunk::Delete {
                    path: "b.txt".into()
                },
                Hunk::Update {
                    path: "c.txt".into(),
                    move_to: Some("d.txt".into()),
                    chunks: vec![Chunk {
                        context: Some("fn main".into()),
                        lines: vec![
                            Line::Context("ctx".into()),
                            Line::Removed("old".into()),
                            Line::Added("new".into()),
                        ],
                        end_of_file: true,
                    }],
                },
            ]
        );
    }

    #[test]
    fn padded_markers_a_heredoc_and_a_first_chunk_without_at_signs_are_accepted() {
        let hunks = parse(
            "<<'EOF'\n  *** Begin Patch  \n*** Update File: x.py  \n import os\n+import sys\n\n\
             @@\n-a\n+b\n *** End Patch \nEOF\n",
        )
        .unwrap();
        let Hunk::Update { path, chunks, .. } = &hunks[0] else {
            panic!("{hunks:?}")
        };
        assert_eq!(path, "x.py");
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].new_lines(), vec!["import os", "import sys"]);
    }

    #[test]
    fn malformed_patches_say_which_line_is_wrong() {
        let err = parse("hello").unwrap_err();
        assert!(err.message.contains("first line"), "{err}");
        let err = parse("*** Begin Patch\n*** Add File: a\n+x\n").unwrap_err();
        assert!(err.message.contains("last line"), "{err}");
        let err = parse("*** Begin Patch\n*** Frobnicate: a\n*** End Patch").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("*** Begin Patch\n*** Update File: a\n*** End Patch").unwrap_err();
        assert!(err.message.contains("no changes"), "{err}");
        let err =
            parse("*** Begin Patch\n*** Update File: a\n@@\nnope\n*** End Patch").unwrap_err();
        assert_eq!(err.line, 4, "{err}");
        assert!(parse("*** Begin Patch\n*** End Patch").unwrap().is_empty());
    }
}
