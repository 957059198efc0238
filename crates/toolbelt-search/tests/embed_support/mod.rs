//! Helpers for the embedding tests: an embedder that counts what it embeds, the local model
//! folder, and a small realistic catalog.

#![allow(dead_code)] // each test file uses a different part

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolbelt_search::SearchError;
use toolbelt_search::ToolDoc;
use toolbelt_search::embed::Embedder;

/// Wraps an embedder and counts the calls and texts that reach it.
pub struct Counting {
    pub inner: Arc<dyn Embedder>,
    pub calls: AtomicUsize,
    pub texts: AtomicUsize,
}

impl Counting {
    pub fn new(inner: Arc<dyn Embedder>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
        })
    }

    pub fn texts(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Embedder for Counting {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, SearchError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts).await
    }
}

fn tool(name: &str, description: &str, params: &[(&str, &str)]) -> ToolDoc {
    let properties: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .map(|(n, d)| ((*n).to_owned(), json!({"type": "string", "description": d})))
        .collect();
    ToolDoc::new(
        name,
        description,
        json!({"type": "object", "properties": properties}),
    )
}

/// Twelve tools of the kinds an agent sees from a few MCP servers.
pub fn catalog() -> Vec<ToolDoc> {
    vec![
        tool(
            "read_file",
            "Read the contents of a text file.",
            &[("path", "Path of the file")],
        ),
        tool(
            "write_file",
            "Create or overwrite a file with new content.",
            &[("path", "Path of the file"), ("content", "Text to write")],
        ),
        tool(
            "list_directory",
            "List the files and folders in a directory.",
            &[("path", "Directory to list")],
        ),
        tool(
            "get_weather",
            "Get the current weather forecast for a city: temperature, rain and wind.",
            &[("city", "City name")],
        ),
        tool(
            "send_email",
            "Send an email message to a recipient.",
            &[
                ("to", "Recipient address"),
                ("subject", "Subject line"),
                ("body", "Message text"),
            ],
        ),
        tool(
            "create_calendar_event",
            "Schedule a meeting or appointment in the user's calendar.",
            &[("title", "Event title"), ("start", "Start time")],
        ),
        tool(
            "search_web",
            "Search the internet and return result links.",
            &[("query", "Search terms")],
        ),
        tool(
            "convert_currency",
            "Convert an amount of money from one currency to another at today's exchange rate.",
            &[
                ("amount", "Amount"),
                ("from", "Currency code"),
                ("to", "Currency code"),
            ],
        ),
        tool(
            "translate_text",
            "Translate text into another language.",
            &[("text", "Text"), ("target_language", "Language code")],
        ),
        tool(
            "git_commit",
            "Record staged changes in the git repository with a message.",
            &[("message", "Commit message")],
        ),
        tool(
            "create_memory_entity",
            "Store a fact about a person or thing in the knowledge graph memory.",
            &[("name", "Entity name"), ("observation", "Fact")],
        ),
        tool(
            "run_sql_query",
            "Run a SQL query against the database and return the rows.",
            &[("sql", "The query")],
        ),
    ]
}
