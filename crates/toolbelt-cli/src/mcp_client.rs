//! What `toolbelt mcp` offers the server it talks to, and how it shows the server's side of a
//! call: elicitation (`--elicitation ask|accept-defaults|decline`), sampling
//! (`--sampling model|decline`, with the tools a request offers the model), the `--dir` as
//! a root, progress lines on stderr, and hints that say what to try when a connection fails.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex};

use clap::ValueEnum;
use futures::StreamExt;
use futures::future::BoxFuture;
use toolbelt::mcp::{
    ElicitationField, ElicitationKind, ElicitationRequest, ElicitationResponse, FailureKind,
    McpError, McpToolSetBuilder, SamplingError, SamplingRequest, SamplingResponse, SamplingRole,
    SamplingToolChoice, SamplingToolUse, TransportConfig,
};
use toolbelt::model::{
    FinishReason, GenerationConfig, Message, Model, OpenAiModel, Request, ToolCall, ToolChoice,
};
use toolbelt::{Declaration, JsonObject};
use toolbelt::{ProgressSink, ProgressUpdate, visible};

/// How `toolbelt mcp` answers a server that asks the user for input.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElicitationMode {
    /// Ask on the terminal, one question per field with its default shown (declines, with a
    /// note, when stdin or stderr is not a terminal).
    Ask,
    /// Accept with the schema's default values, without asking.
    AcceptDefaults,
    /// Decline every request.
    Decline,
}

/// How `toolbelt mcp` answers a server that asks for a completion.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplingMode {
    /// Send it to the configured model (OPENAI_BASE_URL or OPENAI_API_KEY, and
    /// TOOLBELT_MODEL).
    Model,
    /// Refuse every request.
    Decline,
}

/// The model the environment configures, if any (`--sampling` defaults to it).
pub fn configured_model() -> Option<OpenAiModel> {
    OpenAiModel::from_env().ok()
}

/// Sets the elicitation handler `mode` asks for on `builder`.
pub fn with_elicitation(builder: McpToolSetBuilder, mode: ElicitationMode) -> McpToolSetBuilder {
    match mode {
        // A server that knows the client declines does not need to ask.
        ElicitationMode::Decline => builder,
        ElicitationMode::AcceptDefaults => builder.on_elicitation(|request| {
            let answer = match request.kind {
                // Nobody can visit the page.
                ElicitationKind::Url { .. } => ElicitationResponse::Decline,
                _ => ElicitationResponse::Accept(request.defaults()),
            };
            Box::pin(async move { answer })
        }),
        ElicitationMode::Ask => {
            // One question at a time, however many requests arrive together.
            let terminal = Arc::new(Mutex::new(()));
            builder
                .url_elicitation(true)
                .on_elicitation(move |request| {
                    let terminal = terminal.clone();
                    Box::pin(async move {
                        tokio::task::spawn_blocking(move || {
                            let _turn = terminal.lock().unwrap_or_else(|e| e.into_inner());
                            ask_on_terminal(&request)
                        })
                        .await
                        .unwrap_or(ElicitationResponse::Cancel)
                    })
                })
        }
    }
}

/// Asks the user on the terminal (questions on stderr, answers from stdin).
fn ask_on_terminal(request: &ElicitationRequest) -> ElicitationResponse {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        eprintln!(
            "note: server {:?} asked for input ({}); declined because this is not a terminal \
             (use --elicitation accept-defaults to accept its defaults)",
            request.server, request.message
        );
        return ElicitationResponse::Decline;
    }
    let mut input = std::io::stdin().lock();
    let mut err = std::io::stderr().lock();
    // The server writes the whole form: every piece of it is shown escaped, so it cannot
    // redraw the line or pass for a question of Toolbelt's.
    let _ = writeln!(
        err,
        "\nserver {:?} asks: {}",
        request.server,
        visible(&request.message)
    );
    if let ElicitationKind::Url { url, .. } = &request.kind {
        let _ = writeln!(err, "  open {}", visible(url));
        return match prompt(
            &mut input,
            &mut err,
            "  done? [y = yes, n = decline, empty = cancel] ",
        ) {
            Some(answer) if answer.eq_ignore_ascii_case("y") => {
                ElicitationResponse::Accept(Default::default())
            }
            Some(answer) if answer.eq_ignore_ascii_case("n") => ElicitationResponse::Decline,
            _ => ElicitationResponse::Cancel,
        };
    }
    let _ = writeln!(
        err,
        "  (Enter keeps the default in brackets; type - to decline, end of input to cancel)"
    );
    let mut answers = toolbelt::JsonObject::new();
    for field in request.fields() {
        loop {
            let Some(text) = prompt(&mut input, &mut err, &question(&field)) else {
                return ElicitationResponse::Cancel;
            };
            if text == "-" {
                return ElicitationResponse::Decline;
            }
            if text.is_empty() {
                match &field.default {
                    Some(default) => {
                        answers.insert(field.name.clone(), default.clone());
                    }
                    None if field.required => {
                        let _ = writeln!(err, "  {} is required", visible(&field.name));
                        continue;
                    }
                    None => {}
                }
                break;
            }
            match field.value_from_text(&text) {
                Ok(value) => {
                    answers.insert(field.name.clone(), value);
                    break;
                }
                Err(problem) => {
                    let _ = writeln!(err, "  {problem}");
                }
            }
        }
    }
    ElicitationResponse::Accept(answers)
}

/// `  Name (the user's name) [Ann]: `
fn question(field: &ElicitationField) -> String {
    let mut text = format!(
        "  {}",
        visible(field.title.as_deref().unwrap_or(&field.name))
    );
    if let Some(description) = &field.description {
        text.push_str(&format!(" ({})", visible(description)));
    }
    if let toolbelt::mcp::FieldKind::Choice { options, multiple } = &field.kind {
        let joiner = if *multiple { ", any of " } else { ", one of " };
        text.push_str(&format!("{joiner}{}", visible(&options.join("|"))));
    }
    if let Some(default) = &field.default {
        let shown = default
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| default.to_string());
        text.push_str(&format!(" [{}]", visible(&shown)));
    } else if field.required {
        text.push_str(" (required)");
    }
    text.push_str(": ");
    text
}

/// Writes `question` and reads one line; `None` at end of input.
fn prompt(input: &mut impl BufRead, err: &mut impl Write, question: &str) -> Option<String> {
    let _ = write!(err, "{question}");
    let _ = err.flush();
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_string()),
    }
}

/// Sends the server's sampling requests to `model`, with the tools a request offers (the
/// model's calls go back to the server, which runs them); without a model the client
/// declares no sampling and the server's requests are refused.
pub fn with_sampling(builder: McpToolSetBuilder, model: Option<OpenAiModel>) -> McpToolSetBuilder {
    let Some(model) = model else {
        return builder;
    };
    let model = Arc::new(model);
    builder.sampling_tools(true).on_sampling(move |request| {
        let model = model.clone();
        Box::pin(async move { complete(&model, request).await }) as BoxFuture<'static, _>
    })
}

/// Sends a server's sampling request to the model and returns its text and tool calls.
async fn complete(
    model: &OpenAiModel,
    request: SamplingRequest,
) -> Result<SamplingResponse, SamplingError> {
    eprintln!(
        "note: server {:?} asked the model for a completion ({} message(s), {} tool(s), at \
         most {} tokens)",
        request.server,
        request.messages.len(),
        request.tools.len(),
        request.max_tokens
    );
    let config = GenerationConfig {
        max_tokens: Some(request.max_tokens),
        temperature: request.temperature,
        stop: request.stop_sequences.clone(),
        ..GenerationConfig::default()
    };
    let mut model_request = Request::new(conversation(&request)).with_config(config);
    if !request.tools.is_empty() {
        model_request = model_request
            .with_tools(declarations(&request)?)
            .with_tool_choice(match request.tool_choice {
                SamplingToolChoice::Auto => ToolChoice::Auto,
                SamplingToolChoice::Required => ToolChoice::Required,
                SamplingToolChoice::None => ToolChoice::None,
            });
    }
    let failed = |err: toolbelt::model::ModelError| {
        SamplingError::failed(format!("the model failed: {err}"))
    };
    let mut stream = model.generate(model_request).await.map_err(failed)?;
    let mut answer = None;
    while let Some(item) = stream.next().await {
        let item = item.map_err(failed)?;
        if !item.partial {
            answer = Some(item);
        }
    }
    let answer = answer.ok_or_else(|| SamplingError::failed("the model gave no answer"))?;
    let name = if answer.model.is_empty() {
        model.name().to_string()
    } else {
        answer.model
    };
    let message = answer.message.unwrap_or_else(|| Message::assistant(""));
    if !message.tool_calls.is_empty() {
        if request.tools.is_empty() || request.tool_choice == SamplingToolChoice::None {
            return Err(SamplingError::failed(
                "the model called a tool although the request allowed none",
            ));
        }
        let uses = message
            .tool_calls
            .iter()
            .map(tool_use)
            .collect::<Result<Vec<_>, _>>()?;
        let names: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
        eprintln!(
            "note: the model called {names:?}; server {:?} runs the calls",
            request.server
        );
        return Ok(SamplingResponse::tool_uses(name, message.content, uses));
    }
    let mut response = SamplingResponse::new(name, message.content);
    response.stop_reason = match answer.finish_reason {
        Some(FinishReason::Length) => Some("maxTokens".into()),
        Some(FinishReason::Stop) | None => Some("endTurn".into()),
        Some(other) => Some(other.as_str().to_string()),
    };
    Ok(response)
}

/// The server's conversation as the model's messages: the model's earlier tool calls as an
/// assistant message's calls, and each tool result as a tool message answering its call.
fn conversation(request: &SamplingRequest) -> Vec<Message> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system_prompt {
        messages.push(Message::system(system.clone()));
    }
    // A tool message names the tool; the result names only the call.
    let mut called = std::collections::HashMap::new();
    for message in &request.messages {
        match message.role {
            SamplingRole::Assistant if !message.tool_uses.is_empty() => {
                let calls = message
                    .tool_uses
                    .iter()
                    .map(|u| {
                        called.insert(u.id.clone(), u.name.clone());
                        ToolCall::new(
                            u.id.clone(),
                            u.name.clone(),
                            serde_json::Value::Object(u.input.clone()).to_string(),
                        )
                    })
                    .collect();
                messages.push(Message::assistant_tool_calls(message.text.clone(), calls));
            }
            SamplingRole::Assistant => messages.push(Message::assistant(message.text.clone())),
            SamplingRole::User => {
                for result in &message.tool_results {
                    let tool = called.get(&result.tool_use_id).cloned().unwrap_or_default();
                    let mut answer =
                        Message::tool(result.tool_use_id.clone(), tool, result.text.clone());
                    answer.is_error = result.is_error;
                    messages.push(answer);
                }
                if message.tool_results.is_empty() || !message.text.is_empty() {
                    messages.push(Message::user(message.text.clone()));
                }
            }
        }
    }
    messages
}

/// The request's tools as the model's declarations; a name or schema the model cannot take
/// fails the request, telling the server which tool.
fn declarations(request: &SamplingRequest) -> Result<Vec<Declaration>, SamplingError> {
    request
        .tools
        .iter()
        .map(|tool| {
            Declaration::new(
                tool.name.as_str(),
                tool.description.clone().unwrap_or_default(),
            )
            .and_then(|d| d.with_input_schema(serde_json::Value::Object(tool.input_schema.clone())))
            .map_err(|err| {
                SamplingError::failed(format!(
                    "the tool {:?} cannot be offered to the model: {err}",
                    tool.name
                ))
            })
        })
        .collect()
}

/// One of the model's tool calls for the server; arguments that are not a JSON object fail
/// the request (the server could not run the call).
fn tool_use(call: &ToolCall) -> Result<SamplingToolUse, SamplingError> {
    let arguments = call.arguments.as_str().trim();
    let input = if arguments.is_empty() {
        JsonObject::new()
    } else {
        serde_json::from_str::<JsonObject>(arguments).map_err(|err| {
            SamplingError::failed(format!(
                "the model called {:?} with arguments that are not a JSON object: {err}",
                call.name.as_str()
            ))
        })?
    };
    Ok(SamplingToolUse {
        id: call.id.clone(),
        name: call.name.clone(),
        input,
    })
}

/// Prints a call's progress on stderr: one line per report, or one line rewritten in place
/// on a terminal.
pub fn progress_printer() -> Arc<dyn ProgressSink> {
    let terminal = std::io::stderr().is_terminal();
    Arc::new(move |update: ProgressUpdate| {
        let mut line = match update.total {
            Some(total) => format!("progress: {}/{}", number(update.progress), number(total)),
            None => format!("progress: {}", number(update.progress)),
        };
        if let Some(message) = &update.message {
            line.push_str(": ");
            line.extend(message.chars().filter(|c| !c.is_control()).take(200));
        }
        let mut err = std::io::stderr().lock();
        let _ = if terminal {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    })
}

/// Ends a line a terminal progress display left open.
pub fn finish_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
}

/// `3` for 3.0, `2.5` for 2.5.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// The error's message, clipped to its first line when the server sent a page, with what
/// to try next.
pub fn explain(err: &McpError, transport: &TransportConfig) -> String {
    let message = err.to_string();
    let mut lines = message.lines();
    let first = lines.next().unwrap_or_default();
    let mut text: String = if looks_like_html(&message) || message.len() > 2000 {
        let clipped: String = first.chars().take(300).collect();
        let cut = clipped.find('<').unwrap_or(clipped.len());
        format!(
            "{} (the server's page is not shown)",
            clipped[..cut].trim_end()
        )
    } else {
        message.clone()
    };
    if let Some(hint) = hint(err, &message, transport) {
        text.push_str("\nhint: ");
        text.push_str(&hint);
    }
    text
}

fn looks_like_html(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("<html") || lower.contains("<!doctype") || lower.contains("<body")
}

/// What to try for an HTTP status the message names.
fn hint(err: &McpError, message: &str, transport: &TransportConfig) -> Option<String> {
    if matches!(transport, TransportConfig::Stdio { .. }) || err.kind == FailureKind::Cancelled {
        return None;
    }
    let lower = message.to_ascii_lowercase();
    let says = |phrases: &[&str]| phrases.iter().any(|phrase| lower.contains(phrase));
    if says(&[
        "http 401",
        "http 403",
        "401 unauthorized",
        "403 forbidden",
        "auth required",
        "authorization required",
    ]) {
        return Some(
            "the server wants credentials: pass --header 'Authorization: Bearer TOKEN', or \
             run `toolbelt mcp login --http URL` once if it uses OAuth"
                .into(),
        );
    }
    if says(&[
        "http 404",
        "http 405",
        "404 not found",
        "405 method not allowed",
    ]) {
        return Some(match transport {
            TransportConfig::StreamableHttp { .. } => {
                "nothing speaks streamable HTTP at this URL: check the path (often /mcp), or \
                 try the legacy transport with --sse URL (often /sse)"
                    .into()
            }
            _ => "nothing speaks the legacy SSE transport at this URL: check the path (often \
                  /sse), or try streamable HTTP with --http URL (often /mcp)"
                .into(),
        });
    }
    None
}
