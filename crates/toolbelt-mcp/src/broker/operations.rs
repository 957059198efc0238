//! The broker's operations: resolve a selector to a target, apply the ad-hoc policy, ask
//! the header injector, run the step on a pooled connection under the operation timeout,
//! and pass failures of HTTP servers through the error interceptor.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use serde_json::Value;
use toolbelt_core::{DynTool, Payload, ToolContext, ToolOutput, ToolSet};

use super::hooks::{BrokerErrorRequest, ErrorDecision, HeaderInjectRequest, Phase, mcp_error_of};
use super::pool::PoolKey;
use super::selector::{Target, format_tool_selector, parse_server_selector, parse_tool_selector};
use super::signature::render_signature;
use super::wire::{
    AdHocTransport, CallArgs, CallResult, InspectToolsArgs, ListToolsArgs, ServerList,
    ServerSummary, ToolDetail, ToolDetails, ToolList, ToolSummary,
};
use super::{BrokerError, Inner, pooled_set};
use crate::client::McpToolSet;
use crate::config::{ConnectionConfig, TransportConfig};
use crate::error::Step;

/// A selector's target, checked against the policy, with everything needed to connect.
struct Resolved {
    target: Target,
    config: ConnectionConfig,
    transport: Option<AdHocTransport>,
    model_headers: Vec<(String, String)>,
}

impl Resolved {
    fn name(&self) -> &str {
        match &self.target {
            Target::Named(name) | Target::Url(name) => name,
        }
    }

    fn is_ad_hoc(&self) -> bool {
        matches!(self.target, Target::Url(_))
    }

    fn is_http(&self) -> bool {
        !matches!(self.config.transport, TransportConfig::Stdio { .. })
    }
}

/// Who asked for what: the parts of an operation the hooks are told about.
struct Operation<'a> {
    selector: &'a str,
    phase: Phase,
    tool: Option<&'a str>,
}

impl Inner {
    fn names(&self) -> Vec<&str> {
        self.server_names.iter().map(String::as_str).collect()
    }

    pub(crate) fn list_servers(&self) -> ServerList {
        ServerList {
            servers: self
                .servers
                .iter()
                .map(|(name, config)| ServerSummary {
                    name: name.clone(),
                    transport: config.transport.kind().to_string(),
                    description: config.description.clone(),
                })
                .collect(),
        }
    }

    pub(crate) async fn list_tools(
        &self,
        ctx: &ToolContext,
        args: ListToolsArgs,
    ) -> Result<ToolList, BrokerError> {
        let selector = args.selector.trim();
        let target = parse_server_selector(selector, &self.names())?;
        let resolved = self.resolve(target, args.transport, args.headers.as_ref())?;
        let op = Operation {
            selector,
            phase: Phase::ListTools,
            tool: None,
        };
        let mut tools = self
            .run(ctx, &resolved, &op, |ctx, set| async move {
                listed(&ctx, &set).await
            })
            .await?;
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        let tools = tools
            .iter()
            .map(|tool| {
                let decl = tool.declaration();
                ToolSummary {
                    name: decl.name.to_string(),
                    selector: format_tool_selector(&resolved.target, &decl.name),
                    signature: render_signature(
                        &decl.name,
                        &decl.input_schema,
                        decl.output_schema.as_ref(),
                    ),
                    description: first_line(&decl.description),
                }
            })
            .collect();
        Ok(ToolList {
            server: resolved.name().to_string(),
            tools,
        })
    }

    pub(crate) async fn inspect_tools(
        &self,
        ctx: &ToolContext,
        args: InspectToolsArgs,
    ) -> Result<ToolDetails, BrokerError> {
        let selector = args.selector.trim();
        let target = parse_server_selector(selector, &self.names())?;
        let mut wanted: Vec<&str> = Vec::with_capacity(args.tools.len());
        for name in &args.tools {
            if !wanted.contains(&name.as_str()) {
                wanted.push(name);
            }
        }
        if wanted.is_empty() {
            return Err(BrokerError::NoToolsNamed);
        }
        let resolved = self.resolve(target, args.transport, args.headers.as_ref())?;
        let op = Operation {
            selector,
            phase: Phase::InspectTools,
            tool: None,
        };
        let tools = self
            .run(ctx, &resolved, &op, |ctx, set| async move {
                listed(&ctx, &set).await
            })
            .await?;
        let unknown: Vec<String> = wanted
            .iter()
            .filter(|name| !tools.iter().any(|t| t.name() == **name))
            .map(|name| name.to_string())
            .collect();
        if !unknown.is_empty() {
            return Err(unknown_tools(&resolved, unknown, &tools));
        }
        let details = wanted
            .iter()
            .filter_map(|name| tools.iter().find(|t| t.name() == *name))
            .map(|tool| {
                let decl = tool.declaration();
                ToolDetail {
                    name: decl.name.to_string(),
                    selector: format_tool_selector(&resolved.target, &decl.name),
                    description: decl.description.clone(),
                    input_schema: decl.input_schema.clone(),
                    output_schema: if args.include_output_schema == Some(true) {
                        decl.output_schema.clone()
                    } else {
                        None
                    },
                }
            })
            .collect();
        Ok(ToolDetails { tools: details })
    }

    pub(crate) async fn call(
        &self,
        ctx: &ToolContext,
        args: CallArgs,
    ) -> Result<ToolOutput, BrokerError> {
        let selector = args.selector.trim();
        let parsed = parse_tool_selector(selector, &self.names())?;
        let resolved = self.resolve(parsed.target, args.transport, args.headers.as_ref())?;
        let tool_name = parsed.tool.as_str();
        let op = Operation {
            selector,
            phase: Phase::CallTool,
            tool: Some(tool_name),
        };
        let arguments = &args.arguments;
        let resolved = &resolved;
        self.run(ctx, resolved, &op, |ctx, set| async move {
            let tools = listed(&ctx, &set).await?;
            let Some(tool) = tools.iter().find(|t| t.name() == tool_name) else {
                return Err(unknown_tools(resolved, vec![tool_name.to_string()], &tools));
            };
            let decl = tool.declaration();
            let missing: Vec<String> = decl
                .required_properties()
                .into_iter()
                .filter(|name| !arguments.contains_key(*name))
                .map(str::to_string)
                .collect();
            if !missing.is_empty() {
                return Err(BrokerError::MissingArguments {
                    selector: format_tool_selector(&resolved.target, tool_name),
                    missing,
                });
            }
            let text = Value::Object(arguments.clone()).to_string();
            let out = tool.call(ctx, &text).await.map_err(BrokerError::Remote)?;
            Ok(call_output(out))
        })
        .await
    }

    /// Checks `target` against the policy and works out how to reach it.
    fn resolve(
        &self,
        target: Target,
        transport: Option<AdHocTransport>,
        headers: Option<&BTreeMap<String, String>>,
    ) -> Result<Resolved, BrokerError> {
        match target {
            Target::Named(name) => {
                if transport.is_some() || headers.is_some_and(|h| !h.is_empty()) {
                    tracing::debug!(server = %name, "ignoring the model's transport and headers for a named server");
                }
                let config = self.servers.get(&name).cloned().ok_or_else(|| {
                    // The parser only returns configured names; keep a clear error anyway.
                    BrokerError::Selector(super::SelectorError::UnknownServer {
                        given: name.clone(),
                        known: self.server_names.clone(),
                    })
                })?;
                Ok(Resolved {
                    target: Target::Named(name),
                    config,
                    transport: None,
                    model_headers: Vec::new(),
                })
            }
            Target::Url(url) => {
                self.policy.check_url(&url, &self.server_names)?;
                let model_headers = match headers {
                    Some(headers) => self.policy.check_headers(headers)?,
                    None => Vec::new(),
                };
                let transport = transport.unwrap_or_default();
                let config = ConnectionConfig::new(match transport {
                    AdHocTransport::StreamableHttp => TransportConfig::streamable_http(&url),
                    AdHocTransport::Sse => TransportConfig::sse(&url),
                })
                .with_timeout(self.ad_hoc_timeout);
                Ok(Resolved {
                    target: Target::Url(url),
                    config,
                    transport: Some(transport),
                    model_headers,
                })
            }
        }
    }

    /// The headers of one operation: the model's (ad-hoc only, already checked), then the
    /// injector's, which win. Empty for stdio servers.
    async fn operation_headers(
        &self,
        ctx: &ToolContext,
        resolved: &Resolved,
        op: &Operation<'_>,
    ) -> Result<Vec<(String, String)>, BrokerError> {
        if !resolved.is_http() {
            return Ok(Vec::new());
        }
        let mut headers = resolved.model_headers.clone();
        if let Some(injector) = &self.injector {
            let request = HeaderInjectRequest {
                selector: op.selector.to_string(),
                target: resolved.name().to_string(),
                is_ad_hoc: resolved.is_ad_hoc(),
                phase: op.phase,
                tool: op.tool.map(str::to_string),
            };
            let injected =
                injector(ctx, &request)
                    .await
                    .map_err(|source| BrokerError::HeaderInjector {
                        target: resolved.name().to_string(),
                        source,
                    })?;
            for (name, value) in injected {
                headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
                headers.push((name, value));
            }
        }
        Ok(headers)
    }

    /// Runs `step` on the target's pooled connection, bounded by the operation timeout.
    ///
    /// Connections are shared only between operations that send the same headers, so the
    /// credentials one caller's injector chose never travel on another caller's requests.
    async fn run<'a, T, F, Fut>(
        &'a self,
        ctx: &ToolContext,
        resolved: &'a Resolved,
        op: &Operation<'_>,
        step: F,
    ) -> Result<T, BrokerError>
    where
        F: FnOnce(ToolContext, McpToolSet) -> Fut,
        Fut: Future<Output = Result<T, BrokerError>> + 'a,
    {
        let headers = self.operation_headers(ctx, resolved, op).await?;
        let fingerprint = fingerprint(&headers);
        let key = match (&resolved.target, resolved.transport) {
            (Target::Url(url), Some(transport)) => {
                PoolKey::Url(url.clone(), transport, fingerprint)
            }
            _ => PoolKey::Named(resolved.name().to_string(), fingerprint),
        };
        let config = with_headers(resolved.config.clone(), &headers);
        let limit = self.operation_timeout;
        let op_ctx = ctx.child().with_deadline(Instant::now() + limit);
        let attempt = async {
            let lease = self
                .pool
                .lease(&key, || pooled_set(resolved.name(), config.clone()))
                .await?;
            let result = step(op_ctx, lease.entry.set.clone()).await;
            if let Err(BrokerError::Remote(err)) = &result
                && mcp_error_of(err)
                    .is_some_and(|e| matches!(e.step, Step::Connect | Step::Initialize))
            {
                // A target that cannot be reached does not keep a slot.
                self.pool.discard(&lease.entry);
            }
            result
        };
        let result = match tokio::time::timeout(limit, attempt).await {
            Ok(result) => result,
            Err(_) => Err(BrokerError::Timeout {
                target: resolved.name().to_string(),
                phase: op.phase,
                limit,
            }),
        };
        result.map_err(|err| self.intercept(ctx, resolved, op, err))
    }

    /// Lets the host application wrap or handle a failure of an HTTP server.
    fn intercept(
        &self,
        ctx: &ToolContext,
        resolved: &Resolved,
        op: &Operation<'_>,
        err: BrokerError,
    ) -> BrokerError {
        let (Some(interceptor), BrokerError::Remote(error)) = (&self.interceptor, &err) else {
            return err;
        };
        if !resolved.is_http() {
            return err;
        }
        let request = BrokerErrorRequest {
            selector: op.selector,
            target: resolved.name(),
            is_ad_hoc: resolved.is_ad_hoc(),
            phase: op.phase,
            tool: op.tool,
            error,
        };
        match interceptor(ctx, &request) {
            ErrorDecision::Pass => err,
            ErrorDecision::Handle(message) => BrokerError::Handled { message },
            ErrorDecision::Wrap(message) => match err {
                BrokerError::Remote(source) => BrokerError::Intercepted { message, source },
                other => other,
            },
        }
    }
}

/// The server's tools (cached by the connection until the server reports a change).
async fn listed(ctx: &ToolContext, set: &McpToolSet) -> Result<Vec<DynTool>, BrokerError> {
    set.tools(ctx).await.map_err(BrokerError::Remote)
}

fn unknown_tools(resolved: &Resolved, unknown: Vec<String>, tools: &[DynTool]) -> BrokerError {
    let mut available: Vec<String> = tools.iter().map(|t| t.name().to_string()).collect();
    available.sort();
    BrokerError::UnknownTools {
        target: resolved.name().to_string(),
        unknown,
        available,
    }
}

/// The longest description line a listing shows; `mcp_inspect_tools` gives the rest.
const SUMMARY_CHARS: usize = 200;

/// The first non-empty line of a description, cut to [`SUMMARY_CHARS`] with `…`.
fn first_line(description: &str) -> Option<String> {
    let line = description
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    Some(toolbelt_core::text::shorten(line, SUMMARY_CHARS + 1).into_owned())
}

/// Adds `headers` to a remote configuration, replacing same-named ones whatever their case.
fn with_headers(mut config: ConnectionConfig, headers: &[(String, String)]) -> ConnectionConfig {
    if let TransportConfig::Sse { headers: map, .. }
    | TransportConfig::StreamableHttp { headers: map, .. } = &mut config.transport
    {
        for (name, value) in headers {
            map.retain(|existing, _| !existing.eq_ignore_ascii_case(name));
            map.insert(name.clone(), value.clone());
        }
    }
    config
}

/// A hash of an operation's headers (names case-insensitive), to key connections by them.
fn fingerprint(headers: &[(String, String)]) -> u64 {
    let mut sorted: Vec<(String, &str)> = headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.as_str()))
        .collect();
    sorted.sort();
    let mut hasher = DefaultHasher::new();
    sorted.hash(&mut hasher);
    hasher.finish()
}

/// The broker's view of a call result: structured content when the tool sent it, its text
/// otherwise; the tool's blocks, error flag and `_meta` are kept.
fn call_output(out: ToolOutput) -> ToolOutput {
    let result = CallResult {
        content: out.structured.is_none().then(|| out.llm_text()),
        structured_content: out.structured.clone(),
        is_error: out.is_error,
    };
    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
    ToolOutput {
        for_llm: Payload::Json(value.clone()),
        structured: Some(value),
        blocks: out.blocks,
        is_error: out.is_error,
        meta: out.meta,
        ..ToolOutput::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_replace_configured_ones_whatever_their_case() {
        let config =
            ConnectionConfig::new(TransportConfig::streamable_http("http://127.0.0.1:1/mcp"))
                .with_header("authorization", "old")
                .with_header("X-Keep", "1");
        let config = with_headers(config, &[("Authorization".into(), "new".into())]);
        let TransportConfig::StreamableHttp { headers, .. } = &config.transport else {
            unreachable!()
        };
        assert_eq!(
            headers.get("Authorization").map(String::as_str),
            Some("new")
        );
        assert!(!headers.contains_key("authorization"));
        assert_eq!(headers.get("X-Keep").map(String::as_str), Some("1"));
    }

    #[test]
    fn fingerprints_ignore_order_and_name_case_but_not_values() {
        let a = fingerprint(&[("A".into(), "1".into()), ("b".into(), "2".into())]);
        let b = fingerprint(&[("B".into(), "2".into()), ("a".into(), "1".into())]);
        let c = fingerprint(&[("a".into(), "1".into()), ("b".into(), "3".into())]);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn call_results_show_structured_content_or_else_the_text() {
        let text = call_output(ToolOutput::text("hi"));
        assert_eq!(
            text.structured,
            Some(serde_json::json!({"content": "hi", "is_error": false}))
        );
        let structured =
            call_output(ToolOutput::text("{\"t\":1}").with_structured(serde_json::json!({"t": 1})));
        assert_eq!(
            structured.structured,
            Some(serde_json::json!({"structured_content": {"t": 1}, "is_error": false}))
        );
        let failed = call_output(ToolOutput::error("bad"));
        assert!(failed.is_error);
        assert_eq!(failed.llm_text(), r#"{"content":"bad","is_error":true}"#);
    }

    #[test]
    fn descriptions_shrink_to_their_first_line() {
        assert_eq!(
            first_line("\n  Adds numbers.\nMore.").as_deref(),
            Some("Adds numbers.")
        );
        assert_eq!(first_line("  \n"), None);
        let long = "é".repeat(SUMMARY_CHARS + 5);
        let shown = first_line(&long).unwrap();
        assert_eq!(shown.chars().count(), SUMMARY_CHARS + 1);
        assert!(shown.ends_with('…'));
        let exact = "x".repeat(SUMMARY_CHARS);
        assert_eq!(first_line(&exact).unwrap(), exact);
    }
}
