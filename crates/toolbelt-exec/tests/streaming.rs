//! Streamed batches: chunks and progress as they happen, one `Done` per call as it ends, and
//! the same hooks and middleware as for any call.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Trace, any_object, echo, executor_with, tool};
use futures::StreamExt;
use tokio::sync::Notify;
use toolbelt_core::{
    DynTool, ProgressUpdate, StreamChunk, StreamSender, StreamingFunctionTool, ToolContext,
    ToolError, ToolMeta, ToolOutput, async_trait,
};
use toolbelt_exec::{
    AfterAction, BatchEvent, BatchItem, BatchOptions, BeforeAction, ExecutionMode, Executor,
    HookCall, Middleware, Next, Timeout, ToolCall, ToolRequest,
};

/// Arguments of the test streaming tools.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A streaming tool that sends "first", waits until `go` is notified, sends "second" and
/// ends.
fn gated_stream(name: &str, go: &Arc<Notify>) -> DynTool {
    let go = go.clone();
    let tool = StreamingFunctionTool::new(
        name,
        "Streams two chunks, the second once allowed",
        move |_: ToolContext, _: NoArgs, tx: StreamSender| {
            let go = go.clone();
            async move {
                tx.send(StreamChunk::new("first ")).await?;
                go.notified().await;
                tx.send(StreamChunk::new("second")).await?;
                Ok::<(), toolbelt_core::StreamClosed>(())
            }
        },
    )
    .unwrap();
    Arc::new(tool)
}

/// A streaming tool that sends "a", "b", "c" at once.
fn abc(name: &str) -> DynTool {
    let tool = StreamingFunctionTool::new(
        name,
        "Streams a, b, c",
        |_: ToolContext, _: NoArgs, tx: StreamSender| async move {
            for part in ["a", "b", "c"] {
                tx.send(StreamChunk::new(part)).await?;
            }
            Ok::<(), toolbelt_core::StreamClosed>(())
        },
    )
    .unwrap();
    Arc::new(tool)
}

/// Every event of a streamed batch, in the order they came.
async fn all_events(
    executor: &Executor,
    calls: &[ToolCall],
    options: &BatchOptions,
) -> Vec<BatchEvent> {
    executor
        .execute_batch_stream(&ToolContext::new(), calls, options)
        .collect()
        .await
}

fn chunk_texts(events: &[BatchEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            BatchEvent::Chunk { chunk, .. } => Some(chunk.content.to_text()),
            _ => None,
        })
        .collect()
}

fn done_items(events: Vec<BatchEvent>) -> Vec<(usize, BatchItem)> {
    events
        .into_iter()
        .filter_map(|event| match event {
            BatchEvent::Done { index, item } => Some((index, item)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_streaming_tools_chunks_arrive_as_events_before_it_ends() {
    let go = Arc::new(Notify::new());
    let executor = executor_with([gated_stream("gated", &go)], |b| b);
    let calls = [ToolCall::new("c1", "gated", "{}")];
    let options = BatchOptions::new();
    let mut events = executor.execute_batch_stream(&ToolContext::new(), &calls, &options);

    // The tool is still waiting for `go`: the first chunk must arrive anyway.
    match events.next().await.expect("an event") {
        BatchEvent::Chunk {
            index,
            call_id,
            chunk,
        } => {
            assert_eq!((index, call_id.as_str()), (0, "c1"));
            assert_eq!(chunk.content.to_text(), "first ");
        }
        other => panic!("expected the first chunk before anything else, got {other:?}"),
    }
    go.notify_one();
    let rest: Vec<BatchEvent> = events.collect().await;
    assert_eq!(chunk_texts(&rest), ["second"]);
    let done = done_items(rest);
    assert_eq!(done.len(), 1, "exactly one Done per call");
    let (index, item) = &done[0];
    assert_eq!(*index, 0);
    assert_eq!(item.as_done().unwrap().model_text(), "first second");
}

#[tokio::test]
async fn a_non_streamed_batch_calls_streaming_tools_whole_and_gets_the_merged_output() {
    let executor = executor_with([abc("abc")], |b| b);
    let items = executor
        .execute_batch(
            &ToolContext::new(),
            &[ToolCall::new("c1", "abc", "{}")],
            &BatchOptions::new(),
        )
        .await;
    assert_eq!(items[0].as_done().unwrap().model_text(), "abc");
}

/// Records what the middleware chain sees of each result.
struct Recorder(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Middleware for Recorder {
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let result = next.run(ctx, req).await;
        if let Ok(output) = &result {
            self.0.lock().unwrap().push(output.llm_text());
        }
        result
    }
}

#[tokio::test]
async fn middleware_and_after_hooks_see_the_merged_output_of_a_streamed_call() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let executor = executor_with([abc("abc")], |b| {
        b.middleware(Recorder(seen.clone())).after_hook(
            |_: &ToolContext, _: &HookCall<'_>, result: &Result<ToolOutput, ToolError>| {
                let text = result.as_ref().unwrap().llm_text();
                AfterAction::Replace(Ok(ToolOutput::text(format!("checked: {text}"))))
            },
        )
    });
    let events = all_events(
        &executor,
        &[ToolCall::new("c1", "abc", "{}")],
        &BatchOptions::new(),
    )
    .await;
    assert_eq!(chunk_texts(&events), ["a", "b", "c"]);
    assert_eq!(*seen.lock().unwrap(), ["abc"]);
    let done = done_items(events);
    assert_eq!(
        done[0].1.as_done().unwrap().model_text(),
        "checked: abc",
        "the after hook's replacement is the call's result"
    );
}

#[tokio::test]
async fn a_before_hook_that_rejects_a_streaming_call_stops_it_before_any_chunk() {
    let executor = executor_with([abc("abc")], |b| {
        b.before_hook(|_: &ToolContext, _: &HookCall<'_>| BeforeAction::Reject("not now".into()))
    });
    let events = all_events(
        &executor,
        &[ToolCall::new("c1", "abc", "{}")],
        &BatchOptions::new(),
    )
    .await;
    assert!(chunk_texts(&events).is_empty(), "the tool never ran");
    let done = done_items(events);
    assert!(matches!(
        done[0].1.as_done().unwrap().result,
        Err(ToolError::Rejected { .. })
    ));
}

#[tokio::test]
async fn the_timeout_middleware_ends_a_streaming_call_that_stalls_after_a_chunk() {
    let never = Arc::new(Notify::new());
    let executor = executor_with([gated_stream("gated", &never)], |b| {
        b.middleware(Timeout::new(Duration::from_millis(200)))
    });
    let events = all_events(
        &executor,
        &[ToolCall::new("c1", "gated", "{}")],
        &BatchOptions::new(),
    )
    .await;
    assert_eq!(chunk_texts(&events), ["first "]);
    let done = done_items(events);
    assert!(
        matches!(
            done[0].1.as_done().unwrap().result,
            Err(ToolError::Timeout { .. })
        ),
        "{:?}",
        done[0].1
    );
}

#[tokio::test]
async fn progress_reports_become_events_and_still_reach_the_callers_sink() {
    let reporter = tool(
        "reporter",
        any_object(),
        ToolMeta::default(),
        |ctx: ToolContext, _| async move {
            assert!(ctx.wants_progress());
            ctx.report_progress(ProgressUpdate::new(1.0).with_total(2.0));
            ctx.report_progress(ProgressUpdate::new(2.0).with_message("done"));
            Ok(ToolOutput::text("reported"))
        },
    );
    let executor = executor_with([reporter, echo("echo")], |b| b);
    let caller_saw = Arc::new(Mutex::new(Vec::new()));
    let sink = caller_saw.clone();
    let ctx = ToolContext::new().with_progress(Arc::new(move |update: ProgressUpdate| {
        sink.lock().unwrap().push(update.progress)
    }));
    let calls = [
        ToolCall::new("c1", "echo", "{}"),
        ToolCall::new("c2", "reporter", "{}"),
    ];
    let options = BatchOptions::new();
    let events: Vec<BatchEvent> = executor
        .execute_batch_stream(&ctx, &calls, &options)
        .collect()
        .await;
    let mut progress = Vec::new();
    let mut reporter_done_at = None;
    for (position, event) in events.iter().enumerate() {
        match event {
            BatchEvent::Progress {
                index,
                call_id,
                update,
            } => {
                assert_eq!((*index, call_id.as_str()), (1, "c2"));
                progress.push((update.progress, update.message.clone()));
                assert!(reporter_done_at.is_none(), "progress after the call's Done");
            }
            BatchEvent::Done { index: 1, .. } => reporter_done_at = Some(position),
            _ => {}
        }
    }
    assert_eq!(progress, [(1.0, None), (2.0, Some("done".to_string()))]);
    assert!(reporter_done_at.is_some());
    assert_eq!(*caller_saw.lock().unwrap(), [1.0, 2.0]);
}

#[tokio::test]
async fn in_parallel_mode_done_events_come_in_completion_order_and_items_in_call_order() {
    // `slow` waits until `fast` has finished. Both are declared concurrency-safe: otherwise
    // they would take turns on the registry's lane and `slow` would wait forever.
    let safe = ToolMeta {
        concurrency_safe: Some(true),
        ..ToolMeta::default()
    };
    let fast_finished = Arc::new(Notify::new());
    let trace = Trace::default();
    let (wait, log) = (fast_finished.clone(), trace.clone());
    let slow = tool("slow", any_object(), safe.clone(), move |_, _| {
        let (wait, log) = (wait.clone(), log.clone());
        async move {
            wait.notified().await;
            log.push("slow");
            Ok(ToolOutput::text("slow done"))
        }
    });
    let (done, log) = (fast_finished.clone(), trace.clone());
    let fast = tool("fast", any_object(), safe, move |_, _| {
        let (done, log) = (done.clone(), log.clone());
        async move {
            log.push("fast");
            done.notify_one();
            Ok(ToolOutput::text("fast done"))
        }
    });
    let executor = executor_with([slow, fast], |b| b);
    let calls = [
        ToolCall::new("c_slow", "slow", "{}"),
        ToolCall::new("c_fast", "fast", "{}"),
    ];
    let options = BatchOptions::new().mode(ExecutionMode::Parallel);

    let done = done_items(all_events(&executor, &calls, &options).await);
    let order: Vec<(usize, &str)> = done.iter().map(|(i, item)| (*i, item.call_id())).collect();
    assert_eq!(order, [(1, "c_fast"), (0, "c_slow")]);

    let items = executor
        .execute_batch(&ToolContext::new(), &calls, &options)
        .await;
    let ids: Vec<&str> = items.iter().map(BatchItem::call_id).collect();
    assert_eq!(ids, ["c_slow", "c_fast"], "items in the model's call order");
    assert_eq!(trace.take(), ["fast", "slow", "fast", "slow"]);
}

#[tokio::test]
async fn pending_calls_get_a_done_event_too() {
    let executor = executor_with([echo("echo")], |b| b);
    let calls = [
        ToolCall::new("c1", "client_side", "{}"),
        ToolCall::new("c2", "echo", "{}"),
    ];
    let options = BatchOptions::new().filter(toolbelt_exec::ExecutionFilter::pending_names([
        "client_side",
    ]));
    let mut done = done_items(all_events(&executor, &calls, &options).await);
    done.sort_by_key(|(index, _)| *index);
    assert_eq!(done.len(), 2);
    assert!(done[0].1.is_pending());
    assert_eq!(done[1].1.as_done().unwrap().model_text(), "{}");
}

#[tokio::test]
async fn a_consumer_that_reads_slowly_loses_no_chunk_of_a_long_stream() {
    // More chunks than the event buffer holds, read one at a time.
    let long = StreamingFunctionTool::new(
        "long",
        "Streams 500 numbered chunks",
        |_: ToolContext, _: NoArgs, tx: StreamSender| async move {
            for i in 0..500 {
                tx.send(StreamChunk::new(format!("{i},"))).await?;
            }
            Ok::<(), toolbelt_core::StreamClosed>(())
        },
    )
    .unwrap();
    let executor = executor_with([Arc::new(long) as DynTool], |b| b);
    let calls = [ToolCall::new("c1", "long", "{}")];
    let options = BatchOptions::new();
    let mut events = executor.execute_batch_stream(&ToolContext::new(), &calls, &options);
    let mut texts = Vec::new();
    let mut merged = None;
    while let Some(event) = events.next().await {
        tokio::task::yield_now().await;
        match event {
            BatchEvent::Chunk { chunk, .. } => texts.push(chunk.content.to_text()),
            BatchEvent::Done { item, .. } => merged = Some(item.as_done().unwrap().model_text()),
            BatchEvent::Progress { .. } => {}
        }
    }
    let expected: Vec<String> = (0..500).map(|i| format!("{i},")).collect();
    assert_eq!(texts, expected);
    assert_eq!(merged.unwrap(), expected.concat());
}

/// A streaming tool that sends one chunk and then fails with a transient error, counting
/// its attempts.
struct FlakyStream {
    declaration: toolbelt_core::Declaration,
    attempts: Arc<std::sync::atomic::AtomicU32>,
}

#[async_trait]
impl toolbelt_core::Tool for FlakyStream {
    fn declaration(&self) -> &toolbelt_core::Declaration {
        &self.declaration
    }

    async fn call(&self, _ctx: ToolContext, _args: &str) -> Result<ToolOutput, ToolError> {
        self.attempts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Err(ToolError::failed(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )))
    }

    fn is_streaming(&self) -> bool {
        true
    }

    async fn call_stream(
        &self,
        _ctx: ToolContext,
        _args: &str,
    ) -> Result<toolbelt_core::ToolStream, ToolError> {
        self.attempts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let items: Vec<Result<StreamChunk, ToolError>> = vec![
            Ok(StreamChunk::new("part")),
            Err(ToolError::failed(std::io::Error::from(
                std::io::ErrorKind::BrokenPipe,
            ))),
        ];
        Ok(Box::pin(futures::stream::iter(items)))
    }
}

#[tokio::test]
async fn a_streamed_call_is_not_retried_but_the_same_tool_called_whole_is() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let attempts = Arc::new(AtomicU32::new(0));
    let flaky: DynTool = Arc::new(FlakyStream {
        declaration: toolbelt_core::Declaration::new("flaky", "Streams, then breaks").unwrap(),
        attempts: attempts.clone(),
    });
    let policy = toolbelt_exec::RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
        ..Default::default()
    };
    let executor = executor_with([flaky], |b| b.middleware(toolbelt_exec::Retry::new(policy)));
    let calls = [ToolCall::new("c1", "flaky", "{}")];
    let events = all_events(&executor, &calls, &BatchOptions::new()).await;
    assert_eq!(chunk_texts(&events), ["part"], "the chunk was sent once");
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "a streamed call runs once"
    );
    let (_, item) = done_items(events).pop().unwrap();
    assert!(item.as_done().unwrap().result.is_err());

    attempts.store(0, Ordering::SeqCst);
    let whole = executor
        .invoke_tool(ToolContext::new(), "flaky", "{}")
        .await;
    assert!(whole.is_err());
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        3,
        "called whole, it is retried"
    );
}
