//! HTML parsing with bounded work, and the DOM helpers the converters share.
//!
//! A hostile page can nest elements 100,000 deep in a megabyte. That breaks two things: every
//! recursive walk of the tree overflows the stack (htmd's did at about 1,900 nested `<b>`), and
//! html5ever's tree builder, which scans its stack of open elements for many tags, does work
//! proportional to the depth per tag (40,000 nested `<div>`: about 10 s, quadratic). So:
//!
//! - a [`NestingGuard`] between the tokenizer and the tree builder keeps the nesting it hands on
//!   under [`MAX_NESTING`]: it follows the open elements (closing what a new tag implicitly
//!   closes, such as a `<p>` before a `<div>`), gives the tree builder an end tag for every
//!   element it pops, so the builder's stack matches its own, and drops start tags that would
//!   go deeper (and their end tags); their text is kept, in the element at the limit;
//! - every walk of the tree, here and in `markdown.rs`, is a loop over an explicit stack, and
//!   markup5ever_rcdom frees a tree without recursion, so no depth can overflow the stack;
//! - parsing reads its input in slices and stops when its caller sets the stop flag (the
//!   fetch timed out or was cancelled), so abandoned work ends within one slice.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{TreeBuilder, TreeBuilderOpts};
use html5ever::{LocalName, TokenizerResult, local_name};
pub(crate) use markup5ever_rcdom::Handle;
use markup5ever_rcdom::{Node, NodeData, RcDom};

/// The deepest nesting of elements handed to the tree builder. Real pages rarely pass 60; the
/// tree builder's implied elements (`tbody`, `tr`, reopened formatting elements) can add a
/// small factor on top.
pub(crate) const MAX_NESTING: usize = 256;

/// How much input the tokenizer gets between two looks at the stop flag.
const SLICE_BYTES: usize = 64 * 1024;

/// Parsing stopped because the caller set the stop flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

/// Parses an HTML document into a DOM tree whose nesting is bounded (see the module doc).
/// Returns [`Stopped`] when `stop` is set before the end.
pub(crate) fn parse_document(html: &str, stop: &AtomicBool) -> Result<Handle, Stopped> {
    let builder = TreeBuilder::new(
        RcDom::default(),
        TreeBuilderOpts {
            scripting_enabled: true,
            ..Default::default()
        },
    );
    let tokenizer = Tokenizer::new(NestingGuard::new(builder, stop), TokenizerOpts::default());
    let queue = BufferQueue::default();
    let mut rest = html;
    while !rest.is_empty() {
        if stop.load(Ordering::Relaxed) {
            return Err(Stopped);
        }
        let mut cut = rest.len().min(SLICE_BYTES);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        queue.push_back(StrTendril::from_slice(&rest[..cut]));
        rest = &rest[cut..];
        // A `Script` result asks the caller to run a script; there is none to run.
        while !matches!(tokenizer.feed(&queue), TokenizerResult::Done) {}
    }
    tokenizer.end();
    if stop.load(Ordering::Relaxed) {
        return Err(Stopped);
    }
    Ok(tokenizer.sink.builder.sink.document.clone())
}

/// Parses HTML that no caller will abandon (search result pages read within their own limit).
pub(crate) fn parse_html(html: &str) -> Handle {
    let never = AtomicBool::new(false);
    parse_document(html, &never).expect("the stop flag is never set")
}

/// Elements that never have content: the tree builder does not keep them open.
fn is_void(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("area")
            | local_name!("base")
            | local_name!("basefont")
            | local_name!("bgsound")
            | local_name!("br")
            | local_name!("col")
            | local_name!("embed")
            | local_name!("frame")
            | local_name!("hr")
            | local_name!("image")
            | local_name!("img")
            | local_name!("input")
            | local_name!("keygen")
            | local_name!("link")
            | local_name!("meta")
            | local_name!("param")
            | local_name!("source")
            | local_name!("track")
            | local_name!("wbr")
    )
}

/// Elements whose content the tokenizer reads as text up to their end tag (in HTML; inside
/// SVG or MathML some are ordinary elements, which the limit still counts).
fn is_raw_text(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("script")
            | local_name!("style")
            | local_name!("textarea")
            | local_name!("title")
            | local_name!("xmp")
            | local_name!("iframe")
            | local_name!("noembed")
            | local_name!("noframes")
            | local_name!("noscript")
            | local_name!("plaintext")
    )
}

/// Elements that end the search for an element "in scope" (a simplification of the HTML
/// standard's scopes, enough to decide which implied end tags a start tag causes).
fn is_scope_boundary(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("html")
            | local_name!("table")
            | local_name!("td")
            | local_name!("th")
            | local_name!("caption")
            | local_name!("template")
            | local_name!("applet")
            | local_name!("marquee")
            | local_name!("object")
            | local_name!("button")
    )
}

/// Start tags that close an open `<p>` (the HTML standard's list for "in body").
fn closes_p(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("address")
            | local_name!("article")
            | local_name!("aside")
            | local_name!("blockquote")
            | local_name!("center")
            | local_name!("details")
            | local_name!("dialog")
            | local_name!("dir")
            | local_name!("div")
            | local_name!("dl")
            | local_name!("dd")
            | local_name!("dt")
            | local_name!("fieldset")
            | local_name!("figcaption")
            | local_name!("figure")
            | local_name!("footer")
            | local_name!("form")
            | local_name!("header")
            | local_name!("hgroup")
            | local_name!("hr")
            | local_name!("li")
            | local_name!("listing")
            | local_name!("main")
            | local_name!("menu")
            | local_name!("nav")
            | local_name!("ol")
            | local_name!("p")
            | local_name!("plaintext")
            | local_name!("pre")
            | local_name!("search")
            | local_name!("section")
            | local_name!("summary")
            | local_name!("table")
            | local_name!("ul")
            | local_name!("xmp")
    ) || is_heading(name)
}

fn is_heading(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("h1")
            | local_name!("h2")
            | local_name!("h3")
            | local_name!("h4")
            | local_name!("h5")
            | local_name!("h6")
    )
}

fn end_tag(name: LocalName) -> Token {
    Token::TagToken(Tag {
        kind: TagKind::EndTag,
        name,
        self_closing: false,
        attrs: Vec::new(),
    })
}

/// Sits between the tokenizer and the tree builder and bounds the nesting the builder sees
/// (see the module doc).
struct NestingGuard<'a, Sink> {
    builder: Sink,
    /// The elements this guard has let open, outermost first.
    open: RefCell<Vec<LocalName>>,
    /// How many of each name are open: most searches of `open` end here at zero.
    open_counts: RefCell<HashMap<LocalName, usize>>,
    /// Start tags dropped at the limit, by name, whose end tags are still to come.
    dropped: RefCell<HashMap<LocalName, usize>>,
    stop: &'a AtomicBool,
}

impl<'a, Sink: TokenSink> NestingGuard<'a, Sink> {
    fn new(builder: Sink, stop: &'a AtomicBool) -> Self {
        Self {
            builder,
            open: RefCell::new(Vec::new()),
            open_counts: RefCell::new(HashMap::new()),
            dropped: RefCell::new(HashMap::new()),
            stop,
        }
    }

    /// Pops the open elements from the top down to `index` (included), giving the tree
    /// builder an end tag for each, so its stack stays the guard's.
    fn close_down_to(&self, index: usize, line: u64) {
        let popped: Vec<LocalName> = self.open.borrow_mut().drain(index..).rev().collect();
        for name in popped {
            self.forget(&name);
            let _ = self.builder.process_token(end_tag(name), line);
        }
    }

    fn push(&self, name: LocalName) {
        *self
            .open_counts
            .borrow_mut()
            .entry(name.clone())
            .or_default() += 1;
        self.open.borrow_mut().push(name);
    }

    /// Takes a popped element out of the counts.
    fn forget(&self, name: &LocalName) {
        if let Some(count) = self.open_counts.borrow_mut().get_mut(name) {
            *count = count.saturating_sub(1);
        }
    }

    /// The index of the topmost open element named one of `wanted`, searching down from the
    /// top and giving up at an element `stops_at` accepts.
    fn find_open(
        &self,
        wanted: &[LocalName],
        stops_at: impl Fn(&LocalName) -> bool,
    ) -> Option<usize> {
        let counts = self.open_counts.borrow();
        if wanted
            .iter()
            .all(|name| counts.get(name).is_none_or(|&n| n == 0))
        {
            return None;
        }
        let open = self.open.borrow();
        for (index, name) in open.iter().enumerate().rev() {
            if wanted.contains(name) {
                return Some(index);
            }
            if stops_at(name) {
                return None;
            }
        }
        None
    }

    /// Closes what a start tag `name` implicitly ends: an open `<p>` before a block, the
    /// previous `<li>`, `<dt>`/`<dd>`, table cell, row or section, `<option>`, heading, `<a>`.
    fn close_implied(&self, name: &LocalName, line: u64) {
        let found = match *name {
            local_name!("li") => self.find_open(&[local_name!("li")], |n| {
                is_scope_boundary(n) || matches!(*n, local_name!("ul") | local_name!("ol"))
            }),
            local_name!("dd") | local_name!("dt") => self
                .find_open(&[local_name!("dd"), local_name!("dt")], |n| {
                    is_scope_boundary(n) || *n == local_name!("dl")
                }),
            local_name!("td") | local_name!("th") => self
                .find_open(&[local_name!("td"), local_name!("th")], |n| {
                    *n == local_name!("table")
                }),
            local_name!("tr") => {
                self.find_open(&[local_name!("tr")], |n| *n == local_name!("table"))
            }
            local_name!("thead") | local_name!("tbody") | local_name!("tfoot") => self.find_open(
                &[
                    local_name!("thead"),
                    local_name!("tbody"),
                    local_name!("tfoot"),
                ],
                |n| *n == local_name!("table"),
            ),
            local_name!("a") | local_name!("nobr") | local_name!("button") => {
                self.find_open(std::slice::from_ref(name), is_scope_boundary)
            }
            local_name!("option") | local_name!("optgroup") => {
                let open = self.open.borrow();
                let top = open.len().checked_sub(1);
                let closes = |n: &LocalName| {
                    *n == local_name!("option")
                        || (*name == local_name!("optgroup") && *n == local_name!("optgroup"))
                };
                top.filter(|&i| closes(&open[i]))
            }
            _ => None,
        };
        if let Some(index) = found {
            self.close_down_to(index, line);
        }
        if is_heading(name) {
            let top = self.open.borrow().len().checked_sub(1);
            if let Some(index) = top.filter(|&i| is_heading(&self.open.borrow()[i])) {
                self.close_down_to(index, line);
            }
        }
        if closes_p(name)
            && let Some(index) = self.find_open(&[local_name!("p")], is_scope_boundary)
        {
            self.close_down_to(index, line);
        }
    }

    fn start_tag(&self, tag: Tag, line: u64) -> TokenSinkResult<Sink::Handle> {
        let name = tag.name.clone();
        if is_void(&name)
            || matches!(
                name,
                local_name!("html") | local_name!("head") | local_name!("body")
            )
        {
            return self.builder.process_token(Token::TagToken(tag), line);
        }
        self.close_implied(&name, line);
        if is_raw_text(&name) {
            // Its content is text up to its end tag, so it can go one level past the limit;
            // dropping it would parse a script or style as markup.
            if self.open.borrow().len() > MAX_NESTING {
                *self.dropped.borrow_mut().entry(name).or_default() += 1;
                return TokenSinkResult::Continue;
            }
            self.push(name);
            return self.builder.process_token(Token::TagToken(tag), line);
        }
        if tag.self_closing {
            // `<div/>` opens a div in HTML (and closes it inside SVG): an end tag right after
            // makes both the same, an empty element, so nothing stays open unseen.
            let result = self.builder.process_token(Token::TagToken(tag), line);
            let _ = self.builder.process_token(end_tag(name), line);
            return result;
        }
        if self.open.borrow().len() >= MAX_NESTING {
            *self.dropped.borrow_mut().entry(name).or_default() += 1;
            return TokenSinkResult::Continue;
        }
        self.push(name);
        self.builder.process_token(Token::TagToken(tag), line)
    }

    fn end_tag(&self, tag: Tag, line: u64) -> TokenSinkResult<Sink::Handle> {
        if let Some(count) = self.dropped.borrow_mut().get_mut(&tag.name)
            && *count > 0
        {
            *count -= 1;
            return TokenSinkResult::Continue;
        }
        let found = self.find_open(std::slice::from_ref(&tag.name), |_| false);
        if let Some(index) = found {
            if index + 1 < self.open.borrow().len() {
                self.close_down_to(index + 1, line);
            }
            self.open.borrow_mut().truncate(index);
            self.forget(&tag.name);
        }
        // A stray end tag is passed on too: the tree builder ignores it, pops elements or
        // inserts an empty `<p>` or a `<br>`, never leaving anything new open.
        self.builder.process_token(Token::TagToken(tag), line)
    }
}

impl<Sink: TokenSink> TokenSink for NestingGuard<'_, Sink> {
    type Handle = Sink::Handle;

    fn process_token(&self, token: Token, line: u64) -> TokenSinkResult<Self::Handle> {
        if self.stop.load(Ordering::Relaxed) {
            return TokenSinkResult::Continue;
        }
        match token {
            Token::TagToken(tag) if tag.kind == TagKind::StartTag => self.start_tag(tag, line),
            Token::TagToken(tag) => self.end_tag(tag, line),
            other => self.builder.process_token(other, line),
        }
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

/// The local name of an element node.
pub(crate) fn element_name(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

/// An attribute of an element node.
pub(crate) fn attribute(node: &Node, wanted: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == wanted)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

/// Whether an element's `class` attribute has `class` among its tokens.
pub(crate) fn has_class(node: &Node, class: &str) -> bool {
    attribute(node, "class").is_some_and(|value| value.split_whitespace().any(|c| c == class))
}

/// Visits `root` and its descendants in document order (a loop, not recursion); `visit`
/// returns whether to look inside the node.
fn walk(root: &Handle, mut visit: impl FnMut(&Handle) -> bool) {
    let mut pending = vec![root.clone()];
    while let Some(node) = pending.pop() {
        if visit(&node) {
            pending.extend(node.children.borrow().iter().rev().cloned());
        }
    }
}

/// The first node (document order, `root` included) that `matches`.
pub(crate) fn find_element(root: &Handle, matches: &dyn Fn(&Node) -> bool) -> Option<Handle> {
    let mut found = None;
    walk(root, |node| {
        if found.is_some() {
            return false;
        }
        if matches(node) {
            found = Some(node.clone());
            return false;
        }
        true
    });
    found
}

/// Every node (document order) that `matches`, not looking inside a match.
pub(crate) fn find_all(root: &Handle, matches: &dyn Fn(&Node) -> bool) -> Vec<Handle> {
    let mut found = Vec::new();
    walk(root, |node| {
        if matches(node) {
            found.push(node.clone());
            return false;
        }
        true
    });
    found
}

/// The text content of a node, without scripts and styles, whitespace collapsed.
pub(crate) fn text_of(node: &Handle) -> String {
    let mut raw = String::new();
    walk(node, |node| match &node.data {
        NodeData::Text { contents } => {
            raw.push_str(&contents.borrow());
            false
        }
        _ => !matches!(element_name(node), Some("script" | "style")),
    });
    collapse_whitespace(&raw)
}

/// Runs of whitespace become one space; the ends are trimmed.
pub(crate) fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The depth of the deepest node under `root` (`root` is 0).
#[cfg(test)]
fn depth(root: &Handle) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(root.clone(), 0)];
    while let Some((node, level)) = pending.pop() {
        deepest = deepest.max(level);
        for child in node.children.borrow().iter() {
            pending.push((child.clone(), level + 1));
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(open: &str, close: &str, levels: usize) -> String {
        format!(
            "<html><body>{}deep{}</body></html>",
            open.repeat(levels),
            close.repeat(levels)
        )
    }

    #[test]
    fn nesting_past_the_limit_is_flattened_and_its_text_kept() {
        for (open, close) in [
            ("<div>", "</div>"),
            ("<b>", "</b>"),
            ("<table><tr><td>", "</td></tr></table>"),
            (
                "<div><b><i><span><ul><li>",
                "</li></ul></span></i></b></div>",
            ),
            ("<div/>", ""),
            ("<p><b a=1>", ""),
        ] {
            let document = parse_html(&nested(open, close, 20_000));
            let levels = depth(&document);
            // The limit plus html, body, and the tree builder's implied tbody and tr.
            assert!(levels <= 3 * MAX_NESTING, "{open}: {levels} levels");
            assert_eq!(text_of(&document), "deep", "{open}");
        }
    }

    #[test]
    fn ordinary_pages_keep_their_structure() {
        let document = parse_html(
            "<p>one<p>two<ul><li>a<li>b</ul><table><tr><td>1<td>2<tr><td>3</table>\
             <select><option>x<option>y</select><h1>t<h2>u</h2>",
        );
        let count = |tag: &str| find_all(&document, &|n| element_name(n) == Some(tag)).len();
        assert_eq!(count("p"), 2);
        assert_eq!(count("li"), 2);
        assert_eq!(count("td"), 3);
        assert_eq!(count("tr"), 2);
        assert_eq!(count("option"), 2);
        let li = find_all(&document, &|n| element_name(n) == Some("li"));
        assert_eq!(text_of(&li[1]), "b");
        let h2 = find_element(&document, &|n| element_name(n) == Some("h2")).unwrap();
        assert_eq!(text_of(&h2), "u");
    }

    #[test]
    fn a_script_at_the_limit_stays_a_script() {
        let html = nested("<div>", "</div>", MAX_NESTING + 10)
            .replace("deep", "<script>if (a < b) { x('<div>') }</script>text");
        let document = parse_html(&html);
        assert_eq!(text_of(&document), "text");
    }

    #[test]
    fn a_set_stop_flag_ends_parsing() {
        let stop = AtomicBool::new(true);
        assert_eq!(parse_document("<p>x</p>", &stop).map(|_| ()), Err(Stopped));
    }
}
