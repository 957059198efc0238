//! How the tool commands print: tool listings (one line each, or declarations as JSON) and a
//! call's output (what the model reads, what a person sees, or a JSON record), with the exit
//! code the output implies.

use serde_json::json;
use toolbelt::{Declaration, ToolOutput};

use crate::common::{EXIT_OK, EXIT_TOOL_FAILED};

/// Prints tool declarations: `name  first sentence of the description` per line, aligned, or
/// with `json` an array of `{name, description, input_schema, output_schema, annotations}`.
pub fn print_listing(declarations: &[&Declaration], json: bool) {
    print_listing_with_sources(declarations, &[], json);
}

/// As [`print_listing`], with the source of each tool (`sources[i]`, its tool set's name, for
/// `declarations[i]`; none when `sources` is empty): a column of the table, a `source` field
/// of the JSON.
pub fn print_listing_with_sources(declarations: &[&Declaration], sources: &[&str], json: bool) {
    let source_of = |i: usize| sources.get(i).copied();
    if json {
        let listing: Vec<_> = declarations
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut entry = declaration_json(d);
                if let Some(source) = source_of(i) {
                    entry["source"] = json!(source);
                }
                entry
            })
            .collect();
        println!("{}", serde_json::Value::Array(listing));
        return;
    }
    let width = declarations
        .iter()
        .map(|d| d.name.as_str().len())
        .max()
        .unwrap_or(0);
    let source_width = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    for (i, d) in declarations.iter().enumerate() {
        match source_of(i) {
            Some(source) => println!(
                "{:width$}  {:source_width$}  {}",
                d.name.as_str(),
                source,
                first_sentence(&d.description)
            ),
            None => println!(
                "{:width$}  {}",
                d.name.as_str(),
                first_sentence(&d.description)
            ),
        }
    }
}

fn declaration_json(d: &Declaration) -> serde_json::Value {
    json!({
        "name": d.name.as_str(),
        "description": d.description,
        "input_schema": d.input_schema,
        "output_schema": d.output_schema,
        "annotations": {
            "read_only": d.meta.read_only,
            "destructive": d.meta.destructive,
            "idempotent": d.meta.idempotent,
            "open_world": d.meta.open_world,
        },
    })
}

/// The first sentence (or line) of a description, for a one-line listing.
fn first_sentence(description: &str) -> &str {
    let line = description.lines().next().unwrap_or("");
    match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    }
}

/// Which view of a call's output to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// What the model reads (the default).
    Model,
    /// What the tool shows a person (Edit's diff, Read's summary).
    User,
    /// `{is_error, content, user_content, blocks, structured, meta}` as one JSON line.
    Json,
}

/// Prints a call's output and returns the exit code: 0, or 1 for a result-level failure
/// (whose text then goes to stderr, unless the view is JSON).
pub fn print_output(output: &ToolOutput, view: View) -> u8 {
    match view {
        View::Json => println!(
            "{}",
            json!({
                "is_error": output.is_error,
                "content": output.llm_text(),
                "user_content": output.user_text(),
                "blocks": output.blocks,
                "structured": output.structured,
                "meta": output.meta,
            })
        ),
        _ if output.is_error => eprintln!("{}", output.llm_text()),
        View::User => print_text(&output.user_text()),
        View::Model => print_text(&output.llm_text()),
    }
    if output.is_error {
        EXIT_TOOL_FAILED
    } else {
        EXIT_OK
    }
}

/// Prints `text`, ending it with one newline.
fn print_text(text: &str) {
    if text.ends_with('\n') {
        print!("{text}");
    } else {
        println!("{text}");
    }
}
