//! A DOM tree as Markdown, in one pass over an explicit stack: no recursion (a deep tree
//! cannot overflow the stack) and no text copied once per nesting level (the time is linear
//! in the page).
//!
//! What it writes: headings, paragraphs, emphasis, inline code, links, images, nested lists,
//! block quotes, fenced code blocks and GitHub tables (a table inside a table cell becomes
//! the cell's text). Nesting past [`MAX_INDENTED_LEVELS`] lists or quotes is written at that
//! indentation, so a deep page cannot make every line longer than its content.

use std::sync::atomic::{AtomicBool, Ordering};

use markup5ever_rcdom::{Handle, NodeData};

use super::dom::{Stopped, attribute, element_name};

/// Lists and block quotes deeper than this add no more indentation or `>`.
pub(crate) const MAX_INDENTED_LEVELS: usize = 8;

/// How many nodes are visited between two looks at the stop flag.
const NODES_PER_STOP_CHECK: usize = 4096;

/// Converts the tree under `root` to Markdown, leaving out the `skipped` elements and what is
/// inside them. Returns [`Stopped`] when `stop` is set before the end.
pub(crate) fn to_markdown(
    root: &Handle,
    skipped: &[&str],
    stop: &AtomicBool,
) -> Result<String, Stopped> {
    let mut writer = Writer::default();
    let mut pending = vec![Step::Enter(root.clone())];
    let mut visited = 0usize;
    while let Some(step) = pending.pop() {
        visited += 1;
        if visited.is_multiple_of(NODES_PER_STOP_CHECK) && stop.load(Ordering::Relaxed) {
            return Err(Stopped);
        }
        match step {
            Step::Leave(close) => writer.leave(close),
            Step::Enter(node) => match &node.data {
                NodeData::Text { contents } => writer.text(&contents.borrow()),
                NodeData::Document => {
                    push_children(&mut pending, &node);
                }
                NodeData::Element { .. } => {
                    let name = element_name(&node).unwrap_or_default();
                    if skipped.contains(&name) {
                        continue;
                    }
                    let close = writer.enter(name, &node);
                    pending.push(Step::Leave(close));
                    push_children(&mut pending, &node);
                }
                _ => {}
            },
        }
    }
    Ok(writer.finish())
}

enum Step {
    Enter(Handle),
    Leave(Close),
}

/// Queues `node`'s children to be entered next, first child on top.
fn push_children(pending: &mut Vec<Step>, node: &Handle) {
    pending.extend(
        node.children
            .borrow()
            .iter()
            .rev()
            .cloned()
            .map(Step::Enter),
    );
}

/// What leaving an element does, decided when entering it.
enum Close {
    Nothing,
    /// A block ends: at least this many line breaks before what follows.
    Block(u8),
    /// Emphasis or inline code ends (the marker, and where the element's output began).
    Marker {
        marker: &'static str,
        kind: Inline,
        start: Option<Mark>,
    },
    Link {
        href: String,
        start: Mark,
    },
    Heading(Mark),
    Pre,
    List,
    ListItem,
    Quote,
    Table,
    Row,
    Cell,
    /// A table, row or cell inside a table cell: its content is the cell's text.
    CellSeparator,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inline {
    Bold,
    Italic,
    Strike,
    Code,
}

/// The output position and pending layout at an element's start, and where its content
/// begins (after its opening marker), to take back an element that wrote nothing
/// (`<a href=x></a>`, `<b> </b>`).
#[derive(Clone, Copy)]
struct Mark {
    len: usize,
    newlines: u8,
    space: bool,
    content_at: usize,
}

/// A container that prefixes its lines: a quote's `> ` or a list item's indentation.
struct Container {
    prefix: &'static str,
    /// A list item's marker, written on its first line instead of the prefix.
    marker: Option<String>,
}

#[derive(Default)]
struct List {
    ordered: bool,
    next: u64,
}

/// A table being read; rows are written when it ends.
#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Option<Vec<String>>,
}

#[derive(Default)]
struct Writer {
    out: String,
    /// Line breaks owed before the next content (0, 1 or 2).
    newlines: u8,
    /// A space owed before the next content.
    space: bool,
    /// The next content follows an opening marker, so owed spaces go after the marker.
    after_opening: bool,
    containers: Vec<Container>,
    /// A container opened and nothing written in it yet: its first block needs no blank
    /// line.
    fresh_container: bool,
    lists: Vec<List>,
    /// Open inline elements by kind: only the outermost writes its marker.
    inline_depth: [usize; 4],
    pre_depth: usize,
    heading_depth: usize,
    tables: Vec<Table>,
    /// The output being written when each open cell started (a cell writes to a buffer).
    cell_outer: Vec<String>,
}

const HEADING_MARKERS: [&str; 6] = ["# ", "## ", "### ", "#### ", "##### ", "###### "];

impl Writer {
    fn enter(&mut self, name: &str, node: &Handle) -> Close {
        match name {
            "p" | "address" | "figure" | "details" | "summary" | "dl" => {
                self.block(2);
                Close::Block(2)
            }
            "div" | "section" | "article" | "main" | "header" | "footer" | "aside" | "dt"
            | "dd" | "figcaption" | "caption" | "center" | "form" | "fieldset" | "legend"
            | "hgroup" | "body" | "html" => {
                self.block(1);
                Close::Block(1)
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.block(2);
                let level = usize::from(name.as_bytes()[1] - b'1');
                let marker = if self.heading_depth == 0 && self.cell_outer.is_empty() {
                    HEADING_MARKERS[level]
                } else {
                    ""
                };
                let start = self.open(marker);
                self.heading_depth += 1;
                Close::Heading(start)
            }
            "b" | "strong" => self.open_marker("**", Inline::Bold),
            "i" | "em" => self.open_marker("*", Inline::Italic),
            "s" | "del" | "strike" => self.open_marker("~~", Inline::Strike),
            "code" | "kbd" | "samp" | "tt" if self.pre_depth == 0 => {
                self.open_marker("`", Inline::Code)
            }
            "a" => match attribute(node, "href") {
                Some(href) if is_linkable(&href) && self.pre_depth == 0 => {
                    let start = self.open("[");
                    Close::Link {
                        href: href.trim().to_string(),
                        start,
                    }
                }
                _ => Close::Nothing,
            },
            "img" => {
                let alt = attribute(node, "alt").unwrap_or_default();
                let alt = super::dom::collapse_whitespace(&alt);
                match attribute(node, "src") {
                    Some(src) if is_linkable(&src) && self.pre_depth == 0 => {
                        self.raw(&format!("![{}]({})", escape(&alt), link_target(&src)));
                    }
                    _ => self.text(&alt),
                }
                Close::Nothing
            }
            "br" => {
                self.line_break();
                Close::Nothing
            }
            "hr" => {
                self.block(2);
                self.raw("---");
                self.block(2);
                Close::Nothing
            }
            "pre" => {
                self.block(2);
                if self.pre_depth == 0 {
                    let language = code_language(node);
                    self.raw(&format!("```{language}"));
                    self.line_break();
                }
                self.pre_depth += 1;
                Close::Pre
            }
            "ul" | "ol" | "menu" | "dir" => {
                self.block(if self.containers.is_empty() { 2 } else { 1 });
                let start = attribute(node, "start").and_then(|s| s.trim().parse().ok());
                self.lists.push(List {
                    ordered: name == "ol",
                    next: start.unwrap_or(1),
                });
                Close::List
            }
            "li" => {
                self.block(1);
                let marker = match self.lists.last_mut() {
                    Some(list) if list.ordered => {
                        let number = list.next;
                        list.next = number.saturating_add(1);
                        format!("{number}. ")
                    }
                    _ => "- ".to_string(),
                };
                let prefix = if marker.len() == 2 { "  " } else { "   " };
                self.settle_blank_lines();
                self.containers.push(Container {
                    prefix,
                    marker: Some(marker),
                });
                self.fresh_container = true;
                Close::ListItem
            }
            "blockquote" => {
                self.block(2);
                self.settle_blank_lines();
                self.containers.push(Container {
                    prefix: "> ",
                    marker: None,
                });
                self.fresh_container = true;
                Close::Quote
            }
            "table" | "tr" | "td" | "th" if !self.cell_outer.is_empty() => {
                self.space = true;
                Close::CellSeparator
            }
            "table" => {
                self.block(2);
                self.tables.push(Table::default());
                Close::Table
            }
            "tr" => {
                if let Some(table) = self.tables.last_mut() {
                    table.rows.extend(table.row.take());
                    table.row = Some(Vec::new());
                }
                Close::Row
            }
            "td" | "th" if !self.tables.is_empty() => {
                let outer = std::mem::take(&mut self.out);
                self.cell_outer.push(outer);
                self.newlines = 0;
                self.space = false;
                Close::Cell
            }
            _ => Close::Nothing,
        }
    }

    fn leave(&mut self, close: Close) {
        match close {
            Close::Nothing => {}
            Close::Block(newlines) => self.block(newlines),
            Close::Marker {
                marker,
                kind,
                start,
            } => {
                self.inline_depth[kind as usize] -= 1;
                if let Some(start) = start {
                    self.close_marker(marker, start);
                }
            }
            Close::Link { href, start } => {
                if self.out.len() == start.content_at {
                    self.rollback(start);
                } else {
                    self.after_opening = false;
                    let space = std::mem::take(&mut self.space);
                    self.out.push_str("](");
                    self.out.push_str(&link_target(&href));
                    self.out.push(')');
                    self.space = space;
                }
            }
            Close::Heading(start) => {
                self.heading_depth -= 1;
                if self.heading_depth == 0 {
                    if self.out.len() == start.content_at {
                        self.rollback(start);
                    }
                    self.after_opening = false;
                    self.block(2);
                }
            }
            Close::Pre => {
                self.pre_depth -= 1;
                if self.pre_depth == 0 {
                    if !self.out.ends_with('\n') {
                        self.line_break();
                    }
                    self.raw("```");
                    self.block(2);
                }
            }
            Close::List => {
                self.lists.pop();
                self.block(if self.containers.is_empty() { 2 } else { 1 });
            }
            Close::ListItem | Close::Quote => {
                self.containers.pop();
                self.fresh_container = false;
                self.block(1);
            }
            Close::Table => {
                if let Some(mut table) = self.tables.pop() {
                    table.rows.extend(table.row.take());
                    self.write_table(&table.rows);
                }
                self.block(2);
            }
            Close::Row => {
                if let Some(table) = self.tables.last_mut() {
                    table.rows.extend(table.row.take());
                }
            }
            Close::Cell => {
                let outer = self.cell_outer.pop().unwrap_or_default();
                let cell = std::mem::replace(&mut self.out, outer);
                let cell = cell.split_whitespace().collect::<Vec<_>>().join(" ");
                let cell = cell.replace('|', "\\|");
                if let Some(table) = self.tables.last_mut() {
                    table.row.get_or_insert_with(Vec::new).push(cell);
                }
                self.newlines = 0;
                self.space = false;
                self.after_opening = false;
            }
            Close::CellSeparator => self.space = true,
        }
    }

    /// Text of the page: written as is inside `<pre>`, otherwise with whitespace collapsed and
    /// Markdown's special characters escaped.
    fn text(&mut self, text: &str) {
        if self.pre_depth > 0 {
            let mut lines = text.split('\n');
            if let Some(first) = lines.next() {
                self.raw_unspaced(first);
            }
            for line in lines {
                self.line_break();
                self.raw_unspaced(line);
            }
            return;
        }
        if text.starts_with(char::is_whitespace) {
            self.space = true;
        }
        let mut words = text.split_whitespace().peekable();
        while let Some(word) = words.next() {
            let escaped = escape(word);
            let at_line_start = self.at_line_start();
            self.content(|out| {
                if at_line_start && starts_like_markdown(word) {
                    out.push('\\');
                }
                out.push_str(&escaped);
            });
            if words.peek().is_some() {
                self.space = true;
            }
        }
        if text.ends_with(char::is_whitespace) && !text.trim().is_empty() {
            self.space = true;
        }
    }

    /// Asks for at least `newlines` line breaks before the next content.
    fn block(&mut self, newlines: u8) {
        if !self.cell_outer.is_empty() || self.heading_depth > 0 {
            self.space = true;
            return;
        }
        let newlines = if self.fresh_container {
            newlines.min(1)
        } else {
            newlines
        };
        self.newlines = self.newlines.max(newlines);
        self.space = false;
    }

    /// Writes the owed blank lines now, with the prefixes of the containers open now, before
    /// a new container adds its own (the blank line before a quote has no `>`).
    fn settle_blank_lines(&mut self) {
        if self.newlines < 2 || self.out.is_empty() || !self.cell_outer.is_empty() {
            return;
        }
        for _ in 1..self.newlines {
            self.out.push('\n');
            self.write_prefix(true);
        }
        self.newlines = 1;
    }

    /// A line break inside a block (`<br>`, a line of `<pre>`).
    fn line_break(&mut self) {
        if (!self.cell_outer.is_empty() || self.heading_depth > 0) && self.pre_depth == 0 {
            self.space = true;
            return;
        }
        if self.out.is_empty() {
            return;
        }
        self.out.push('\n');
        self.write_prefix(false);
        self.space = false;
    }

    /// Writes Markdown syntax (no escaping).
    fn raw(&mut self, text: &str) {
        self.content(|out| out.push_str(text));
    }

    /// Writes preformatted text: owed line breaks, but no owed space.
    fn raw_unspaced(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.space = false;
        self.raw(text);
    }

    /// Writes content after what the layout owes: line breaks and the line's prefix, or a
    /// space.
    fn content(&mut self, write: impl FnOnce(&mut String)) {
        if self.newlines > 0 && !self.out.is_empty() {
            for _ in 1..self.newlines {
                self.out.push('\n');
                self.write_prefix(true);
            }
            self.out.push('\n');
            self.write_prefix(false);
            self.space = false;
        } else if self.out.is_empty() || self.out.ends_with('\n') {
            self.write_prefix(false);
        } else if self.space && !self.after_opening && !self.out.ends_with(' ') {
            self.out.push(' ');
        }
        self.newlines = 0;
        self.space = false;
        self.after_opening = false;
        self.fresh_container = false;
        write(&mut self.out);
    }

    /// Writes the prefixes of the open containers at the start of a line; a list item's
    /// marker on its first line. `blank` trims a prefix for an empty line.
    fn write_prefix(&mut self, blank: bool) {
        if !self.cell_outer.is_empty() {
            return;
        }
        let start = self.out.len();
        let last = self.containers.len().saturating_sub(1);
        for (index, container) in self.containers.iter_mut().enumerate() {
            let deep = index >= MAX_INDENTED_LEVELS && index != last;
            match container.marker.take() {
                Some(marker) if blank => container.marker = Some(marker),
                // The marker of an item past the indentation limit is lost with it.
                Some(_) if deep => {}
                Some(marker) => self.out.push_str(&marker),
                None if deep => {}
                None => self.out.push_str(container.prefix),
            }
        }
        if blank {
            let kept = self.out[start..].trim_end().len();
            self.out.truncate(start + kept);
        }
    }

    fn at_line_start(&self) -> bool {
        self.newlines > 0 || self.out.is_empty() || self.out.ends_with('\n')
    }

    fn open_marker(&mut self, marker: &'static str, kind: Inline) -> Close {
        let depth = &mut self.inline_depth[kind as usize];
        *depth += 1;
        let start = (*depth == 1 && self.pre_depth == 0).then(|| self.open(marker));
        Close::Marker {
            marker,
            kind,
            start,
        }
    }

    fn close_marker(&mut self, marker: &str, start: Mark) {
        if self.out.len() == start.content_at {
            self.rollback(start);
            return;
        }
        // A space before the closing marker goes after it.
        let space = std::mem::take(&mut self.space);
        self.after_opening = false;
        self.out.push_str(marker);
        self.space = space;
    }

    /// Writes an element's opening marker (none for `""`); owed spaces go after it.
    fn open(&mut self, marker: &str) -> Mark {
        let mut start = Mark {
            len: self.out.len(),
            newlines: self.newlines,
            space: self.space,
            content_at: 0,
        };
        if !marker.is_empty() {
            self.raw(marker);
            self.after_opening = true;
        }
        start.content_at = self.out.len();
        start
    }

    fn rollback(&mut self, start: Mark) {
        self.out.truncate(start.len);
        self.newlines = start.newlines;
        self.space = start.space;
        self.after_opening = false;
    }

    fn write_table(&mut self, rows: &[Vec<String>]) {
        let Some(header) = rows.first() else {
            return;
        };
        for (index, row) in rows.iter().enumerate() {
            if row.is_empty() {
                continue;
            }
            self.block(1);
            self.raw(&format!("| {} |", row.join(" | ")));
            if index == 0 {
                self.block(1);
                let separator = vec!["---"; header.len().max(1)].join(" | ");
                self.raw(&format!("| {separator} |"));
            }
        }
    }

    fn finish(self) -> String {
        self.out.trim_end().trim_start_matches('\n').to_string()
    }
}

/// Whether a URL is worth writing as a link (not a script, not a huge inline image).
fn is_linkable(url: &str) -> bool {
    let url = url.trim();
    let lower = url.get(..11).unwrap_or(url).to_ascii_lowercase();
    !url.is_empty() && !lower.starts_with("javascript:") && !lower.starts_with("data:")
}

/// A URL as a Markdown link target: in angle brackets when it has spaces or parentheses.
fn link_target(url: &str) -> String {
    let url = url.trim();
    if url.contains([' ', '(', ')', '<', '>']) {
        format!("<{}>", url.replace('<', "%3C").replace('>', "%3E"))
    } else {
        url.to_string()
    }
}

/// The language of a code block, from a `language-x` or `lang-x` class on the `<pre>` or its
/// first `<code>`.
fn code_language(pre: &Handle) -> String {
    let code = pre
        .children
        .borrow()
        .iter()
        .find(|c| element_name(c) == Some("code"))
        .cloned();
    [Some(pre.clone()), code]
        .into_iter()
        .flatten()
        .filter_map(|n| attribute(&n, "class"))
        .flat_map(|class| {
            class
                .split_whitespace()
                .filter_map(|c| c.strip_prefix("language-").or(c.strip_prefix("lang-")))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .find(|l| {
            l.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-_.#".contains(c))
        })
        .unwrap_or_default()
}

/// Escapes the characters that would turn page text into Markdown emphasis, code or links.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '`' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether text at the start of a line would read as a heading, quote or list item.
fn starts_like_markdown(word: &str) -> bool {
    if word.starts_with(['#', '>']) || matches!(word, "-" | "+" | "=" | "---") {
        return true;
    }
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && matches!(&word[digits..], "." | ")")
}

#[cfg(test)]
mod tests {
    use super::super::dom::parse_html;
    use super::*;

    fn md(html: &str) -> String {
        let never = AtomicBool::new(false);
        to_markdown(&parse_html(html), &["script", "head"], &never).unwrap()
    }

    #[test]
    fn blocks_and_inline_markup() {
        assert_eq!(
            md(
                "<h1>Hello</h1><p>A <b>bold</b> and <em> slanted </em> move, <code>x()</code>.</p>\
                <p>See <a href='/d'>the <i>docs</i></a>.<br>Next line</p><hr><p>end</p>"
            ),
            "# Hello\n\nA **bold** and *slanted* move, `x()`.\n\nSee [the *docs*](/d).\n\
             Next line\n\n---\n\nend"
        );
    }

    #[test]
    fn empty_markup_writes_nothing() {
        assert_eq!(
            md("<p>a <b> </b><a href='x'></a><i></i>b</p><h2></h2>"),
            "a b"
        );
    }

    #[test]
    fn nested_lists_quotes_and_code() {
        assert_eq!(
            md("<ul><li>one<ul><li>inner</li></ul></li><li>two</li></ul>\
                <ol start=3><li>three</li><li>four</li></ol>\
                <blockquote><p>said</p><p>twice</p></blockquote>\
                <pre><code class='language-rust'>fn main() {\n    *x\n}</code></pre>"),
            "- one\n  - inner\n- two\n\n3. three\n4. four\n\n> said\n>\n> twice\n\n\
             ```rust\nfn main() {\n    *x\n}\n```"
        );
    }

    #[test]
    fn tables_become_github_tables() {
        assert_eq!(
            md("<table><tr><th>a</th><th>b|c</th></tr><tr><td>1</td>\
                <td><table><tr><td>x</td><td>y</td></tr></table></td></tr></table>"),
            "| a | b\\|c |\n| --- | --- |\n| 1 | x y |"
        );
    }

    #[test]
    fn page_text_is_escaped() {
        assert_eq!(
            md("<p># not a heading</p><p>2. not a list, *not* [a link]</p>"),
            "\\# not a heading\n\n\\2. not a list, \\*not\\* \\[a link\\]"
        );
    }

    #[test]
    fn deep_lists_stop_indenting() {
        let html = format!("{}deep{}", "<ul><li>".repeat(50), "</li></ul>".repeat(50));
        let text = md(&html);
        let last = text.lines().last().unwrap();
        assert!(last.ends_with("- deep"), "{last}");
        assert!(last.len() < 2 * 3 * MAX_INDENTED_LEVELS + 10, "{last}");
    }

    #[test]
    fn a_set_stop_flag_ends_the_conversion() {
        let html = "<p>x</p>".repeat(10_000);
        let stop = AtomicBool::new(true);
        assert_eq!(to_markdown(&parse_html(&html), &[], &stop), Err(Stopped));
    }
}
