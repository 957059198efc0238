//! Hostile pages shared by the attack suite and the conversion bench: nesting of several
//! shapes, a large flat page, deeply nested JSON.

/// Shapes of nesting: a name, and the opening and closing run of tags of one level.
pub const SHAPES: [(&str, &str, &str); 5] = [
    ("b", "<b>", "</b>"),
    ("div", "<div>", "</div>"),
    ("table", "<table><tr><td>", "</td></tr></table>"),
    (
        "mixed",
        "<div><b><i><span><ul><li><blockquote><a href=/x>",
        "</a></blockquote></li></ul></span></i></b></div>",
    ),
    // Never closed: the tree builder keeps every one open.
    ("unclosed", "<section><em><font>", ""),
];

/// The text at the bottom of every nested page.
pub const BOTTOM: &str = "bottom-of-the-page";

/// A page whose body nests `levels` levels of `shape`, with [`BOTTOM`] inside the deepest.
pub fn nested_page(shape: &str, levels: usize) -> String {
    let (_, open, close) = SHAPES
        .iter()
        .find(|(name, _, _)| *name == shape)
        .expect("a known shape");
    let mut page = String::with_capacity((open.len() + close.len()) * levels + 128);
    page.push_str("<!DOCTYPE html><html><head><title>Deep</title></head><body>");
    for _ in 0..levels {
        page.push_str(open);
    }
    page.push_str(BOTTOM);
    for _ in 0..levels {
        page.push_str(close);
    }
    page.push_str("</body></html>");
    page
}

/// A page of ordinary paragraphs, at least `bytes` long.
pub fn flat_page(bytes: usize) -> String {
    let paragraph = "<p>Flat text with <b>some</b> markup and a <a href=\"/l\">link</a>.</p>\n";
    let mut page = String::with_capacity(bytes + 256);
    page.push_str("<!DOCTYPE html><html><body>");
    while page.len() < bytes {
        page.push_str(paragraph);
    }
    page.push_str("</body></html>");
    page
}

/// A JSON array nested `depth` deep.
pub fn deep_json(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}
