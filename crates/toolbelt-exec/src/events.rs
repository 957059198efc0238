//! The events of a streamed batch: chunks and progress as they happen, and one `Done` per
//! call, carried from the running calls to the consumer through one bounded channel.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
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

/// Where the driver of a batch reports: the channel of a streamed batch, or the result slots
/// of [`Executor::execute_batch`](crate::Executor::execute_batch), which wants only the
/// `Done` items and so skips the channel (about 1,600 instructions per call).
pub(crate) enum Events {
    Stream(mpsc::Sender<BatchEvent>),
    Collect(Mutex<Vec<Option<BatchItem>>>),
}

impl Events {
    /// A streamed batch's events and the receiving end.
    pub(crate) fn channel() -> (Self, mpsc::Receiver<BatchEvent>) {
        let (sender, receiver) = mpsc::channel(EVENT_BUFFER);
        (Self::Stream(sender), receiver)
    }

    /// Slots for the items of a batch of `len` calls.
    pub(crate) fn collect(len: usize) -> Self {
        Self::Collect(Mutex::new((0..len).map(|_| None).collect()))
    }

    /// The collected items, by call index (`None` for a call that never ended).
    pub(crate) fn into_items(self) -> Vec<Option<BatchItem>> {
        match self {
            Self::Collect(items) => items.into_inner().unwrap_or_else(|p| p.into_inner()),
            Self::Stream(_) => Vec::new(),
        }
    }

    /// The context one call runs with, and where its chunks go: in a streamed batch, a
    /// progress sink that forwards to the stream (and to `ctx`'s own sink, if any) and a
    /// chunk sink.
    pub(crate) fn for_call(
        &self,
        ctx: &ToolContext,
        index: usize,
        call_id: &str,
    ) -> (ToolContext, Option<Arc<ChunkSink>>) {
        let Self::Stream(sender) = self else {
            return (ctx.clone(), None);
        };
        let progress = ProgressForward {
            index,
            call_id: call_id.to_string(),
            sender: sender.clone(),
            outer: ctx.wants_progress().then(|| ctx.clone()),
        };
        let chunks = ChunkSink {
            index,
            call_id: call_id.to_string(),
            sender: sender.clone(),
        };
        // Shared: the request that carries it is copied through every layer of every call,
        // and a pointer keeps that as cheap as before streaming existed.
        (
            ctx.clone().with_progress(Arc::new(progress)),
            Some(Arc::new(chunks)),
        )
    }

    /// Reports a call's end. In a streamed batch, waits while the consumer is behind.
    pub(crate) async fn done(&self, index: usize, item: BatchItem) {
        match self {
            // The receiver lives as long as the driver that calls this: this cannot fail.
            Self::Stream(sender) => {
                let _ = sender.send(BatchEvent::Done { index, item }).await;
            }
            Self::Collect(items) => {
                let mut items = items.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(slot) = items.get_mut(index) {
                    *slot = Some(item);
                }
            }
        }
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
