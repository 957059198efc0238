//! The [`Tool`] trait: a declaration plus a call.

use std::sync::Arc;

use async_trait::async_trait;

use crate::stream::{ToolStream, single_chunk_stream};
use crate::{Declaration, ToolContext, ToolError, ToolOutput};

/// A tool a model can call.
///
/// The trait is object-safe; tools are shared as [`DynTool`] (`Arc<dyn Tool>`).
///
/// # Arguments are raw JSON text
///
/// [`Tool::call`] takes the arguments as the `&str` the model produced, not as a parsed
/// `serde_json::Value` or `RawValue`:
/// - OpenAI-compatible models deliver arguments as a string, which may be empty, so a `&str`
///   is what arrives and nothing is parsed twice on the way in;
/// - an empty string is a legal "no arguments" that a `RawValue` cannot hold;
/// - a typed tool deserializes straight from the text into its argument struct.
///
/// When a tool runs through the executor, the text has been repaired (if enabled) and
/// validated against [`Declaration::input_schema`]; called directly, it has not.
///
/// # Streaming
///
/// A streaming tool overrides [`Tool::call_stream`] and [`Tool::is_streaming`], and implements
/// `call` by merging its chunks ([`crate::collect_stream`]), so every consumer can use it.
/// The default `call_stream` yields `call`'s result as one chunk.
#[async_trait]
pub trait Tool: Send + Sync {
    /// What the model is told about this tool.
    fn declaration(&self) -> &Declaration;

    /// Runs the tool with raw JSON arguments.
    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError>;

    /// Whether [`Tool::call_stream`] produces output incrementally.
    fn is_streaming(&self) -> bool {
        false
    }

    /// Runs the tool and returns its output as a stream of chunks.
    ///
    /// Dropping the stream tells the producer to stop: its next send reports the stream
    /// closed.
    async fn call_stream(&self, ctx: ToolContext, args: &str) -> Result<ToolStream, ToolError> {
        let output = self.call(ctx, args).await?;
        Ok(single_chunk_stream(output))
    }

    /// The tool's name (shorthand for `declaration().name`).
    fn name(&self) -> &str {
        &self.declaration().name
    }

    /// A fingerprint of everything besides its arguments that this call's result depends
    /// on, for a result cache (`toolbelt_exec::ResultCache`); `None` (the default) means the
    /// result must not be cached.
    ///
    /// A cache serves a stored result only when the tool's name, its canonical arguments
    /// (`args`, after repair) and this fingerprint are all equal to the stored ones, and only
    /// for tools declared read-only. So the fingerprint must change whenever the result could:
    /// a file's identity, size and times for a file reader, the base directory and settings
    /// the tool runs with. Return `None` when that cannot be told cheaply. Wrappers that
    /// delegate [`Tool::call`] should delegate this too.
    async fn cache_fingerprint(
        &self,
        ctx: &ToolContext,
        args: &serde_json::Value,
    ) -> Option<String> {
        let _ = (ctx, args);
        None
    }
}

/// A shared, type-erased tool.
pub type DynTool = Arc<dyn Tool>;

#[async_trait]
impl<T: Tool + ?Sized> Tool for Arc<T> {
    fn declaration(&self) -> &Declaration {
        (**self).declaration()
    }
    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        (**self).call(ctx, args).await
    }
    fn is_streaming(&self) -> bool {
        (**self).is_streaming()
    }
    async fn call_stream(&self, ctx: ToolContext, args: &str) -> Result<ToolStream, ToolError> {
        (**self).call_stream(ctx, args).await
    }
    async fn cache_fingerprint(
        &self,
        ctx: &ToolContext,
        args: &serde_json::Value,
    ) -> Option<String> {
        (**self).cache_fingerprint(ctx, args).await
    }
}
