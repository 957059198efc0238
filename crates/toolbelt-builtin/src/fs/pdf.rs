//! PDF text for Read: the text of each page of a PDF (or of a page range), extracted with
//! `lopdf` (the `pdf` feature), within bounds a hostile file cannot push past:
//!
//! - the file is at most the file tools' size limit (Read refuses larger ones unread);
//! - nesting of arrays, dictionaries and strings is bounded by the parser (`lopdf` refuses
//!   deeper than 100), so a deeply nested file is an error, not a stack overflow;
//! - every stream decompresses to at most [`MAX_STREAM_BYTES`] (object streams, xref
//!   streams, page contents and fonts' maps), so a compression bomb is refused;
//! - at most [`MAX_PAGES`] pages are read per call and at most [`MAX_TEXT_CHARS`]
//!   characters returned;
//! - the work runs on a blocking thread and the call gives up after [`TIME_LIMIT`]. Limit:
//!   the thread itself cannot be stopped, so a file that makes the parser loop keeps one
//!   blocking thread busy after the call failed (no such file is known; each stream and each
//!   object is bounded above).

use std::time::Duration;

/// The most bytes one stream may decompress to.
pub const MAX_STREAM_BYTES: usize = 32 * 1024 * 1024;
/// The most pages one Read returns.
pub const MAX_PAGES: usize = 100;
/// The most characters of text one Read returns.
pub const MAX_TEXT_CHARS: usize = 200_000;
/// How long an extraction may take.
pub const TIME_LIMIT: Duration = Duration::from_secs(20);

/// Whether `bytes` is a PDF: the `%PDF-` header within the first KiB, as readers accept it.
pub fn is_pdf(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    head.windows(5).any(|w| w == b"%PDF-")
}

/// The text of some pages of a PDF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfText {
    /// `(page number, text)` for each page returned, in order.
    pub pages: Vec<(u32, String)>,
    /// How many pages the document has.
    pub page_count: u32,
    /// Whether text was left out to keep within [`MAX_TEXT_CHARS`].
    pub truncated: bool,
}

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
/// within the time limit.
pub async fn extract(bytes: Vec<u8>, range: Option<(u32, u32)>) -> Result<PdfText, String> {
    let work = tokio::task::spawn_blocking(move || extract_blocking(&bytes, range));
    match tokio::time::timeout(TIME_LIMIT, work).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(format!("the PDF could not be read: {e}")),
        Err(_) => Err(format!(
            "the PDF took more than {} s to read; it was given up",
            TIME_LIMIT.as_secs()
        )),
    }
}

#[cfg(feature = "pdf")]
fn extract_blocking(bytes: &[u8], range: Option<(u32, u32)>) -> Result<PdfText, String> {
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(MAX_STREAM_BYTES),
        ..Default::default()
    };
    let document = lopdf::Document::load_mem_with_options(bytes, options)
        .map_err(|e| format!("not a readable PDF: {e}"))?;
    if document.is_encrypted() {
        return Err("the PDF is encrypted; its text cannot be read without the password".into());
    }
    let numbers: Vec<u32> = document.get_pages().keys().copied().collect();
    let page_count = numbers.len() as u32;
    let (first, last) = range.unwrap_or((1, page_count.max(1)));
    if page_count == 0 {
        return Ok(PdfText {
            pages: Vec::new(),
            page_count,
            truncated: false,
        });
    }
    if first > page_count {
        return Err(format!(
            "page {first} is past the end of the PDF, which has {page_count} pages"
        ));
    }
    let last = last.min(page_count);
    let mut pages = Vec::new();
    let mut chars = 0usize;
    let mut truncated = false;
    for number in first..=last {
        if pages.len() >= MAX_PAGES || chars >= MAX_TEXT_CHARS {
            truncated = true;
            break;
        }
        let text = document
            .extract_text_with_limit(&[number], MAX_STREAM_BYTES)
            .map_err(|e| format!("page {number}: {e}"))?;
        let room = MAX_TEXT_CHARS - chars;
        let text = match text.char_indices().nth(room) {
            Some((cut, _)) => {
                truncated = true;
                text[..cut].to_string()
            }
            None => text,
        };
        chars += text.chars().count();
        pages.push((number, text));
    }
    Ok(PdfText {
        pages,
        page_count,
        truncated,
    })
}

#[cfg(not(feature = "pdf"))]
fn extract_blocking(_: &[u8], _: Option<(u32, u32)>) -> Result<PdfText, String> {
    Err("this build reads no PDFs (toolbelt-builtin's `pdf` feature is off)".to_string())
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
