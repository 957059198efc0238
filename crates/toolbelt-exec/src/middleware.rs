//! Middleware: layers around the tool call itself, like tower's.
//!
//! The chain is an onion: the first middleware added is the outermost, so it sees the call
//! first and the result last. Hooks run outside the whole chain.

use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::BoxFuture;
use toolbelt_core::{DynTool, ToolContext, ToolError, ToolOutput};

use crate::events::ChunkSink;

/// The call a middleware handles: the resolved tool and the arguments it will get.
///
/// Cloning is cheap (a few `Arc`s), so a middleware such as retry can run the rest of the
/// chain more than once. The executor makes requests; a middleware may change their fields.
#[derive(Clone)]
pub struct ToolRequest {
    /// The tool about to run.
    pub tool: DynTool,
    /// The call's `tool_call_id` (empty for programmatic calls that gave none).
    pub call_id: Arc<str>,
    /// The argument text the tool will receive (after repair, validation and hooks).
    pub arguments: Arc<str>,
    /// Where a streaming tool's chunks go, in a streamed batch.
    pub(crate) chunks: Option<Arc<ChunkSink>>,
}

impl std::fmt::Debug for ToolRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRequest")
            .field("tool", &self.tool.name())
            .field("call_id", &self.call_id)
            .field("arguments", &self.arguments)
            .finish()
    }
}

impl ToolRequest {
    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        self.tool.name()
    }
}

/// A layer around tool calls.
///
/// A middleware receives the context, the request and [`Next`], the rest of the chain. It
/// may change the context (a child token, a deadline), change the request, run `next` zero
/// times (answer itself), once, or several times (retry), and inspect or change the result.
///
/// ```
/// use toolbelt_core::{ToolContext, ToolError, ToolOutput, async_trait};
/// use toolbelt_exec::{Middleware, Next, ToolRequest};
///
/// /// Appends a signature to every text result.
/// struct Sign;
///
/// #[async_trait]
/// impl Middleware for Sign {
///     async fn handle(&self, ctx: ToolContext, req: ToolRequest, next: Next<'_>)
///         -> Result<ToolOutput, ToolError>
///     {
///         let out = next.run(ctx, req).await?;
///         Ok(ToolOutput { for_llm: format!("{} (signed)", out.llm_text()).into(), ..out })
///     }
/// }
/// ```
#[async_trait]
pub trait Middleware: Send + Sync {
    /// Handles one call; call `next.run(ctx, req)` to go on to the tool.
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError>;
}

/// A shared middleware.
pub type DynMiddleware = Arc<dyn Middleware>;

/// The rest of the middleware chain, ending in the tool. `Copy`, so it can be run again.
#[derive(Clone, Copy)]
pub struct Next<'a> {
    chain: &'a [DynMiddleware],
}

impl std::fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Next({} middleware left)", self.chain.len())
    }
}

impl<'a> Next<'a> {
    pub(crate) fn new(chain: &'a [DynMiddleware]) -> Self {
        Self { chain }
    }

    /// Runs the rest of the chain and then the tool.
    ///
    /// A panic in the tool is caught here and becomes [`ToolError::Panicked`], so outer
    /// middleware (retry, audit) see it as an ordinary error.
    pub async fn run(self, ctx: ToolContext, req: ToolRequest) -> Result<ToolOutput, ToolError> {
        match self.chain.split_first() {
            Some((first, rest)) => first.handle(ctx, req, Next { chain: rest }).await,
            None => call_tool(ctx, req).await,
        }
    }
}

/// Calls the tool, turning a panic into an error. In a streamed batch a streaming tool is
/// called with `call_stream`, its chunks forwarded as they arrive and merged into one output.
async fn call_tool(ctx: ToolContext, req: ToolRequest) -> Result<ToolOutput, ToolError> {
    // Either way one boxed future, so the common path's future stays as small as before.
    let call: BoxFuture<'_, Result<ToolOutput, ToolError>> = match &req.chunks {
        Some(chunks) if req.tool.is_streaming() => Box::pin(async {
            let stream = req.tool.call_stream(ctx, &req.arguments).await?;
            chunks.forward(stream).await
        }),
        _ => req.tool.call(ctx, &req.arguments),
    };
    match std::panic::AssertUnwindSafe(call).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(ToolError::Panicked(panic_message(payload.as_ref()))),
    }
}

/// The message of a caught panic.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
