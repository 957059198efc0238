//! PDF text for Read: the text of each page of a PDF (or of a page range), read by
//! toolbelt-pdf (its parser comes with the `pdf` feature) within the bounds its docs list
//! (decompression, nesting, pages, characters, time, and a cap on readers still running after
//! a time-out); the file is at most the file tools' size limit (Read refuses larger ones
//! unread). This module adds Read's page ranges and how pages are shown.

use std::time::Duration;

pub use toolbelt_pdf::{MAX_STREAM_BYTES, PdfText, is_pdf};

/// The most pages one Read returns.
pub const MAX_PAGES: usize = 100;
/// The most characters of text one Read returns.
pub const MAX_TEXT_CHARS: usize = 200_000;
/// How long an extraction may take.
pub const TIME_LIMIT: Duration = Duration::from_secs(20);

/// A page range as Read takes it: `"3"` or `"2-5"` (1-based, inclusive).
pub fn parse_pages(spec: &str) -> Result<(u32, u32), String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                format!("pages must be a page number or a range like \"2-5\", got {spec:?}")
            })
    };
    let (first, last) = match spec.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => {
            let n = number(spec)?;
            (n, n)
        }
    };
    if last < first {
        return Err(format!("pages {spec:?}: the range ends before it starts"));
    }
    Ok((first, last))
}

/// Extracts the text of pages `range` (all when `None`, up to [`MAX_PAGES`]) from `bytes`,
/// within Read's limits.
pub async fn extract(bytes: Vec<u8>, range: Option<(u32, u32)>) -> Result<PdfText, String> {
    let limits = toolbelt_pdf::Limits {
        max_pages: MAX_PAGES,
        max_chars: MAX_TEXT_CHARS,
        time_limit: TIME_LIMIT,
    };
    toolbelt_pdf::extract(bytes, range, limits).await
}

/// The pages as Read shows them: a header line per page, then its text, and how to read the
/// pages left out.
pub fn render(text: &PdfText, shown: &str) -> String {
    let mut out = render_pages(text, shown);
    if let Some((last, _)) = text.pages.last()
        && (text.truncated || *last < text.page_count)
    {
        out.push_str(&format!(
            "\n[showing pages {}-{last} of {}; pass pages: \"{}-{}\" to read more]\n",
            text.pages[0].0,
            text.page_count,
            last + 1,
            text.page_count.min(last + MAX_PAGES as u32)
        ));
    }
    out
}

/// The pages alone: a header line per page (`--- {shown}: page 2 of 9 ---`), then its text.
pub fn render_pages(text: &PdfText, shown: &str) -> String {
    let mut out = String::new();
    for (number, page) in &text.pages {
        out.push_str(&format!(
            "--- {shown}: page {number} of {} ---\n",
            text.page_count
        ));
        out.push_str(page.trim_end());
        out.push('\n');
    }
    if text.pages.is_empty() {
        out.push_str(&format!("{shown}: the PDF has no pages.\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(parse_pages("3"), Ok((3, 3)));
        assert_eq!(parse_pages(" 2 - 5 "), Ok((2, 5)));
        assert!(parse_pages("0").is_err());
        assert!(parse_pages("5-2").unwrap_err().contains("ends before"));
        assert!(parse_pages("x").unwrap_err().contains("range like"));
    }
}
