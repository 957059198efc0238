//! `toolbelt tools search`: rank the tools (built-in and `--mcp-config`, or a `--catalog`
//! file) against a query, by BM25, embeddings or both.
//!
//! One query prints the best `--top` tools; `--queries FILE` reads JSON lines
//! `{"id", "query"}` and writes one JSON line `{"id", "results": [{"name", "score"}]}` per
//! query, all in one process (the index is built once), for evaluation. Every query line
//! is checked before the first search runs, so a bad line costs no partial output.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde_json::{Value, json};
use toolbelt::ToolContext;
use toolbelt::search::{Hit, Method, ToolDoc, ToolIndex, parse_catalog};

use crate::common::{CliError, EXIT_OK, Outcome, ToolSourceArgs, Toolbox};
use crate::progress::Progress;

mod embedder;
pub(crate) use embedder::EmbedderArgs;

/// Flags of `toolbelt tools search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// What the tools are wanted for, in words (omit with --queries).
    #[arg(required_unless_present = "queries", conflicts_with = "queries")]
    query: Option<String>,
    /// How many tools to return per query.
    #[arg(long, value_name = "K", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    top: u32,
    /// `bm25` (no model), `embed` (embeddings), `hybrid` (reciprocal rank fusion of both) or
    /// `llm` (the model named by --model / TOOLBELT_MODEL at --base-url / OPENAI_BASE_URL
    /// reads the tools' names and descriptions and names the best; scores are 1/rank).
    #[arg(long, value_name = "METHOD", default_value = "bm25")]
    method: String,
    /// Print a JSON array of `{name, score}` instead of a table.
    #[arg(long)]
    json: bool,
    /// Search the tools of this file instead: a JSON array of OpenAI function declarations
    /// (`{name, description, parameters}`, or `{type: "function", function: {...}}`) or an
    /// MCP `tools/list` result (`{tools: [...]}`). Names are taken as given.
    #[arg(long, value_name = "FILE", conflicts_with = "mcp_config")]
    catalog: Option<PathBuf>,
    /// Answer every query of this file (JSON lines `{"id", "query"}`) with a JSON line
    /// `{"id", "results": [{"name", "score"}]}`.
    #[arg(long, value_name = "FILE")]
    queries: Option<PathBuf>,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// With --method llm: the model name (overrides TOOLBELT_MODEL).
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// With --method llm: the OpenAI-compatible server (overrides OPENAI_BASE_URL; the key
    /// is read from OPENAI_API_KEY).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    #[command(flatten)]
    sources: ToolSourceArgs,
}

/// Runs `toolbelt tools search`.
pub async fn run(args: SearchArgs) -> Outcome {
    let llm = match args.method.as_str() {
        "llm" => Some(search_model(&args)?),
        _ => None,
    };
    let method = match llm {
        Some(_) => Method::Bm25,
        None => parse_method(&args.method)?,
    };
    let embeddings = match method {
        Method::Bm25 => None,
        _ => Some(args.embedder.index(&format!("--method {method}"))?),
    };
    // Read the queries before any work, so a bad file fails fast and whole.
    let queries = match &args.queries {
        Some(path) => Some(read_queries(path)?),
        None => None,
    };
    let docs = match &args.catalog {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
            parse_catalog(&text).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?
        }
        None => listed_tools(&args.sources).await?,
    };

    // A cold embedding of hundreds of tools takes a while: a terminal shows how far it got.
    let progress = Progress::on_stderr(args.json);
    let mut index = ToolIndex::new();
    if let Some(embeddings) = embeddings {
        let line = progress.clone();
        index = index.with_embeddings(embeddings.on_progress(move |p| {
            line.count("embedding tools", p.embedded as u64, p.total as u64);
        }));
    }
    let synced = index.sync(&docs).await;
    progress.hide();
    synced.map_err(|e| CliError::failed(format!("indexing the tools: {e}")))?;

    let k = args.top as usize;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let write_failed = |e: std::io::Error| CliError::failed(format!("writing the results: {e}"));
    match queries {
        Some(queries) => {
            for (id, query) in queries {
                let hits = match &llm {
                    Some(model) => search_with_model(model, &docs, &query, k).await?,
                    None => search(&index, &query, k, method).await?,
                };
                let line = json!({"id": id, "results": hits});
                writeln!(out, "{line}").map_err(write_failed)?;
            }
        }
        None => {
            let query = args.query.as_deref().unwrap_or_default();
            let hits = match &llm {
                Some(model) => search_with_model(model, &docs, query, k).await?,
                None => search(&index, query, k, method).await?,
            };
            if args.json {
                writeln!(out, "{}", json!(hits)).map_err(write_failed)?;
            } else {
                print_table(&mut out, &hits, &docs).map_err(write_failed)?;
            }
        }
    }
    out.flush().map_err(write_failed)?;
    Ok(EXIT_OK)
}

/// The model of `--method llm`, from its flags and the environment (as `run`'s).
fn search_model(args: &SearchArgs) -> Result<toolbelt::model::DynModel, CliError> {
    use toolbelt::model::{ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, OpenAiConfig, OpenAiModel};
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let base_url = args.base_url.clone().or_else(|| var(ENV_BASE_URL));
    let model = args.model.clone().or_else(|| var(ENV_MODEL));
    let config = OpenAiConfig::from_values(base_url, var(ENV_API_KEY), model).map_err(|e| {
        CliError::usage(format!(
            "--method llm needs a model (--model or {ENV_MODEL}, --base-url or {ENV_BASE_URL}): {e}"
        ))
    })?;
    let model = OpenAiModel::new(config).map_err(|e| CliError::usage(e.to_string()))?;
    Ok(Arc::new(model))
}

/// `--method llm`: the tools the model names for `query`, scored 1/rank.
async fn search_with_model(
    model: &toolbelt::model::DynModel,
    docs: &[ToolDoc],
    query: &str,
    k: usize,
) -> Result<Vec<Hit>, CliError> {
    let tools: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| (d.name.as_str(), d.description.as_str()))
        .collect();
    let names = toolbelt::agent::tool_search::choose_with_model(model, query, &tools, k)
        .await
        .map_err(|e| CliError::failed(format!("search: {e}")))?;
    Ok(names
        .into_iter()
        .enumerate()
        .map(|(rank, name)| Hit {
            name,
            score: 1.0 / (rank as f32 + 1.0),
        })
        .collect())
}

fn parse_method(name: &str) -> Result<Method, CliError> {
    name.parse::<Method>()
        .map_err(|_| CliError::usage(format!("--method {name:?}: expected bm25, embed or hybrid")))
}

/// The built-in tools and those of the `--mcp-config` servers, as `toolbelt tools list`
/// shows them.
async fn listed_tools(sources: &ToolSourceArgs) -> Result<Vec<ToolDoc>, CliError> {
    let toolbox = Toolbox::open(sources, None)?;
    let snapshot = toolbox.list(&ToolContext::new()).await;
    toolbox.close().await;
    Ok(snapshot
        .tools()
        .map(|t| ToolDoc::from_declaration(t.declaration()))
        .collect())
}

/// Reads `{"id", "query"}` lines (blank lines skipped); any other line is a usage error
/// naming its line number. The id is echoed back as given (string or number).
fn read_queries(path: &Path) -> Result<Vec<(Value, String)>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    let mut queries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| CliError::usage(format!("{}:{}: {why}", path.display(), i + 1));
        let value: Value =
            serde_json::from_str(line).map_err(|e| bad(&format!("not a JSON object: {e}")))?;
        let Some(query) = value.get("query").and_then(Value::as_str) else {
            return Err(bad(
                "expected {\"id\": ..., \"query\": \"...\"}: no string \"query\"",
            ));
        };
        let Some(id) = value
            .get("id")
            .filter(|id| id.is_string() || id.is_number())
        else {
            return Err(bad(
                "expected {\"id\": ..., \"query\": \"...\"}: no string or number \"id\"",
            ));
        };
        queries.push((id.clone(), query.to_owned()));
    }
    Ok(queries)
}

async fn search(
    index: &ToolIndex,
    query: &str,
    k: usize,
    method: Method,
) -> Result<Vec<Hit>, CliError> {
    index
        .search(query, k, method)
        .await
        .map_err(|e| CliError::failed(format!("search: {e}")))
}

/// One line per hit: rank, name, score and the first line of the description.
fn print_table(out: &mut impl Write, hits: &[Hit], docs: &[ToolDoc]) -> std::io::Result<()> {
    if hits.is_empty() {
        writeln!(out, "no tool matches")?;
        return Ok(());
    }
    let width = hits
        .iter()
        .map(|h| h.name.chars().count())
        .max()
        .unwrap_or(0);
    for (i, hit) in hits.iter().enumerate() {
        let description = docs
            .iter()
            .find(|d| d.name == hit.name)
            .and_then(|d| d.description.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .trim();
        let description = printable(&description.chars().take(100).collect::<String>());
        writeln!(
            out,
            "{:>2}. {:<width$}  {:>7.3}  {description}",
            i + 1,
            printable(&hit.name),
            hit.score
        )?;
    }
    Ok(())
}

/// `text` with control characters escaped: a catalog's names and descriptions are someone
/// else's text and must not drive the terminal (escape sequences, carriage returns).
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
