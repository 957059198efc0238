//! `toolbelt tools list` and `toolbelt tools call`: the built-in tools (and those of the MCP
//! servers in `--mcp-config`) listed, or one of them called through the executor pipeline
//! (validation, hooks, timeout), exactly as a model's call would be.
//!
//! Write, Edit and NotebookEdit change an existing file only after it was fully Read in the
//! same tool set session. Each `call` is a fresh session unless `--session FILE` names a
//! file that keeps the session's read state between calls (created when missing, rewritten
//! atomically after each call).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use toolbelt::ToolContext;
use toolbelt::builtin::fs::ReadState;
use toolbelt::exec::{Executor, Timeout, ToolCall};

use crate::common::{
    CliError, EXIT_OK, Outcome, ToolSourceArgs, Toolbox, execute_until_signal, read_arguments,
};
use crate::output::{View, print_listing, print_output};

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
    }
}

async fn list(args: ListArgs) -> Outcome {
    let toolbox = Toolbox::open(&args.sources, None)?;
    toolbox.announce_sandbox();
    let snapshot = toolbox.list(&ToolContext::new()).await;
    toolbox.close().await;
    let tools: Vec<_> = snapshot.tools().map(|t| t.declaration()).collect();
    print_listing(&tools, args.json);
    Ok(EXIT_OK)
}

async fn call(args: CallArgs) -> Outcome {
    let raw_args = read_arguments(&args.args)?;
    let read_state = match &args.session {
        Some(path) => Some(Arc::new(load_session(path)?)),
        None => None,
    };
    let toolbox = Toolbox::open(&args.sources, read_state)?;
    let ctx = ToolContext::for_call("cli");
    let snapshot = toolbox.list(&ctx).await;
    let executor = Executor::builder(toolbox.registry.clone())
        .repair_json(args.repair_json)
        .middleware(Timeout::new(Duration::from_secs(args.timeout)))
        .build();
    let call = ToolCall::new("cli", args.name.as_str(), raw_args);
    let result = execute_until_signal(&executor, &snapshot, ctx, &call).await;

    if let Some(path) = &args.session {
        save_session(path, toolbox.builtin.read_state())?;
    }
    toolbox.close().await;

    let output = result.result.map_err(|e| CliError::from_tool_error(&e))?;
    let view = if args.json {
        View::Json
    } else if args.user_view {
        View::User
    } else {
        View::Model
    };
    Ok(print_output(&output, view))
}

/// The read state saved in `path`, or a new session when the file does not exist yet.
fn load_session(path: &Path) -> Result<ReadState, CliError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReadState::new()),
        Err(e) => {
            return Err(CliError::usage(format!(
                "--session {}: {e}",
                path.display()
            )));
        }
    };
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("--session {}: not JSON: {e}", path.display())))?;
    ReadState::from_json(&value)
        .map_err(|e| CliError::usage(format!("--session {}: {e}", path.display())))
}

/// Saves the read state to `path` atomically: a temp file in the same directory, renamed.
fn save_session(path: &Path, state: &ReadState) -> Result<(), CliError> {
    let fail = |e: std::io::Error| CliError::failed(format!("--session {}: {e}", path.display()));
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&temp, state.to_json().to_string()).map_err(fail)?;
    std::fs::rename(&temp, path).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        fail(e)
    })
}
