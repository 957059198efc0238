//! OpenTelemetry export of the `gen_ai` spans (feature `otel`).
//!
//! The library crates open spans of target `gen_ai` for runs (`invoke_agent`), model calls
//! (`chat`) and tool calls (`execute_tool`), with the attributes of the OpenTelemetry GenAI
//! semantic conventions. Without a subscriber that enables them they are never built. This
//! module adds one, a `tracing-opentelemetry` layer that sees only that target, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set; the exporter
//! reads the other standard variables itself (`OTEL_EXPORTER_OTLP_HEADERS`, `..._TIMEOUT`,
//! `OTEL_SERVICE_NAME`).
//!
//! Spans go out in batches from the processor's own thread over OTLP/HTTP (protobuf), and
//! [`Telemetry::shutdown`] flushes what is left: `main` calls it after every command, whether
//! it succeeded, failed or was stopped by SIGINT (the commands return normally then).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::common::CliError;

/// The target of the spans this layer exports (the library crates' `gen_ai` spans).
const TARGET: &str = "gen_ai";

/// The exporter while the command runs; flush it with [`Telemetry::shutdown`].
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Sends the spans still buffered and stops the exporter. Failures are reported on stderr,
    /// never change the exit code: the command's own outcome matters more.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("toolbelt: could not send the last OpenTelemetry spans: {error}");
        }
    }
}

/// Whether an OTLP endpoint is configured in the environment.
fn endpoint_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

/// The layer exporting `gen_ai` spans, or `None` when no endpoint is configured. Must be
/// called outside the async runtime: the exporter's blocking HTTP client owns a runtime.
pub fn layer<S>() -> Result<Option<(impl Layer<S> + Send + Sync, Telemetry)>, CliError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    if !endpoint_configured() {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| CliError::failed(format!("cannot set up the OTLP exporter: {e}")))?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("toolbelt");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("toolbelt");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        // Only the `gen_ai` spans: the fmt layer's events stay in the log.
        .with_filter(Targets::new().with_target(TARGET, tracing::Level::INFO));
    Ok(Some((layer, Telemetry { provider })))
}
