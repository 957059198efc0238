//! One conversation on each wire format: OpenAI chat completions, the OpenAI Responses API,
//! Anthropic Messages and Gemini. The same [`Request`] (a system prompt, a question and a tool
//! named `notes.read`) goes to each provider's client; the model calls the tool, gets its
//! result and answers. The scripted server of `toolbelt_model::testing` stands in for the
//! four APIs, as strict as they are about what a request may carry, so this runs offline.
//!
//! ```text
//! cargo run -p toolbelt-model --features test-server --example every_provider
//! ```
//!
//! Against a real provider, build the client the same way with its endpoint and key:
//! `connect(Provider::Anthropic, OpenAiConfig::new("https://…/v1", "claude-…").with_api_key(key))`.

use futures::StreamExt;
use toolbelt_core::Declaration;
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{
    DynModel, GenerationConfig, Message, ModelError, OpenAiConfig, Provider, Request, Response,
    connect,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let notes = Declaration::new("notes.read", "Reads the user's notes")?.with_input_schema(
        serde_json::json!({"type": "object",
            "properties": {"topic": {"type": "string", "description": "What the notes are about"}},
            "required": ["topic"]}),
    )?;
    for provider in [
        Provider::OpenAi,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ] {
        // The model asks for the tool by the name its provider allows (`notes_read`, since
        // OpenAI and Anthropic refuse a `.`; Gemini takes it as it is), then answers.
        let wire_name = if provider == Provider::Gemini || provider == Provider::OpenAi {
            "notes.read"
        } else {
            "notes_read"
        };
        let server = ScriptedServer::start([
            Reply::tool_call("call_1", wire_name, r#"{"topic":"lunch"}"#),
            Reply::text("Your notes say: lunch at noon."),
        ])
        .await?;
        let config =
            OpenAiConfig::new(server.base_url_for(provider), "a-model").with_api_key("a-key");
        let model = connect(provider, config)?;

        let mut messages = vec![
            Message::system("You answer from the user's notes."),
            Message::user("When is lunch?"),
        ];
        let first = ask(&model, &messages, &notes).await?;
        for warning in &first.warnings {
            println!("{provider}: warning: {warning}");
        }
        let call = first
            .tool_calls()
            .first()
            .ok_or("the model called no tool")?;
        // The call comes back under the declared name, whatever the wire carried.
        println!(
            "{provider}: the model calls {}({})",
            call.name.as_str(),
            call.arguments.as_str()
        );
        let call = call.clone();
        messages.push(first.message.clone().ok_or("no message")?);
        messages.push(Message::tool(&call.id, &call.name, "lunch at noon"));
        let second = ask(&model, &messages, &notes).await?;
        let answer = second.message.map(|m| m.content).unwrap_or_default();
        println!("{provider}: the model answers {answer:?}");
        // The scripted server refuses what the real API refuses; a refusal would have
        // failed `ask` above.
        println!(
            "{provider}: {} requests to {}",
            server.requests().len(),
            server.requests()[0].path
        );
    }
    Ok(())
}

/// One streamed call of `model`: its final response (deltas skipped).
async fn ask(
    model: &DynModel,
    messages: &[Message],
    tool: &Declaration,
) -> Result<Response, ModelError> {
    let request = Request::new(messages.to_vec())
        .with_tools(vec![tool.clone()])
        .with_config(GenerationConfig {
            stream: true,
            ..GenerationConfig::default()
        });
    let mut stream = model.generate(request).await?;
    let mut last = Response::default();
    while let Some(response) = stream.next().await {
        let response = response?;
        if !response.partial {
            last = response;
        }
    }
    Ok(last)
}
