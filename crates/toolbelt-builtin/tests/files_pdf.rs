//! PDF text in Read (issue 32, item 4): a real PDF made by fpdf2 (tests/peers), read whole
//! and by page range; hostile PDFs (a compression bomb of 1 GiB, arrays nested 100,000
//! deep, a stream claiming a terabyte, noise after the header) each refused with a message,
//! the process still standing.

use crate::files_support;

use std::path::Path;

use files_support::{call, call_ok, set_on};
use serde_json::json;

/// Writes the fixtures with the peers' Python (fpdf2 from tests/peers/requirements.txt).
fn make_pdfs(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/make_pdfs.py");
    let out = std::process::Command::new(toolbelt_testkit::python())
        .arg(script)
        .arg(dir)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "making the PDFs failed (run .ci/install-peers for fpdf2): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_pdf_is_read_by_page_and_by_range() {
    let dir = tempfile::tempdir().unwrap();
    make_pdfs(dir.path());
    let set = set_on(dir.path());
    let out = call_ok(&set, "Read", json!({"file_path": "real.pdf"})).await;
    let text = out.llm_text();
    let one = text.find("--- real.pdf: page 1 of 3 ---\n").expect(&text);
    let alpha = text.find("Page one alpha").expect(&text);
    let three = text.find("--- real.pdf: page 3 of 3 ---\n").expect(&text);
    let gamma = text.find("Page three gamma").expect(&text);
    assert!(one < alpha && alpha < three && three < gamma, "{text}");
    assert_eq!(out.structured.as_ref().unwrap()["pages"], json!([1, 2, 3]));
    assert_eq!(out.user_text(), "Read 3 pages of real.pdf");

    let out = call_ok(&set, "Read", json!({"file_path": "real.pdf", "pages": "2"})).await;
    assert_eq!(out.user_text(), "Read 1 page of real.pdf");
    let text = out.llm_text();
    assert!(text.contains("Page two beta"), "{text}");
    assert!(!text.contains("alpha") && !text.contains("gamma"), "{text}");
    assert!(text.contains("pass pages: \"3-3\""), "{text}");

    let out = call(
        &set,
        "Read",
        json!({"file_path": "real.pdf", "pages": "7-9"}),
    )
    .await;
    assert!(
        out.is_error && out.llm_text().contains("has 3 pages"),
        "{}",
        out.llm_text()
    );
    let out = call(
        &set,
        "Read",
        json!({"file_path": "real.pdf", "pages": "two"}),
    )
    .await;
    assert!(
        out.is_error && out.llm_text().contains("range like"),
        "{}",
        out.llm_text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_pdfs_are_refused_and_the_process_stands() {
    let dir = tempfile::tempdir().unwrap();
    make_pdfs(dir.path());
    let set = set_on(dir.path());
    for name in ["bomb.pdf", "nested.pdf", "huge_length.pdf", "garbage.pdf"] {
        let out = call(&set, "Read", json!({"file_path": name})).await;
        let text = out.llm_text();
        // Refused, or (a stream of a terabyte that is not there) read as what is there; never
        // the bomb's gigabyte, never a crash.
        assert!(
            out.is_error || text.len() < 1_000_000,
            "{name}: {} bytes",
            text.len()
        );
        if out.is_error {
            assert!(text.starts_with(&format!("cannot read {name}: ")), "{text}");
        }
    }
    let bomb = call(&set, "Read", json!({"file_path": "bomb.pdf"})).await;
    assert!(bomb.is_error, "{}", bomb.llm_text());
    // Still answering.
    call_ok(&set, "Read", json!({"file_path": "real.pdf", "pages": "1"})).await;
}
