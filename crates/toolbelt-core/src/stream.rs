//! Streaming tool output: chunks, a bounded channel whose producer sees the consumer leave,
//! and merging a stream into one [`ToolOutput`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::{ContentBlock, Payload, ToolError, ToolOutput};

/// Metadata attached to a chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkMetadata {
    /// When the producer made the chunk.
    pub created_at: SystemTime,
}

impl Default for ChunkMetadata {
    fn default() -> Self {
        Self {
            created_at: SystemTime::now(),
        }
    }
}

/// One piece of a streaming tool's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    /// The content: text or JSON.
    pub content: Payload,
    /// Content blocks carried by this chunk (rare; images produced along the way).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<ContentBlock>,
    /// When it was made, and so on.
    pub metadata: ChunkMetadata,
}

impl StreamChunk {
    /// A chunk stamped now.
    pub fn new(content: impl Into<Payload>) -> Self {
        Self {
            content: content.into(),
            blocks: Vec::new(),
            metadata: ChunkMetadata::default(),
        }
    }
}

/// A stream of chunks, as returned by [`crate::Tool::call_stream`].
pub type ToolStream = Pin<Box<dyn Stream<Item = Result<StreamChunk, ToolError>> + Send>>;

/// The producer's end of a tool stream.
#[derive(Debug, Clone)]
pub struct StreamSender {
    tx: mpsc::Sender<Result<StreamChunk, ToolError>>,
}

/// The consumer dropped the stream; the producer should stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the stream's consumer is gone")]
pub struct StreamClosed;

impl StreamSender {
    /// Sends a chunk, waiting while the buffer is full. `Err(StreamClosed)` means the consumer
    /// dropped the stream: stop producing.
    pub async fn send(&self, chunk: StreamChunk) -> Result<(), StreamClosed> {
        self.tx.send(Ok(chunk)).await.map_err(|_| StreamClosed)
    }

    /// Ends the stream with an error.
    pub async fn fail(&self, error: ToolError) -> Result<(), StreamClosed> {
        self.tx.send(Err(error)).await.map_err(|_| StreamClosed)
    }

    /// Whether the consumer has dropped the stream.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Completes when the consumer drops the stream.
    pub async fn closed(&self) {
        self.tx.closed().await
    }
}

struct ReceiverStream(mpsc::Receiver<Result<StreamChunk, ToolError>>);

impl Stream for ReceiverStream {
    type Item = Result<StreamChunk, ToolError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// A bounded channel for a streaming tool: the producer sends, the consumer reads the
/// [`ToolStream`]. The stream ends when every sender is dropped.
///
/// ```
/// # tokio_test();
/// # fn tokio_test() { tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use futures::StreamExt;
/// use toolbelt_core::{StreamChunk, tool_stream};
///
/// let (tx, mut stream) = tool_stream(4);
/// tokio::spawn(async move {
///     for word in ["Sunny", ", ", "25°C"] {
///         if tx.send(StreamChunk::new(word)).await.is_err() {
///             break; // the consumer left
///         }
///     }
/// });
/// let mut text = String::new();
/// while let Some(chunk) = stream.next().await {
///     text += &chunk.unwrap().content.to_text();
/// }
/// assert_eq!(text, "Sunny, 25°C");
/// # }) }
/// ```
pub fn tool_stream(buffer: usize) -> (StreamSender, ToolStream) {
    let (tx, rx) = mpsc::channel(buffer.max(1));
    (StreamSender { tx }, Box::pin(ReceiverStream(rx)))
}

/// A stream holding one chunk made from `output` (used to stream non-streaming tools).
pub fn single_chunk_stream(output: ToolOutput) -> ToolStream {
    let chunk = StreamChunk {
        content: output.for_llm,
        blocks: output.blocks,
        metadata: ChunkMetadata::default(),
    };
    Box::pin(futures::stream::iter([Ok(chunk)]))
}

/// Reads a stream to its end and merges it into one output.
///
/// Text chunks are concatenated. If any chunk is JSON, the result is a JSON array of every
/// chunk's content in order (text chunks as strings), so nothing is lost. Blocks are kept in
/// order. The first error ends the merge and is returned.
pub async fn collect_stream(mut stream: ToolStream) -> Result<ToolOutput, ToolError> {
    let mut contents = Vec::new();
    let mut blocks = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        contents.push(chunk.content);
        blocks.extend(chunk.blocks);
    }
    let all_text = contents.iter().all(|c| matches!(c, Payload::Text(_)));
    let for_llm = if all_text {
        Payload::Text(contents.iter().map(Payload::to_text).collect())
    } else {
        let values = contents
            .into_iter()
            .map(|c| match c {
                Payload::Text(t) => Value::String(t),
                Payload::Json(v) => v,
            })
            .collect();
        Payload::Json(Value::Array(values))
    };
    Ok(ToolOutput {
        for_llm,
        blocks,
        ..ToolOutput::default()
    })
}
