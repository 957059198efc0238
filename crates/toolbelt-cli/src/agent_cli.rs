//! What `toolbelt run` and `toolbelt chat` share: the flags, the model from flags or
//! environment, the agent over the command's tool box, the session store, approval of
//! destructive tools, and the rendering of a run's events (the answer streamed to stdout,
//! tool activity to stderr as compact lines, a spinner while tools run).

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use toolbelt::ToolContext;
use toolbelt::agent::{
    Event, EventStream, InMemorySessionService, LlmAgent, ObjectType, Runner, SessionService,
    SqliteSessionService,
};
use toolbelt::exec::{BeforeAction, BeforeHook, ExecutionMode, Executor, HookCall, Timeout};
use toolbelt::model::{
    ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, GenerationConfig, ModelError, OpenAiConfig, OpenAiModel,
};

use crate::common::{CliError, ToolSourceArgs, Toolbox, shutdown_signal};

/// The application name sessions are stored under.
const APP: &str = "toolbelt";
/// The user sessions are stored for.
const USER: &str = "local";
/// How long one tool call may run.
const TOOL_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest result preview on a tool line, in characters.
const PREVIEW_CHARS: usize = 80;
/// How long an interrupted run may take to stop its tools.
const WIND_DOWN: Duration = Duration::from_secs(10);
/// The longest argument summary on a tool line, in characters.
const ARGS_CHARS: usize = 60;

/// The flags `run` and `chat` share.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    #[command(flatten)]
    pub sources: ToolSourceArgs,
    /// The model name (overrides TOOLBELT_MODEL).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (overrides
    /// OPENAI_BASE_URL). The API key is read from OPENAI_API_KEY.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Keep the conversation in this SQLite file, so it can be resumed with --session-id.
    #[arg(long, value_name = "FILE")]
    pub session: Option<PathBuf>,
    /// The session to resume (or create) in the --session file; a new one when omitted.
    #[arg(long, value_name = "ID", requires = "session")]
    pub session_id: Option<String>,
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
    /// Replace the default system instruction.
    #[arg(long, value_name = "TEXT")]
    pub instruction: Option<String>,
}

/// The model configured by flags and environment; with none, an error naming exactly what
/// to set (exit code 2).
pub fn model_from(args: &AgentArgs) -> Result<OpenAiModel, CliError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let base_url = args.base_url.clone().or_else(|| var(ENV_BASE_URL));
    let model = args.model.clone().or_else(|| var(ENV_MODEL));
    let config =
        OpenAiConfig::from_values(base_url, var(ENV_API_KEY), model).map_err(|e| match e {
            ModelError::NotConfigured { missing } => CliError::usage(not_configured(&missing)),
            other => CliError::usage(other.to_string()),
        })?;
    OpenAiModel::new(config).map_err(|e| CliError::usage(e.to_string()))
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

/// The session store: the --session SQLite file, or memory.
fn sessions_from(args: &AgentArgs) -> Result<Arc<dyn SessionService>, CliError> {
    match &args.session {
        Some(path) => Ok(Arc::new(SqliteSessionService::open(path).map_err(|e| {
            CliError::usage(format!("--session {}: {e}", path.display()))
        })?)),
        None => Ok(Arc::new(InMemorySessionService::new())),
    }
}

/// The session id to use: the one given, or a new one.
fn session_id(args: &AgentArgs) -> String {
    args.session_id.clone().unwrap_or_else(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{nanos:x}-{:x}", std::process::id())
    })
}

/// The agent over the tool box's registry, its calls going through an executor with a time
/// limit and, when given, an approval hook.
fn agent_from(
    args: &AgentArgs,
    model: OpenAiModel,
    toolbox: &Toolbox,
    approval: Option<Approval>,
) -> Result<LlmAgent, CliError> {
    let mut executor =
        Executor::builder(toolbox.registry.clone()).middleware(Timeout::new(TOOL_TIMEOUT));
    if let Some(approval) = approval {
        executor = executor.before_hook(approval);
    }
    let dir = std::fs::canonicalize(&args.sources.dir).unwrap_or_else(|_| args.sources.dir.clone());
    let instruction = args.instruction.clone().unwrap_or_else(|| {
        format!(
            "You are a careful coding assistant working in the directory {}. Use the tools to \
             look at files before answering questions about them, and keep answers short.",
            dir.display()
        )
    });
    LlmAgent::builder("toolbelt")
        .description("The toolbelt command-line agent")
        .instruction(instruction)
        .model(model)
        .executor(executor.build())
        .execution_mode(if args.parallel {
            ExecutionMode::Parallel
        } else {
            ExecutionMode::Serial
        })
        .max_tool_iterations(args.max_iterations)
        .generation_config(GenerationConfig {
            stream: !args.no_stream,
            ..GenerationConfig::default()
        })
        .build()
        .map_err(|e| CliError::usage(e.to_string()))
}

/// Lines of standard input, shared by the chat prompt and approval questions so neither
/// loses what the other buffered.
pub type SharedStdin = Arc<tokio::sync::Mutex<Lines<BufReader<Stdin>>>>;

/// Standard input, line by line.
pub fn shared_stdin() -> SharedStdin {
    Arc::new(tokio::sync::Mutex::new(
        BufReader::new(tokio::io::stdin()).lines(),
    ))
}

/// Asks on stderr before a destructive tool runs; the answer is read from stdin. Anything
/// but `y`/`yes` (or the end of input) refuses the call, and the model is told so.
pub struct Approval {
    stdin: SharedStdin,
    spinner: Spinner,
}

impl Approval {
    /// Approval questions read from `stdin`; the spinner is paused while asking.
    pub fn new(stdin: SharedStdin, spinner: Spinner) -> Self {
        Self { stdin, spinner }
    }
}

#[toolbelt::async_trait]
impl BeforeHook for Approval {
    async fn before(&self, _ctx: &ToolContext, call: &HookCall<'_>) -> BeforeAction {
        if call.declaration.meta.destructive != Some(true) {
            return BeforeAction::Continue;
        }
        // One question at a time, even when parallel calls ask together.
        let mut stdin = self.stdin.lock().await;
        self.spinner.pause();
        eprint!(
            "allow {}({})? [y/N] ",
            call.tool_name(),
            short_args(call.arguments)
        );
        let _ = std::io::stderr().flush();
        let answer = stdin.next_line().await.ok().flatten().unwrap_or_default();
        if !std::io::stdin().is_terminal() {
            // Nobody typed it, so nothing echoed it: keep the question's line readable.
            eprintln!("{}", answer.trim());
        }
        self.spinner.resume();
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => BeforeAction::Continue,
            _ => BeforeAction::Reject("the user did not allow this call".to_string()),
        }
    }
}

/// A spinner on stderr while tools run, only when stderr is a terminal.
#[derive(Clone)]
pub struct Spinner {
    state: Arc<Mutex<SpinnerState>>,
    enabled: bool,
}

#[derive(Default)]
struct SpinnerState {
    label: Option<String>,
    paused: bool,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Spinner {
    /// A spinner that draws only if stderr is a terminal.
    pub fn new() -> Self {
        Self {
            state: Arc::default(),
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SpinnerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts spinning with `label`.
    pub fn start(&self, label: String) {
        if !self.enabled {
            return;
        }
        let mut state = self.lock();
        state.label = Some(label);
        if state.task.is_none() {
            let shared = self.state.clone();
            state.task = Some(tokio::spawn(async move {
                const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
                for frame in FRAMES.iter().cycle() {
                    {
                        let state = shared.lock().unwrap_or_else(|p| p.into_inner());
                        if let (Some(label), false) = (&state.label, state.paused) {
                            eprint!("\r\x1b[2K{frame} {label}");
                            let _ = std::io::stderr().flush();
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }));
        }
    }

    /// Stops spinning and clears its line.
    pub fn stop(&self) {
        if !self.enabled {
            return;
        }
        let mut state = self.lock();
        if let Some(task) = state.task.take() {
            task.abort();
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
        state.label = None;
    }

    fn pause(&self) {
        if self.enabled {
            self.lock().paused = true;
            eprint!("\r\x1b[2K");
        }
    }

    fn resume(&self) {
        if self.enabled {
            self.lock().paused = false;
        }
    }
}

impl Default for Spinner {
    fn default() -> Self {
        Self::new()
    }
}

/// How a run ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunSummary {
    /// Error events (model failures, the iteration limit) were reported.
    pub failed: bool,
}

/// Prints a run's events: answer text to stdout as it streams, tool activity to stderr.
pub struct Renderer {
    spinner: Spinner,
    /// Calls of the current turn by id: (name, short arguments), for the result lines.
    calls: HashMap<String, (String, String)>,
    /// Whether answer text was streamed for the current model turn.
    streamed: bool,
    /// Whether stdout's last character was a newline (or nothing was written).
    at_line_start: bool,
}

impl Renderer {
    /// A renderer using `spinner` while tools run.
    pub fn new(spinner: Spinner) -> Self {
        Self {
            spinner,
            calls: HashMap::new(),
            streamed: false,
            at_line_start: true,
        }
    }

    /// Renders the events of `events` until the run completes. Safe to call again after
    /// the future was dropped part-way (the state is in the renderer and the stream).
    pub async fn render(&mut self, events: &mut EventStream) -> RunSummary {
        let mut summary = RunSummary::default();
        while let Some(event) = events.recv().await {
            self.event(&event, &mut summary);
            if event.is_runner_completion() {
                break;
            }
        }
        self.spinner.stop();
        self.end_answer_line();
        summary
    }

    /// Renders `events` until the run completes or Ctrl-C / SIGTERM arrives; then cancels
    /// the run and waits (up to [`WIND_DOWN`]) for its tools to stop, so no command it
    /// started outlives the process. `None` when interrupted.
    pub async fn render_until_interrupted(
        &mut self,
        mut events: EventStream,
    ) -> Option<RunSummary> {
        tokio::select! {
            summary = self.render(&mut events) => return Some(summary),
            () = shutdown_signal() => {}
        }
        self.spinner.stop();
        self.end_answer_line();
        eprintln!("toolbelt: stopping the run");
        events.cancel();
        let _ = tokio::time::timeout(WIND_DOWN, self.render(&mut events)).await;
        None
    }

    fn event(&mut self, event: &Event, summary: &mut RunSummary) {
        match event.object {
            ObjectType::ChatChunk => {
                let text = event.delta_text();
                if !text.is_empty() {
                    self.streamed = true;
                    self.write_answer(text);
                }
            }
            ObjectType::ChatCompletion => {
                if let Some(message) = event.message()
                    && !self.streamed
                    && !message.content.is_empty()
                {
                    self.write_answer(&message.content);
                }
                self.streamed = false;
                let calls = event.tool_calls();
                if !calls.is_empty() {
                    self.end_answer_line();
                    self.calls = calls
                        .iter()
                        .map(|c| {
                            let entry = (c.name().to_string(), short_args(c.arguments()));
                            (c.id.clone(), entry)
                        })
                        .collect();
                    let label = match calls {
                        [one] => format!("{}({})", one.name(), short_args(one.arguments())),
                        many => format!("running {} tools", many.len()),
                    };
                    self.spinner.start(label);
                }
            }
            ObjectType::ToolResponse => {
                self.spinner.stop();
                for result in &event.tool_results {
                    let (name, args) = self
                        .calls
                        .get(&result.call_id)
                        .cloned()
                        .unwrap_or_else(|| (result.name.clone(), String::new()));
                    let mark = if result.is_error { '✗' } else { '✓' };
                    eprintln!(
                        "{mark} {name}({args}) {} ms → {}",
                        result.duration_ms,
                        preview(&result.content)
                    );
                }
            }
            ObjectType::Error => {
                self.spinner.stop();
                self.end_answer_line();
                summary.failed = true;
                let message = event
                    .error
                    .as_ref()
                    .map_or("unknown error", |e| e.message.as_str());
                eprintln!("toolbelt: error: {message}");
            }
            ObjectType::UserInput | ObjectType::RunnerCompletion => {}
        }
    }

    fn write_answer(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    fn end_answer_line(&mut self) {
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }
}

/// Arguments shortened for one line: `key=value` pairs of a JSON object, values clipped.
pub fn short_args(arguments: &str) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                format!("{k}={}", clip(&one_line(&v), 40))
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => one_line(arguments),
    };
    clip(&text, ARGS_CHARS)
}

/// The start of a result on one line.
fn preview(content: &str) -> String {
    let text = one_line(content.trim());
    if text.is_empty() {
        "(empty)".to_string()
    } else {
        clip(&text, PREVIEW_CHARS)
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(max.saturating_sub(1)).collect();
    clipped.push('…');
    clipped
}

/// What a `run` or `chat` works with: the tool sets it opened (and must close), the runner
/// and the session id.
pub struct AgentSession {
    /// The tool sets; close them with [`Toolbox::close`] when done.
    pub toolbox: Toolbox,
    /// The runner over the agent and the session store.
    pub runner: Runner,
    /// The session to run in.
    pub session_id: String,
}

impl AgentSession {
    /// Opens the session store, the tool sets (connecting to MCP servers now, so a broken
    /// one is reported before the model runs) and the agent. On failure nothing stays open.
    pub async fn open(
        args: &AgentArgs,
        model: OpenAiModel,
        approval: Option<Approval>,
    ) -> Result<Self, CliError> {
        let sessions = sessions_from(args)?;
        let toolbox = Toolbox::open(&args.sources, None)?;
        toolbox.announce_sandbox();
        toolbox.list(&ToolContext::new()).await;
        let agent = match agent_from(args, model, &toolbox, approval) {
            Ok(agent) => agent,
            Err(err) => {
                toolbox.close().await;
                return Err(err);
            }
        };
        Ok(Self {
            toolbox,
            runner: Runner::new(APP, Arc::new(agent)).with_session_service(sessions),
            session_id: session_id(args),
        })
    }

    /// Starts a run of `input` in the session, for the local user.
    pub fn start(&self, input: &str) -> EventStream {
        self.runner.run(
            USER,
            &self.session_id,
            input,
            toolbelt::agent::RunOptions::new(),
        )
    }

    /// Tells how to resume a stored session, then closes the tool sets.
    pub async fn close(self, args: &AgentArgs) {
        if args.session.is_some() {
            let id = &self.session_id;
            eprintln!("session: {id} (resume with --session-id {id})");
        }
        self.toolbox.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_shortened_to_one_line() {
        assert_eq!(
            short_args(r#"{"file_path":"a.txt","limit":3}"#),
            "file_path=a.txt, limit=3"
        );
        let long = format!(r#"{{"content":"{}"}}"#, "x".repeat(100));
        let short = short_args(&long);
        assert!(
            short.chars().count() <= ARGS_CHARS && short.ends_with('…'),
            "{short}"
        );
        assert_eq!(short_args("not json\nat all"), "not json at all");
    }

    #[test]
    fn previews_fit_one_line() {
        assert_eq!(preview("  alpha\nbeta\n"), "alpha beta");
        assert_eq!(preview(""), "(empty)");
        assert_eq!(preview(&"y".repeat(200)).chars().count(), PREVIEW_CHARS);
    }

    #[test]
    fn the_missing_model_message_names_every_variable() {
        let text = not_configured(&[ENV_BASE_URL, ENV_MODEL]);
        for name in ["OPENAI_BASE_URL", "OPENAI_API_KEY", "TOOLBELT_MODEL"] {
            assert!(text.contains(name), "{text}");
        }
    }
}
