//! Typed function tools: an `async fn(ctx, Args) -> Result<Out, E>` becomes a [`Tool`] in one
//! line, with its input schema generated from `Args`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::declaration::{required_properties, schema_object};
use crate::schema::{is_object_schema, schema_for};
use crate::stream::{StreamSender, ToolStream, collect_stream, tool_stream};
use crate::{
    BoxError, Declaration, Payload, ProgressUpdate, ToolContext, ToolError, ToolMeta, ToolOutput,
};

type CallFn = dyn Fn(
        ToolContext,
        &str,
        &Declaration,
    ) -> Result<BoxFuture<'static, Result<ToolOutput, ToolError>>, ToolError>
    + Send
    + Sync;

/// A tool made from an async function with typed arguments.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use toolbelt_core::{FunctionTool, Tool, ToolContext};
///
/// /// Arguments of `add`.
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs {
///     /// The first addend.
///     a: f64,
///     /// The second addend.
///     b: f64,
/// }
///
/// async fn add(_ctx: ToolContext, args: AddArgs) -> Result<f64, std::convert::Infallible> {
///     Ok(args.a + args.b)
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let tool = FunctionTool::new("add", "Adds two numbers", add)?;
/// let out = tool.call(ToolContext::for_call("c1"), r#"{"a": 2, "b": 3}"#).await?;
/// assert_eq!(out.llm_text(), "5.0");
/// # Ok::<(), toolbelt_core::ToolError>(()) }).unwrap();
/// ```
///
/// # Arguments
///
/// Arguments are decoded with serde; a decoding error names the field and what was expected
/// (`"b: invalid type: string \"x\", expected f64"`). Empty arguments (`""` or whitespace)
/// mean `{}` when the schema has no required properties; otherwise the error names the
/// missing fields.
///
/// # Output
///
/// `Out` is serialized to JSON. A string becomes text for the model; anything else is JSON.
/// When `Out`'s schema describes an object, it is declared as the output schema and the value
/// is also returned as structured output (`without_output_schema` turns that off). Return a
/// [`ToolOutput`] yourself with [`FunctionTool::returning_output`].
#[derive(Clone)]
pub struct FunctionTool {
    declaration: Declaration,
    call: Arc<CallFn>,
}

impl fmt::Debug for FunctionTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionTool")
            .field("declaration", &self.declaration)
            .finish_non_exhaustive()
    }
}

/// Builds the declaration of a typed tool from its argument type.
fn typed_declaration<Args: JsonSchema>(
    name: &str,
    description: &str,
) -> Result<Declaration, ToolError> {
    let mut declaration = Declaration::new(name, description)?;
    let input = schema_for::<Args>();
    if !is_object_schema(&input) {
        return Err(ToolError::InvalidDeclaration {
            tool: name.to_string(),
            reason: "the argument type must serialize as a JSON object (use a struct)".into(),
        });
    }
    declaration.input_schema = input;
    Ok(declaration)
}

/// The output schema generated for `Out`, when it describes an object.
fn typed_output_schema<Out: JsonSchema>() -> Option<crate::JsonObject> {
    let schema = schema_for::<Out>();
    is_object_schema(&schema).then_some(schema)
}

/// Decodes raw arguments into `Args`, applying the empty-arguments rule.
pub fn decode_args<Args: DeserializeOwned>(
    raw: &str,
    declaration: &Declaration,
) -> Result<Args, ToolError> {
    let text = if raw.trim().is_empty() {
        let required = required_properties(&declaration.input_schema);
        if !required.is_empty() {
            return Err(ToolError::invalid_arguments(format!(
                "no arguments given; required: {}",
                required.join(", ")
            )));
        }
        "{}"
    } else {
        raw
    };
    // Fast path: plain serde. Only a failure pays for the second pass that finds the path.
    if let Ok(args) = serde_json::from_str(text) {
        return Ok(args);
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = if path == "." || path.is_empty() {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        };
        ToolError::invalid_arguments(message)
    })
}

/// Turns a serialized typed result into a [`ToolOutput`].
fn typed_output<Out: Serialize>(out: Out, structured: bool) -> Result<ToolOutput, ToolError> {
    let value = serde_json::to_value(out)
        .map_err(|e| ToolError::failed(format!("could not serialize the tool's result: {e}")))?;
    let mut output = match value {
        Value::String(text) => ToolOutput::text(text),
        other => ToolOutput::json(other),
    };
    if structured && let Payload::Json(value @ Value::Object(_)) = &output.for_llm {
        output.structured = Some(value.clone());
    }
    Ok(output)
}

impl FunctionTool {
    /// A tool from `f`, with the input schema generated from `Args` and the output schema from
    /// `Out` (when it describes an object).
    pub fn new<Args, Out, E, F, Fut>(name: &str, description: &str, f: F) -> Result<Self, ToolError>
    where
        Args: DeserializeOwned + JsonSchema + Send + 'static,
        Out: Serialize + JsonSchema + 'static,
        E: Into<BoxError> + 'static,
        F: Fn(ToolContext, Args) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Out, E>> + Send + 'static,
    {
        let mut declaration = typed_declaration::<Args>(name, description)?;
        declaration.output_schema = typed_output_schema::<Out>();
        let call = move |ctx: ToolContext, raw: &str, decl: &Declaration| {
            let args: Args = decode_args(raw, decl)?;
            let structured = decl.output_schema.is_some();
            let fut = f(ctx, args);
            Ok(Box::pin(async move {
                let out = fut.await.map_err(|e| ToolError::from_boxed(e.into()))?;
                typed_output(out, structured)
            }) as BoxFuture<'static, _>)
        };
        Ok(Self {
            declaration,
            call: Arc::new(call),
        })
    }

    /// A tool from `f`, which builds its own [`ToolOutput`] (for text and user views, content
    /// blocks, or result-level errors). No output schema is declared.
    pub fn returning_output<Args, E, F, Fut>(
        name: &str,
        description: &str,
        f: F,
    ) -> Result<Self, ToolError>
    where
        Args: DeserializeOwned + JsonSchema + Send + 'static,
        E: Into<BoxError> + 'static,
        F: Fn(ToolContext, Args) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, E>> + Send + 'static,
    {
        let declaration = typed_declaration::<Args>(name, description)?;
        let call = move |ctx: ToolContext, raw: &str, decl: &Declaration| {
            let args: Args = decode_args(raw, decl)?;
            let fut = f(ctx, args);
            Ok(
                Box::pin(async move { fut.await.map_err(|e| ToolError::from_boxed(e.into())) })
                    as BoxFuture<'static, _>,
            )
        };
        Ok(Self {
            declaration,
            call: Arc::new(call),
        })
    }

    /// Replaces the generated input schema (it must be a JSON object). Arguments are still
    /// decoded into `Args`, so the schema should describe something `Args` accepts.
    pub fn with_input_schema(mut self, schema: Value) -> Result<Self, ToolError> {
        self.declaration.input_schema = schema_object(&self.declaration.name, schema)?;
        Ok(self)
    }

    /// Replaces (or with `None` removes) the output schema.
    pub fn with_output_schema(mut self, schema: Option<Value>) -> Result<Self, ToolError> {
        self.declaration = self.declaration.with_output_schema(schema)?;
        Ok(self)
    }

    /// Declares no output schema and returns no structured output.
    pub fn without_output_schema(mut self) -> Self {
        self.declaration.output_schema = None;
        self
    }

    /// Replaces the behaviour hints.
    pub fn with_meta(mut self, meta: ToolMeta) -> Self {
        self.declaration.meta = meta;
        self
    }

    /// Edits the declaration in place (hints, description) and returns the tool.
    pub fn map_declaration(mut self, edit: impl FnOnce(Declaration) -> Declaration) -> Self {
        let name = self.declaration.name.clone();
        self.declaration = edit(self.declaration);
        self.declaration.name = name;
        self
    }
}

#[async_trait]
impl crate::Tool for FunctionTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        (self.call)(ctx, args, &self.declaration)?.await
    }
}

type StreamFn = dyn Fn(ToolContext, &str, &Declaration, StreamSender) -> Result<BoxFuture<'static, ()>, ToolError>
    + Send
    + Sync;

/// A streaming tool made from an async function that writes chunks to a [`StreamSender`].
///
/// The function runs in its own task. When the consumer drops the stream, the function's next
/// `send` returns `Err(StreamClosed)` and it should return. An error it returns ends the
/// stream with that error. Called as a plain tool, the chunks are merged
/// ([`crate::collect_stream`]).
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use toolbelt_core::{StreamChunk, StreamSender, StreamingFunctionTool, Tool, ToolContext};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Weather {
///     /// A city name.
///     location: String,
/// }
///
/// async fn weather(_ctx: ToolContext, args: Weather, tx: StreamSender) -> Result<(), String> {
///     for part in ["Sunny", ", 25°C in ", &args.location] {
///         if tx.send(StreamChunk::new(part)).await.is_err() {
///             break;
///         }
///     }
///     Ok(())
/// }
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// let tool = StreamingFunctionTool::new("get_weather_stream", "Streams the weather", weather)?;
/// let out = tool.call(ToolContext::new(), r#"{"location":"Paris"}"#).await?;
/// assert_eq!(out.llm_text(), "Sunny, 25°C in Paris");
/// # Ok::<(), toolbelt_core::ToolError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct StreamingFunctionTool {
    declaration: Declaration,
    buffer: usize,
    start: Arc<StreamFn>,
}

impl fmt::Debug for StreamingFunctionTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamingFunctionTool")
            .field("declaration", &self.declaration)
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl StreamingFunctionTool {
    /// A streaming tool from `f`, with the input schema generated from `Args`.
    pub fn new<Args, E, F, Fut>(name: &str, description: &str, f: F) -> Result<Self, ToolError>
    where
        Args: DeserializeOwned + JsonSchema + Send + 'static,
        E: Into<BoxError> + 'static,
        F: Fn(ToolContext, Args, StreamSender) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        let declaration = typed_declaration::<Args>(name, description)?;
        let start = move |ctx: ToolContext, raw: &str, decl: &Declaration, tx: StreamSender| {
            let args: Args = decode_args(raw, decl)?;
            let fut = f(ctx, args, tx.clone());
            Ok(Box::pin(async move {
                let result = fut.await.map_err(|e| ToolError::from_boxed(e.into()));
                if let Err(error) = result {
                    // The consumer may be gone already; then nobody needs the error.
                    let _ = tx.fail(error).await;
                }
            }) as BoxFuture<'static, ()>)
        };
        Ok(Self {
            declaration,
            buffer: 16,
            start: Arc::new(start),
        })
    }

    /// How many chunks may wait unread before the producer's `send` waits (default 16).
    pub fn with_buffer(mut self, chunks: usize) -> Self {
        self.buffer = chunks.max(1);
        self
    }

    /// Replaces the generated input schema (it must be a JSON object).
    pub fn with_input_schema(mut self, schema: Value) -> Result<Self, ToolError> {
        self.declaration.input_schema = schema_object(&self.declaration.name, schema)?;
        Ok(self)
    }

    /// Edits the declaration in place (hints, description) and returns the tool.
    pub fn map_declaration(mut self, edit: impl FnOnce(Declaration) -> Declaration) -> Self {
        let name = self.declaration.name.clone();
        self.declaration = edit(self.declaration);
        self.declaration.name = name;
        self
    }
}

#[async_trait]
impl crate::Tool for StreamingFunctionTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        let stream = self.call_stream(ctx.clone(), args).await?;
        if !ctx.wants_progress() {
            return collect_stream(stream).await;
        }
        // Someone watches this call: report every chunk as it arrives, then merge as usual.
        let mut count = 0.0;
        let reported = stream.inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                count += 1.0;
                ctx.report_progress(
                    ProgressUpdate::new(count).with_message(chunk.content.to_text()),
                );
            }
        });
        collect_stream(Box::pin(reported)).await
    }

    fn is_streaming(&self) -> bool {
        true
    }

    async fn call_stream(&self, ctx: ToolContext, args: &str) -> Result<ToolStream, ToolError> {
        let (tx, stream) = tool_stream(self.buffer);
        let producer = (self.start)(ctx, args, &self.declaration, tx)?;
        tokio::spawn(producer);
        Ok(stream)
    }
}
