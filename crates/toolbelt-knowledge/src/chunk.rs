//! Chunking by structure: a document becomes chunks that follow its headings, paragraphs and
//! code blocks, each with the heading path and line range a citation needs.
//!
//! Every chunk is a range of whole lines of the document (a line longer than the chunk size is
//! the one exception: it is cut into pieces that share its line number), so a citation's line
//! range is exactly what the chunk holds. The walk is one pass over the lines:
//!
//! 1. **Sections.** Markdown starts a section at every ATX heading (`#` to `######`) outside a
//!    code fence; source code at every unindented definition (`fn`, `def`, `class`, `impl`,
//!    ...); plain text has one section. A chunk never spans two sections, so a hit's heading
//!    path is the whole truth about where it sits.
//! 2. **Units.** Inside a section, paragraphs (runs of non-blank lines) and fenced code blocks
//!    (blank lines included) are the units a chunk is packed from.
//! 3. **Packing.** Units are added to the current chunk while it stays within
//!    [`ChunkOptions::max_chars`]; the next chunk of the same section starts with the last lines
//!    of the previous one, up to [`ChunkOptions::overlap_chars`], so a sentence cut at a chunk
//!    boundary is whole in one of them. A unit larger than a chunk is cut between lines.
//!
//! Markdown front matter (`---` lines around `key: value` pairs at the top) becomes the
//! chunks' user fields, and its `title` their title.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How many lines of front matter are read before it is taken for ordinary text.
const MAX_FRONT_MATTER_LINES: usize = 200;
/// How many front-matter fields are kept.
const MAX_FRONT_MATTER_FIELDS: usize = 64;
/// The longest heading kept in a heading path, in characters.
const MAX_HEADING_CHARS: usize = 200;

/// What kind of text a document is; decides how it is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocKind {
    /// Markdown: sections at headings, code fences kept whole.
    Markdown,
    /// Source code: sections at unindented definitions.
    Code,
    /// Plain text: paragraphs.
    Text,
    /// HTML: read as text with its headings, paragraphs and `<pre>` blocks (no line ranges).
    Html,
    /// PDF: the text of each page, split into paragraphs; a chunk never spans two pages and
    /// cites its page (no line ranges). Read with the `pdf` feature.
    Pdf,
}

impl DocKind {
    /// The kind a file's extension names, or `None` for files the knowledge base does not
    /// read (images, archives, binaries, and extensions it does not know).
    pub fn from_path(path: &std::path::Path) -> Option<DocKind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "md" | "markdown" | "mdx" => DocKind::Markdown,
            "txt" | "text" | "rst" | "adoc" | "org" | "log" => DocKind::Text,
            "html" | "htm" | "xhtml" => DocKind::Html,
            #[cfg(feature = "pdf")]
            "pdf" => DocKind::Pdf,
            "rs" | "py" | "go" | "js" | "mjs" | "cjs" | "ts" | "tsx" | "jsx" | "java" | "kt"
            | "c" | "h" | "cc" | "cpp" | "hpp" | "cs" | "rb" | "php" | "swift" | "scala" | "sh"
            | "bash" | "lua" | "sql" | "toml" | "yaml" | "yml" | "json" | "proto" => DocKind::Code,
            _ => return None,
        })
    }

    /// The lowercase name used in metadata and filters.
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Markdown => "markdown",
            DocKind::Code => "code",
            DocKind::Text => "text",
            DocKind::Html => "html",
            DocKind::Pdf => "pdf",
        }
    }
}

/// Chunk sizes, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// The largest chunk (default 1,500 characters, about 400 tokens; at least 64).
    pub max_chars: usize,
    /// How much of a chunk's end is repeated at the start of the next chunk of the same
    /// section (default 150; at most half of `max_chars`).
    pub overlap_chars: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            max_chars: 1500,
            overlap_chars: 150,
        }
    }
}

impl ChunkOptions {
    /// The options with their bounds applied.
    fn bounded(self) -> ChunkOptions {
        let max_chars = self.max_chars.max(64);
        ChunkOptions {
            max_chars,
            overlap_chars: self.overlap_chars.min(max_chars / 2),
        }
    }
}

/// One chunk of a document, with what a citation and a filter need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Unique in the knowledge base: the source and the chunk's position in it (`path#3`).
    pub id: String,
    /// The source: a path as the caller named it (relative to the folder it gave), or a URL.
    pub source: String,
    /// The document's kind.
    pub kind: DocKind,
    /// The document's title: front matter `title`, the first `#` heading, the HTML `<title>`.
    pub title: Option<String>,
    /// The headings this chunk sits under, outermost first.
    pub heading_path: Vec<String>,
    /// The first and last line (1-based, inclusive); `None` for HTML and PDF.
    pub lines: Option<(usize, usize)>,
    /// The PDF page the chunk is on, as `(first, last)` (1-based; a chunk never spans two
    /// pages, so both are the same); `None` for other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<(u32, u32)>,
    /// The chunk's text.
    pub text: String,
    /// User fields: the document's front matter and the caller's fields for its source.
    pub fields: BTreeMap<String, Value>,
}

impl Chunk {
    /// The text that is indexed and embedded: the heading path, then the chunk.
    pub fn search_text(&self) -> String {
        if self.heading_path.is_empty() {
            return self.text.clone();
        }
        format!("{}\n{}", self.heading_path.join(" > "), self.text)
    }

    /// Where the chunk comes from, as a reader would look it up: `path:10-24`, `file.pdf#page=3`
    /// (the form PDF viewers open at the page), or the URL.
    pub fn citation(&self) -> String {
        if let Some((first, last)) = self.pages {
            return if first == last {
                format!("{}#page={first}", self.source)
            } else {
                format!("{}#page={first}-{last}", self.source)
            };
        }
        match self.lines {
            Some((a, b)) if a == b => format!("{}:{a}", self.source),
            Some((a, b)) => format!("{}:{a}-{b}", self.source),
            None => self.source.clone(),
        }
    }
}

/// A document to chunk: its source name, kind and text.
#[derive(Debug, Clone)]
pub(crate) struct Document<'a> {
    pub(crate) source: &'a str,
    pub(crate) kind: DocKind,
    pub(crate) text: &'a str,
    /// The caller's fields for this source (front matter wins over nothing, loses to these).
    pub(crate) fields: &'a BTreeMap<String, Value>,
    /// For a PDF: each page's number and the line of `text` it starts on (0-based), in order.
    pub(crate) pages: &'a [(u32, usize)],
}

/// A section: a heading path and the lines under it.
struct Section {
    headings: Vec<String>,
    start: usize,
    end: usize,
}

/// Splits `doc` into chunks; see the [module docs](self).
pub(crate) fn chunk_document(doc: &Document<'_>, options: ChunkOptions) -> Vec<Chunk> {
    let options = options.bounded();
    let (text, title_hint) = match doc.kind {
        DocKind::Html => {
            let page = crate::html::to_text(doc.text);
            (std::borrow::Cow::Owned(page.text), page.title)
        }
        _ => (std::borrow::Cow::Borrowed(doc.text), None),
    };
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let kind = doc.kind;
    let (mut fields, body_start) = if kind == DocKind::Markdown {
        front_matter(&lines)
    } else {
        (BTreeMap::new(), 0)
    };
    for (k, v) in doc.fields {
        fields.insert(k.clone(), v.clone());
    }
    let mut sections = sections(kind, &lines, body_start, doc.pages);
    if kind == DocKind::Pdf {
        // Pages are not headings: no heading path.
        for section in &mut sections {
            section.headings.clear();
        }
    }
    let title = match fields.get("title") {
        Some(Value::String(t)) => Some(t.clone()),
        _ => title_hint.or_else(|| {
            if matches!(kind, DocKind::Markdown | DocKind::Html) {
                sections.iter().find_map(|s| s.headings.first().cloned())
            } else {
                None
            }
        }),
    };

    let mut out = Vec::new();
    for section in &sections {
        for (start, end, piece) in pack(kind, &lines, section, options) {
            let body = match piece {
                Some(p) => p,
                None => lines[start..end].join("\n"),
            };
            if body.trim().is_empty() {
                continue;
            }
            out.push(Chunk {
                id: format!("{}#{}", doc.source, out.len()),
                source: doc.source.to_owned(),
                kind,
                title: title.clone(),
                heading_path: section.headings.clone(),
                lines: matches!(kind, DocKind::Markdown | DocKind::Code | DocKind::Text)
                    .then_some((start + 1, end)),
                pages: (kind == DocKind::Pdf).then(|| page_of(doc.pages, start)),
                text: body,
                fields: fields.clone(),
            });
        }
    }
    out
}

/// The page of a PDF's line `line` (`(n, n)`; page 1 for a document without pages).
fn page_of(pages: &[(u32, usize)], line: usize) -> (u32, u32) {
    let at = pages.partition_point(|(_, start)| *start <= line);
    let number = at
        .checked_sub(1)
        .map_or(pages.first().map_or(1, |p| p.0), |i| pages[i].0);
    (number, number)
}

/// Front matter at the top of a Markdown document: its fields and the first line after it.
fn front_matter(lines: &[&str]) -> (BTreeMap<String, Value>, usize) {
    let mut fields = BTreeMap::new();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return (fields, 0);
    }
    let Some(close) = lines
        .iter()
        .take(MAX_FRONT_MATTER_LINES)
        .skip(1)
        .position(|l| matches!(l.trim_end(), "---" | "..."))
    else {
        return (fields, 0);
    };
    for line in &lines[1..=close] {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let valid_key = !key.is_empty()
            && key.len() <= 64
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_key || fields.len() >= MAX_FRONT_MATTER_FIELDS {
            continue;
        }
        fields.insert(key.to_owned(), scalar(value.trim()));
    }
    (fields, close + 2)
}

/// A front-matter value: a number, a boolean, a `[a, b]` list of strings, or a string
/// (quotes removed).
fn scalar(value: &str) -> Value {
    if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        return Value::Array(
            inner
                .split(',')
                .map(|item| unquote(item.trim()))
                .filter(|item| !item.is_empty())
                .map(|item| Value::String(item.to_owned()))
                .collect(),
        );
    }
    match value {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(n) = value.parse::<i64>() {
        return Value::from(n);
    }
    if let Ok(n) = value.parse::<f64>()
        && n.is_finite()
    {
        return Value::from(n);
    }
    Value::String(unquote(value).to_owned())
}

fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

/// An ATX heading's level and text (`## Usage` → 2, "Usage").
fn heading(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim();
    Some((level, text))
}

/// Whether `line` opens or closes a Markdown code fence.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// Words that start a definition at the start of an unindented line of source code.
const DEFINITION_WORDS: &[&str] = &[
    "fn ",
    "pub ",
    "impl ",
    "impl<",
    "struct ",
    "enum ",
    "trait ",
    "mod ",
    "def ",
    "async ",
    "class ",
    "func ",
    "function ",
    "export ",
    "interface ",
    "type ",
    "const ",
    "static ",
];

/// The heading of a definition line of source code, if it starts one.
fn definition(line: &str) -> Option<String> {
    if line.starts_with([' ', '\t', '}', ')', ']']) || line.trim().is_empty() {
        return None;
    }
    if !DEFINITION_WORDS.iter().any(|w| line.starts_with(w)) {
        return None;
    }
    let head = line.trim_end().trim_end_matches(['{', ':', '(']).trim_end();
    Some(cut_chars(head, MAX_HEADING_CHARS))
}

fn cut_chars(text: &str, max: usize) -> String {
    toolbelt_core::text::char_prefix(text, max).to_owned()
}

/// The sections of the document from `start` on.
fn sections(
    kind: DocKind,
    lines: &[&str],
    start: usize,
    page_starts: &[(u32, usize)],
) -> Vec<Section> {
    let mut out = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut current = start;
    let mut in_fence = false;
    let headings_of = |path: &[(usize, String)]| path.iter().map(|(_, h)| h.clone()).collect();
    for (i, line) in lines.iter().enumerate().skip(start) {
        let opens = match kind {
            DocKind::Markdown | DocKind::Html => {
                if is_fence(line) {
                    in_fence = !in_fence;
                    None
                } else if in_fence {
                    None
                } else {
                    heading(line).map(|(level, text)| (level, cut_chars(text, MAX_HEADING_CHARS)))
                }
            }
            DocKind::Code => definition(line).map(|h| (1, h)),
            DocKind::Text => None,
            // A page is a section: a chunk never spans two, so its page is its citation.
            DocKind::Pdf => page_starts
                .binary_search_by_key(&i, |(_, line)| *line)
                .ok()
                .filter(|_| i > start)
                .map(|_| (1, String::new())),
        };
        if let Some((level, text)) = opens {
            if i > current {
                out.push(Section {
                    headings: headings_of(&path),
                    start: current,
                    end: i,
                });
            }
            while path.last().is_some_and(|(l, _)| *l >= level) {
                path.pop();
            }
            path.push((level, text));
            current = i;
        }
    }
    if lines.len() > current {
        out.push(Section {
            headings: headings_of(&path),
            start: current,
            end: lines.len(),
        });
    }
    out
}

/// The units of a section: paragraphs, and fenced blocks whole, as line ranges.
fn units(kind: DocKind, lines: &[&str], section: &Section) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut in_fence = false;
    for (i, line) in lines
        .iter()
        .enumerate()
        .take(section.end)
        .skip(section.start)
    {
        let fence = matches!(kind, DocKind::Markdown | DocKind::Html) && is_fence(line);
        if fence && !in_fence {
            if let Some(s) = start.take() {
                out.push((s, i));
            }
            in_fence = true;
            start = Some(i);
            continue;
        }
        if in_fence {
            if fence {
                in_fence = false;
                out.push((start.take().unwrap_or(i), i + 1));
            }
            continue;
        }
        if line.trim().is_empty() {
            if let Some(s) = start.take() {
                out.push((s, i));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s, section.end));
    }
    out
}

/// Packs a section's units into chunks: `(start, end, text)` where `text` is `Some` only for
/// a piece of an over-long line (otherwise the chunk is `lines[start..end]`).
fn pack(
    kind: DocKind,
    lines: &[&str],
    section: &Section,
    options: ChunkOptions,
) -> Vec<(usize, usize, Option<String>)> {
    let len = |i: usize| lines[i].chars().count() + 1;
    let mut out = Vec::new();
    // The open chunk: its first line and the end of its last unit (exclusive), and its size.
    let mut open: Option<(usize, usize)> = None;
    let mut size = 0usize;
    let close = |open: &mut Option<(usize, usize)>,
                 size: &mut usize,
                 out: &mut Vec<(usize, usize, Option<String>)>| {
        if let Some((s, e)) = open.take() {
            out.push((s, e, None));
            // The overlap: the last lines of the chunk that fit in overlap_chars, never all.
            let mut start = e;
            let mut carried = 0;
            while start > s + 1 && carried + len(start - 1) <= options.overlap_chars {
                start -= 1;
                carried += len(start);
            }
            *size = 0;
            if start < e {
                *open = Some((start, e));
                *size = carried;
            }
        }
    };
    // What adding the lines up to `end` costs: the gap of blank lines before a unit counts,
    // as it is part of the chunk's text.
    let cost = |open: Option<(usize, usize)>, start: usize, end: usize| -> usize {
        let from = open.map_or(start, |(_, e)| e.min(start));
        (from..end).map(len).sum()
    };
    for (us, ue) in units(kind, lines, section) {
        if size + cost(open, us, ue) <= options.max_chars {
            size += cost(open, us, ue);
            open = Some(match open {
                Some((s, _)) => (s, ue),
                None => (us, ue),
            });
            continue;
        }
        // Does not fit: close what is open (a chunk that is only carried overlap is dropped,
        // its lines are already in the chunk before).
        if let Some((s, e)) = open
            && size > 0
        {
            let only_overlap = out.last().is_some_and(|(_, pe, _)| *pe == e);
            if only_overlap {
                open = None;
                size = 0;
            } else {
                open = Some((s, e));
                close(&mut open, &mut size, &mut out);
            }
        }
        if size + cost(open, us, ue) <= options.max_chars {
            size += cost(open, us, ue);
            open = Some(match open {
                Some((s, _)) => (s, ue),
                None => (us, ue),
            });
            continue;
        }
        // A unit larger than a chunk: line by line.
        open = None;
        size = 0;
        for (i, line) in lines.iter().enumerate().take(ue).skip(us) {
            let l = line.chars().count() + 1;
            if l > options.max_chars {
                if open.is_some() {
                    close(&mut open, &mut size, &mut out);
                    open = None;
                    size = 0;
                }
                for piece in pieces(line, options.max_chars) {
                    out.push((i, i + 1, Some(piece)));
                }
                continue;
            }
            if size + l > options.max_chars {
                close(&mut open, &mut size, &mut out);
            }
            open = Some(match open {
                Some((s, _)) => (s, i + 1),
                None => (i, i + 1),
            });
            size += l;
        }
    }
    if let Some((s, e)) = open
        && out.last().is_none_or(|(_, pe, _)| *pe != e)
    {
        out.push((s, e, None));
    }
    out
}

/// `line` cut into pieces of at most `max` characters.
fn pieces(line: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    chars.chunks(max).map(|c| c.iter().collect()).collect()
}
