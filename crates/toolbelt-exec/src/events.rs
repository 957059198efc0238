//! The events of a streamed batch: chunks and progress as they happen, and one `Done` per
//! call, carried from the running calls to the consumer through one bounded channel.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use toolbelt_core::{
    ProgressSink, ProgressUpdate, StreamChunk, ToolContext, ToolError, ToolOutput, ToolStream,
    collect_stream,
};

use crate::BatchItem;

/// How many events wait for the consumer before chunk producers wait too (and progress
/// reports are dropped).
const EVENT_BUFFER: usize = 32;

/// What happens in a batch run with
/// [`Executor::execute_batch_stream`](crate::Executor::execute_batch_stream).
// Nearly every event is small next to `Done`; boxing it would cost an allocation per call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum BatchEvent {
    /// A chunk a streaming tool produced, as it arrives.
    Chunk {
        /// The call's position in the batch.
        index: usize,
        /// The call's `tool_call_id`.
        call_id: String,
        /// The chunk.
        chunk: StreamChunk,
    },
    /// A progress report from a running call
    /// ([`ToolContext::report_progress`](toolbelt_core::ToolContext::report_progress)).
    Progress {
        /// The call's position in the batch.
        index: usize,
        /// The call's `tool_call_id`.
        call_id: String,
        /// The report.
        update: ProgressUpdate,
    },
    /// One call is over (or handed back as [`BatchItem::Pending`]): arrives as each call
    /// ends, in completion order. Every call yields exactly one.
    Done {
        /// The call's position in the batch.
        index: usize,
        /// What happened to it.
        item: BatchItem,
    },
}

/// The stream [`Executor::execute_batch_stream`](crate::Executor::execute_batch_stream)
/// returns. The batch runs while the stream is polled; dropping it drops every running call.
pub struct BatchStream<'a> {
    /// Schedules and runs the calls; `None` once every call is done.
    driver: Option<Pin<Box<dyn Future<Output = ()> + Send + 'a>>>,
    receiver: mpsc::Receiver<BatchEvent>,
}

impl std::fmt::Debug for BatchStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchStream")
            .field("running", &self.driver.is_some())
            .finish()
    }
}

impl<'a> BatchStream<'a> {
    pub(crate) fn new(
        driver: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
        receiver: mpsc::Receiver<BatchEvent>,
    ) -> Self {
        Self {
            driver: Some(driver),
            receiver,
        }
    }
}

impl Stream for BatchStream<'_> {
    type Item = BatchEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<BatchEvent>> {
        let this = self.get_mut();
        // Queued events first: the calls only go on once the consumer has caught up, which
        // keeps the queue short.
        if let Poll::Ready(Some(event)) = this.receiver.poll_recv(cx) {
            return Poll::Ready(Some(event));
        }
        if let Some(driver) = &mut this.driver
            && driver.as_mut().poll(cx).is_ready()
        {
            this.driver = None;
        }
        match this.receiver.try_recv() {
            Ok(event) => Poll::Ready(Some(event)),
            // Every `Done` was sent before the driver ended; a progress report from a task a
            // tool left behind after its call ended has nobody to go to.
            Err(_) if this.driver.is_none() => Poll::Ready(None),
            Err(_) => Poll::Pending,
        }
    }
}

/// The sending side of a batch's events.
pub(crate) struct Events {
    sender: mpsc::Sender<BatchEvent>,
    /// Whether chunks and progress are wanted (a streamed batch) or only `Done`s.
    forward: bool,
}

impl Events {
    pub(crate) fn channel(forward: bool) -> (Self, mpsc::Receiver<BatchEvent>) {
        let (sender, receiver) = mpsc::channel(EVENT_BUFFER);
        (Self { sender, forward }, receiver)
    }

    /// The context one call runs with, and where its chunks go: a progress sink that forwards
    /// to the stream (and to `ctx`'s own sink, if any), when chunks and progress are wanted.
    pub(crate) fn for_call(
        &self,
        ctx: &ToolContext,
        index: usize,
        call_id: &str,
    ) -> (ToolContext, Option<ChunkSink>) {
        if !self.forward {
            return (ctx.clone(), None);
        }
        let progress = ProgressForward {
            index,
            call_id: call_id.to_string(),
            sender: self.sender.clone(),
            outer: ctx.wants_progress().then(|| ctx.clone()),
        };
        let chunks = ChunkSink {
            index,
            call_id: call_id.to_string(),
            sender: self.sender.clone(),
        };
        (ctx.clone().with_progress(Arc::new(progress)), Some(chunks))
    }

    /// Reports a call's end. Waits while the consumer is behind.
    pub(crate) async fn done(&self, index: usize, item: BatchItem) {
        // The receiver lives as long as the driver that calls this, so this cannot fail.
        let _ = self.sender.send(BatchEvent::Done { index, item }).await;
    }
}

/// Forwards a call's progress reports to the batch's stream.
struct ProgressForward {
    index: usize,
    call_id: String,
    sender: mpsc::Sender<BatchEvent>,
    /// The caller's context, when it watches progress itself.
    outer: Option<ToolContext>,
}

impl ProgressSink for ProgressForward {
    fn report(&self, update: ProgressUpdate) {
        if let Some(outer) = &self.outer {
            outer.report_progress(update.clone());
        }
        // A sink must not block: when the consumer is behind, the report is dropped (a later
        // one says more anyway).
        let _ = self.sender.try_send(BatchEvent::Progress {
            index: self.index,
            call_id: self.call_id.clone(),
            update,
        });
    }
}

/// Where the innermost step of a streamed batch's call sends its chunks.
#[derive(Clone)]
pub(crate) struct ChunkSink {
    index: usize,
    call_id: String,
    sender: mpsc::Sender<BatchEvent>,
}

impl ChunkSink {
    /// Reads a streaming tool's `stream` to its end, sending each chunk to the batch's
    /// stream as it arrives, and merges the chunks as [`collect_stream`] does.
    pub(crate) async fn forward(&self, stream: ToolStream) -> Result<ToolOutput, ToolError> {
        let sink = self.clone();
        let forwarding = stream.then(move |item| {
            let sink = sink.clone();
            async move {
                if let Ok(chunk) = &item {
                    let event = BatchEvent::Chunk {
                        index: sink.index,
                        call_id: sink.call_id,
                        chunk: chunk.clone(),
                    };
                    // Waits while the consumer is behind; fails only once the stream is
                    // dropped, and then this call is being dropped too.
                    let _ = sink.sender.send(event).await;
                }
                item
            }
        });
        collect_stream(Box::pin(forwarding)).await
    }
}
