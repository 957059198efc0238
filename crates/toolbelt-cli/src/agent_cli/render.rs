//! Showing a run's events: for people (the final answer on stdout, everything else on
//! stderr: text written between tool calls, one line per tool call as it ends, a spinner
//! naming the tools still running, warnings and errors) or for scripts (`--json`: every
//! event as one JSON line on stdout).
//!
//! Where the model's text goes: only the answer that ends the run belongs on stdout, so
//! `toolbelt run … > answer.txt` holds the answer alone. Whether a turn's text is that answer
//! is known only when the turn ends (a turn that calls tools is not), so a turn's text is
//! shown live only where the choice does not matter: on stdout when stdout and stderr are
//! both the terminal, else on stderr when stderr is a terminal (the answer is then also
//! written to stdout when the turn ends). With neither a terminal, each turn's text is
//! written once, when the turn ends, to where it belongs.
//!
//! An agent tool's forwarded events (those with a `tool_call_id`: the child's own turns) are
//! progress, never the answer: for people only the child's finished tool calls are shown,
//! one indented line each on stderr.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use toolbelt::ContentBlock;
use toolbelt::agent::{Event, EventKind, EventStream, ToolResult};
use toolbelt::model::{Message, ModelError, RetryNotice, RetryObserver};

use crate::progress::Progress;

/// The longest result preview on a tool line, in characters.
const PREVIEW_CHARS: usize = 80;
/// The longest argument summary on a tool line, in characters.
const ARGS_CHARS: usize = 60;
/// The longest note (latest chunk or progress) on the spinner's line, in characters.
const NOTE_CHARS: usize = 40;
/// The spinner's label while a model call has not answered yet.
const WAITING_FOR_MODEL: &str = "waiting for the model…";

/// The longest spinner label, in characters.
const LABEL_CHARS: usize = 110;

/// How a run's events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// For people: the answer on stdout, the rest on stderr.
    Human,
    /// For scripts: every event as one JSON line on stdout (the stable `--json` format).
    Json,
}

/// How a run ended.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// An error event was reported (the model failed, the session store failed, too many
    /// tool rounds), or the run ended without its completion event.
    pub failed: bool,
    /// The calls the run paused on, waiting for a person's approval (their ids).
    pub awaiting: Vec<String>,
    /// The long-running calls whose result the run waits for (their ids).
    pub running_long: Vec<String>,
    /// A graph node that asked a person: its name and question (as text).
    pub interrupted: Option<(String, String)>,
}

impl RunSummary {
    /// Whether the run waits for something from outside: an approval, a long-running
    /// call's result, or a graph node's answer.
    pub fn paused(&self) -> bool {
        !self.awaiting.is_empty() || !self.running_long.is_empty() || self.interrupted.is_some()
    }
}

/// Where a turn's text is shown while it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Live {
    Stdout,
    Stderr,
    Off,
}

/// One tool call of the current turn, for its result line and the spinner.
struct Call {
    id: String,
    name: String,
    args: String,
    /// The latest chunk or progress note.
    note: Option<String>,
    running: bool,
    /// When the model's turn asking for it ended (the executor starts it then).
    started: Instant,
}

/// Prints a run's events (see the module doc).
pub struct Renderer {
    spinner: Spinner,
    format: Format,
    live: Live,
    calls: Vec<Call>,
    /// The short arguments of forwarded child tool calls, by call id, for their lines.
    child_calls: Vec<(String, String)>,
    /// Whether the current turn's text was shown while it streamed.
    shown_live: bool,
    /// How many graph nodes have started and not ended: a model's answer inside a node is
    /// a step of the workflow (shown on stderr), not the run's answer.
    open_nodes: usize,
    stdout_at_line_start: bool,
    stderr_at_line_start: bool,
    /// Which of the two streams is a terminal: model text written there is escaped.
    stdout_tty: bool,
    stderr_tty: bool,
}

impl Renderer {
    /// A renderer printing in `format`, with `spinner` while tools run (people only).
    pub fn new(spinner: Spinner, format: Format) -> Self {
        let (out, err) = (
            std::io::stdout().is_terminal(),
            std::io::stderr().is_terminal(),
        );
        let live = match (out, err) {
            (true, true) => Live::Stdout,
            (_, true) => Live::Stderr,
            _ => Live::Off,
        };
        Self {
            spinner,
            format,
            live,
            calls: Vec::new(),
            child_calls: Vec::new(),
            shown_live: false,
            open_nodes: 0,
            stdout_at_line_start: true,
            stderr_at_line_start: true,
            stdout_tty: out,
            stderr_tty: err,
        }
    }

    /// Renders the events of `events` until the run completes. Safe to call again after
    /// the future was dropped part-way (the state is in the renderer and the stream).
    pub async fn render(&mut self, events: &mut EventStream) -> RunSummary {
        let mut summary = RunSummary::default();
        let mut completed = false;
        // A run starts with a model call.
        self.waiting_for_model();
        while let Some(event) = events.recv().await {
            self.event(&event, &mut summary);
            // Child invocations end with a completion of their own; the root's is the last.
            if matches!(event.kind, EventKind::RunCompleted) && event.parent_invocation_id.is_none()
            {
                completed = true;
                break;
            }
        }
        self.spinner.hide();
        self.end_lines();
        if !completed {
            summary.failed = true;
            eprintln!("toolbelt: error: the run ended without completing");
        }
        summary
    }

    fn event(&mut self, event: &Event, summary: &mut RunSummary) {
        if let EventKind::Error { message, .. } = &event.kind {
            summary.failed = true;
            self.spinner.hide();
            self.end_lines();
            eprintln!("toolbelt: error: {message}");
        }
        if let EventKind::ApprovalRequested { call_id, .. } = &event.kind {
            summary.awaiting.push(call_id.clone());
        }
        if let EventKind::ToolPending { call_id, .. } = &event.kind {
            summary.running_long.push(call_id.clone());
        }
        if let EventKind::Interrupted { node, question } = &event.kind {
            summary.interrupted = Some((node.clone(), question_text(question)));
        }
        match &event.kind {
            EventKind::NodeStarted { .. } => self.open_nodes += 1,
            EventKind::NodeEnded { .. } => self.open_nodes = self.open_nodes.saturating_sub(1),
            _ => {}
        }
        if let EventKind::Warning { message } = &event.kind {
            self.end_stderr_line();
            self.spinner
                .println(&format!("toolbelt: warning: {message}"));
        }
        match self.format {
            Format::Json => print_json(event),
            Format::Human if event.tool_call_id.is_some() => self.forwarded(&event.kind),
            Format::Human => self.human(&event.kind),
        }
    }

    /// An agent tool's forwarded event: its finished tool calls as indented lines.
    fn forwarded(&mut self, kind: &EventKind) {
        match kind {
            EventKind::ModelResponse { message, .. } => {
                self.child_calls.extend(
                    message
                        .tool_calls
                        .iter()
                        .map(|c| (c.id.clone(), short_args(c.arguments.as_str()))),
                );
            }
            EventKind::ToolResult { result } => {
                let args = self
                    .child_calls
                    .iter()
                    .position(|(id, _)| *id == result.call_id)
                    .map(|at| self.child_calls.swap_remove(at).1)
                    .unwrap_or_default();
                self.end_lines();
                self.spinner
                    .println(&format!("  {}", result_line(result, &args)));
            }
            _ => {}
        }
    }

    fn human(&mut self, kind: &EventKind) {
        match kind {
            EventKind::ModelDelta { delta } if !delta.content.is_empty() => {
                if self.live != Live::Off {
                    self.spinner.hide();
                }
                match self.live {
                    Live::Stdout if self.open_nodes > 0 => self.write_stderr(&delta.content),
                    Live::Stdout => self.write_stdout(&delta.content),
                    Live::Stderr => self.write_stderr(&delta.content),
                    Live::Off => return,
                }
                self.shown_live = true;
            }
            EventKind::ModelResponse { message, .. } => self.model_response(message),
            EventKind::ToolChunk { call_id, chunk, .. } => {
                self.note(call_id, last_line(&chunk.content.to_text()));
            }
            EventKind::ToolProgress {
                call_id, update, ..
            } => {
                let note = match (&update.message, update.total) {
                    (Some(message), _) => last_line(message),
                    (None, Some(total)) => Some(format!("{}/{total}", update.progress)),
                    (None, None) => Some(update.progress.to_string()),
                };
                self.note(call_id, note);
            }
            EventKind::ToolResult { result } => self.tool_result(result),
            EventKind::ApprovalRequested {
                call_id,
                name,
                arguments,
                reason,
                preview,
            } => {
                let mut text = format!(
                    "toolbelt: call {} awaits approval (asked because {}):\n{}",
                    toolbelt::visible(call_id),
                    toolbelt::visible(reason),
                    super::approval::describe_call(name, arguments, false),
                );
                if let Some(preview) = preview {
                    text.push_str(&super::approval::describe_preview(preview, false));
                }
                self.end_lines();
                self.spinner.println(text.trim_end());
            }
            EventKind::ToolPending {
                call_id,
                name,
                status,
            } => {
                self.end_lines();
                self.spinner.println(&format!(
                    "toolbelt: {} (call {}) goes on outside this run: {}",
                    toolbelt::visible(name),
                    toolbelt::visible(call_id),
                    toolbelt::visible(&short_args(status)),
                ));
            }
            EventKind::NodeStarted { node, step } => {
                self.end_lines();
                self.spinner.println(&format!(
                    "toolbelt: step {step}: {}",
                    toolbelt::visible(node)
                ));
            }
            EventKind::Interrupted { node, question } => {
                self.end_lines();
                self.spinner.println(&format!(
                    "toolbelt: {} asks: {}",
                    toolbelt::visible(node),
                    toolbelt::visible(&question_text(question))
                ));
            }
            EventKind::PendingToolCalls { calls } => {
                let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
                self.spinner.println(&format!(
                    "toolbelt: {} tool calls were handed back unrun: {}",
                    calls.len(),
                    names.join(", ")
                ));
            }
            _ => {}
        }
    }

    /// The end of a model turn: its text goes where it belongs (see the module doc), and
    /// the calls it makes start running.
    fn model_response(&mut self, message: &Message) {
        self.spinner.hide();
        let answer = message.tool_calls.is_empty() && self.open_nodes == 0;
        let text = message.content.as_str();
        match (self.shown_live, self.live) {
            (true, Live::Stdout) if self.open_nodes == 0 => self.end_stdout_line(),
            (true, _) => {
                self.end_stderr_line();
                if answer {
                    self.write_stdout(text);
                    self.end_stdout_line();
                }
            }
            (false, _) if text.is_empty() => {}
            (false, _) if answer => {
                self.write_stdout(text);
                self.end_stdout_line();
            }
            (false, _) => {
                self.write_stderr(text);
                self.end_stderr_line();
            }
        }
        self.shown_live = false;
        if answer {
            return;
        }
        self.end_lines();
        self.calls = message
            .tool_calls
            .iter()
            .map(|c| Call {
                id: c.id.clone(),
                name: c.name.clone(),
                args: short_args(c.arguments.as_str()),
                note: None,
                running: true,
                started: Instant::now(),
            })
            .collect();
        self.update_spinner();
    }

    fn note(&mut self, call_id: &str, note: Option<String>) {
        if let Some(call) = self.calls.iter_mut().find(|c| c.id == call_id)
            && note.is_some()
        {
            call.note = note;
            self.update_spinner();
        }
    }

    /// Prints the line of a finished call ([`result_line`]) and updates the spinner.
    fn tool_result(&mut self, result: &ToolResult) {
        let args = match self.calls.iter_mut().find(|c| c.id == result.call_id) {
            Some(call) => {
                call.running = false;
                call.args.clone()
            }
            None => String::new(),
        };
        self.end_lines();
        self.spinner.println(&result_line(result, &args));
        if let Some(plan) = plan_lines(result) {
            self.spinner.println(&plan);
        }
        self.update_spinner();
    }

    /// The spinner names the calls still running ([`spinner_label`]); when none is, the
    /// results go back to the model, which is waited for next.
    fn update_spinner(&self) {
        if self.format == Format::Json {
            return;
        }
        match spinner_label(&self.calls) {
            // The clock of the longest-running call: a large Grep shows it still runs.
            Some((label, since)) => self.spinner.spin_since(label, since),
            None => self.waiting_for_model(),
        }
    }

    /// Spins while the model has not answered (its first token can take seconds, its
    /// retries longer); the first text shown, the answer or an error ends it.
    fn waiting_for_model(&self) {
        if self.format == Format::Human {
            self.spinner.spin(WAITING_FOR_MODEL);
        }
    }

    fn write_stdout(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let shown = on_terminal(text, self.stdout_tty);
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(shown.as_bytes());
        let _ = out.flush();
        self.stdout_at_line_start = text.ends_with('\n');
    }

    fn write_stderr(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let shown = on_terminal(text, self.stderr_tty);
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(shown.as_bytes());
        let _ = err.flush();
        self.stderr_at_line_start = text.ends_with('\n');
    }

    fn end_stdout_line(&mut self) {
        if !self.stdout_at_line_start {
            self.write_stdout("\n");
        }
    }

    fn end_stderr_line(&mut self) {
        if !self.stderr_at_line_start {
            self.write_stderr("\n");
        }
    }

    fn end_lines(&mut self) {
        self.end_stdout_line();
        self.end_stderr_line();
    }
}

/// What the spinner says: the one running call with its latest chunk or progress note, or
/// how many calls run and their names, with when the first of them started; `None` when no
/// call runs.
fn spinner_label(calls: &[Call]) -> Option<(String, Instant)> {
    let running: Vec<&Call> = calls.iter().filter(|c| c.running).collect();
    let label = match running.as_slice() {
        [] => return None,
        [one] => match &one.note {
            Some(note) => format!("{}({}) {note}", one.name, one.args),
            None => format!("{}({})", one.name, one.args),
        },
        many => {
            let names: Vec<&str> = many.iter().map(|c| c.name.as_str()).collect();
            format!("{} tools running: {}", many.len(), names.join(", "))
        }
    };
    let since = running.iter().map(|c| c.started).min()?;
    Some((clip(&label, LABEL_CHARS), since))
}

/// One line for a finished call: mark, name, short arguments, duration, and a preview of
/// what it returned (none for a silent success: the tool meant it for the model only), with
/// a note per image or other block.
fn result_line(result: &ToolResult, args: &str) -> String {
    let mark = if result.is_error { '✗' } else { '✓' };
    let mut line = format!("{mark} {}({args}) {} ms", result.name, result.duration_ms);
    if !result.silent || result.is_error {
        line.push_str(" → ");
        line.push_str(&preview(&result.content));
    }
    for note in result.blocks.iter().filter_map(block_note) {
        line.push_str(&format!(" [{note}]"));
    }
    line
}

/// The task list a successful TodoWrite saved, as its checklist (the tool's user view),
/// indented under its line, so a run shows its plan as it changes.
fn plan_lines(result: &ToolResult) -> Option<String> {
    if result.name != "TodoWrite" || result.is_error {
        return None;
    }
    let list = result.user_text.as_deref()?.trim_end();
    Some(
        list.lines()
            .map(|line| format!("    {line}"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Model text as written to a stream: on a terminal, every character the terminal would
/// interpret (an escape sequence that clears the screen or rewrites a line the user trusts)
/// is written out visibly, tabs and line feeds kept; to a pipe or a file, the text as the
/// model wrote it, for the program that reads it.
fn on_terminal(text: &str, tty: bool) -> std::borrow::Cow<'_, str> {
    if !tty || !toolbelt::has_hidden(&text.replace('\t', " ")) {
        return std::borrow::Cow::Borrowed(text);
    }
    let parts: Vec<_> = text.split('\t').map(toolbelt::visible).collect();
    std::borrow::Cow::Owned(parts.join("\t"))
}

/// One event as one line of JSON on stdout (the `--json` format).
pub(crate) fn print_json(event: &Event) {
    match serde_json::to_string(event) {
        Ok(line) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        Err(err) => eprintln!("toolbelt: error: an event could not be written as JSON: {err}"),
    }
}

/// A short note for a block a terminal line cannot show (none for text).
fn block_note(block: &ContentBlock) -> Option<String> {
    let size = |base64: &str| format_size(base64.len() / 4 * 3);
    match block {
        ContentBlock::Text { .. } => None,
        ContentBlock::Image { mime_type, data } => {
            Some(format!("image {mime_type}, {}", size(data)))
        }
        ContentBlock::Audio { mime_type, data } => {
            Some(format!("audio {mime_type}, {}", size(data)))
        }
        ContentBlock::ResourceLink { uri, .. } | ContentBlock::Resource { uri, .. } => {
            Some(format!("resource {}", clip(uri, NOTE_CHARS)))
        }
    }
}

fn format_size(bytes: usize) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{} KB", bytes / 1024),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
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

/// The last non-blank line of `text`, clipped, for the spinner.
fn last_line(text: &str) -> Option<String> {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| clip(&one_line(l), NOTE_CHARS))
}

/// `text` on one line, with what a terminal would interpret written out
/// ([`toolbelt::visible`]): these lines show what models and tools sent, and an escape
/// sequence in them could otherwise hide or rewrite the lines around, the approval
/// question included.
fn one_line(text: &str) -> String {
    toolbelt::visible(&text.split_whitespace().collect::<Vec<_>>().join(" ")).into_owned()
}

fn clip(text: &str, max: usize) -> String {
    toolbelt::core::text::shorten(text, max).into_owned()
}

/// The run's status line ([`Progress`]): drawn for people only, and only when stderr is a
/// terminal. Lines printed through it ([`Progress::println`]) never mix with it.
#[derive(Clone)]
pub struct Spinner(Progress);

impl Spinner {
    /// The status line of a run printed in `format`.
    pub fn new(format: Format) -> Self {
        Self(Progress::on_stderr(format == Format::Json))
    }

    /// A model retry observer that shows each retry's wait on this line as a countdown
    /// ("model: HTTP 429, retry 2/3 in 4 s"), after which the line shows the wait for the
    /// model again.
    pub fn retry_observer(&self) -> RetryObserver {
        let progress = self.0.clone();
        RetryObserver::new(move |notice: &RetryNotice<'_>| {
            progress.countdown(retry_label(notice), Instant::now() + notice.delay);
        })
    }
}

impl std::ops::Deref for Spinner {
    type Target = Progress;
    fn deref(&self) -> &Progress {
        &self.0
    }
}

/// What a retry's countdown says before "in N s": why the attempt failed and which retry
/// comes ("model: HTTP 429, retry 2/3").
fn retry_label(notice: &RetryNotice<'_>) -> String {
    let why = match notice.error {
        ModelError::Status { status, .. } => format!("HTTP {status}"),
        other => clip(&one_line(&other.to_string()), NOTE_CHARS),
    };
    format!(
        "model: {why}, retry {}/{}",
        notice.attempt,
        notice.max_attempts.saturating_sub(1)
    )
}

/// A graph node's question as text: a string as it is, anything else as JSON.
fn question_text(question: &serde_json::Value) -> String {
    match question {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
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
    fn a_result_line_shows_a_preview_unless_silent_and_notes_images() {
        let mut result = ToolResult::new("c1", "Shot", "took a screenshot");
        result.duration_ms = 12;
        result.blocks = vec![ContentBlock::image("image/png", "A".repeat(8))];
        assert_eq!(
            result_line(&result, "x=1"),
            "✓ Shot(x=1) 12 ms → took a screenshot [image image/png, 6 B]"
        );
        result.silent = true;
        result.blocks.clear();
        assert_eq!(result_line(&result, "x=1"), "✓ Shot(x=1) 12 ms");
        // A failure is always shown.
        result.is_error = true;
        result.content = "Error: no display".into();
        assert_eq!(
            result_line(&result, ""),
            "✗ Shot() 12 ms → Error: no display"
        );
    }

    #[test]
    fn the_spinner_names_the_calls_still_running_with_the_oldest_clock() {
        let t0 = Instant::now();
        let call = |id: &str, name: &str, note: Option<&str>, running, secs| Call {
            id: id.into(),
            name: name.into(),
            args: "a=1".into(),
            note: note.map(Into::into),
            running,
            started: t0 + std::time::Duration::from_secs(secs),
        };
        let mut calls = vec![
            call("c1", "Bash", Some("compiling"), true, 2),
            call("c2", "Grep", None, true, 1),
            call("c3", "Read", None, false, 0),
        ];
        let label = |calls: &[Call]| spinner_label(calls).map(|(l, since)| (l, since - t0));
        let secs = std::time::Duration::from_secs;
        assert_eq!(
            label(&calls).unwrap(),
            ("2 tools running: Bash, Grep".to_string(), secs(1))
        );
        calls[1].running = false;
        assert_eq!(
            label(&calls).unwrap(),
            ("Bash(a=1) compiling".to_string(), secs(2))
        );
        calls[0].running = false;
        assert_eq!(label(&calls), None);
    }

    #[test]
    fn an_image_block_gets_a_note_with_its_type_and_size() {
        let image = ContentBlock::image("image/png", "A".repeat(4096));
        assert_eq!(block_note(&image).unwrap(), "image image/png, 3 KB");
        assert_eq!(block_note(&ContentBlock::text("hi")), None);
    }

    #[test]
    fn the_spinner_note_is_the_last_non_blank_line() {
        assert_eq!(last_line("one\ntwo\n\n").as_deref(), Some("two"));
        assert_eq!(last_line("  \n"), None);
    }
}
