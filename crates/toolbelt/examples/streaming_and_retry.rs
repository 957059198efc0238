//! A streaming tool whose chunks reach the caller as they are made, a retry rule that reads
//! the call's context (the spec's `RetryOn(ctx, info)`), and all tool sets replaced at once
//! between runs (the spec's `SetToolSets`).
//!
//! The model is a scripted OpenAI-compatible server on 127.0.0.1, so the example runs
//! offline.
//!
//! Run: `cargo run -p toolbelt --example streaming_and_retry --features agent`

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use toolbelt::agent::{EventKind, Invocation, LlmAgent, RunOptions, Runner};
use toolbelt::exec::{Retry, default_retry_on};
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{OpenAiConfig, OpenAiModel};
use toolbelt::{
    DynToolSet, FunctionTool, RetryPolicy, StaticToolSet, StreamChunk, StreamSender,
    StreamingFunctionTool, ToolContext, ToolError,
};

/// Arguments of the example tools.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Count {
    /// How far to count.
    to: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "count", r#"{"to":3}"#),
        Reply::tool_call("c2", "flaky", r#"{"to":1}"#),
        Reply::text("Counted, and the flaky tool came through."),
        Reply::text("Now only the clock is offered."),
    ])
    .await?;

    // Streams one chunk per number.
    let count = StreamingFunctionTool::new(
        "count",
        "Counts aloud",
        |_ctx: ToolContext, args: Count, tx: StreamSender| async move {
            for n in 1..=args.to {
                tx.send(StreamChunk::new(format!("{n} "))).await?;
            }
            Ok::<(), toolbelt::StreamClosed>(())
        },
    )?;
    // Says it is busy the first time.
    let attempts = Arc::new(AtomicU32::new(0));
    let tries = attempts.clone();
    let flaky = FunctionTool::new("flaky", "Busy at first", move |_ctx, _args: Count| {
        let tries = tries.clone();
        async move {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0 => Err(ToolError::failed("busy, try again")),
                _ => Ok("done".to_string()),
            }
        }
    })?;
    // Failures the default rule would not retry are, but only for the agent named `patient`.
    let retry = Retry::new(RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(10),
        ..RetryPolicy::default()
    })
    .retry_on(|info| {
        let patient =
            Invocation::from_context(info.ctx).is_some_and(|inv| inv.agent_name() == "patient");
        default_retry_on(info) || (patient && info.error.is_some())
    });

    let work: DynToolSet = Arc::new(StaticToolSet::new(
        "work",
        vec![Arc::new(count), Arc::new(flaky)],
    ));
    let agent = Arc::new(
        LlmAgent::builder("patient")
            .model(OpenAiModel::new(OpenAiConfig::new(
                server.base_url(),
                "scripted",
            ))?)
            .tool_set(work)
            .tool_retry_with(retry)
            .build()?,
    );
    let runner = Runner::new("streaming", agent.clone());
    for event in runner
        .run("me", "s", "Count to three", RunOptions::new())
        .collect_all()
        .await
    {
        match &event.kind {
            EventKind::ToolChunk { chunk, .. } => println!("chunk: {}", chunk.content.to_text()),
            EventKind::ToolResult { result } => {
                println!("{} returned: {}", result.name, result.content)
            }
            _ => {}
        }
    }
    println!("flaky ran {} times", attempts.load(Ordering::SeqCst));

    // Replace every tool set at once; the next run sees only the new ones.
    let clock = FunctionTool::new("clock", "Tells the time", |_ctx, _args: Count| async {
        Ok::<_, ToolError>("noon".to_string())
    })?;
    agent.set_tool_sets(vec![Arc::new(StaticToolSet::new(
        "time",
        vec![Arc::new(clock)],
    ))]);
    runner
        .run("me", "s", "What can you do now?", RunOptions::new())
        .collect_all()
        .await;
    println!(
        "offered now: {}",
        server.requests()[3].tool_names().join(", ")
    );
    Ok(())
}
