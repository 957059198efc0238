//! What a fetched body becomes: HTML as Markdown, other text as is, binary refused; and the
//! small DOM helpers the result-page parsers share.

use std::rc::Rc;

use htmd::{HtmlToMarkdown, Node};
use markup5ever_rcdom::NodeData;

/// Elements dropped before HTML becomes Markdown: code, styling, navigation and embedded
/// documents carry no content a model wants to read.
const STRIPPED_ELEMENTS: &[&str] = &[
    "script", "style", "nav", "noscript", "template", "iframe", "svg", "head",
];

/// How a body is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentKind {
    /// Converted to Markdown.
    Html,
    /// Passed through.
    Text,
    /// Refused.
    Binary,
}

/// The media type of a `Content-Type` value, lowercased, without parameters.
pub(crate) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Classifies by the declared media type alone; `None` when nothing useful is declared and
/// the body has to be sniffed.
pub(crate) fn kind_of_media_type(media_type: &str) -> Option<ContentKind> {
    if media_type.is_empty() {
        return None;
    }
    if media_type == "text/html" || media_type == "application/xhtml+xml" {
        return Some(ContentKind::Html);
    }
    let (top, sub) = media_type.split_once('/').unwrap_or((media_type, ""));
    let textual_application = matches!(
        sub,
        "json"
            | "xml"
            | "javascript"
            | "ecmascript"
            | "x-javascript"
            | "yaml"
            | "x-yaml"
            | "toml"
            | "x-toml"
            | "x-sh"
            | "sql"
            | "graphql"
            | "x-www-form-urlencoded"
            | "x-ndjson"
            | "csv"
    ) || sub.ends_with("+json")
        || sub.ends_with("+xml");
    if top == "text" || (matches!(top, "application" | "image") && textual_application) {
        Some(ContentKind::Text)
    } else {
        Some(ContentKind::Binary)
    }
}

/// Sniffs an undeclared body: binary when it has NUL bytes or is not UTF-8 (a sequence cut at
/// the end by a truncated read is fine), HTML when it starts like a document.
pub(crate) fn sniff(bytes: &[u8]) -> ContentKind {
    let head = &bytes[..bytes.len().min(4096)];
    if head.contains(&0) {
        return ContentKind::Binary;
    }
    if let Err(e) = std::str::from_utf8(head)
        && (e.error_len().is_some() || e.valid_up_to() + 4 < head.len())
    {
        return ContentKind::Binary;
    }
    let start = String::from_utf8_lossy(&head[..head.len().min(512)])
        .trim_start_matches('\u{feff}')
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        ContentKind::Html
    } else {
        ContentKind::Text
    }
}

/// A page converted to Markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MarkdownPage {
    /// The document's `<title>`, if it has one.
    pub title: Option<String>,
    /// The body as Markdown, without scripts, styles and navigation.
    pub markdown: String,
}

/// Converts HTML to Markdown (CPU-bound: callers on a runtime run it on a blocking thread).
pub(crate) fn html_to_markdown(html: &str) -> MarkdownPage {
    // Compact list markers: fewer tokens for the model, same Markdown.
    let options = htmd::options::Options {
        bullet_list_marker: htmd::options::BulletListMarker::Dash,
        ul_bullet_spacing: 1,
        ol_number_spacing: 1,
        ..Default::default()
    };
    let converter = HtmlToMarkdown::builder()
        .options(options)
        .skip_tags(STRIPPED_ELEMENTS.to_vec())
        .build();
    let Ok(tree) = converter.html_to_tree(html) else {
        return MarkdownPage {
            title: None,
            markdown: html.to_string(),
        };
    };
    let title = find_element(&tree, &|node| element_name(node) == Some("title"))
        .map(|node| text_of(&node))
        .filter(|t| !t.is_empty());
    let markdown = converter.tree_to_markdown(&tree);
    MarkdownPage { title, markdown }
}

/// Parses HTML into a DOM tree.
pub(crate) fn parse_html(html: &str) -> Option<Rc<Node>> {
    HtmlToMarkdown::new().html_to_tree(html).ok()
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

/// The first node (depth first, `root` included) that `matches`.
pub(crate) fn find_element(root: &Rc<Node>, matches: &dyn Fn(&Node) -> bool) -> Option<Rc<Node>> {
    if matches(root) {
        return Some(root.clone());
    }
    root.children
        .borrow()
        .iter()
        .find_map(|child| find_element(child, matches))
}

/// Every node (depth first) that `matches`, not looking inside a match.
pub(crate) fn find_all(root: &Rc<Node>, matches: &dyn Fn(&Node) -> bool, out: &mut Vec<Rc<Node>>) {
    if matches(root) {
        out.push(root.clone());
        return;
    }
    for child in root.children.borrow().iter() {
        find_all(child, matches, out);
    }
}

/// The text content of a node, whitespace collapsed.
pub(crate) fn text_of(node: &Rc<Node>) -> String {
    fn collect(node: &Node, out: &mut String) {
        match &node.data {
            NodeData::Text { contents } => out.push_str(&contents.borrow()),
            _ => {
                if matches!(element_name(node), Some("script" | "style")) {
                    return;
                }
                for child in node.children.borrow().iter() {
                    collect(child, out);
                }
            }
        }
    }
    let mut raw = String::new();
    collect(node, &mut raw);
    collapse_whitespace(&raw)
}

/// Runs of whitespace become one space; the ends are trimmed.
pub(crate) fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Keeps the first `max_chars` characters of `text` and appends a marker saying how many were
/// cut. Returns the text and the number of characters cut.
pub(crate) fn cut_to_limit(text: &str, max_chars: usize) -> (String, usize) {
    let Some((cut_at, _)) = text.char_indices().nth(max_chars) else {
        return (text.to_string(), 0);
    };
    let omitted = text[cut_at..].chars().count();
    let mut kept = text[..cut_at].to_string();
    kept.push_str(&format!(
        "\n\n[Content truncated: {omitted} more characters not shown]"
    ));
    (kept, omitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_decide_the_treatment() {
        assert_eq!(kind_of_media_type("text/html"), Some(ContentKind::Html));
        assert_eq!(
            kind_of_media_type("application/xhtml+xml"),
            Some(ContentKind::Html)
        );
        assert_eq!(kind_of_media_type("text/plain"), Some(ContentKind::Text));
        assert_eq!(
            kind_of_media_type("application/json"),
            Some(ContentKind::Text)
        );
        assert_eq!(
            kind_of_media_type("application/atom+xml"),
            Some(ContentKind::Text)
        );
        assert_eq!(kind_of_media_type("image/svg+xml"), Some(ContentKind::Text));
        assert_eq!(kind_of_media_type("image/png"), Some(ContentKind::Binary));
        assert_eq!(
            kind_of_media_type("application/pdf"),
            Some(ContentKind::Binary)
        );
        assert_eq!(
            kind_of_media_type("application/octet-stream"),
            Some(ContentKind::Binary)
        );
        assert_eq!(kind_of_media_type(""), None);
    }

    #[test]
    fn undeclared_bodies_are_sniffed() {
        assert_eq!(sniff(b"<!DOCTYPE html><p>x"), ContentKind::Html);
        assert_eq!(sniff(b"just words"), ContentKind::Text);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), ContentKind::Binary);
        assert_eq!(sniff(b"\xff\xfe\xfd not utf-8 at all"), ContentKind::Binary);
        // A multi-byte character cut by a truncated read is still text.
        assert_eq!(sniff(&"abc é".as_bytes()[..5]), ContentKind::Text);
    }

    #[test]
    fn scripts_styles_and_navigation_are_stripped() {
        let page = html_to_markdown(
            "<html><head><title>T</title><style>p{}</style></head><body><nav>Menu</nav>\
             <h1>Hello</h1><script>alert(1)</script><p>A <b>bold</b> move.</p></body></html>",
        );
        assert_eq!(page.title.as_deref(), Some("T"));
        assert_eq!(page.markdown, "# Hello\n\nA **bold** move.");
    }

    #[test]
    fn cutting_counts_characters_not_bytes() {
        let (kept, omitted) = cut_to_limit("ééééé", 2);
        assert_eq!(omitted, 3);
        assert!(kept.starts_with("éé\n\n[Content truncated: 3 more"));
        assert_eq!(cut_to_limit("short", 10), ("short".to_string(), 0));
    }
}
