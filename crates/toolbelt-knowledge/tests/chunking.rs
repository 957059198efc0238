//! Chunking by structure: Markdown, source code, plain text and HTML.

use serde_json::json;
use toolbelt_knowledge::{ChunkOptions, DocKind};

use crate::support::{chunks_of, chunks_with};

const GUIDE: &str = "---
title: Operations guide
team: platform
tags: [deploy, oncall]
reviewed: true
---
# Operations

Intro paragraph.

## Deploying

Run the pipeline.

```sh
# not a heading inside a fence

make deploy
```

## Rollback

### Database

Restore the snapshot.
";

#[tokio::test]
async fn markdown_chunks_follow_headings_with_front_matter_fields() {
    let chunks = chunks_of("guide.md", GUIDE).await;
    let paths: Vec<Vec<String>> = chunks.iter().map(|c| c.heading_path.clone()).collect();
    assert_eq!(
        paths,
        [
            vec!["Operations"],
            vec!["Operations", "Deploying"],
            vec!["Operations", "Rollback"],
            vec!["Operations", "Rollback", "Database"],
        ]
    );
    let deploy = &chunks[1];
    assert_eq!(deploy.kind, DocKind::Markdown);
    // The fenced block, blank line and `#` comment included, is in the Deploying chunk.
    assert!(
        deploy
            .text
            .contains("# not a heading inside a fence\n\nmake deploy\n```")
    );
    assert_eq!(deploy.lines, Some((11, 19)));
    assert!(deploy.citation().ends_with("guide.md:11-19"));
    // Front matter: the title and typed user fields on every chunk.
    assert_eq!(deploy.title.as_deref(), Some("Operations guide"));
    assert_eq!(deploy.fields["team"], json!("platform"));
    assert_eq!(deploy.fields["tags"], json!(["deploy", "oncall"]));
    assert_eq!(deploy.fields["reviewed"], json!(true));
    // Line ranges are the document's own lines.
    let lines: Vec<&str> = GUIDE.lines().collect();
    let (a, b) = chunks[3].lines.unwrap();
    assert_eq!(lines[a - 1..b].join("\n"), chunks[3].text);
}

#[tokio::test]
async fn long_sections_split_between_paragraphs_with_overlap() {
    let mut doc = String::from("# Big\n\n");
    for i in 0..40 {
        doc.push_str(&format!(
            "Paragraph {i} says something about topic {i}.\n\n"
        ));
    }
    let options = ChunkOptions {
        max_chars: 300,
        overlap_chars: 60,
    };
    let chunks = chunks_with("big.md", &doc, options).await;
    assert!(chunks.len() > 5, "{} chunks", chunks.len());
    let lines: Vec<&str> = doc.lines().collect();
    for pair in chunks.windows(2) {
        let (a0, b0) = pair[0].lines.unwrap();
        let (a1, b1) = pair[1].lines.unwrap();
        assert!(pair[0].text.chars().count() <= 300);
        // The next chunk starts inside the previous one (overlap), and moves on.
        assert!(a1 > a0 && a1 <= b0 && b1 > b0, "{a0}-{b0} then {a1}-{b1}");
        assert_eq!(lines[a1 - 1..b1].join("\n"), pair[1].text);
    }
    // Every paragraph is in some chunk, whole.
    for i in 0..40 {
        let p = format!("Paragraph {i} says something about topic {i}.");
        assert!(chunks.iter().any(|c| c.text.contains(&p)), "{p}");
    }
}

#[tokio::test]
async fn an_overlong_line_is_cut_into_pieces_of_the_chunk_size() {
    let line = "x".repeat(1000);
    let chunks = chunks_with(
        "one.txt",
        &format!("short\n\n{line}\n"),
        ChunkOptions {
            max_chars: 300,
            overlap_chars: 0,
        },
    )
    .await;
    let pieces: Vec<_> = chunks.iter().filter(|c| c.lines == Some((3, 3))).collect();
    assert_eq!(pieces.len(), 4);
    assert!(pieces.iter().all(|c| c.text.chars().count() <= 300));
    assert_eq!(
        pieces.iter().map(|c| c.text.as_str()).collect::<String>(),
        line
    );
}

#[tokio::test]
async fn code_sections_start_at_unindented_definitions() {
    let code = "use std::io;\n\n/// Adds.\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\nstruct Point {\n    x: i32,\n}\n\nimpl Point {\n    fn norm(&self) -> i32 {\n\n        self.x\n    }\n}\n";
    let chunks = chunks_of("lib.rs", code).await;
    let heads: Vec<String> = chunks.iter().map(|c| c.heading_path.join(" > ")).collect();
    assert_eq!(
        heads,
        [
            "",
            "pub fn add(a: i32, b: i32) -> i32",
            "struct Point",
            "impl Point"
        ]
    );
    assert!(chunks.iter().all(|c| c.kind == DocKind::Code));
    // The blank line inside `norm` does not start a section.
    assert!(chunks[3].text.contains("fn norm") && chunks[3].text.contains("self.x"));
    assert_eq!(chunks[3].lines, Some((12, 17)));
}

#[tokio::test]
async fn plain_text_is_packed_by_paragraph() {
    let chunks = chunks_of("notes.txt", "first para\nline two\n\nsecond para\n").await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].kind, DocKind::Text);
    assert!(chunks[0].heading_path.is_empty());
    assert_eq!(chunks[0].text, "first para\nline two\n\nsecond para");
}

#[tokio::test]
async fn html_keeps_headings_and_pre_and_drops_scripts_and_navigation() {
    let html = r#"<!doctype html><html><head><title>Service  manual</title>
<style>h1 { color: red }</style></head><body>
<nav><a href="/">Home</a> | <a href="/x">Menu item</a></nav>
<h1>Service</h1><p>Restart   the <b>daemon</b> with care.</p>
<script>var secret = "<h2>not a heading</h2>";</script>
<h2>Logs</h2><pre>journalctl -u svc
  --since today</pre><p>Then &amp; only then.</p></body></html>"#;
    let chunks = chunks_of("manual.html", html).await;
    assert_eq!(chunks[0].title.as_deref(), Some("Service manual"));
    let all: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert!(!all.contains("secret") && !all.contains("Menu item") && !all.contains("color"));
    assert!(all.contains("Restart the daemon with care."));
    let logs = chunks
        .iter()
        .find(|c| c.heading_path == ["Service", "Logs"])
        .expect("a Logs chunk");
    assert!(
        logs.text
            .contains("```\njournalctl -u svc\n  --since today\n```")
    );
    assert!(logs.text.contains("Then & only then."));
    assert_eq!(logs.lines, None);
    assert!(logs.citation().ends_with("manual.html"));
}

#[tokio::test]
async fn deeply_nested_html_is_read_without_trouble() {
    let depth = 50_000;
    let html = format!(
        "{}deep text{}",
        "<div>".repeat(depth),
        "</div>".repeat(depth)
    );
    let chunks = chunks_of("deep.html", &html).await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].text, "deep text");
}
