//! What `toolbelt run` and `toolbelt chat` share: the flags, the model from flags or
//! environment, the agent over the command's tool box, the session store, approval of tool
//! calls ([`approval`]), the rendering of a run's events ([`render`]) and stopping a run on
//! SIGINT or SIGTERM.

mod agents_file;
mod approval;
mod artifacts;
pub(crate) mod extensions;
mod hooks;
pub use hooks::MAX_STOP_ROUNDS;
pub(crate) mod permissions;
pub(crate) mod render;
pub mod scripted;
pub(crate) mod tool_search;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use toolbelt::agent::session::open_url;
use toolbelt::agent::{
    AgentError, Decision, DynAgent, EventStream, InMemorySessionService, LlmAgent, RunInput,
    RunOptions, Runner, SessionService,
};
use toolbelt::core::RetryPolicy;
use toolbelt::exec::{
    ARTIFACT_READ_TOOL, ArtifactOffload, ExecutionMode, Executor, Retry, Timeout,
};
use toolbelt::model::{
    DynModel, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, FallbackModel, GenerationConfig, ModelError,
    OpenAiConfig, OpenAiModel, Provider,
};
use toolbelt::{ToolContext, ToolFilter};

pub use approval::{Approval, ApprovalPolicy, SharedStdin, shared_stdin};
pub use render::{Format, Renderer, RunSummary, Spinner};

use crate::common::{CliError, ToolSourceArgs, Toolbox, canonical_dir};
use crate::progress::Progress;
use crate::signal::{StopSignal, stop_signal};

/// The application name sessions are stored under.
pub(crate) const APP: &str = "toolbelt";
/// The user sessions are stored for.
pub(crate) const USER: &str = "local";
/// How long one tool call may run.
const TOOL_TIMEOUT: Duration = Duration::from_secs(600);
/// How long an interrupted run may take to stop its tools.
const WIND_DOWN: Duration = Duration::from_secs(10);

/// The flags `run` and `chat` share.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    #[command(flatten)]
    pub sources: ToolSourceArgs,
    /// The model name (overrides TOOLBELT_MODEL).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The provider's API: openai (chat completions, the default), openai-responses,
    /// anthropic or gemini (overrides TOOLBELT_PROVIDER). The key is read from
    /// OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY; without --base-url the
    /// provider's own endpoint is used.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<Provider>,
    /// The OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (overrides
    /// OPENAI_BASE_URL). The API key is read from OPENAI_API_KEY.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The longest wait, in seconds, for the model server to start answering one request
    /// (connecting included). Default: the library's (a dead server fails in under a minute,
    /// retries included).
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub request_timeout: Option<Duration>,
    /// The longest silence, in seconds, between two pieces of a streamed answer. Default: the
    /// library's.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub idle_timeout: Option<Duration>,
    /// How many times a failed model request (connection failure, timeout, 429, 5xx) is
    /// retried. Default: the library's.
    #[arg(long, value_name = "N")]
    pub max_retries: Option<usize>,
    /// Keep the conversation in this SQLite file, so it can be resumed with --session-id or
    /// --continue (`toolbelt sessions list` finds it by its first prompt); or
    /// in a server shared by several machines: postgres://USER:PASSWORD@HOST/DB or
    /// redis://HOST:PORT (builds with features postgres, redis).
    #[arg(long, value_name = "FILE|URL")]
    pub session: Option<PathBuf>,
    /// The session to resume (or create) in the --session file; a new one when omitted.
    /// `toolbelt sessions list --session FILE` lists them.
    #[arg(long, value_name = "ID", requires = "session")]
    pub session_id: Option<String>,
    /// Go on with the most recently updated session of the --session store (`chat` starts
    /// a new one when the store holds none; `run` fails).
    #[arg(
        long = "continue",
        short = 'c',
        requires = "session",
        conflicts_with = "session_id"
    )]
    pub continue_last: bool,
    /// Offer the model only these tools (comma-separated names, as `toolbelt tools list`
    /// prints them).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub tools: Vec<String>,
    /// Do not offer the model these tools (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub exclude_tools: Vec<String>,
    /// When to ask before a tool call no permission rule decides: `never`, `on-write`
    /// (tools not declared read-only: Write, Edit, NotebookEdit, Bash, TaskStop, undeclared
    /// MCP tools) or `always`. Questions are asked on the terminal; without one, a call
    /// that needs approval is refused and the model is told.
    #[arg(long, value_name = "POLICY", value_enum, default_value_t = ApprovalPolicy::OnWrite)]
    pub approval: ApprovalPolicy,
    /// Run every tool call no permission rule asks about or denies without asking (the
    /// same as --approval never).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Run the calls this permission rule matches without asking (Claude Code's syntax:
    /// `Bash(npm run test:*)`, `Edit(src/**)`, `WebFetch(domain:docs.rs)`, `mcp__server`);
    /// repeatable; added to the settings files' rules.
    #[arg(long, value_name = "RULE")]
    pub allow: Vec<String>,
    /// Ask before the calls this permission rule matches (repeatable).
    #[arg(long, value_name = "RULE")]
    pub ask: Vec<String>,
    /// Refuse the calls this permission rule matches, telling the model why; a Read rule
    /// also keeps Grep and Glob out of those paths (repeatable). Deny beats ask beats allow.
    #[arg(long, value_name = "RULE")]
    pub deny: Vec<String>,
    /// Also run the command hooks of the project's settings files in --dir
    /// (`.toolbelt/settings.json`, `.claude/settings.json`); the user's own file's hooks
    /// always run. Hooks run outside the tools' sandbox: trust the folder first.
    #[arg(long)]
    pub project_hooks: bool,
    /// Repair almost-JSON tool arguments (unquoted keys, single quotes, trailing commas, a
    /// cut-off object) instead of answering the model with an error.
    #[arg(long)]
    pub repair_json: bool,
    /// Run the tool calls of one model turn concurrently (tools that are not safe to overlap
    /// still run alone).
    #[arg(long)]
    pub parallel: bool,
    /// Ask the model for whole answers instead of streamed ones (for servers whose
    /// streaming of tool calls is unreliable).
    #[arg(long)]
    pub no_stream: bool,
    /// The most rounds of tool calls before the run stops with an error.
    #[arg(long, value_name = "N", default_value_t = toolbelt::agent::DEFAULT_MAX_TOOL_ITERATIONS)]
    pub max_iterations: usize,
    #[command(flatten)]
    pub artifacts: artifacts::ArtifactArgs,
    #[command(flatten)]
    pub extensions: extensions::ExtensionArgs,
    /// Replace the default system instruction.
    #[arg(long, value_name = "TEXT")]
    pub instruction: Option<String>,
    /// Run the agents composed in this TOML or YAML file (by extension): their
    /// instructions, models, tools, sub-agents and agent tools (see the README).
    #[arg(long, value_name = "FILE", conflicts_with = "instruction")]
    pub agents: Option<PathBuf>,
    #[command(flatten)]
    pub search: tool_search::ToolSearchArgs,
    #[command(flatten)]
    pub knowledge: crate::knowledge::KnowledgeArgs,
}

impl AgentArgs {
    /// The approval policy in effect (`--yes` is `never`).
    pub fn approval_policy(&self) -> ApprovalPolicy {
        if self.yes {
            ApprovalPolicy::Never
        } else {
            self.approval
        }
    }

    /// `--tools` and `--exclude-tools` as one filter; `None` when neither is given.
    fn tool_filter(&self) -> Option<ToolFilter> {
        // Offloaded results are read back with artifact_read: offered whenever --artifacts is.
        let mut tools = self.tools.clone();
        if self.artifacts.artifacts.is_some() {
            tools.push(ARTIFACT_READ_TOOL.to_string());
        }
        let include = (!self.tools.is_empty()).then(|| ToolFilter::include_names(tools));
        let exclude = (!self.exclude_tools.is_empty())
            .then(|| ToolFilter::exclude_names(self.exclude_tools.clone()));
        match (include, exclude) {
            (Some(i), Some(e)) => Some(i.and(e)),
            (i, e) => i.or(e),
        }
    }
}

/// A number of seconds: positive and finite.
fn seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    // NaN fails this too.
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("{text:?}: the time must be more than 0 seconds"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{text:?}: {e}"))
}

/// The model configured by flags and environment; with none, an error naming exactly what
/// to set (exit code 2).
pub fn model_from(args: &AgentArgs) -> Result<OpenAiModel, CliError> {
    OpenAiModel::new(config_from(args)?).map_err(|e| CliError::usage(e.to_string()))
}

/// The provider named by `--provider` or `TOOLBELT_PROVIDER` (chat completions without).
pub fn provider_from(args: &AgentArgs) -> Result<Provider, CliError> {
    if let Some(provider) = args.provider {
        return Ok(provider);
    }
    match std::env::var(ENV_PROVIDER)
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        Some(name) => name
            .parse()
            .map_err(|e| CliError::usage(format!("{ENV_PROVIDER}: {e}"))),
        None => Ok(Provider::OpenAi),
    }
}

/// The environment variable `--provider` overrides.
const ENV_PROVIDER: &str = "TOOLBELT_PROVIDER";

/// The client of `model`'s configuration for the provider `args` name; with several
/// `--model` entries, a [`FallbackModel`] over one client each, `model` first.
fn connected(args: &AgentArgs, model: &OpenAiModel) -> Result<DynModel, CliError> {
    let usage = |e: ModelError| CliError::usage(e.to_string());
    let entries = entries(args)?;
    let first: DynModel = match entries[0].0 {
        Provider::OpenAi => Arc::new(model.clone()),
        other => toolbelt::model::connect(other, model.config().clone()).map_err(usage)?,
    };
    if entries.len() == 1 {
        return Ok(first);
    }
    let mut models = vec![first];
    for (provider, name) in entries.into_iter().skip(1) {
        let config = entry_config(args, provider, Some(name))?;
        models.push(toolbelt::model::connect(provider, config).map_err(usage)?);
    }
    // Each move to the next model reaches the run as a warning event (the response's
    // `warnings`), which every output format shows.
    Ok(Arc::new(FallbackModel::new(models).map_err(usage)?))
}

/// `--model` (or TOOLBELT_MODEL) as `provider:model` entries separated by commas; an entry
/// without a known provider prefix (`qwen3:8b`) is a model of `--provider`'s provider.
fn entries(args: &AgentArgs) -> Result<Vec<(Provider, String)>, CliError> {
    let default = provider_from(args)?;
    let text = args.model.clone().or_else(|| {
        std::env::var(ENV_MODEL)
            .ok()
            .filter(|v| !v.trim().is_empty())
    });
    let Some(text) = text else {
        return Ok(vec![(default, String::new())]);
    };
    let entries: Vec<_> = text
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|entry| match entry.split_once(':') {
            Some((provider, model)) if !model.is_empty() => match provider.parse() {
                Ok(provider) => (provider, model.to_string()),
                Err(_) => (default, entry.to_string()),
            },
            _ => (default, entry.to_string()),
        })
        .collect();
    if entries.is_empty() {
        return Err(CliError::usage(format!("--model {text:?} names no model")));
    }
    Ok(entries)
}

/// The environment variable with `provider`'s base URL (the one its official SDK reads).
fn base_url_variable(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi | Provider::OpenAiResponses => ENV_BASE_URL,
        Provider::Anthropic => "ANTHROPIC_BASE_URL",
        Provider::Gemini => "GOOGLE_GEMINI_BASE_URL",
    }
}

/// The model's configuration from flags and environment (see [`model_from`]): the first
/// `--model` entry's.
fn config_from(args: &AgentArgs) -> Result<OpenAiConfig, CliError> {
    let (provider, model) = entries(args)?.swap_remove(0);
    entry_config(args, provider, Some(model).filter(|m| !m.is_empty()))
}

/// The configuration of `model` on `provider`: `--base-url` for the `--provider`
/// provider's entries, else the provider's base-URL variable, else its own endpoint; the key
/// from its key variable.
fn entry_config(
    args: &AgentArgs,
    provider: Provider,
    model: Option<String>,
) -> Result<OpenAiConfig, CliError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let flag = args
        .base_url
        .clone()
        .filter(|_| provider_from(args).is_ok_and(|p| p == provider));
    let base_url = flag.or_else(|| var(base_url_variable(provider)));
    let key = var(provider.key_variable());
    let base_url = match (provider, base_url) {
        // A key alone means OpenAI's endpoint (OpenAiConfig::from_values).
        (Provider::OpenAi, base_url) => base_url,
        (_, Some(base_url)) => Some(base_url),
        // The provider's own endpoint refuses every request without a key: say which
        // variable holds it before the first request, not after a 401.
        (other, None) if key.is_none() => {
            return Err(CliError::usage(format!(
                "no API key for {other}: set {} (or --base-url, or {}, for a server that \
                 needs none)",
                other.key_variable(),
                base_url_variable(other)
            )));
        }
        (other, None) => Some(other.default_base_url().to_string()),
    };
    let mut config = OpenAiConfig::from_values(base_url, key, model).map_err(|e| match e {
        ModelError::NotConfigured { missing } => CliError::usage(not_configured(&missing)),
        other => CliError::usage(other.to_string()),
    })?;
    if let Some(timeout) = args.request_timeout {
        config = config.with_request_timeout(timeout);
    }
    if let Some(timeout) = args.idle_timeout {
        config = config.with_idle_timeout(timeout);
    }
    if let Some(retries) = args.max_retries {
        let mut retry = config.retry.clone();
        retry.max_retries = retries;
        config = config.with_retry(retry);
    }
    Ok(config)
}

fn not_configured(missing: &[&str]) -> String {
    let mut lines = vec!["no model configured. Set:".to_string()];
    if missing.contains(&ENV_BASE_URL) {
        lines.push(format!(
            "  {ENV_BASE_URL}  the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (or --base-url)"
        ));
        lines.push(format!(
            "  {ENV_API_KEY}   the API key, if the server needs one (a key alone means OpenAI's endpoint)"
        ));
    }
    if missing.contains(&ENV_MODEL) {
        lines.push(format!("  {ENV_MODEL}   the model name (or --model)"));
    }
    lines.join("\n")
}

/// The session store: the --session SQLite file or server URL, or memory. A store that
/// cannot be opened (a file locked by another process past the wait or not a database, a
/// server that does not answer) fails the command (exit 1) before the model is called, and is
/// left as it was; a URL whose store this build lacks is a usage error naming the feature.
async fn sessions_from(args: &AgentArgs) -> Result<Arc<dyn SessionService>, CliError> {
    match &args.session {
        Some(target) => open_store(target).await,
        None => Ok(Arc::new(InMemorySessionService::new())),
    }
}

/// The session store `target` (a `--session` value) names, as [`sessions_from`] opens it:
/// what `toolbelt sessions` lists and `--continue` resumes from.
pub(crate) async fn open_store(
    target: &std::path::Path,
) -> Result<Arc<dyn SessionService>, CliError> {
    let target = target.to_string_lossy();
    // A URL may hold a password: errors name only its scheme.
    let shown = match target.split_once("://") {
        Some((scheme, _)) => format!("{scheme}://…"),
        None => target.to_string(),
    };
    open_url(&target).await.map_err(|e| match e {
        AgentError::Config(_) => CliError::usage(format!("--session {shown}: {e}")),
        _ => CliError::failed(format!("--session {shown}: {e}")),
    })
}

/// The stored events of the `--session` store's session `--session-id` (what it waits for:
/// approvals, long-running calls' results).
pub async fn stored_events(args: &AgentArgs) -> Result<Vec<toolbelt::agent::Event>, CliError> {
    let sessions = sessions_from(args).await?;
    let key = toolbelt::agent::SessionKey::new(APP, USER, session_id(args));
    sessions
        .events(&key)
        .await
        .map_err(|e| CliError::failed(format!("reading the session: {e}")))
}

/// With `--continue`, sets `--session-id` to the most recently updated session of the
/// `--session` store. When the store holds none, `chat` (`new_if_none`) says so and starts a
/// new one; `run` fails with a usage error, since its prompt was meant for a conversation.
pub async fn resolve_continue(args: &mut AgentArgs, new_if_none: bool) -> Result<(), CliError> {
    let Some(target) = args.session.clone().filter(|_| args.continue_last) else {
        return Ok(());
    };
    let store = open_store(&target).await?;
    let listed = crate::sessions::listed(store.as_ref()).await?;
    match listed.into_iter().next() {
        Some(latest) => {
            eprintln!(
                "toolbelt: continuing session {}{}",
                toolbelt::visible(&latest.id),
                latest
                    .title
                    .map(|t| format!(" ({})", toolbelt::visible(&t)))
                    .unwrap_or_default()
            );
            args.session_id = Some(latest.id);
        }
        None if new_if_none => {
            eprintln!("toolbelt: no stored session to continue; starting a new one");
        }
        None => {
            return Err(CliError::usage(
                "--continue: the --session store holds no session yet; leave out --continue \
                 to start one",
            ));
        }
    }
    Ok(())
}

/// The session id to use: the one given, or a new one.
fn session_id(args: &AgentArgs) -> String {
    args.session_id.clone().unwrap_or_else(new_session_id)
}

/// A new session id: the time in nanoseconds and the process id, in hex.
pub(crate) fn new_session_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{:x}", std::process::id())
}

/// The executor over the tool box's registry, configured by the flags (schedule, JSON
/// repair, a time limit) with the approval hook, if any. Agents set none of these
/// themselves, so the executor's configuration is what runs.
fn executor_from(
    args: &AgentArgs,
    toolbox: &Toolbox,
    permit: Permit,
    offload: Option<&ArtifactOffload>,
) -> Executor {
    executor_with(args, toolbox, permit, offload, None)
}

/// [`executor_from`], retrying failed calls on `retry`'s schedule (outside the timeout, so
/// each attempt has the whole time).
fn executor_with(
    args: &AgentArgs,
    toolbox: &Toolbox,
    permit: Permit,
    offload: Option<&ArtifactOffload>,
    retry: Option<RetryPolicy>,
) -> Executor {
    let mut executor = Executor::builder(toolbox.registry.clone());
    if let Some(policy) = retry {
        executor = executor.middleware(Retry::new(policy));
    }
    let mut executor = executor
        .middleware(Timeout::new(TOOL_TIMEOUT))
        .mode(if args.parallel {
            ExecutionMode::Parallel
        } else {
            ExecutionMode::Serial
        })
        .repair_json(args.repair_json);
    executor = executor.permissions(permit.rules);
    if let Some(approver) = &permit.approver {
        executor = executor.approver(approver.clone());
    }
    if let Some(hooks) = permit.hooks {
        executor = executor.before_hook(hooks.clone()).after_hook(hooks);
    }
    if let Some(offload) = offload {
        executor = executor.artifact_offload(offload.clone());
    }
    let executor = executor.build();
    toolbox.bind_executor(&executor);
    executor
}

/// The system instruction: `--instruction`, or the default one naming `--dir`.
fn instruction_from(args: &AgentArgs) -> String {
    let dir = std::fs::canonicalize(&args.sources.dir).unwrap_or_else(|_| args.sources.dir.clone());
    args.instruction.clone().unwrap_or_else(|| {
        format!(
            "You are a careful coding assistant working in the directory {}. Use the tools to \
             look at files before answering questions about them, and keep answers short.",
            dir.display()
        )
    })
}

/// The agent over the tool box's registry, through [`executor_from`].
fn agent_from(
    args: &AgentArgs,
    model: DynModel,
    toolbox: &Toolbox,
    permit: Permit,
    offload: Option<&ArtifactOffload>,
) -> Result<DynAgent, CliError> {
    let executor = executor_from(args, toolbox, permit, offload);
    let instruction = instruction_from(args);
    let agent = LlmAgent::builder("toolbelt")
        .description("The toolbelt command-line agent")
        .instruction(instruction)
        .model_arc(model)
        .executor(executor)
        .max_tool_iterations(args.max_iterations)
        .generation_config(generation_from(args))
        .build()
        .map_err(|e| CliError::usage(e.to_string()))?;
    Ok(Arc::new(agent))
}

fn generation_from(args: &AgentArgs) -> GenerationConfig {
    GenerationConfig {
        stream: !args.no_stream,
        ..GenerationConfig::default()
    }
}

/// The root of the agents of an `--agents` file, each over the tool box's registry through
/// one [`executor_from`], offered the tools the file names (checked against `offered`).
fn agents_from(
    args: &AgentArgs,
    agents: &agents_file::Agents,
    // The root model and the configuration the agents' own models start from.
    (root, config): (DynModel, OpenAiConfig),
    toolbox: &Toolbox,
    offered: Vec<String>,
    permit: Permit,
    offload: Option<&ArtifactOffload>,
) -> Result<DynAgent, CliError> {
    let model_named = |name: &str| -> Result<DynModel, CliError> {
        let mut config = config.clone();
        config.model = name.to_string();
        toolbelt::model::connect(provider_from(args)?, config)
            .map_err(|e| CliError::usage(e.to_string()))
    };
    let retrying_executor =
        |policy: RetryPolicy| executor_with(args, toolbox, permit.clone(), offload, Some(policy));
    agents.build(&agents_file::BuildContext {
        executor: executor_from(args, toolbox, permit.clone(), offload),
        retrying_executor: &retrying_executor,
        model: root,
        model_named: &model_named,
        offered,
        default_instruction: instruction_from(args),
        generation: generation_from(args),
        max_iterations: args.max_iterations,
    })
}

/// The approver of a terminal run, asking what the permission rules ask about (with
/// `--approval never` only what an ask rule names).
pub fn approval_from(stdin: &SharedStdin, spinner: &Spinner) -> Option<Approval> {
    Some(Approval::new(stdin.clone(), spinner.clone()))
}

/// What decides a run's calls: the permission rules, and who is asked when they ask.
#[derive(Clone)]
struct Permit {
    rules: Arc<permissions::LiveRules>,
    approver: Option<Arc<dyn toolbelt::exec::Approver>>,
    /// The settings files' command hooks.
    hooks: Option<toolbelt_ext::CommandHooks>,
}

/// How a watched run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// The run completed (possibly with an error event).
    Completed(RunSummary),
    /// A signal stopped it.
    Stopped(StopSignal),
}

/// Renders `events` until the run completes or SIGINT / SIGTERM arrives; then cancels the
/// run and waits (up to [`WIND_DOWN`]) for its tools to stop, so no command a tool started
/// outlives the process.
pub async fn watch_run(renderer: &mut Renderer, mut events: EventStream) -> RunEnd {
    let signal = tokio::select! {
        summary = renderer.render(&mut events) => return RunEnd::Completed(summary),
        signal = stop_signal() => signal,
    };
    eprintln!("toolbelt: stopping the run");
    events.cancel();
    let _ = tokio::time::timeout(WIND_DOWN, renderer.render(&mut events)).await;
    RunEnd::Stopped(signal)
}

/// What a `run` or `chat` works with: the tool sets it opened (and must close), the runner
/// and the session id.
pub struct AgentSession {
    /// The tool sets; close them with [`Toolbox::close`] when done.
    pub toolbox: Toolbox,
    /// The runner over the agent and the session store.
    pub runner: Runner,
    /// Skills and project rules, closed with the session.
    extensions: toolbelt::agent::Extensions,
    /// The session to run in.
    pub session_id: String,
    /// The settings files' command hooks (the executor runs the tool hooks; `run` the
    /// conversation's).
    pub hooks: Option<toolbelt_ext::CommandHooks>,
    /// `--tools` / `--exclude-tools`, applied to every run.
    tool_filter: Option<ToolFilter>,
    /// The permission rules every call is checked with; a person may add to them.
    pub rules: Arc<permissions::LiveRules>,
}

impl AgentSession {
    /// Opens the session store, the tool sets (connecting to MCP servers now, so a broken
    /// one is reported before the model runs) and the agent. On failure nothing stays open.
    pub async fn open(
        args: &AgentArgs,
        model: OpenAiModel,
        approval: Option<Approval>,
        progress: &Progress,
    ) -> Result<Self, CliError> {
        // The agents file first: a mistake in it is reported before anything is opened.
        let agents = args.agents.as_deref().map(agents_file::load).transpose()?;
        args.search.check()?;
        let search_model: DynModel = connected(args, &model)?;
        let delegations = agents
            .as_ref()
            .map(|agents| agents.delegations())
            .unwrap_or_default();
        let dir = canonical_dir(&args.sources.dir)?;
        let rules = permissions::rules_from(args, &dir, &delegations)?;
        let approver = approval.map(|a| Arc::new(a) as Arc<dyn toolbelt::exec::Approver>);
        let hooks = hooks::hooks_from(
            &canonical_dir(&args.sources.dir)?,
            args.project_hooks,
            approver.clone(),
        )?;
        let sessions = sessions_from(args).await?;
        // Indexed before anything is opened: a failure leaves nothing to close.
        let knowledge = args
            .knowledge
            .plugin(&args.sources.dir, progress, &search_model)
            .await?;
        let toolbox = Toolbox::open_hiding(&args.sources, None, rules.hidden_paths())?
            .connect_remote()
            .await?;
        let rules = Arc::new(permissions::LiveRules::new(rules, &dir));
        let permit = Permit {
            rules: rules.clone(),
            approver,
            hooks: hooks.clone(),
        };
        let offload = match args.artifacts.offload(&toolbox.registry) {
            Ok(offload) => offload,
            Err(err) => {
                toolbox.close().await;
                return Err(err);
            }
        };
        toolbox.announce_sandbox();
        let mut snapshot = toolbox.list(&ToolContext::new()).await;
        let externals = match agents
            .as_ref()
            .map(|a| a.external_tools(|n| snapshot.get(n).is_some()))
        {
            Some(Ok(tools)) => tools,
            Some(Err(err)) => {
                toolbox.close().await;
                return Err(err);
            }
            None => Vec::new(),
        };
        if !externals.is_empty() {
            // Distinct names (checked by `load`) that no tool set offers: registering succeeds.
            let _ = toolbox.registry.register_all(externals);
            snapshot = toolbox.list(&ToolContext::new()).await;
        }
        for name in &args.tools {
            if snapshot.get(name).is_none() {
                eprintln!("toolbelt: warning: --tools names {name:?}, which no tool set offers");
            }
        }
        let built = match &agents {
            Some(agents) => {
                let offered = snapshot.names().map(str::to_string).collect();
                agents_from(
                    args,
                    agents,
                    // Its configuration, retry observer included.
                    (search_model.clone(), model.config().clone()),
                    &toolbox,
                    offered,
                    permit,
                    offload.as_ref(),
                )
            }
            None => agent_from(
                args,
                search_model.clone(),
                &toolbox,
                permit,
                offload.as_ref(),
            ),
        };
        let agent = match built {
            Ok(agent) => agent,
            Err(err) => {
                toolbox.close().await;
                return Err(err);
            }
        };
        let mut runner = Runner::new(APP, agent).with_session_service(sessions);
        if let Some(knowledge) = knowledge {
            runner = runner.with_plugin(knowledge);
        }
        let runner = match args
            .search
            .apply(runner, search_model, &toolbox, progress)
            .await
        {
            Ok(runner) => runner,
            Err(err) => {
                toolbox.close().await;
                return Err(err);
            }
        };
        // Skills and project rules reach every agent of the run (runner extensions).
        let extensions = match args.extensions.start(&args.sources.dir).await {
            Ok(extensions) => extensions,
            Err(err) => {
                toolbox.close().await;
                return Err(err);
            }
        };
        let runner = match runner.with_extensions(&extensions) {
            Ok(runner) => runner,
            Err(err) => {
                let _ = extensions.close().await;
                toolbox.close().await;
                return Err(CliError::failed(err.to_string()));
            }
        };
        Ok(Self {
            toolbox,
            runner,
            extensions,
            session_id: session_id(args),
            tool_filter: args.tool_filter(),
            rules,
            hooks,
        })
    }

    /// Starts a run of `input` in `session_id` applying a person's `decisions` on its
    /// requested approvals (`toolbelt run --approve`, the web UI's buttons).
    pub fn start_with(
        &self,
        session_id: &str,
        input: RunInput,
        decisions: std::collections::HashMap<String, Decision>,
    ) -> EventStream {
        let mut options = self.options();
        options.decisions = decisions;
        self.runner.run(USER, session_id, input, options)
    }

    fn options(&self) -> RunOptions {
        let mut options = RunOptions::new();
        if let Some(filter) = &self.tool_filter {
            options = options.tool_filter(filter.clone());
        }
        options
    }

    /// Tells how to resume a stored session, then closes the tool sets.
    pub async fn close(self, args: &AgentArgs) {
        if args.session.is_some() {
            let id = &self.session_id;
            eprintln!(
                "session: {id} (resume with --session-id {id}, or --continue while it is the latest)"
            );
        }
        if let Err(error) = self.extensions.close().await {
            eprintln!("toolbelt: warning: {error}");
        }
        self.toolbox.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_model_message_names_every_variable() {
        let text = not_configured(&[ENV_BASE_URL, ENV_MODEL]);
        for name in ["OPENAI_BASE_URL", "OPENAI_API_KEY", "TOOLBELT_MODEL"] {
            assert!(text.contains(name), "{text}");
        }
    }

    #[test]
    fn seconds_must_be_a_positive_finite_number() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["0", "-1", "NaN", "inf", "soon"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
    }
}
