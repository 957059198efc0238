//! What a fetched body becomes: HTML as Markdown, other text as is, binary refused.

use std::sync::atomic::AtomicBool;

use super::dom::{self, Stopped};
use super::markdown;

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

/// Converts HTML to Markdown with bounded work (see the `dom` module): CPU-bound, so callers
/// on a runtime run it on a blocking thread and set `stop` when they stop waiting for it.
pub(crate) fn html_to_markdown(html: &str, stop: &AtomicBool) -> Result<MarkdownPage, Stopped> {
    let document = dom::parse_document(html, stop)?;
    let title = dom::find_element(&document, &|node| dom::element_name(node) == Some("title"))
        .map(|node| dom::text_of(&node))
        .filter(|t| !t.is_empty());
    let markdown = markdown::to_markdown(&document, STRIPPED_ELEMENTS, stop)?;
    Ok(MarkdownPage { title, markdown })
}

/// Keeps the first `max_chars` characters of `text` and appends a marker saying how many were
/// cut. Returns the text and the number of characters cut.
pub(crate) fn cut_to_limit(text: &str, max_chars: usize) -> (String, usize) {
    let (kept, omitted) = toolbelt_core::text::cut_noted(text, max_chars);
    (kept.into_owned(), omitted)
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
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(page.title.as_deref(), Some("T"));
        assert_eq!(page.markdown, "# Hello\n\nA **bold** move.");
    }

    #[test]
    fn cutting_counts_characters_not_bytes() {
        let (kept, omitted) = cut_to_limit("ééééé", 2);
        assert_eq!(omitted, 3);
        assert!(
            kept.starts_with("éé… [3 more characters not shown]"),
            "{kept}"
        );
        assert_eq!(cut_to_limit("short", 10), ("short".to_string(), 0));
    }
}
