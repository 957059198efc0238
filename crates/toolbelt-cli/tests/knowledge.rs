//! `toolbelt knowledge index|search|status`, run as a user runs it: the built binary over a
//! folder of files, with exit codes, stdout and stderr checked.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn toolbelt(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run toolbelt")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(dir: &Path, path: &str, content: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

#[test]
fn index_search_and_status_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "docs/ops.md",
        "---\nteam: sre\n---\n# Ops\n\n## Rollback\n\nRun `make rollback` to restore the previous release.\n",
    );
    write(
        d,
        "src/main.rs",
        "fn main() {\n    println!(\"hello\");\n}\n",
    );

    let out = toolbelt(d, &["knowledge", "index", "docs", "src"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("2 files: 2 added, 0 changed, 0 unchanged, 0 removed"),
        "{text}"
    );
    assert!(text.contains("BM25"), "{text}");
    assert!(d.join(".toolbelt/knowledge.db").is_file());

    let out = toolbelt(d, &["knowledge", "search", "how do I roll back a release"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("Ranking: keyword search (BM25) only"),
        "{text}"
    );
    assert!(
        text.contains("[1] docs/ops.md:6-8 — Ops > Rollback"),
        "{text}"
    );

    let out = toolbelt(
        d,
        &[
            "knowledge",
            "search",
            "main",
            "--filter",
            r#"{"kind": "code"}"#,
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["mode"], "bm25_only");
    assert_eq!(json["hits"][0]["citation"], "src/main.rs:1-3");

    // A second index with one file gone and one changed.
    std::fs::remove_file(d.join("src/main.rs")).unwrap();
    write(
        d,
        "docs/ops.md",
        "# Ops\n\n## Rollback\n\nRun the undo script.\n",
    );
    let out = toolbelt(d, &["knowledge", "index", "docs", "src", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (&report["changed"], &report["removed"], &report["chunks"]),
        (&Value::from(1), &Value::from(1), &Value::from(2))
    );

    let out = toolbelt(d, &["knowledge", "status", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (&status["documents"], &status["chunks"]),
        (&Value::from(1), &Value::from(2))
    );
}

#[test]
fn bad_filters_and_a_missing_base_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = toolbelt(d, &["knowledge", "search", "anything"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("run `toolbelt knowledge index PATH...` first"),
        "{}",
        stderr(&out)
    );
    assert!(!d.join(".toolbelt").exists(), "search creates nothing");

    write(d, "a.md", "# A\n\nalpha\n");
    assert!(
        toolbelt(d, &["knowledge", "index", "a.md"])
            .status
            .success()
    );
    let out = toolbelt(
        d,
        &[
            "knowledge",
            "search",
            "alpha",
            "--filter",
            r#"{"owner": "' OR 1=1 --"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown field \"owner\""),
        "{}",
        stderr(&out)
    );
    let out = toolbelt(d, &["knowledge", "search", "alpha", "--filter", "not json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--filter is not JSON"),
        "{}",
        stderr(&out)
    );

    let out = toolbelt(d, &["knowledge", "index", "missing-folder"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("source missing-folder"),
        "{}",
        stderr(&out)
    );

    // Another program's database is refused, not written into.
    std::fs::write(
        d.join("other.db"),
        "plain text, not a database at all, long enough",
    )
    .unwrap();
    let out = toolbelt(d, &["knowledge", "status", "--db", "other.db"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not a database"), "{}", stderr(&out));
}

#[test]
fn a_pdf_is_indexed_and_its_passages_cite_their_page() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A real two-page PDF, made by fpdf2 in the peers' Python.
    let script = r#"
import sys
from fpdf import FPDF
pdf = FPDF()
pdf.set_font("helvetica", size=11)
for text in ["Unpacking the crate.", "The flamingo lever resets the counter."]:
    pdf.add_page()
    pdf.multi_cell(0, 8, text)
pdf.output(sys.argv[1])
"#;
    let made = Command::new(toolbelt_testkit::python())
        .args(["-c", script, &d.join("manual.pdf").to_string_lossy()])
        .output()
        .expect("python runs");
    assert!(
        made.status.success(),
        "making the PDF failed (run .ci/install-peers for fpdf2): {}",
        String::from_utf8_lossy(&made.stderr)
    );
    std::fs::write(d.join("broken.pdf"), b"%PDF-1.7\nnot really a PDF").unwrap();

    let out = toolbelt(d, &["knowledge", "index", "."]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("2 files: 1 added"), "{text}");
    assert!(text.contains("1 unreadable"), "{text}");

    let out = toolbelt(d, &["knowledge", "search", "flamingo lever", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["hits"][0]["citation"], "./manual.pdf#page=2", "{json}");
    assert_eq!(json["hits"][0]["pages"], serde_json::json!([2, 2]));
}

#[cfg(feature = "postgres")]
#[test]
fn a_postgres_base_is_indexed_and_searched_and_its_url_never_printed() {
    let url = toolbelt_testkit::service_url(
        "TOOLBELT_TEST_POSTGRES_URL",
        "postgres://toolbelt:toolbelt@127.0.0.1:5432/toolbelt",
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "docs/ops.md",
        "# Ops\n\n## Rollback\n\nThe axolotl script restores a release.\n",
    );
    let out = toolbelt(d, &["knowledge", "index", "docs", "--db", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("chunks in PostgreSQL"), "{text}");
    assert!(
        !text.contains(&url) && !stderr(&out).contains("toolbelt:toolbelt"),
        "{text}"
    );

    let out = toolbelt(
        d,
        &["knowledge", "search", "axolotl", "--db", &url, "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["hits"][0]["citation"], "docs/ops.md:3-5", "{json}");
}

/// A web server on 127.0.0.1 answering every request with `page` (HTML) while `up` holds,
/// else with a 500; returns its address and the count of requests it saw.
fn page_server(
    page: &'static str,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let (status, body) = if up.load(Ordering::SeqCst) {
                ("200 OK", page)
            } else {
                ("500 Internal Server Error", "down")
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (address, seen)
}

const GUIDE: &str = "<html><head><title>Release guide</title></head><body>\
<h2>Rollback</h2><p>Run <code>make rollback</code> to restore the previous release.</p>\
</body></html>";

#[test]
fn a_web_page_is_indexed_through_webfetch_and_kept_when_it_cannot_be_fetched_again() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let up = std::sync::Arc::new(AtomicBool::new(true));
    let (address, seen) = page_server(GUIDE, up.clone());
    let url = format!("http://{address}/guide");

    // WebFetch's guard refuses a loopback address unless it is allowed: nothing is sent.
    let out = toolbelt(d, &["knowledge", "index", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("1 unreadable"), "{}", stdout(&out));
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "the guard refused before connecting"
    );

    let out = toolbelt(
        d,
        &["knowledge", "index", &url, "--allow-address", "127.0.0.1"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("1 files: 1 added"),
        "{}",
        stdout(&out)
    );
    let search = |d: &Path| {
        let out = toolbelt(d, &["knowledge", "search", "how do I roll back a release"]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let found = search(d);
    assert!(found.contains(&format!("[1] {url}")), "{found}");
    assert!(found.contains("make rollback"), "{found}");

    // The page is down now: the stored version stays and is still found.
    up.store(false, Ordering::SeqCst);
    let out = toolbelt(
        d,
        &[
            "knowledge",
            "index",
            &url,
            "--allow-address",
            "127.0.0.1/32",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("0 removed"), "{}", stdout(&out));
    assert!(stdout(&out).contains("1 unreadable"), "{}", stdout(&out));
    assert!(search(d).contains("make rollback"));

    let out = toolbelt(
        d,
        &["knowledge", "index", &url, "--allow-address", "nonsense"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--allow-address"), "{}", stderr(&out));
}
