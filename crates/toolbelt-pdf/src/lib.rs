//! PDF text by page, for every part of Toolbelt that reads PDFs (Read, WebFetch, the
//! knowledge base), within bounds a hostile file cannot push past:
//!
//! - the caller bounds the file's size before it hands the bytes over;
//! - nesting of arrays, dictionaries and strings is bounded by the parser (`lopdf` refuses
//!   deeper than 100), so a deeply nested file is an error, not a stack overflow;
//! - every stream decompresses to at most [`MAX_STREAM_BYTES`] (object streams, xref
//!   streams, page contents and fonts' maps), so a compression bomb is refused;
//! - at most [`Limits::max_pages`] pages are read and at most [`Limits::max_chars`]
//!   characters returned;
//! - the work runs on a thread of its own and the call gives up after
//!   [`Limits::time_limit`]. A thread cannot be killed, so the limit is kept in two more ways:
//!   the thread checks between pages whether its caller gave up and stops there (a slow
//!   document of many pages ends at the next page), and at most [`MAX_RUNNING`] extractions
//!   run at once, abandoned ones included, so files that make the parser loop on one page
//!   cannot pile up threads: past that, `extract` fails at once and says why. The threads
//!   are not tokio's blocking pool, so a stuck parse never delays a file read or a database
//!   call of the same process.
//!
//! The `extract` feature brings in the parser; without it [`extract`] says this build reads
//! no PDFs, and [`is_pdf`] still tells a PDF from text.
//!
//! ```
//! assert!(toolbelt_pdf::is_pdf(b"%PDF-1.7\n..."));
//! assert!(!toolbelt_pdf::is_pdf(b"# a Markdown file"));
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The most bytes one stream may decompress to.
pub const MAX_STREAM_BYTES: usize = 32 * 1024 * 1024;
/// The most extractions running at once in a process, given-up ones included.
pub const MAX_RUNNING: usize = 4;

/// How much one extraction may read and how long it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most pages returned (default 100, what one Read shows).
    pub max_pages: usize,
    /// The most characters of text returned (default 200,000).
    pub max_chars: usize,
    /// How long the extraction may take (default 20 s).
    pub time_limit: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pages: 100,
            max_chars: 200_000,
            time_limit: Duration::from_secs(20),
        }
    }
}

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
    /// Whether pages or text were left out to keep within the [`Limits`].
    pub truncated: bool,
}

/// Extractions running now (given-up ones included), bounded by [`MAX_RUNNING`].
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// How many extractions are running now, given-up ones included.
pub fn running() -> usize {
    RUNNING.load(Ordering::SeqCst)
}

/// Extracts the text of pages `range` (1-based, inclusive; from the first when `None`)
/// from `bytes`, within `limits`; see the [crate docs](crate) for the bounds.
pub async fn extract(
    bytes: Vec<u8>,
    range: Option<(u32, u32)>,
    limits: Limits,
) -> Result<PdfText, String> {
    run_bounded(limits.time_limit, move |cancelled| {
        extract_blocking(&bytes, range, limits, cancelled)
    })
    .await?
}

/// Counts a running extraction for as long as its thread lives.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        RUNNING
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_RUNNING).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `work` on a thread of its own, waiting at most `limit`; on time-out the flag `work`
/// is given is set, so it can stop at its next check.
async fn run_bounded<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce(&AtomicBool) -> T + Send + 'static,
) -> Result<T, String> {
    let slot = Slot::take().ok_or_else(|| {
        format!(
            "{MAX_RUNNING} PDF extractions are still running (PDFs that took too long keep \
             their thread until it ends); try again later"
        )
    })?;
    let cancelled = Arc::new(AtomicBool::new(false));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let flag = cancelled.clone();
    std::thread::Builder::new()
        .name("toolbelt-pdf".into())
        .spawn(move || {
            let _slot = slot;
            // The receiver is gone when the caller gave up: nothing to tell.
            let _ = tx.send(work(&flag));
        })
        .map_err(|e| format!("cannot start the PDF reader: {e}"))?;
    match tokio::time::timeout(limit, rx).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err("the PDF reader failed (it panicked)".into()),
        Err(_) => {
            cancelled.store(true, Ordering::SeqCst);
            Err(format!(
                "the PDF took more than {} s to read; it was given up",
                limit.as_secs_f64()
            ))
        }
    }
}

#[cfg(feature = "extract")]
fn extract_blocking(
    bytes: &[u8],
    range: Option<(u32, u32)>,
    limits: Limits,
    cancelled: &AtomicBool,
) -> Result<PdfText, String> {
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
        if cancelled.load(Ordering::SeqCst) {
            return Err("given up".into());
        }
        if pages.len() >= limits.max_pages || chars >= limits.max_chars {
            truncated = true;
            break;
        }
        let text = document
            .extract_text_with_limit(&[number], MAX_STREAM_BYTES)
            .map_err(|e| format!("page {number}: {e}"))?;
        let room = limits.max_chars - chars;
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

#[cfg(not(feature = "extract"))]
fn extract_blocking(
    _: &[u8],
    _: Option<(u32, u32)>,
    _: Limits,
    _: &AtomicBool,
) -> Result<PdfText, String> {
    Err("this build reads no PDFs (the `pdf` feature is off)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until no extraction runs. The counter is global, so the tests that take slots
    /// run one at a time under [`SERIAL`].
    fn idle() {
        toolbelt_testkit::eventually("every PDF reader ended", Duration::from_secs(10), || {
            (running() == 0).then_some(())
        });
    }

    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[tokio::test]
    async fn a_reader_that_never_answers_is_given_up_told_to_stop_and_its_slot_freed() {
        let _serial = SERIAL.lock().await;
        idle();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let (saw_tx, saw) = std::sync::mpsc::channel::<bool>();
        let err = run_bounded(Duration::from_millis(10), move |cancelled| {
            // Blocks until the test releases it: the time limit always passes first.
            wait.recv().unwrap();
            saw_tx.send(cancelled.load(Ordering::SeqCst)).unwrap();
        })
        .await
        .unwrap_err();
        assert!(err.contains("given up"), "{err}");
        // The thread still runs (nothing can kill it) and holds its slot...
        assert_eq!(running(), 1);
        release.send(()).unwrap();
        // ...and, released, it sees that its caller gave up.
        assert!(saw.recv().unwrap());
        idle();
    }

    #[tokio::test]
    async fn stuck_readers_are_capped_and_the_next_call_fails_at_once() {
        let _serial = SERIAL.lock().await;
        idle();
        let mut releases = Vec::new();
        for _ in 0..MAX_RUNNING {
            let (release, wait) = std::sync::mpsc::channel::<()>();
            releases.push(release);
            let err = run_bounded(Duration::from_millis(1), move |_| {
                let _ = wait.recv();
            })
            .await
            .unwrap_err();
            assert!(err.contains("given up"), "{err}");
        }
        assert_eq!(running(), MAX_RUNNING);
        let err = run_bounded(Duration::from_secs(60), |_| ())
            .await
            .unwrap_err();
        assert!(err.contains("still running"), "{err}");
        drop(releases);
        idle();
        // With the slots free, work runs again.
        assert_eq!(run_bounded(Duration::from_secs(60), |_| 7).await, Ok(7));
    }

    #[tokio::test]
    async fn noise_after_a_header_is_an_error_not_a_panic() {
        let _serial = SERIAL.lock().await;
        let mut bytes = b"%PDF-1.7\n".to_vec();
        bytes.extend((0..50_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        let err = extract(bytes, None, Limits::default()).await.unwrap_err();
        assert!(!err.is_empty());
    }
}
