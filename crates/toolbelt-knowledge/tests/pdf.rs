//! PDF text as a source (feature `pdf`): real PDFs made by fpdf2 (tests/peers), chunked by
//! page and cited by page; broken and hostile PDFs skipped and counted, the rest indexed.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolbelt_knowledge::{DocKind, KnowledgeBase, MemoryStore, Source};

/// Writes `manual.pdf`: three pages, two paragraphs each, with a word found only there.
fn make_manual(dir: &Path, third_page: &str) {
    let script = r#"
import sys
from fpdf import FPDF
pdf = FPDF()
pdf.set_font("helvetica", size=11)
pages = [
    ["Installing the ocelot service.", "Copy the binary to the server."],
    ["Configuring the ocelot service.", "The quetzal setting chooses the port."],
    [sys.argv[2], "Restart the service afterwards."],
]
for paragraphs in pages:
    pdf.add_page()
    for p in paragraphs:
        pdf.multi_cell(0, 8, p)
        pdf.ln(8)
pdf.output(sys.argv[1])
"#;
    run_python(&[
        "-c",
        script,
        &dir.join("manual.pdf").to_string_lossy(),
        third_page,
    ]);
}

fn run_python(args: &[&str]) {
    let out = std::process::Command::new(toolbelt_testkit::python())
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "making the PDFs failed (run .ci/install-peers for fpdf2): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn source(dir: &Path) -> Vec<Source> {
    vec![Source::new(dir.to_string_lossy())]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pdf_is_chunked_by_page_and_cited_by_page() {
    let dir = tempfile::tempdir().unwrap();
    make_manual(dir.path(), "Troubleshooting a stuck xylophone job.");
    std::fs::write(
        dir.path().join("notes.md"),
        "# Notes\n\nThe ocelot sleeps.\n",
    )
    .unwrap();
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    let report = base.index(&source(dir.path())).await.unwrap();
    assert_eq!(
        (report.files, report.added, report.skipped_unreadable),
        (2, 2, 0)
    );

    let chunks = base.chunks().await.unwrap();
    let pdf: Vec<_> = chunks.iter().filter(|c| c.kind == DocKind::Pdf).collect();
    let pages: Vec<u32> = pdf.iter().map(|c| c.pages.unwrap().0).collect();
    assert_eq!(pages, [1, 2, 3], "one chunk per short page: {pdf:#?}");
    assert!(
        pdf.iter()
            .all(|c| c.lines.is_none() && c.heading_path.is_empty())
    );
    assert!(pdf[1].text.contains("quetzal setting"), "{}", pdf[1].text);
    assert!(!pdf[1].text.contains("binary") && !pdf[1].text.contains("xylophone"));

    let hit = &base.search("quetzal port", 1, None).await.unwrap().hits[0];
    assert!(
        hit.chunk.citation().ends_with("manual.pdf#page=2"),
        "{}",
        hit.chunk.citation()
    );
    let hit = &base.search("xylophone", 1, None).await.unwrap().hits[0];
    assert!(hit.chunk.citation().ends_with("manual.pdf#page=3"));

    // The kind is a filter value the model can use.
    let only_pdf = base.parse_filter(&json!({"kind": "pdf"})).unwrap();
    let hits = base
        .search("ocelot", 10, Some(&only_pdf))
        .await
        .unwrap()
        .hits;
    assert!(!hits.is_empty() && hits.iter().all(|h| h.chunk.kind == DocKind::Pdf));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unchanged_pdf_is_not_read_again_and_a_changed_one_is_rechunked() {
    let dir = tempfile::tempdir().unwrap();
    make_manual(dir.path(), "The first edition mentions a narwhal.");
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    base.index(&source(dir.path())).await.unwrap();
    let again = base.index(&source(dir.path())).await.unwrap();
    assert_eq!((again.unchanged, again.changed), (1, 0));

    make_manual(dir.path(), "The second edition mentions a wombat.");
    let update = base.index(&source(dir.path())).await.unwrap();
    assert_eq!((update.changed, update.unchanged), (1, 0));
    assert!(
        base.search("narwhal", 5, None)
            .await
            .unwrap()
            .hits
            .is_empty()
    );
    let hit = &base.search("wombat", 1, None).await.unwrap().hits[0];
    assert!(hit.chunk.citation().ends_with("#page=3"));
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_and_hostile_pdfs_are_skipped_and_counted_and_the_rest_indexed() {
    let dir = tempfile::tempdir().unwrap();
    // toolbelt-builtin's fixtures: a real PDF, a 1 GiB compression bomb, arrays nested
    // 100,000 deep, a stream claiming a terabyte, noise after a header.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../toolbelt-builtin/tests/fixtures/make_pdfs.py");
    run_python(&[&fixtures.to_string_lossy(), &dir.path().to_string_lossy()]);
    // A `.pdf` that is not a PDF at all.
    std::fs::write(dir.path().join("fake.pdf"), "just text, no header").unwrap();
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    let report = base.index(&source(dir.path())).await.unwrap();
    assert_eq!(report.skipped_binary, 1, "{report:?}");
    // Each is refused (and counted) or read as the little text that is there; never the
    // bomb's gigabyte, never a crash. The bomb is refused.
    assert_eq!(report.files, 5, "{report:?}");
    assert_eq!(report.added + report.skipped_unreadable, 5, "{report:?}");
    let chunks = base.chunks().await.unwrap();
    assert!(chunks.iter().all(|c| !c.source.ends_with("bomb.pdf")));
    let total: usize = chunks.iter().map(|c| c.text.len()).sum();
    assert!(total < 1_000_000, "{total} bytes of text");
    let hit = &base.search("gamma", 1, None).await.unwrap().hits[0];
    assert!(
        hit.chunk.citation().ends_with("real.pdf#page=3"),
        "{}",
        hit.chunk.citation()
    );
    // An unreadable file is not stored, so the next run tries it again (and counts it again).
    let again = base.index(&source(dir.path())).await.unwrap();
    assert_eq!(again.skipped_unreadable, report.skipped_unreadable);
}
