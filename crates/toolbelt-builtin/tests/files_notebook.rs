//! NotebookEdit on a real nbformat 4.5 notebook written by hand, validated afterwards with
//! the nbformat package from PyPI (tests/peers/requirements.txt).

use crate::files_support;

use std::process::Command;

use files_support::{call_err, call_ok, set_on};
use serde_json::{Value, json};

/// A notebook as Jupyter writes it: one-space indentation, sorted keys, final newline.
const NOTEBOOK: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "a1b2c3d4",
   "metadata": {},
   "source": [
    "# Analysis\n",
    "Numbers below."
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 7,
   "id": "e5f6a7b8",
   "metadata": {},
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "42\n"
     ]
    }
   ],
   "source": [
    "x = 6 * 7\n",
    "print(x)"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  },
  "language_info": {
   "name": "python"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

/// Validates with nbformat (fails with install instructions when it is missing).
fn validate_with_nbformat(path: &std::path::Path) {
    let script = "import sys, nbformat\nnb = nbformat.read(sys.argv[1], as_version=4)\nnbformat.validate(nb)\nprint('valid')";
    let output = Command::new(toolbelt_testkit::python())
        .arg("-c")
        .arg(script)
        .arg(path)
        .output()
        .expect("python3 must be on PATH to validate notebooks");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named 'nbformat'"),
        "nbformat is missing: run `pip install -r tests/peers/requirements.txt`"
    );
    assert!(
        output.status.success(),
        "nbformat rejected the notebook: {stderr}"
    );
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("analysis.ipynb");
    std::fs::write(&path, NOTEBOOK).unwrap();
    validate_with_nbformat(&path);
    (dir, path)
}

fn load(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn replacing_a_code_cell_resets_its_outputs_and_keeps_the_format() {
    let (dir, path) = setup();
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "analysis.ipynb"})).await;
    call_ok(
        &set,
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "cell_id": "e5f6a7b8", "new_source": "y = 1\nprint(y)"}),
    )
    .await;
    let nb = load(&path);
    let cell = &nb["cells"][1];
    assert_eq!(cell["source"], json!(["y = 1\n", "print(y)"]));
    assert_eq!(cell["outputs"], json!([]));
    assert_eq!(cell["execution_count"], Value::Null);
    assert_eq!(cell["id"], "e5f6a7b8");
    // Same style as Jupyter's: only the changed lines differ.
    let expected = NOTEBOOK
        .replace(
            "   \"execution_count\": 7,",
            "   \"execution_count\": null,",
        )
        .replace(
            "   \"outputs\": [\n    {\n     \"name\": \"stdout\",\n     \"output_type\": \"stream\",\n     \"text\": [\n      \"42\\n\"\n     ]\n    }\n   ],",
            "   \"outputs\": [],",
        )
        .replace("    \"x = 6 * 7\\n\",\n    \"print(x)\"", "    \"y = 1\\n\",\n    \"print(y)\"");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    validate_with_nbformat(&path);
}

#[tokio::test(flavor = "multi_thread")]
async fn inserting_needs_a_cell_type_and_gives_the_new_cell_an_id() {
    let (dir, path) = setup();
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "analysis.ipynb"})).await;
    call_err(
        &set,
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "cell_id": "a1b2c3d4", "new_source": "x", "edit_mode": "insert"}),
        "cell_type",
    )
    .await;
    call_ok(
        &set,
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "cell_id": "a1b2c3d4", "new_source": "## Method", "edit_mode": "insert", "cell_type": "markdown"}),
    )
    .await;
    call_ok(
        &set,
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "new_source": "import os", "edit_mode": "insert", "cell_type": "code"}),
    )
    .await;
    let nb = load(&path);
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    assert_eq!(cells[0]["source"], json!(["import os"]));
    assert_eq!(cells[0]["outputs"], json!([]));
    assert_eq!(cells[2]["cell_type"], "markdown");
    assert_eq!(cells[2]["source"], json!(["## Method"]));
    assert!(cells[2].get("outputs").is_none());
    let ids: Vec<&str> = cells.iter().map(|c| c["id"].as_str().unwrap()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "ids are unique: {ids:?}");
    validate_with_nbformat(&path);
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_by_id_or_index_removes_the_cell() {
    let (dir, path) = setup();
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "analysis.ipynb"})).await;
    call_ok(&set, "NotebookEdit", json!({"notebook_path": "analysis.ipynb", "cell_id": "0", "new_source": "", "edit_mode": "delete"})).await;
    let nb = load(&path);
    assert_eq!(nb["cells"].as_array().unwrap().len(), 1);
    assert_eq!(nb["cells"][0]["id"], "e5f6a7b8");
    call_err(&set, "NotebookEdit", json!({"notebook_path": "analysis.ipynb", "cell_id": "zzz", "new_source": "", "edit_mode": "delete"}), "no cell with id or index").await;
    validate_with_nbformat(&path);
}

#[tokio::test(flavor = "multi_thread")]
async fn notebook_edits_require_a_read_first() {
    let (dir, _path) = setup();
    let set = set_on(dir.path());
    call_err(
        &set,
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "cell_id": "0", "new_source": "x"}),
        "Read it first",
    )
    .await;
}
