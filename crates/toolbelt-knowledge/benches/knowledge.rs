//! Knowledge base benchmark: index build and query latency on the sources of well-known crates
//! in the local cargo registry (at least 10,000 chunks), and recall@5 on a labelled question
//! set, with the same chunks and questions written out for `bm25s` (benches/bm25s_compare.py).
//!
//! The question set is built mechanically, so anyone can rebuild it: every 7th doc-comment
//! line (`/// ...`, 6 to 20 words, first occurrence) of the corpus, in chunk order, at most
//! 500, becomes a question with its `///` removed; its answers are every chunk whose text
//! holds that line (overlap can put a line in two chunks). A hit is an answer in the top 5.
//!
//! With `--features postgres` the same corpus is built into a PostgreSQL store too (schema
//! `tb_kb_bench`, dropped before and after; `TOOLBELT_TEST_POSTGRES_URL`, default the server
//! `.ci/start-services` runs), reopened, and queried with the same questions. With
//! `--features pdf`, PDF indexing throughput: 40 PDFs of 25 pages each, made by fpdf2
//! (tests/peers/.venv) from the corpus's first 1,000 chunks, one chunk per page, indexed into
//! a memory store.
//!
//! Run: `cargo bench -p toolbelt-knowledge --bench knowledge [--features postgres,pdf]`
//! (writes the chunk and question files to `$CARGO_TARGET_DIR/knowledge-bench/` and, when
//! tests/peers/.venv has bm25s, runs the comparison).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolbelt_knowledge::{KnowledgeBase, MemoryStore, Source, SqliteStore};

/// The crates indexed (their `src/` folders), found by name in the registry.
const CRATES: &[&str] = &[
    "tokio",
    "serde",
    "regex",
    "hyper",
    "rustls",
    "clap_builder",
    "syn",
    "reqwest",
    "axum",
    "h2",
    "ignore",
    "rusqlite",
];
const MAX_QUESTIONS: usize = 500;

fn registry_src() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
    let src = home.join("registry/src");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}; the benchmark reads crate sources there",
                src.display()
            )
        })
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter().next().expect("a registry index folder")
}

/// The newest version's `src/` of each crate.
fn corpus() -> Vec<PathBuf> {
    let registry = registry_src();
    let mut names: Vec<String> = std::fs::read_dir(&registry)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for krate in CRATES {
        let prefix = format!("{krate}-");
        let found = names.iter().rev().find(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        });
        match found {
            Some(name) => out.push(registry.join(name).join("src")),
            None => eprintln!("note: {krate} is not in {}", registry.display()),
        }
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let dirs = corpus();
    let sources: Vec<Source> = dirs
        .iter()
        .map(|d| Source::new(d.to_string_lossy()))
        .collect();
    println!("corpus: {} crates' src/ folders", dirs.len());

    // Build in memory (cold), then the incremental pass over unchanged files.
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    let t = Instant::now();
    let report = base.index(&sources).await.unwrap();
    let build = t.elapsed();
    let t = Instant::now();
    let again = base.index(&sources).await.unwrap();
    let rescan = t.elapsed();
    assert_eq!(again.unchanged, report.files);
    println!(
        "memory store: {} files, {} chunks: build {:.2} s; re-index unchanged {:.2} s",
        report.files,
        report.chunks,
        build.as_secs_f64(),
        rescan.as_secs_f64()
    );
    assert!(report.chunks >= 10_000, "only {} chunks", report.chunks);

    let out_dir =
        PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into()))
            .join("knowledge-bench");
    std::fs::create_dir_all(&out_dir).unwrap();
    let db = out_dir.join("kb.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let sqlite = KnowledgeBase::new(Arc::new(SqliteStore::open(&db).unwrap()));
    let t = Instant::now();
    sqlite.index(&sources).await.unwrap();
    let sqlite_build = t.elapsed();
    let t = Instant::now();
    let reopened = KnowledgeBase::new(Arc::new(SqliteStore::open(&db).unwrap()));
    reopened.status().await.unwrap();
    let load = t.elapsed();
    println!(
        "sqlite store: build {:.2} s; open and load {:.2} s",
        sqlite_build.as_secs_f64(),
        load.as_secs_f64()
    );

    // The question set.
    let chunks = base.chunks().await.unwrap();
    let mut seen = HashSet::new();
    let mut candidates = Vec::new();
    for chunk in &chunks {
        for line in chunk.text.lines() {
            let Some(doc) = line.trim().strip_prefix("/// ") else {
                continue;
            };
            let words = doc.split_whitespace().count();
            if (6..=20).contains(&words) && seen.insert(doc.to_owned()) {
                candidates.push((line.trim().to_owned(), doc.to_owned()));
            }
        }
    }
    let questions: Vec<(String, String)> = candidates
        .into_iter()
        .step_by(7)
        .take(MAX_QUESTIONS)
        .collect();
    let mut answers: Vec<HashSet<&str>> = Vec::new();
    for (line, _) in &questions {
        answers.push(
            chunks
                .iter()
                .filter(|c| c.text.contains(line.as_str()))
                .map(|c| c.id.as_str())
                .collect(),
        );
    }

    println!(
        "memory store: {}",
        measure_queries(&base, &questions, &answers).await
    );
    #[cfg(feature = "postgres")]
    postgres_store(&sources, &questions, &answers).await;
    #[cfg(feature = "pdf")]
    pdf_throughput(&chunks, &out_dir).await;

    // The same chunks and questions for bm25s.
    let index: HashMap<&str, usize> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(out_dir.join("chunks.jsonl")).unwrap());
    for chunk in &chunks {
        writeln!(
            f,
            "{}",
            serde_json::json!({"id": chunk.id, "text": chunk.search_text()})
        )
        .unwrap();
    }
    drop(f);
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(out_dir.join("questions.jsonl")).unwrap());
    for ((_, query), answer) in questions.iter().zip(&answers) {
        let mut ids: Vec<usize> = answer.iter().map(|id| index[id]).collect();
        ids.sort();
        writeln!(f, "{}", serde_json::json!({"query": query, "answers": ids})).unwrap();
    }
    drop(f);
    compare_with_bm25s(&out_dir);
}

/// Asks every question of `base`: latency mean, p50 and p95, and recall@5, in a line.
async fn measure_queries(
    base: &KnowledgeBase,
    questions: &[(String, String)],
    answers: &[HashSet<&str>],
) -> String {
    let mut latencies = Vec::new();
    let mut found = 0;
    for ((_, query), answer) in questions.iter().zip(answers) {
        let t = Instant::now();
        let hits = base.search(query, 5, None).await.unwrap().hits;
        latencies.push(t.elapsed());
        if hits.iter().any(|h| answer.contains(h.chunk.id.as_str())) {
            found += 1;
        }
    }
    latencies.sort();
    let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
    format!(
        "queries: {}; BM25 latency mean {:.2} ms, p50 {:.2} ms, p95 {:.2} ms; recall@5 {:.3}",
        questions.len(),
        mean.as_secs_f64() * 1e3,
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.95).as_secs_f64() * 1e3,
        found as f64 / questions.len() as f64
    )
}

/// The corpus in a PostgreSQL store: build, re-index unchanged, reopen and load, queries.
#[cfg(feature = "postgres")]
async fn postgres_store(
    sources: &[Source],
    questions: &[(String, String)],
    answers: &[HashSet<&str>],
) {
    use toolbelt_knowledge::PostgresStore;
    const SCHEMA: &str = "tb_kb_bench";
    let url = std::env::var("TOOLBELT_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://toolbelt:toolbelt@127.0.0.1:5432/toolbelt".into());
    let drop_schema = || async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {url}: {e} (run .ci/start-services)"));
        let connection = tokio::spawn(connection);
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
            .await
            .unwrap();
        drop(client);
        let _ = connection.await;
    };
    drop_schema().await;
    let store = Arc::new(PostgresStore::open_in_schema(&url, SCHEMA).await.unwrap());
    let base = KnowledgeBase::new(store);
    let t = Instant::now();
    let report = base.index(sources).await.unwrap();
    let build = t.elapsed();
    let t = Instant::now();
    let again = base.index(sources).await.unwrap();
    let rescan = t.elapsed();
    assert_eq!(again.unchanged, report.files);
    let t = Instant::now();
    let store = Arc::new(PostgresStore::open_in_schema(&url, SCHEMA).await.unwrap());
    let reopened = KnowledgeBase::new(store.clone());
    let status = reopened.status().await.unwrap();
    let load = t.elapsed();
    assert_eq!(status.chunks, report.chunks);
    println!(
        "postgres store ({:?} vectors): build {:.2} s; re-index unchanged {:.2} s; open and load {:.2} s",
        store.vector_column(),
        build.as_secs_f64(),
        rescan.as_secs_f64(),
        load.as_secs_f64()
    );
    println!(
        "postgres store, reopened: {}",
        measure_queries(&reopened, questions, answers).await
    );
    drop_schema().await;
}

/// PDF indexing throughput: PDFs made by fpdf2 from the corpus's chunks, indexed in memory.
#[cfg(feature = "pdf")]
async fn pdf_throughput(chunks: &[toolbelt_knowledge::Chunk], out_dir: &Path) {
    const FILES: usize = 40;
    const PAGES: usize = 25;
    let dir = out_dir.join("pdfs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pages: Vec<&str> = chunks
        .iter()
        .take(FILES * PAGES)
        .map(|c| c.text.as_str())
        .collect();
    assert_eq!(pages.len(), FILES * PAGES, "the corpus is too small");
    let texts = dir.join("pages.json");
    std::fs::write(&texts, serde_json::to_string(&pages).unwrap()).unwrap();
    let script = r#"
import json, sys
from fpdf import FPDF
pages = json.load(open(sys.argv[1]))
files, per_file, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for f in range(files):
    pdf = FPDF()
    pdf.set_font("courier", size=8)
    for text in pages[f * per_file:(f + 1) * per_file]:
        pdf.add_page()
        text = text.replace("	", "    ").encode("latin-1", "replace").decode("latin-1")
        pdf.multi_cell(0, 3.5, text)
    pdf.output(f"{out}/doc{f:02}.pdf")
"#;
    let t = Instant::now();
    let made = std::process::Command::new(toolbelt_testkit::python())
        .args(["-c", script])
        .arg(&texts)
        .args([FILES.to_string(), PAGES.to_string()])
        .arg(&dir)
        .output()
        .expect("python runs");
    assert!(
        made.status.success(),
        "making the PDFs failed (run .ci/install-peers for fpdf2): {}",
        String::from_utf8_lossy(&made.stderr)
    );
    std::fs::remove_file(&texts).unwrap();
    let made_in = t.elapsed();
    let bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    let sources = [Source::new(dir.to_string_lossy())];
    let t = Instant::now();
    let report = base.index(&sources).await.unwrap();
    let build = t.elapsed();
    assert_eq!((report.files, report.skipped_unreadable), (FILES, 0));
    let t = Instant::now();
    let again = base.index(&sources).await.unwrap();
    let rescan = t.elapsed();
    assert_eq!(again.unchanged, FILES);
    let pages = (FILES * PAGES) as f64;
    println!(
        "pdf: {FILES} files, {} pages, {:.1} MB (made in {:.1} s), {} chunks: index {:.2} s \
         ({:.0} pages/s, {:.2} MB/s); re-index unchanged {:.3} s",
        FILES * PAGES,
        bytes as f64 / 1e6,
        made_in.as_secs_f64(),
        report.chunks,
        build.as_secs_f64(),
        pages / build.as_secs_f64(),
        bytes as f64 / 1e6 / build.as_secs_f64(),
        rescan.as_secs_f64()
    );
}

fn compare_with_bm25s(out_dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("tests/peers/.venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/bm25s_compare.py");
    if !python.exists() {
        eprintln!(
            "bm25s comparison skipped: no {} (run .ci/install-peers)",
            python.display()
        );
        return;
    }
    let status = std::process::Command::new(python)
        .arg(script)
        .arg(out_dir)
        .status()
        .expect("run the bm25s comparison");
    assert!(status.success(), "the bm25s comparison failed");
}
