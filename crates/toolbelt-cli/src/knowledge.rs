//! `toolbelt knowledge index|search|status`: a knowledge base in an SQLite file, built from
//! files and folders and searched as the agent's `knowledge_search` tools search it.
//!
//! `index` makes the named paths and globs the base's content: new and changed files are
//! chunked, unchanged ones kept, files indexed before but not named now removed. `search`
//! answers through the tools themselves (`knowledge_search`, or `agentic_knowledge_search`
//! with `--filter`), so what a person sees is what the model would get. Without an embedder
//! the base ranks by BM25 alone, and every answer says so.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use toolbelt::ToolContext;
use toolbelt_knowledge::{
    KnowledgeBase, KnowledgeToolOptions, Source, SqliteStore, knowledge_tools,
};

use crate::common::{CliError, EXIT_OK, Outcome};
use crate::progress::Progress;

mod fetch;
mod flag;
pub use flag::KnowledgeArgs;

/// `toolbelt knowledge ...`.
#[derive(Subcommand, Debug)]
pub enum KnowledgeCommand {
    /// Index files, folders (.gitignore honoured) and globs into the knowledge base; files
    /// indexed before and not named now are removed.
    Index(IndexArgs),
    /// Search the knowledge base: ranked passages with their citations.
    Search(SearchArgs),
    /// What the knowledge base holds.
    Status(StatusArgs),
}

/// The knowledge base file, shared by every subcommand.
#[derive(Args, Debug)]
pub struct DbArgs {
    /// The knowledge base file (SQLite; created by `index`), or a PostgreSQL URL
    /// (postgres://user:password@host/db; feature postgres).
    #[arg(long, value_name = "FILE", default_value = ".toolbelt/knowledge.db")]
    db: PathBuf,
}

/// Flags of `toolbelt knowledge index`.
#[derive(Args, Debug)]
pub struct IndexArgs {
    /// Files, folders, globs (`docs/**/*.md`) or web pages (`https://…`, read by WebFetch).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<String>,
    #[command(flatten)]
    db: DbArgs,
    /// Let URL sources reach this address or range (loopback, private and link-local
    /// addresses are refused by default; repeatable).
    #[arg(long, value_name = "CIDR")]
    allow_address: Vec<String>,
    /// The largest chunk, in characters.
    #[arg(long, value_name = "N", default_value_t = 1500,
          value_parser = clap::value_parser!(u32).range(64..=100_000))]
    max_chars: u32,
    /// Characters repeated from one chunk at the start of the next.
    #[arg(long, value_name = "N", default_value_t = 150)]
    overlap: u32,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Flags of `toolbelt knowledge search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// What to look for, in words.
    query: String,
    #[command(flatten)]
    db: DbArgs,
    /// How many passages.
    #[arg(long, value_name = "K", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=20))]
    top: u32,
    /// A metadata filter, as the agentic_knowledge_search tool takes it (JSON), e.g.
    /// '{"kind": "markdown", "source": {"$prefix": "docs/"}}'.
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,
    /// Print the hits as JSON.
    #[arg(long)]
    json: bool,
}

/// Flags of `toolbelt knowledge status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `toolbelt knowledge ...`.
pub async fn run(command: KnowledgeCommand) -> Outcome {
    match command {
        KnowledgeCommand::Index(args) => index(args).await,
        KnowledgeCommand::Search(args) => search(args).await,
        KnowledgeCommand::Status(args) => status(args).await,
    }
}

fn failed(err: impl std::fmt::Display) -> CliError {
    CliError::failed(err.to_string())
}

/// Opens the base in `db`; `create` makes the file's folder, otherwise a missing file is an
/// error that says to index first.
async fn open(db: &DbArgs, create: bool) -> Result<KnowledgeBase, CliError> {
    open_base(&db.db, create).await
}

/// Whether `db` names a PostgreSQL database rather than a file.
fn is_postgres(db: &std::path::Path) -> bool {
    db.to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// How a base location is shown: a file's path, or "PostgreSQL" (never the URL, which may
/// hold a password).
fn shown(db: &std::path::Path) -> String {
    if is_postgres(db) {
        "PostgreSQL".to_string()
    } else {
        db.display().to_string()
    }
}

/// Opens the base in the file `db` (see [`open`]); also what `--knowledge` indexes into.
async fn open_base(db: &std::path::Path, create: bool) -> Result<KnowledgeBase, CliError> {
    if is_postgres(db) {
        return open_postgres(db.to_str().unwrap_or_default()).await;
    }
    if create {
        if let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| failed(format!("{}: {e}", parent.display())))?;
        }
    } else if !db.exists() {
        return Err(CliError::usage(format!(
            "no knowledge base at {}; run `toolbelt knowledge index PATH...` first",
            db.display()
        )));
    }
    let store = SqliteStore::open(db).map_err(failed)?;
    Ok(KnowledgeBase::new(Arc::new(store)))
}

/// A base in PostgreSQL (`--db postgres://...`, feature `postgres`).
#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<KnowledgeBase, CliError> {
    let store = toolbelt_knowledge::PostgresStore::open(url)
        .await
        .map_err(failed)?;
    Ok(KnowledgeBase::new(Arc::new(store)))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_: &str) -> Result<KnowledgeBase, CliError> {
    Err(CliError::usage(
        "this build has no PostgreSQL knowledge store (build with --features postgres)",
    ))
}

async fn index(args: IndexArgs) -> Outcome {
    let base = open(&args.db, true)
        .await?
        .with_chunking(toolbelt_knowledge::ChunkOptions {
            max_chars: args.max_chars as usize,
            overlap_chars: args.overlap as usize,
        })
        .with_url_fetcher(Arc::new(fetch::web_fetch_source(&args.allow_address)?));
    let sources: Vec<Source> = args.paths.iter().map(Source::new).collect();
    let progress = Progress::on_stderr(args.json);
    progress.spin(format!("indexing {}", args.paths.join(" ")));
    let report = base.index(&sources).await;
    progress.hide();
    let report = report.map_err(failed)?;
    if args.json {
        println!("{}", json!(report));
    } else {
        println!(
            "{} files: {} added, {} changed, {} unchanged, {} removed; {} chunks in {}",
            report.files,
            report.added,
            report.changed,
            report.unchanged,
            report.removed,
            report.chunks,
            shown(&args.db.db)
        );
        if report.skipped_large + report.skipped_binary + report.skipped_unreadable > 0 {
            println!(
                "skipped: {} too large ({} bytes, {} for a PDF), {} binary, {} unreadable \
                 (a broken, encrypted or too slow PDF, or a page that could not be fetched: \
                 its stored version is kept)",
                report.skipped_large,
                toolbelt_knowledge::MAX_FILE_BYTES,
                toolbelt_knowledge::MAX_PDF_BYTES,
                report.skipped_binary,
                report.skipped_unreadable
            );
        }
        println!("ranking: {}", base.mode().describe());
    }
    Ok(EXIT_OK)
}

async fn search(args: SearchArgs) -> Outcome {
    let filter: Option<Value> = match &args.filter {
        Some(raw) => Some(
            serde_json::from_str(raw)
                .map_err(|e| CliError::usage(format!("--filter is not JSON: {e}")))?,
        ),
        None => None,
    };
    let base = Arc::new(open(&args.db, false).await?);
    let tools = knowledge_tools(base, KnowledgeToolOptions::default()).map_err(failed)?;
    let (tool, call) = match filter {
        None => (&tools[0], json!({"query": args.query, "k": args.top})),
        Some(filter) => (
            &tools[1],
            json!({"query": args.query, "k": args.top, "filter": filter}),
        ),
    };
    let output = tool
        .call(ToolContext::for_call("cli"), &call.to_string())
        .await
        .map_err(|e| CliError::from_tool_error(&e))?;
    if args.json {
        println!("{}", output.structured.unwrap_or(Value::Null));
    } else {
        println!("{}", output.llm_text().trim_end());
    }
    Ok(EXIT_OK)
}

async fn status(args: StatusArgs) -> Outcome {
    let base = open(&args.db, false).await?;
    let status = base.status().await.map_err(failed)?;
    if args.json {
        println!("{}", json!(status));
    } else {
        println!(
            "{}: {} documents, {} chunks\nranking: {}",
            shown(&args.db.db),
            status.documents,
            status.chunks,
            status.mode.describe()
        );
    }
    Ok(EXIT_OK)
}
