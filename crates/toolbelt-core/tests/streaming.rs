//! Streaming tools: consumed to the end, dropped early, called as plain tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::oneshot;
use toolbelt_core::{
    Payload, StreamChunk, StreamClosed, StreamSender, StreamingFunctionTool, Tool, ToolContext,
    ToolError,
};

#[derive(Deserialize, JsonSchema)]
struct Count {
    /// How many chunks to produce.
    n: usize,
}

#[tokio::test]
async fn a_stream_consumed_to_the_end_yields_every_chunk_in_order() {
    let tool = StreamingFunctionTool::new(
        "count",
        "Counts",
        |_ctx, c: Count, tx: StreamSender| async move {
            for i in 0..c.n {
                if tx.send(StreamChunk::new(format!("{i} "))).await.is_err() {
                    break;
                }
            }
            Ok::<_, ToolError>(())
        },
    )
    .unwrap();
    assert!(tool.is_streaming());
    let mut stream = tool
        .call_stream(ToolContext::new(), r#"{"n": 50}"#)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert!(chunk.metadata.created_at <= std::time::SystemTime::now());
        seen.push(chunk.content.to_text());
    }
    let expected: Vec<String> = (0..50).map(|i| format!("{i} ")).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn dropping_the_stream_early_tells_the_producer_it_is_closed() {
    let (done_tx, done_rx) = oneshot::channel::<(usize, bool)>();
    let done_tx = Arc::new(std::sync::Mutex::new(Some(done_tx)));
    let tool = StreamingFunctionTool::new(
        "endless",
        "Never stops by itself",
        move |_ctx, _c: Count, tx: StreamSender| {
            let done_tx = done_tx.clone();
            async move {
                let mut sent = 0;
                let closed = loop {
                    match tx.send(StreamChunk::new("x")).await {
                        Ok(()) => sent += 1,
                        Err(StreamClosed) => break true,
                    }
                    if sent > 10_000 {
                        break false;
                    }
                };
                if let Some(done) = done_tx.lock().unwrap().take() {
                    let _ = done.send((sent, closed));
                }
                Ok::<_, ToolError>(())
            }
        },
    )
    .unwrap()
    .with_buffer(2);

    let mut stream = tool
        .call_stream(ToolContext::new(), r#"{"n": 0}"#)
        .await
        .unwrap();
    for _ in 0..3 {
        stream.next().await.unwrap().unwrap();
    }
    drop(stream);
    let (sent, closed) = tokio::time::timeout(Duration::from_secs(5), done_rx)
        .await
        .expect("the producer stops once the consumer is gone")
        .unwrap();
    assert!(closed, "the producer's send reported the stream closed");
    assert!(
        sent < 10,
        "the producer stopped soon after the drop (sent {sent})"
    );
}

#[tokio::test]
async fn a_streaming_tool_called_as_a_plain_tool_merges_its_chunks() {
    let text = StreamingFunctionTool::new(
        "words",
        "Words",
        |_ctx, c: Count, tx: StreamSender| async move {
            for word in ["Sunny", ", ", "25°C"].into_iter().take(c.n) {
                tx.send(StreamChunk::new(word)).await?;
            }
            Ok::<_, StreamClosed>(())
        },
    )
    .unwrap();
    let out = text.call(ToolContext::new(), r#"{"n": 3}"#).await.unwrap();
    assert_eq!(out.for_llm, Payload::Text("Sunny, 25°C".into()));

    let json_tool = StreamingFunctionTool::new(
        "weather",
        "Weather",
        |_ctx, _c: Count, tx: StreamSender| async move {
            for w in ["S", "u"] {
                tx.send(StreamChunk::new(json!({"weather": w}))).await?;
            }
            Ok::<_, StreamClosed>(())
        },
    )
    .unwrap();
    let out = json_tool
        .call(ToolContext::new(), r#"{"n": 0}"#)
        .await
        .unwrap();
    assert_eq!(
        out.for_llm,
        Payload::Json(json!([{"weather": "S"}, {"weather": "u"}]))
    );
}

#[tokio::test]
async fn a_producer_error_ends_the_stream_with_that_error() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let tool = StreamingFunctionTool::new(
        "flaky",
        "Fails midway",
        move |_ctx, _c: Count, tx: StreamSender| {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                tx.send(StreamChunk::new("partial"))
                    .await
                    .map_err(ToolError::failed)?;
                Err(ToolError::failed("upstream went away"))
            }
        },
    )
    .unwrap();
    let err = tool
        .call(ToolContext::new(), r#"{"n":1}"#)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "upstream went away");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let err = tool
        .call_stream(ToolContext::new(), r#"{"n":"x"}"#)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ToolError::InvalidArguments { .. }));
}

#[tokio::test]
async fn a_plain_tool_streams_as_one_chunk() {
    #[derive(Deserialize, JsonSchema)]
    struct E {}
    let tool = toolbelt_core::FunctionTool::new("one", "One", |_ctx, _e: E| async move {
        Ok::<_, ToolError>("whole".to_string())
    })
    .unwrap();
    assert!(!tool.is_streaming());
    let chunks: Vec<_> = tool
        .call_stream(ToolContext::new(), "{}")
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].as_ref().unwrap().content.to_text(), "whole");
}

#[tokio::test]
async fn a_watched_streaming_call_reports_each_chunk_as_progress() {
    use std::sync::Mutex;
    use toolbelt_core::ProgressUpdate;

    let tool = StreamingFunctionTool::new(
        "words",
        "Words",
        |_ctx, c: Count, tx: StreamSender| async move {
            for i in 0..c.n {
                tx.send(StreamChunk::new(format!("w{i}"))).await?;
            }
            Ok::<_, StreamClosed>(())
        },
    )
    .unwrap();
    let seen: Arc<Mutex<Vec<ProgressUpdate>>> = Arc::default();
    let sink = seen.clone();
    let ctx = ToolContext::new().with_progress(Arc::new(move |u: ProgressUpdate| {
        sink.lock().unwrap().push(u);
    }));
    let out = tool.call(ctx, r#"{"n": 3}"#).await.unwrap();
    assert_eq!(out.llm_text(), "w0w1w2");
    let seen = seen.lock().unwrap();
    let progress: Vec<(f64, Option<&str>)> = seen
        .iter()
        .map(|u| (u.progress, u.message.as_deref()))
        .collect();
    assert_eq!(
        progress,
        [(1.0, Some("w0")), (2.0, Some("w1")), (3.0, Some("w2"))]
    );
}
