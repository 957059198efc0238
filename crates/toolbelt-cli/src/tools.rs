//! `toolbelt tools list` and `toolbelt tools call`: the built-in tools (and those of the MCP
//! servers in `--mcp-config`) listed, or one of them called through the executor pipeline
//! (validation, hooks, timeout), exactly as a model's call would be. A server that offers
//! some tools only to a client declaring elicitation, sampling or roots (which this client
//! does not) gets a note on stderr naming each such tool and what it needs.
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
    /// `Read` in one call allows an `Edit` in the next. (Not with --remote: the record is
    /// the remote serve's.)
    #[arg(long, value_name = "FILE", conflicts_with = "remote")]
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
    let toolbox = Toolbox::open(&args.sources, None)?.connect_remote().await?;
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
    if let Some(path) = &args.sources.mcp_config {
        for note in offered_elsewhere::notes(path, &args.sources.dir, &snapshot).await {
            eprintln!("note: {note}");
        }
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
    let toolbox = Toolbox::open(&args.sources, read_state)?
        .connect_remote()
        .await?;
    let ctx = ToolContext::for_call("cli");
    let snapshot = toolbox.list(&ctx).await;
    let executor = Executor::builder(toolbox.registry.clone())
        .repair_json(args.repair_json)
        .middleware(Timeout::new(Duration::from_secs(args.timeout)))
        .build();
    toolbox.bind_executor(&executor);
    let call = ToolCall::new("cli", args.name.as_str(), raw_args);
    let result = execute_until_signal(&executor, &snapshot, ctx, &call).await;

    if let (Some(session), Some(builtin)) = (session, &toolbox.builtin) {
        session.save(builtin.read_state())?;
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

mod offered_elsewhere {
    //! The tools an `--mcp-config` server offers only to a client that declares what the
    //! client of `toolbelt tools`, `run` and `chat` does not: elicitation, sampling or roots
    //! (the reference server-everything registers its elicitation, sampling and roots tools
    //! only after such an `initialize`). `toolbelt serve` declares all three for its clients.
    //!
    //! Each server is asked once more, declaring all three (every request declined); only
    //! when that lists a tool the listing did not is it asked once per capability, to say
    //! which one each such tool needs.

    use std::collections::BTreeSet;
    use std::path::Path;

    use futures::future::join_all;
    use toolbelt::exec::ToolSnapshot;
    use toolbelt::mcp::{
        ConnectionConfig, ElicitationResponse, McpServersFile, McpToolSet, Root, SamplingError,
    };
    use toolbelt::{ToolContext, ToolSet};

    /// What a client can declare in `initialize` beyond plain tool calls.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Offer {
        Elicitation,
        Sampling,
        Roots,
    }

    const OFFERS: [Offer; 3] = [Offer::Elicitation, Offer::Sampling, Offer::Roots];

    impl Offer {
        fn name(self) -> &'static str {
            match self {
                Offer::Elicitation => "elicitation",
                Offer::Sampling => "sampling",
                Offer::Roots => "roots",
            }
        }
    }

    /// One line per tool left out of `listed` for a capability, after a line naming the
    /// server; nothing for a server that offers every client the same tools, or that the
    /// listing could not reach (it has said so already).
    pub(super) async fn notes(path: &Path, dir: &Path, listed: &ToolSnapshot) -> Vec<String> {
        let Ok(file) = McpServersFile::load(path) else {
            return Vec::new();
        };
        let Some(root) = std::fs::canonicalize(dir)
            .ok()
            .and_then(|dir| Root::directory(&dir).ok())
        else {
            return Vec::new();
        };
        let servers: Vec<(String, ConnectionConfig)> = file
            .servers()
            .into_iter()
            .filter_map(|(name, config)| Some((name, config.ok()?)))
            .collect();
        let per_server = join_all(servers.iter().map(|(name, config)| {
            let root = root.clone();
            async move { server_notes(name, config, &root, listed).await }
        }))
        .await;
        per_server.into_iter().flatten().collect()
    }

    async fn server_notes(
        server: &str,
        config: &ConnectionConfig,
        root: &Root,
        listed: &ToolSnapshot,
    ) -> Vec<String> {
        // A server the listing could not reach has been reported already; asking it again
        // would only wait for it once more.
        if listed.errors().iter().any(|(set, _)| set == server) {
            return Vec::new();
        }
        let shown = shown_names(server, listed);
        let Some(all) = tools_offered(server, config, &OFFERS, root).await else {
            return Vec::new();
        };
        let left_out: Vec<&String> = all.iter().filter(|t| !shown.contains(*t)).collect();
        if left_out.is_empty() {
            return Vec::new();
        }
        let each = join_all(
            OFFERS
                .iter()
                .map(|offer| tools_offered(server, config, std::slice::from_ref(offer), root)),
        )
        .await;
        let mut notes = vec![format!(
            "server {server:?} offers these tools only to a client that declares a capability \
             `toolbelt tools`, `run` and `chat` do not, so they are left out here (`toolbelt \
             serve` declares elicitation, sampling and roots for its clients and passes the \
             server's requests on to them):"
        )];
        for tool in left_out {
            let needs: Vec<&str> = OFFERS
                .iter()
                .zip(&each)
                .filter(|(_, tools)| tools.as_ref().is_some_and(|t| t.contains(tool)))
                .map(|(offer, _)| offer.name())
                .collect();
            let why = match needs[..] {
                [] => "needs more than one of elicitation, sampling and roots".to_string(),
                _ => format!("needs {}", needs.join(" or ")),
            };
            notes.push(format!("  {tool} ({why})"));
        }
        notes
    }

    /// The names `listed` shows for `server`'s tools, with the `{server}_` a clash added
    /// taken off again.
    fn shown_names(server: &str, listed: &ToolSnapshot) -> BTreeSet<String> {
        let prefix = format!("{server}_");
        let mut shown = BTreeSet::new();
        for name in listed.names() {
            if listed.tool_set_of(name) != Some(server) {
                continue;
            }
            shown.insert(name.to_string());
            if let Some(own) = name.strip_prefix(&prefix) {
                shown.insert(own.to_string());
            }
        }
        shown
    }

    /// The names of the tools `server` lists to a client declaring `offers` (each request
    /// for them declined; `root` the one root); `None` when it cannot be listed.
    async fn tools_offered(
        server: &str,
        config: &ConnectionConfig,
        offers: &[Offer],
        root: &Root,
    ) -> Option<BTreeSet<String>> {
        let mut builder = McpToolSet::builder(server, config.clone());
        for offer in offers {
            builder = match offer {
                Offer::Elicitation => builder
                    .url_elicitation(true)
                    .on_elicitation(|_| Box::pin(async { ElicitationResponse::Decline })),
                Offer::Sampling => builder.on_sampling(|_| {
                    Box::pin(async {
                        Err(SamplingError::declined(
                            "toolbelt tools list answers no requests",
                        ))
                    })
                }),
                Offer::Roots => builder.roots(vec![root.clone()]),
            };
        }
        let set = builder.build().ok()?;
        let listed = set.tools(&ToolContext::new()).await;
        if let Err(err) = set.close().await {
            tracing::debug!(server, "closing a capability probe: {err}");
        }
        match listed {
            Ok(tools) => Some(tools.iter().map(|t| t.name().to_string()).collect()),
            Err(err) => {
                tracing::debug!(server, "a capability probe could not list the tools: {err}");
                None
            }
        }
    }
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
