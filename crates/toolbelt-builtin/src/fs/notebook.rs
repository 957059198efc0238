//! Jupyter notebooks: rendering for Read and the NotebookEdit tool.
//!
//! Edits keep the notebook valid JSON in the style Jupyter writes it (sorted keys, the
//! file's own indentation, a final newline if it had one), reset a replaced code cell's
//! outputs and execution count, and give new cells ids when the notebook is nbformat 4.5 or
//! later.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::read_state::read_modify_write;
use crate::BuiltinEnv;

/// Characters of one output kept when summarising it for Read.
const MAX_OUTPUT_CHARS: usize = 2000;

/// A notebook rendered as text for the model.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// One section per cell: header, source, summarised outputs.
    pub text: String,
    /// How many cells the notebook has.
    pub cells: usize,
}

/// Renders a notebook's cells, with outputs summarised (text cut, images named, errors shown).
pub fn render(bytes: &[u8]) -> Result<Rendered, String> {
    let notebook: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a valid notebook (JSON error: {e})"))?;
    let cells = notebook
        .get("cells")
        .and_then(Value::as_array)
        .ok_or("not a valid notebook: it has no \"cells\" array")?;
    let mut text = String::new();
    for (index, cell) in cells.iter().enumerate() {
        let kind = cell
            .get("cell_type")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        text.push_str(&format!("<cell index=\"{index}\""));
        if let Some(id) = cell.get("id").and_then(Value::as_str) {
            text.push_str(&format!(" id=\"{id}\""));
        }
        text.push_str(&format!(" type=\"{kind}\""));
        if let Some(count) = cell.get("execution_count").and_then(Value::as_i64) {
            text.push_str(&format!(" execution_count=\"{count}\""));
        }
        text.push_str(">\n");
        let source = joined_source(cell.get("source"));
        text.push_str(&source);
        if !source.is_empty() && !source.ends_with('\n') {
            text.push('\n');
        }
        if let Some(outputs) = cell.get("outputs").and_then(Value::as_array)
            && !outputs.is_empty()
        {
            text.push_str("<outputs>\n");
            for output in outputs {
                text.push_str(&summarise_output(output));
                text.push('\n');
            }
            text.push_str("</outputs>\n");
        }
        text.push_str("</cell>\n");
    }
    if cells.is_empty() {
        text.push_str("(the notebook has no cells)\n");
    }
    Ok(Rendered {
        text,
        cells: cells.len(),
    })
}

/// A cell's `source`, which nbformat allows as a string or a list of strings.
fn joined_source(source: Option<&Value>) -> String {
    match source {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn cut(text: &str) -> String {
    toolbelt_core::text::cut_noted(text, MAX_OUTPUT_CHARS)
        .0
        .into_owned()
}

fn summarise_output(output: &Value) -> String {
    let kind = output
        .get("output_type")
        .and_then(Value::as_str)
        .unwrap_or("output");
    match kind {
        "stream" => {
            let name = output
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("stdout");
            format!(
                "[{name}] {}",
                cut(joined_source(output.get("text")).trim_end())
            )
        }
        "error" => {
            let ename = output
                .get("ename")
                .and_then(Value::as_str)
                .unwrap_or("Error");
            let evalue = output.get("evalue").and_then(Value::as_str).unwrap_or("");
            format!("[error] {ename}: {}", cut(evalue))
        }
        _ => {
            let mut parts = Vec::new();
            if let Some(data) = output.get("data").and_then(Value::as_object) {
                for (mime, value) in data {
                    if mime == "text/plain" {
                        parts.push(cut(joined_source(Some(value)).trim_end()));
                    } else {
                        let size = joined_source(Some(value)).len();
                        parts.push(format!("[{mime}, {size} bytes]"));
                    }
                }
            }
            format!("[{kind}] {}", parts.join(" "))
        }
    }
}

const DESCRIPTION: &str = "Edits a Jupyter notebook (.ipynb) cell by cell. edit_mode \
replace (default) replaces a cell's source (a code cell's outputs and execution count are \
cleared); insert adds a new cell after the cell given by cell_id (at the start when cell_id is \
omitted) and needs cell_type; delete removes the cell. cell_id is a cell's id as shown by \
Read, or a 0-based index. The notebook must have been Read first.";

/// The kind of a notebook cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    /// A code cell.
    Code,
    /// A Markdown cell.
    Markdown,
}

/// What NotebookEdit does to the cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EditMode {
    /// Replace the cell's source.
    #[default]
    Replace,
    /// Insert a new cell after it.
    Insert,
    /// Delete it.
    Delete,
}

/// Arguments of NotebookEdit.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotebookEditArgs {
    /// The path of the notebook (absolute, or relative to the working directory).
    pub notebook_path: String,
    /// The id of the cell to edit (as Read shows it), or its 0-based index. For insert, the
    /// new cell goes after this cell, or first when omitted.
    #[serde(default)]
    pub cell_id: Option<String>,
    /// The new source of the cell (ignored for delete).
    #[serde(default)]
    pub new_source: String,
    /// The cell's type; required for insert, and changes the type on replace.
    #[serde(default)]
    pub cell_type: Option<CellType>,
    /// replace (default), insert or delete.
    #[serde(default)]
    pub edit_mode: Option<EditMode>,
}

/// The NotebookEdit tool over `env`'s file backend.
pub fn notebook_edit_tool(env: &BuiltinEnv) -> Result<DynTool, ToolError> {
    let env = env.clone();
    let tool = FunctionTool::returning_output(
        "NotebookEdit",
        DESCRIPTION,
        move |ctx: ToolContext, args: NotebookEditArgs| {
            let env = env.for_call(&ctx);
            async move { Ok::<_, ToolError>(notebook_edit(&env, args).await) }
        },
    )?
    .map_declaration(|d| d.destructive().closed_world().concurrency_safe(false));
    Ok(Arc::new(tool))
}

/// Runs NotebookEdit; failures are result-level errors.
pub async fn notebook_edit(env: &BuiltinEnv, args: NotebookEditArgs) -> ToolOutput {
    match try_notebook_edit(env, args).await {
        Ok(out) => out,
        Err(message) => ToolOutput::error(message),
    }
}

async fn try_notebook_edit(env: &BuiltinEnv, args: NotebookEditArgs) -> Result<ToolOutput, String> {
    let ops = &env.files;
    let path = ops
        .resolve(&args.notebook_path)
        .map_err(|e| e.to_string())?;
    let shown = ops.display_path(&path);
    if !path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
    {
        return Err(format!(
            "{shown} is not a notebook (.ipynb); use Edit for other files"
        ));
    }
    let name = shown.clone();
    // The change runs under the file's lock; it hands back what the report needs.
    let (summary, mode, cell_count) = read_modify_write(env, path, shown.clone(), move |current| {
        let contents = current.ok_or_else(|| format!("file does not exist: {name}"))?;
        let (updated, report) = edited(&contents.bytes, args, &name)?;
        Ok((updated.into_bytes(), report))
    })
    .await?;
    Ok(
        ToolOutput::text(format!("{summary} of {shown}.")).with_structured(json!({
            "notebook_path": shown,
            "edit_mode": mode,
            "cells": cell_count,
        })),
    )
}

/// The notebook after the edit, and (summary, mode, cell count) for the report.
fn edited(
    bytes: &[u8],
    args: NotebookEditArgs,
    shown: &str,
) -> Result<(String, (String, EditMode, usize)), String> {
    let original = std::str::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 JSON"))?;
    let mut notebook: Value = serde_json::from_str(original)
        .map_err(|e| format!("{shown} is not a valid notebook (JSON error: {e})"))?;
    let wants_ids = supports_cell_ids(&notebook);
    let cells = notebook
        .get_mut("cells")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| format!("{shown} is not a valid notebook: it has no \"cells\" array"))?;
    let mode = args.edit_mode.unwrap_or_default();
    let target = match &args.cell_id {
        Some(id) => Some(find_cell(cells, id).ok_or_else(|| {
            format!(
                "no cell with id or index {id:?} in {shown} ({} cells)",
                cells.len()
            )
        })?),
        None => None,
    };
    let summary = match mode {
        EditMode::Replace => {
            let index = target.ok_or("cell_id is required to replace a cell")?;
            let cell = cells[index]
                .as_object_mut()
                .ok_or_else(|| format!("cell {index} is not a JSON object"))?;
            let kind = match args.cell_type {
                Some(kind) => kind,
                None => match cell.get("cell_type").and_then(Value::as_str) {
                    Some("markdown") => CellType::Markdown,
                    Some("code") => CellType::Code,
                    _ => CellType::Code,
                },
            };
            let as_list = !matches!(cell.get("source"), Some(Value::String(_)));
            cell.insert("source".into(), source_value(&args.new_source, as_list));
            set_cell_type(cell, kind);
            format!("Replaced the source of cell {index}")
        }
        EditMode::Insert => {
            let kind = args
                .cell_type
                .ok_or("cell_type (code or markdown) is required to insert a cell")?;
            let index = target.map_or(0, |i| i + 1);
            let mut cell = Map::new();
            if wants_ids {
                cell.insert("id".into(), Value::String(new_cell_id(cells)));
            }
            cell.insert("metadata".into(), json!({}));
            cell.insert("source".into(), source_value(&args.new_source, true));
            set_cell_type(&mut cell, kind);
            cells.insert(index, Value::Object(cell));
            format!("Inserted a new cell at index {index}")
        }
        EditMode::Delete => {
            let index = target.ok_or("cell_id is required to delete a cell")?;
            cells.remove(index);
            format!("Deleted cell {index}")
        }
    };
    let cell_count = cells.len();
    let updated = serialize_like(&notebook, original)?;
    Ok((updated, (summary, mode, cell_count)))
}

/// nbformat 4.5 introduced cell ids.
fn supports_cell_ids(notebook: &Value) -> bool {
    let major = notebook
        .get("nbformat")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let minor = notebook
        .get("nbformat_minor")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    (major, minor) >= (4, 5)
}

/// The index of the cell whose id is `id`, or `id` read as a 0-based index (`3` or `cell-3`).
fn find_cell(cells: &[Value], id: &str) -> Option<usize> {
    if let Some(i) = cells
        .iter()
        .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
    {
        return Some(i);
    }
    let number = id.strip_prefix("cell-").unwrap_or(id);
    number.parse::<usize>().ok().filter(|&i| i < cells.len())
}

/// Sets a cell's type and the fields that go with it: a code cell gets empty outputs and no
/// execution count; a Markdown cell has neither.
fn set_cell_type(cell: &mut Map<String, Value>, kind: CellType) {
    match kind {
        CellType::Code => {
            cell.insert("cell_type".into(), json!("code"));
            cell.insert("outputs".into(), json!([]));
            cell.insert("execution_count".into(), Value::Null);
        }
        CellType::Markdown => {
            cell.insert("cell_type".into(), json!("markdown"));
            cell.remove("outputs");
            cell.remove("execution_count");
        }
    }
    if !cell.contains_key("metadata") {
        cell.insert("metadata".into(), json!({}));
    }
}

/// A source as Jupyter stores it: a list of lines, each keeping its newline.
fn source_value(source: &str, as_list: bool) -> Value {
    if !as_list {
        return Value::String(source.to_string());
    }
    let lines: Vec<Value> = source
        .split_inclusive('\n')
        .map(|line| Value::String(line.to_string()))
        .collect();
    Value::Array(lines)
}

/// A fresh 8-hex-digit id not used by any cell.
fn new_cell_id(cells: &[Value]) -> String {
    let random = RandomState::new();
    let mut salt = 0u64;
    loop {
        let mut hasher = random.build_hasher();
        hasher.write_u64(salt);
        hasher.write_usize(cells.len());
        let id = format!("{:08x}", hasher.finish() as u32);
        if !cells
            .iter()
            .any(|c| c.get("id").and_then(Value::as_str) == Some(id.as_str()))
        {
            return id;
        }
        salt += 1;
    }
}

/// Serializes `notebook` with the indentation of `original` (Jupyter uses one space) and
/// its final newline, keys sorted as Jupyter writes them.
fn serialize_like(notebook: &Value, original: &str) -> Result<String, String> {
    let indent = detect_indent(original);
    let mut out = Vec::new();
    match &indent {
        Some(indent) => {
            let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
            notebook
                .serialize(&mut serializer)
                .map_err(|e| e.to_string())?;
        }
        None => serde_json::to_writer(&mut out, notebook).map_err(|e| e.to_string())?,
    }
    let mut text = String::from_utf8(out).map_err(|e| e.to_string())?;
    if original.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// The indentation of the first indented line, or `None` for compact JSON.
fn detect_indent(original: &str) -> Option<String> {
    let second = original.trim_start().split('\n').nth(1)?;
    let indent: String = second
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    if indent.is_empty() {
        None
    } else {
        Some(indent)
    }
}
