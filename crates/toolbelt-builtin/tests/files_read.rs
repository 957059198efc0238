//! Read on real files: numbering, paging, long lines, metadata, encodings, line endings,
//! binary refusal, images, notebooks and the size limit.

use crate::files_support;

use files_support::{call_err, call_ok, set_on};
use serde_json::json;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::ContentBlock;

#[tokio::test(flavor = "multi_thread")]
async fn read_numbers_lines_like_cat_n_and_reports_metadata() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let set = set_on(dir.path());
    let out = call_ok(&set, "Read", json!({"file_path": "a.txt"})).await;
    assert_eq!(out.llm_text(), "     1\tone\n     2\ttwo\n     3\tthree\n");
    let meta = out.structured.clone().unwrap();
    assert_eq!(meta["start_line"], 1);
    assert_eq!(meta["lines_returned"], 3);
    assert_eq!(meta["total_lines"], 3);
    // What a person reads: the count in words, singular for one.
    assert_eq!(out.user_text(), "Read 3 lines of a.txt");
    std::fs::write(dir.path().join("b.txt"), "only\n").unwrap();
    let out = call_ok(&set, "Read", json!({"file_path": "b.txt"})).await;
    assert_eq!(out.user_text(), "Read 1 line of b.txt");
}

#[tokio::test(flavor = "multi_thread")]
async fn read_pages_with_a_one_based_offset_and_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let body: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("long.txt"), body).unwrap();
    let set = set_on(dir.path());
    let first = call_ok(&set, "Read", json!({"file_path": "long.txt"})).await;
    let meta = first.structured.clone().unwrap();
    assert_eq!(meta["lines_returned"], 2000, "default limit is 2000 lines");
    assert_eq!(meta["total_lines"], 3000);
    assert!(first.llm_text().contains("pass offset 2001"));
    let page = call_ok(
        &set,
        "Read",
        json!({"file_path": "long.txt", "offset": 2999, "limit": 5}),
    )
    .await;
    assert_eq!(page.llm_text(), "  2999\tline 2999\n  3000\tline 3000\n");
    call_err(
        &set,
        "Read",
        json!({"file_path": "long.txt", "offset": 3001}),
        "past the end",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn read_cuts_lines_longer_than_2000_characters_with_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("wide.txt"),
        format!("{}\n", "é".repeat(2500)),
    )
    .unwrap();
    let set = set_on(dir.path());
    let out = call_ok(&set, "Read", json!({"file_path": "wide.txt"})).await;
    let text = out.llm_text();
    assert!(text.contains(&"é".repeat(2000)));
    assert!(!text.contains(&"é".repeat(2001)));
    assert!(text.contains("… [500 more characters not shown]"));
}

#[tokio::test(flavor = "multi_thread")]
async fn read_shows_crlf_files_as_lines_and_decodes_byte_order_marks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("crlf.txt"), "a\r\nb\r\n").unwrap();
    std::fs::write(dir.path().join("bom8.txt"), b"\xEF\xBB\xBFhello\n").unwrap();
    let mut utf16 = vec![0xFF, 0xFE];
    "héllo\r\nwörld\r\n"
        .encode_utf16()
        .for_each(|u| utf16.extend(u.to_le_bytes()));
    std::fs::write(dir.path().join("utf16.txt"), utf16).unwrap();
    let mut utf16be = vec![0xFE, 0xFF];
    "big\n"
        .encode_utf16()
        .for_each(|u| utf16be.extend(u.to_be_bytes()));
    std::fs::write(dir.path().join("utf16be.txt"), utf16be).unwrap();
    let set = set_on(dir.path());
    let read = |p: &'static str| {
        let set = &set;
        async move {
            call_ok(set, "Read", json!({"file_path": p}))
                .await
                .llm_text()
        }
    };
    assert_eq!(read("crlf.txt").await, "     1\ta\n     2\tb\n");
    assert_eq!(read("bom8.txt").await, "     1\thello\n");
    assert_eq!(read("utf16.txt").await, "     1\théllo\n     2\twörld\n");
    assert_eq!(read("utf16be.txt").await, "     1\tbig\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn read_refuses_binary_files_clearly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blob.bin"), [0u8, 1, 2, 3, 255]).unwrap();
    std::fs::write(dir.path().join("latin1.txt"), [b'c', b'a', b'f', 0xE9]).unwrap();
    let set = set_on(dir.path());
    call_err(&set, "Read", json!({"file_path": "blob.bin"}), "binary").await;
    call_err(
        &set,
        "Read",
        json!({"file_path": "latin1.txt"}),
        "not valid UTF-8",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn read_returns_images_as_image_blocks() {
    let dir = tempfile::tempdir().unwrap();
    // A real 1x1 PNG.
    let png: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
        0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ];
    std::fs::write(dir.path().join("dot.png"), png).unwrap();
    let set = set_on(dir.path());
    let out = call_ok(&set, "Read", json!({"file_path": "dot.png"})).await;
    match &out.blocks[..] {
        [ContentBlock::Image { mime_type, data }] => {
            assert_eq!(mime_type, "image/png");
            assert!(data.starts_with("iVBORw0KGgo"), "base64 of the PNG: {data}");
        }
        other => panic!("expected one image block, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn read_shows_notebooks_as_cells_with_outputs_summarised() {
    let dir = tempfile::tempdir().unwrap();
    let notebook = json!({
        "cells": [
            {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Title\n", "text"]},
            {"cell_type": "code", "id": "calc", "execution_count": 2, "metadata": {},
             "source": ["print(1 + 1)"],
             "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["2\n"]},
                {"output_type": "display_data", "metadata": {},
                 "data": {"image/png": "iVBORw0KGgo=", "text/plain": ["<Figure>"]}},
                {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": []}
             ]}
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    std::fs::write(
        dir.path().join("nb.ipynb"),
        serde_json::to_string_pretty(&notebook).unwrap(),
    )
    .unwrap();
    let set = set_on(dir.path());
    let text = call_ok(&set, "Read", json!({"file_path": "nb.ipynb"}))
        .await
        .llm_text();
    assert!(
        text.contains("<cell index=\"0\" id=\"intro\" type=\"markdown\">\n# Title\ntext\n</cell>"),
        "{text}"
    );
    assert!(
        text.contains("id=\"calc\" type=\"code\" execution_count=\"2\""),
        "{text}"
    );
    assert!(text.contains("[stdout] 2"), "{text}");
    assert!(text.contains("[image/png, 12 bytes]"), "{text}");
    assert!(text.contains("[error] ValueError: bad"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn read_refuses_files_over_the_size_limit_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), "x".repeat(2048)).unwrap();
    let set =
        BuiltinToolSet::new(BuiltinOptions::new(dir.path()).with_max_file_size(1024)).unwrap();
    call_err(
        &set,
        "Read",
        json!({"file_path": "big.txt"}),
        "more than the 1024-byte limit",
    )
    .await;
    std::fs::create_dir(dir.path().join("d")).unwrap();
    call_err(&set, "Read", json!({"file_path": "d"}), "is a directory").await;
    call_err(
        &set,
        "Read",
        json!({"file_path": "missing.txt"}),
        "does not exist",
    )
    .await;
}
