//! `toolbelt mcp tools` and `toolbelt mcp call`: one MCP server, named on the command line
//! (`--stdio`, `--sse`, `--http`) or in an `mcpServers` file (`--config` and `--server`),
//! its tools listed, or one of them called through the executor pipeline (schema
//! validation, timeout) exactly as a model's call would be.
//!
//! Exit codes are those of `toolbelt tools call`: 0 on success, 1 when the tool reports a
//! failure (an `isError` result, a timeout, a server that died during the call after it may
//! have run it: such a call is not sent again unless the tool is declared idempotent), 2 for
//! a usage error, an unknown tool, invalid arguments, or a server that cannot be reached.
//! Messages go to stderr. A `--stdio` server sees only the core environment variables
//! (`PATH`, `HOME`, …; never the parent's secrets): set others on its command line
//! (`--stdio "env KEY=value server"`) or in a `--config` file's `env`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand};
use toolbelt::exec::{Executor, Registry, Timeout, ToolCall, ToolSetRefresh};
use toolbelt::mcp::{
    ConnectionConfig, McpServersFile, McpToolSet, McpToolSetBuilder, Root, TransportConfig,
};
use toolbelt::{Declaration, ToolContext, ToolError, ToolSet};

use crate::common::{CliError, EXIT_OK, Outcome, execute_until_signal, read_arguments};
use crate::mcp_client::{ElicitationMode, SamplingMode};
use crate::output::{View, print_listing, print_output};

/// How many times the session is re-established when the server goes away during a call.
const RECONNECT_ATTEMPTS: u8 = 1;

/// `toolbelt mcp …`
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// List the server's tools: a name and a one-line description each, or with --json
    /// their declarations.
    Tools(ToolsArgs),
    /// Call one of the server's tools with JSON arguments through the executor. Exit code 0
    /// on success, 1 when the tool reports a failure, 2 for an unknown tool, invalid
    /// arguments or a server that cannot be reached.
    Call(CallArgs),
    /// Authorize with an HTTP server that uses OAuth and keep its tokens for later commands
    /// (the browser opens; --no-browser follows the redirects without one).
    Login(crate::mcp_login::LoginArgs),
}

/// Which server to talk to: exactly one of `--stdio`, `--sse`, `--http` or `--config`.
#[derive(Args, Debug, Clone)]
#[command(group(
    ArgGroup::new("server_source")
        .required(true)
        .args(["stdio", "sse", "http", "config"]),
))]
pub struct ServerArgs {
    /// Run a stdio server: the command line, split like a shell would
    /// (`--stdio "npx -y @scope/server --flag"`).
    #[arg(long, value_name = "COMMAND")]
    stdio: Option<String>,
    /// A server speaking the legacy HTTP+SSE transport at this URL (the event stream, often
    /// `…/sse`).
    #[arg(long, value_name = "URL")]
    sse: Option<String>,
    /// A server speaking streamable HTTP at this URL (often `…/mcp`).
    #[arg(long, value_name = "URL")]
    http: Option<String>,
    /// An `mcpServers` JSON file (Claude Desktop, Cursor, Claude Code); `${VAR}` is expanded
    /// from the environment.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server to use from --config (may be left out when the file has only one).
    #[arg(long, value_name = "NAME", requires = "config")]
    server: Option<String>,
    /// An HTTP header for every request to a remote server, `Name: value` (repeatable).
    #[arg(long = "header", value_name = "K:V")]
    headers: Vec<String>,
    /// The time limit in seconds for connecting, initializing and listing.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    connect_timeout: u64,
    #[command(flatten)]
    oauth: crate::mcp_login::OAuthArgs,
    /// A directory offered to the server as its root (`roots/list`, a file:// URI); without
    /// it the client declares no roots.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// How to answer a server that asks for input: ask on the terminal (declines with a
    /// note when there is none), accept the defaults of its form, or decline.
    #[arg(long, value_enum, value_name = "MODE", default_value = "ask")]
    elicitation: ElicitationMode,
    /// How to answer a server that asks for a completion: send it to the configured model
    /// (OPENAI_BASE_URL or OPENAI_API_KEY, and TOOLBELT_MODEL), or decline. Default: model
    /// when one is configured, else decline.
    #[arg(long, value_enum, value_name = "MODE")]
    sampling: Option<SamplingMode>,
}

/// Flags of `toolbelt mcp tools`.
#[derive(Args, Debug)]
pub struct ToolsArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Print a JSON array of `{name, description, input_schema, output_schema, annotations}`.
    #[arg(long)]
    json: bool,
}

/// Flags of `toolbelt mcp call`.
#[derive(Args, Debug)]
pub struct CallArgs {
    /// The tool's name, as `toolbelt mcp tools` prints it.
    tool: String,
    /// The arguments, a JSON object (`-` reads them from stdin).
    #[arg(default_value = "{}")]
    args: String,
    #[command(flatten)]
    server: ServerArgs,
    /// The call's time limit in seconds; when it passes the server is sent
    /// `notifications/cancelled`.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    /// Print `{is_error, content, user_content, blocks, structured, meta}` as JSON instead
    /// of the text.
    #[arg(long)]
    json: bool,
}

/// Runs `toolbelt mcp …`.
pub async fn run(command: McpCommand) -> Outcome {
    match command {
        McpCommand::Tools(args) => tools(args).await,
        McpCommand::Call(args) => call(args).await,
        McpCommand::Login(args) => crate::mcp_login::run(args).await,
    }
}

/// The tool set for the server the flags name, connected and initialized (so that a server
/// that cannot be reached is reported before anything else, as a usage error).
async fn open(args: &ServerArgs, ctx: &ToolContext) -> Result<McpToolSet, CliError> {
    let (name, config) = connection(args)?;
    let transport = config.transport.clone();
    let builder = McpToolSet::builder(name, config).session_reconnect(RECONNECT_ATTEMPTS);
    let builder = client_features(builder, args)?;
    let set = builder
        .build()
        .map_err(|e| CliError::usage(e.to_string()))?;
    // Ctrl-C while connecting ends the attempt (and reaps a stdio child) instead of hanging.
    let connected = tokio::select! {
        result = set.init(ctx) => {
            result.map_err(|e| CliError::usage(crate::mcp_client::explain(&e, &transport)))
        }
        _ = crate::signal::stop_signal() => Err(CliError::failed("interrupted while connecting")),
    };
    if let Err(err) = connected {
        close(&set).await;
        return Err(err);
    }
    Ok(set)
}

/// What the client offers the server: elicitation and sampling handlers, the root.
fn client_features(
    builder: McpToolSetBuilder,
    args: &ServerArgs,
) -> Result<McpToolSetBuilder, CliError> {
    let mut builder = crate::mcp_client::with_elicitation(builder, args.elicitation);
    let model = match args.sampling {
        Some(SamplingMode::Decline) => None,
        Some(SamplingMode::Model) => {
            Some(crate::mcp_client::configured_model().ok_or_else(|| {
                CliError::usage(
                    "--sampling model needs a model: set TOOLBELT_MODEL and OPENAI_BASE_URL (or \
                 OPENAI_API_KEY)",
                )
            })?)
        }
        None => crate::mcp_client::configured_model(),
    };
    builder = crate::mcp_client::with_sampling(builder, model);
    if let Some(dir) = &args.dir {
        if !dir.is_dir() {
            return Err(CliError::usage(format!(
                "--dir {}: not a directory",
                dir.display()
            )));
        }
        let root = Root::directory(dir)
            .map_err(|e| CliError::usage(format!("--dir {}: {e}", dir.display())))?;
        builder = builder.roots(vec![root]);
    }
    Ok(builder)
}

/// The server's name (for messages) and its connection configuration.
fn connection(args: &ServerArgs) -> Result<(String, ConnectionConfig), CliError> {
    let (name, mut config) = if let Some(command_line) = &args.stdio {
        let mut words = shlex::split(command_line)
            .ok_or_else(|| CliError::usage(format!("--stdio {command_line:?}: unbalanced quotes")))?
            .into_iter();
        let command = words
            .next()
            .ok_or_else(|| CliError::usage("--stdio needs a command"))?;
        let name = std::path::Path::new(&command)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| command.clone());
        let config = ConnectionConfig::new(TransportConfig::stdio(command, words));
        (name, config)
    } else if let Some(url) = &args.sse {
        (
            url.clone(),
            ConnectionConfig::new(TransportConfig::sse(url)),
        )
    } else if let Some(url) = &args.http {
        let transport = TransportConfig::streamable_http(url);
        (url.clone(), ConnectionConfig::new(transport))
    } else if let Some(path) = &args.config {
        from_file(path, args.server.as_deref())?
    } else {
        return Err(CliError::usage(
            "name a server with --stdio, --sse, --http or --config",
        ));
    };
    config.timeout = Duration::from_secs(args.connect_timeout.max(1));
    if !args.headers.is_empty() && matches!(config.transport, TransportConfig::Stdio { .. }) {
        return Err(CliError::usage(
            "--header applies to --sse and --http servers, not to stdio ones",
        ));
    }
    for header in &args.headers {
        let (key, value) = header.split_once(':').ok_or_else(|| {
            CliError::usage(format!("--header {header:?}: expected `Name: value`"))
        })?;
        let key = key.trim();
        if key.is_empty() {
            return Err(CliError::usage(format!(
                "--header {header:?}: the header name is empty"
            )));
        }
        config = config.with_header(key, value.trim());
    }
    args.oauth.apply(&mut config)?;
    Ok((name, config))
}

/// The server `server` of an `mcpServers` file (or its only one).
fn from_file(
    path: &std::path::Path,
    server: Option<&str>,
) -> Result<(String, ConnectionConfig), CliError> {
    let in_file = |e: &dyn std::fmt::Display| CliError::usage(format!("{}: {e}", path.display()));
    let file = McpServersFile::load(path).map_err(|e| in_file(&e))?;
    let name = match server {
        Some(name) => name.to_string(),
        None => match file.names()[..] {
            [only] => only.to_string(),
            [] => return Err(in_file(&"the file names no servers")),
            ref names => {
                return Err(in_file(&format!(
                    "it names several servers ({}); choose one with --server",
                    names.join(", ")
                )));
            }
        },
    };
    let config = file.server(&name).map_err(|e| in_file(&e))?;
    Ok((name, config))
}

/// Ends the session; a stdio server's process is reaped.
async fn close(set: &McpToolSet) {
    if let Err(err) = set.close().await {
        tracing::warn!(server = set.name(), "closing failed: {err}");
    }
}

async fn tools(args: ToolsArgs) -> Outcome {
    let ctx = ToolContext::new();
    let set = open(&args.server, &ctx).await?;
    let listed = set.tools(&ctx).await;
    close(&set).await;
    let tools = listed.map_err(|e| CliError::usage(e.to_string()))?;
    let declarations: Vec<&Declaration> = tools.iter().map(|t| t.declaration()).collect();
    print_listing(&declarations, args.json);
    Ok(EXIT_OK)
}

async fn call(args: CallArgs) -> Outcome {
    let raw_args = read_arguments(&args.args)?;
    // The call's progress reports are shown on stderr as they come.
    let ctx = ToolContext::for_call("cli").with_progress(crate::mcp_client::progress_printer());
    let set = open(&args.server, &ctx).await?;
    let registry = Arc::new(Registry::new());
    if let Err(err) = registry.add_tool_set(Arc::new(set.clone()), ToolSetRefresh::Cached) {
        close(&set).await;
        return Err(CliError::usage(err.to_string()));
    }
    let snapshot = registry.snapshot(&ctx).await;
    if let Some((_, err)) = snapshot.errors().first() {
        let err = CliError::usage(err.to_string());
        close(&set).await;
        return Err(err);
    }
    let executor = Executor::builder(registry)
        .middleware(Timeout::new(Duration::from_secs(args.timeout.max(1))))
        .build();
    let call = ToolCall::new("cli", args.tool.as_str(), raw_args);
    let result = execute_until_signal(&executor, &snapshot, ctx, &call).await;
    crate::mcp_client::finish_progress();
    close(&set).await;

    let output = result.result.map_err(|e| call_error(&e))?;
    let view = if args.json { View::Json } else { View::Model };
    Ok(print_output(&output, view))
}

/// A connection lost for good during the call is a server that cannot be reached (exit 2),
/// like one that could not be reached at the start; the rest is as for `tools call`.
fn call_error(err: &ToolError) -> CliError {
    match err {
        ToolError::Transient(_) => CliError::usage(err.to_string()),
        _ => CliError::from_tool_error(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_args() -> ServerArgs {
        ServerArgs {
            stdio: None,
            sse: None,
            http: None,
            config: None,
            server: None,
            headers: Vec::new(),
            connect_timeout: 30,
            oauth: Default::default(),
            dir: None,
            elicitation: ElicitationMode::Decline,
            sampling: None,
        }
    }

    #[test]
    fn a_stdio_command_line_is_split_like_a_shell_would() {
        let args = ServerArgs {
            stdio: Some(r#"python3 "my server.py" --name 'a b'"#.into()),
            ..server_args()
        };
        let (name, config) = connection(&args).unwrap();
        assert_eq!(name, "python3");
        assert_eq!(
            config.transport,
            TransportConfig::stdio("python3", ["my server.py", "--name", "a b"])
        );
    }

    #[test]
    fn unbalanced_quotes_and_headers_for_stdio_are_usage_errors() {
        let args = ServerArgs {
            stdio: Some(r#"python3 "server.py"#.into()),
            ..server_args()
        };
        assert!(connection(&args).unwrap_err().message.contains("quotes"));
        let args = ServerArgs {
            stdio: Some("python3 server.py".into()),
            headers: vec!["X-A: b".into()],
            ..server_args()
        };
        assert_eq!(connection(&args).unwrap_err().code, 2);
    }

    #[test]
    fn headers_are_parsed_and_trimmed() {
        let args = ServerArgs {
            http: Some("http://127.0.0.1:1/mcp".into()),
            headers: vec!["Authorization: Bearer abc".into(), "X-Empty:".into()],
            ..server_args()
        };
        let (_, config) = connection(&args).unwrap();
        let TransportConfig::StreamableHttp { headers, .. } = config.transport else {
            panic!("not streamable HTTP");
        };
        assert_eq!(headers["Authorization"], "Bearer abc");
        assert_eq!(headers["X-Empty"], "");
        let args = ServerArgs {
            http: Some("http://127.0.0.1:1/mcp".into()),
            headers: vec!["no colon".into()],
            ..server_args()
        };
        assert!(
            connection(&args)
                .unwrap_err()
                .message
                .contains("Name: value")
        );
    }
}
