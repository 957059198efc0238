//! `toolbelt tools list` and `toolbelt tools call`: the built-in tools (and those of the MCP
//! servers in `--mcp-config`) listed, or one of them called through the executor pipeline
//! (validation, hooks, timeout), exactly as a model's call would be.
//!
//! Write, Edit and NotebookEdit change an existing file only after it was fully Read in the
//! same tool set session. Each `call` is a fresh session unless `--session FILE` names a
//! file that keeps the session's read state between calls (created when missing, rewritten
//! atomically after each call). The file is locked (`flock`) from loading to saving, so two
//! calls sharing a session take turns: without it, both would load the same state, both
//! check the file they edit against it, and the later write would drop the earlier change.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use toolbelt::builtin::fs::ReadState;
use toolbelt::builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt::exec::{Executor, Timeout, ToolCall};
use toolbelt::{ToolContext, ToolError};

use crate::common::{
    CliError, EXIT_OK, Outcome, ToolSourceArgs, Toolbox, execute_until_signal, read_arguments,
};
use crate::output::{View, print_listing, print_listing_with_sources, print_output};

/// `toolbelt tools …`
#[derive(Subcommand, Debug)]
pub enum ToolsCommand {
    /// List the tools: a name and a one-line description each, or with --json their
    /// declarations.
    List(ListArgs),
    /// Call one tool with JSON arguments through the executor (validation, timeout).
    /// Exit code 0 on success, 1 when the tool reports a failure, 2 for an unknown tool or
    /// invalid arguments.
    Call(CallArgs),
    /// Rank the tools (or a --catalog file's) against a query: BM25, embeddings or hybrid.
    Search(crate::tools_search::SearchArgs),
}

/// Flags of `toolbelt tools list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    sources: ToolSourceArgs,
    /// Print a JSON array of `{name, description, input_schema, output_schema,
    /// annotations}` instead.
    #[arg(long)]
    json: bool,
    /// With --json: print the `tools` array exactly as this provider's request carries it
    /// (openai, openai-strict, openai-responses, anthropic, gemini), names and schemas
    /// shaped to what it accepts; what had to be simplified is reported on stderr.
    #[arg(long, value_name = "DIALECT", requires = "json")]
    dialect: Option<toolbelt::model::ToolDialect>,
}

/// Flags of `toolbelt tools call`.
#[derive(Args, Debug)]
pub struct CallArgs {
    /// The tool's name, as `toolbelt tools list` prints it.
    name: String,
    /// The arguments, a JSON object (`-` reads them from stdin).
    #[arg(default_value = "{}")]
    args: String,
    #[command(flatten)]
    sources: ToolSourceArgs,
    /// A JSON file that keeps the read-before-write session between calls, so that a
    /// `Read` in one call allows an `Edit` in the next.
    #[arg(long, value_name = "FILE")]
    session: Option<PathBuf>,
    /// The call's time limit in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    /// Repair malformed JSON arguments (unquoted keys, single quotes, trailing commas)
    /// instead of refusing them.
    #[arg(long)]
    repair_json: bool,
    /// Print what the tool shows a person (Edit's diff, Read's summary) instead of what
    /// the model reads.
    #[arg(long, conflicts_with = "json")]
    user_view: bool,
    /// Print `{is_error, content, user_content, blocks, structured, meta}` as JSON instead
    /// of the text.
    #[arg(long)]
    json: bool,
}

/// Runs `toolbelt tools …`.
pub async fn run(command: ToolsCommand) -> Outcome {
    match command {
        ToolsCommand::List(args) => list(args).await,
        ToolsCommand::Call(args) => call(args).await,
        ToolsCommand::Search(args) => crate::tools_search::run(args).await,
    }
}

async fn list(args: ListArgs) -> Outcome {
    let toolbox = Toolbox::open(&args.sources, None)?;
    toolbox.announce_sandbox();
    let snapshot = toolbox.list(&ToolContext::new()).await;
    toolbox.close().await;
    let tools: Vec<_> = snapshot.tools().map(|t| t.declaration()).collect();
    if let Some(dialect) = args.dialect {
        let declarations: Vec<_> = tools.iter().map(|d| (*d).clone()).collect();
        let wire = toolbelt::model::wire_tools(dialect, &declarations);
        for warning in &wire.warnings {
            eprintln!("warning: {warning}");
        }
        // Gemini's request carries its declarations inside one tool object.
        let array = match dialect {
            toolbelt::model::ToolDialect::Gemini => {
                serde_json::json!([{ "functionDeclarations": wire.tools }])
            }
            _ => serde_json::Value::Array(wire.tools),
        };
        println!("{array}");
        return Ok(EXIT_OK);
    }
    // With MCP servers the listing says where each tool comes from: `builtin` or the
    // server's name.
    if args.sources.mcp_config.is_some() {
        let sources: Vec<&str> = snapshot
            .names()
            .map(|name| snapshot.tool_set_of(name).unwrap_or("direct"))
            .collect();
        print_listing_with_sources(&tools, &sources, args.json);
    } else {
        print_listing(&tools, args.json);
    }
    Ok(EXIT_OK)
}

async fn call(args: CallArgs) -> Outcome {
    let raw_args = read_arguments(&args.args)?;
    // Held until the session is saved: another call sharing it waits here.
    let session = match &args.session {
        Some(path) => Some(SessionFile::lock(path.clone()).await?),
        None => None,
    };
    let read_state = match &session {
        Some(session) => Some(Arc::new(session.load()?)),
        None => None,
    };
    let toolbox = Toolbox::open(&args.sources, read_state)?;
    let ctx = ToolContext::for_call("cli");
    let snapshot = toolbox.list(&ctx).await;
    let executor = Executor::builder(toolbox.registry.clone())
        .repair_json(args.repair_json)
        .middleware(Timeout::new(Duration::from_secs(args.timeout)))
        .build();
    toolbox.bind_executor(&executor);
    let call = ToolCall::new("cli", args.name.as_str(), raw_args);
    let result = execute_until_signal(&executor, &snapshot, ctx, &call).await;

    if let Some(session) = session {
        session.save(toolbox.builtin.read_state())?;
    }
    toolbox.close().await;

    let output = result.result.map_err(|e| {
        unknown_in_read_only(&e, &args).unwrap_or_else(|| CliError::from_tool_error(&e))
    })?;
    let view = if args.json {
        View::Json
    } else if args.user_view {
        View::User
    } else {
        View::Model
    };
    let code = print_output(&output, view);
    if output.is_error && args.session.is_none() && output.llm_text().contains(NOT_READ) {
        eprintln!(
            "toolbelt: hint: each `toolbelt tools call` is a session of its own, so a Read made \
             by another call does not count; pass the same --session FILE to both calls"
        );
    }
    Ok(code)
}

/// What the file tools say of a file this session has not read.
const NOT_READ: &str = "has not been read yet";

/// For a tool unknown only because `--read-only` leaves it out, the usage error that says so.
fn unknown_in_read_only(err: &ToolError, args: &CallArgs) -> Option<CliError> {
    if !matches!(err, ToolError::UnknownTool { .. }) || !args.sources.read_only {
        return None;
    }
    let full = BuiltinToolSet::new(BuiltinOptions::new(&args.sources.dir)).ok()?;
    let offered = full
        .tool_list()
        .iter()
        .any(|tool| tool.declaration().name.as_str() == args.name);
    offered.then(|| {
        CliError::usage(format!(
            "{} is not offered with --read-only, which leaves out the tools that change files \
             or run commands; call it without --read-only",
            args.name
        ))
    })
}

/// A `--session` file, locked for this process from [`SessionFile::lock`] until it is saved
/// (or dropped).
struct SessionFile {
    path: PathBuf,
    /// The locked file: the lock is released when it is closed.
    locked: File,
}

impl SessionFile {
    /// Opens `path` (creating it empty when missing) and waits for its exclusive lock.
    ///
    /// A save replaces the file by renaming a new one over it, so the file a waiting call
    /// finally locks may no longer be the one at `path`; then it locks again, until the file
    /// it holds is the current one.
    async fn lock(path: PathBuf) -> Result<Self, CliError> {
        tokio::task::spawn_blocking(move || {
            let fail =
                |e: std::io::Error| CliError::usage(format!("--session {}: {e}", path.display()));
            loop {
                let locked = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(fail)?;
                rustix::fs::flock(&locked, rustix::fs::FlockOperation::LockExclusive)
                    .map_err(|e| fail(e.into()))?;
                let held = rustix::fs::fstat(&locked).map_err(|e| fail(e.into()))?;
                match rustix::fs::stat(&path) {
                    Ok(now) if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino) => {
                        return Ok(Self { path, locked });
                    }
                    // Replaced or removed meanwhile: lock the file that is there now.
                    Ok(_) | Err(rustix::io::Errno::NOENT) => continue,
                    Err(e) => return Err(fail(e.into())),
                }
            }
        })
        .await
        .map_err(|e| CliError::failed(format!("--session: {e}")))?
    }

    /// The read state saved in the file; a new session when the file is empty (just made).
    fn load(&self) -> Result<ReadState, CliError> {
        let mut text = String::new();
        (&self.locked)
            .read_to_string(&mut text)
            .map_err(|e| CliError::usage(format!("--session {}: {e}", self.path.display())))?;
        if text.trim().is_empty() {
            return Ok(ReadState::new());
        }
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            CliError::usage(format!("--session {}: not JSON: {e}", self.path.display()))
        })?;
        ReadState::from_json(&value)
            .map_err(|e| CliError::usage(format!("--session {}: {e}", self.path.display())))
    }

    /// Saves the read state atomically (a temp file in the same directory, renamed over the
    /// session file), then releases the lock. The temp file is removed on every failure: a
    /// full disk leaves the old session and nothing else.
    fn save(self, state: &ReadState) -> Result<(), CliError> {
        let fail =
            |e: std::io::Error| CliError::failed(format!("--session {}: {e}", self.path.display()));
        let dir = match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Removed when dropped unless persisted: every early return below cleans up.
        let mut temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(fail)?;
        temp.write_all(state.to_json().to_string().as_bytes())
            .and_then(|()| temp.flush())
            .map_err(fail)?;
        temp.persist(&self.path).map_err(|e| fail(e.error))?;
        drop(self.locked);
        Ok(())
    }
}
