//! An agent that loads a skill and follows it in a real browser: the skill `form-check` says
//! how to check a web form; the agent loads it (`skill_load`), opens the form
//! (`browser_navigate`), fills it and submits (`browser_type`), and reports the greeting.
//!
//! The model is a scripted OpenAI-compatible server on 127.0.0.1 and the form is served on
//! 127.0.0.1 by the example, so it runs offline; the browser is the system's Chromium
//! (`apt-get install chromium`, or `TOOLBELT_CHROMIUM`). Point `OpenAiConfig` at a real
//! endpoint to use a real model.
//!
//! Run: `cargo run -p toolbelt --example browser_skill --features browser`

use std::error::Error;
use std::sync::Arc;

use futures::StreamExt;
use toolbelt::agent::{EventKind, Extension, Extensions, LlmAgent, RunOptions, Runner};
use toolbelt::browser::{BrowserOptions, BrowserToolSet};
use toolbelt::builtin::web::AddressPolicy;
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{OpenAiConfig, OpenAiModel};
use toolbelt::{DynToolSet, ToolSet};
use toolbelt_ext::{SkillsConfig, SkillsExtension};

const SKILL: &str = "---
name: form-check
description: Checks that a web form accepts a name and greets the user.
---
# Checking a form
1. Open the form with browser_navigate.
2. Type a test name into the name field with browser_type, submit true.
3. The page must then say `Hello, NAME!`. Report the greeting, or what the page said instead.
";

const FORM: &str = "<!doctype html><title>Sign-up</title>
<form action=/hello><label>Your name <input name=name></label><button>Send</button></form>";

/// Serves the form and its greeting on 127.0.0.1 (a minimal HTTP/1.1 responder).
async fn serve_form() -> Result<String, Box<dyn Error>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                let target = head.split(' ').nth(1).unwrap_or("/");
                let body = match target.strip_prefix("/hello?name=") {
                    Some(name) => {
                        let name: String =
                            name.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
                        format!("<!doctype html><title>Welcome</title><p>Hello, {name}!</p>")
                    }
                    None => FORM.to_string(),
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    Ok(base)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // A project with one skill.
    let project = tempfile::tempdir()?;
    let skill_dir = project.path().join(".toolbelt/skills/form-check");
    std::fs::create_dir_all(&skill_dir)?;
    std::fs::write(skill_dir.join("SKILL.md"), SKILL)?;
    let base = serve_form().await?;

    // What the model will answer, in order. In the form's snapshot the name field is the
    // first interactive element, so its reference is e1.
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "skill_load", r#"{"name":"form-check"}"#),
        Reply::tool_call("c2", "browser_navigate", &format!(r#"{{"url":"{base}/"}}"#)),
        Reply::tool_call(
            "c3",
            "browser_type",
            r#"{"ref":"e1","text":"Ada","submit":true}"#,
        ),
        Reply::text("The form works: after submitting the name it says \"Hello, Ada!\"."),
    ])
    .await?;

    // Skills contribute their names to the instructions and skill_load / skill_read.
    let extensions = Extensions::init([Arc::new(SkillsExtension::new(
        SkillsConfig::new().folder(project.path().join(".toolbelt/skills"), false),
    )) as Arc<dyn Extension>])
    .await?;
    // The browser may reach the example's server on 127.0.0.1 and nothing else private.
    let browser = Arc::new(BrowserToolSet::new(
        BrowserOptions::default()
            .with_addresses(AddressPolicy::default().allow("127.0.0.1/32".parse()?)),
    ));
    let agent = LlmAgent::builder("tester")
        .instruction("You test web pages. Use the skill that fits the task.")
        .model(OpenAiModel::new(OpenAiConfig::new(
            server.base_url(),
            "scripted",
        ))?)
        .with_extensions(&extensions)
        .tool_set(browser.clone() as DynToolSet)
        .build()?;
    let runner = Runner::new("browser-skill-example", Arc::new(agent));

    let mut greeted = false;
    let mut events = runner.run(
        "user",
        "session",
        "Check the sign-up form.",
        RunOptions::new(),
    );
    while let Some(event) = events.next().await {
        match &event.kind {
            EventKind::ModelResponse { message, .. } => {
                for call in &message.tool_calls {
                    println!("calls {}({})", call.name, call.arguments);
                }
                if !message.content.is_empty() {
                    println!("says: {}", message.content);
                }
            }
            EventKind::ToolResult { result } => {
                let first = result.content.lines().next().unwrap_or_default();
                println!("  {} returned: {first} …", result.name);
                greeted |= result.name == "browser_type" && result.content.contains("Hello, Ada!");
            }
            EventKind::Error { kind, message } => println!("error ({kind:?}): {message}"),
            EventKind::RunCompleted => break,
            _ => {}
        }
    }
    browser.close().await?;
    extensions.close().await?;
    if !greeted {
        return Err("the submitted form never said Hello, Ada!".into());
    }
    Ok(())
}
