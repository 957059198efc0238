//! Transports to MCP servers: stdio (our own child handling), the legacy HTTP+SSE transport
//! (ours: rmcp has no client for it) and streamable HTTP (rmcp's, behind a client that adds
//! per-request headers).

pub(crate) mod delivery;
pub(crate) mod http;
mod lines;
pub(crate) mod sse;
pub(crate) mod stdio;

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage};
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use serde_json::Value;

use crate::error::{FailureKind, classify_error_chain, classify_reqwest};

/// The private `_meta` key through which a request carries the headers an injector chose
/// for it from the caller's context. The HTTP transports remove it before the message is
/// sent, so it never reaches the server; it is only ever set on HTTP sessions.
pub(crate) const HEADERS_META_KEY: &str = "dev.toolbelt/request-headers";

/// Removes the injected headers from a request and returns them.
///
/// The client puts them in the `_meta` of the request's params (`tools/call`, `tools/list`);
/// rmcp merges that map with the `_meta` it keeps in the request's extensions when it writes
/// the message, so both places are cleared.
pub(crate) fn take_injected_headers(message: &mut ClientJsonRpcMessage) -> Vec<(String, String)> {
    let JsonRpcMessage::Request(request) = message else {
        return Vec::new();
    };
    let mut taken = Vec::new();
    let params_meta = match &mut request.request {
        ClientRequest::CallToolRequest(call) => call.params.meta.as_mut(),
        ClientRequest::ListToolsRequest(list) => list.params.as_mut().and_then(|p| p.meta.as_mut()),
        _ => None,
    };
    if let Some(meta) = params_meta {
        taken.extend(remove_headers(&mut meta.0.0));
    }
    taken.extend(remove_headers(&mut request.request.get_meta_mut().0.0));
    taken
}

fn remove_headers(meta: &mut serde_json::Map<String, Value>) -> Vec<(String, String)> {
    match meta.remove(HEADERS_META_KEY) {
        Some(Value::Object(map)) => map
            .into_iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_string())))
            .collect(),
        _ => Vec::new(),
    }
}

/// Removes the private `_meta` entry `key` from a `tools/call` request and returns its
/// value: from the params' `_meta`, where the client puts it, and from the `_meta` rmcp keeps
/// in the request's extensions (it merges both when writing), so it never reaches the server.
pub(crate) fn take_private_meta(message: &mut ClientJsonRpcMessage, key: &str) -> Option<Value> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    let mut value = None;
    if let ClientRequest::CallToolRequest(call) = &mut request.request
        && let Some(meta) = call.params.meta.as_mut()
    {
        value = meta.0.remove(key);
    }
    let in_extensions = request.request.get_meta_mut().0.remove(key);
    value.or(in_extensions)
}

/// Classifies a transport failure and describes it without rmcp's wrapper (which names the
/// transport's Rust type) and down to the I/O cause ("Connection refused"), which rmcp's
/// streamable HTTP error does not chain as a source.
pub(crate) fn describe_transport_error(err: &DynamicTransportError) -> (FailureKind, String) {
    let inner: &(dyn std::error::Error + 'static) = err.error.as_ref();
    match inner.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(request)) => {
            return (classify_reqwest(request), sse::error_chain(request));
        }
        Some(StreamableHttpError::Auth(auth)) => return (classify_auth(auth), auth.to_string()),
        _ => {}
    }
    (classify_error_chain(inner), sse::error_chain(inner))
}

/// An OAuth failure is the configuration's (a refused or failed authorization, metadata that
/// fails a check: a new session would fail the same way, and would start another
/// authorization), except a refresh or request that failed on the way, which may pass later.
fn classify_auth(err: &rmcp::transport::auth::AuthError) -> FailureKind {
    use rmcp::transport::auth::AuthError;
    match err {
        AuthError::TokenRefreshFailed(_) | AuthError::HttpError(_) => FailureKind::Connection,
        _ => FailureKind::Configuration,
    }
}

/// Converts configured headers into a header map, naming the first bad one.
pub(crate) fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let (name, value) = parse_header(name, value)?;
        map.insert(name, value);
    }
    Ok(map)
}

/// Parses one header, with a message naming it when it is not valid HTTP.
pub(crate) fn parse_header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let header_name = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("{name:?} is not a valid HTTP header name"))?;
    let header_value = HeaderValue::from_str(value)
        .map_err(|_| format!("the value of header {name:?} is not valid in HTTP"))?;
    Ok((header_name, header_value))
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, JsonRpcRequest, RequestId};

    use super::*;

    fn call_with_injected(headers: serde_json::Value) -> ClientJsonRpcMessage {
        let mut meta = serde_json::Map::new();
        meta.insert(HEADERS_META_KEY.into(), headers);
        meta.insert("trace".into(), Value::String("keep".into()));
        let mut params = CallToolRequestParams::new("echo");
        params.meta = Some(rmcp::model::RequestMetaObject::from(meta));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        JsonRpcMessage::Request(JsonRpcRequest::new(RequestId::Number(1), request))
    }

    #[test]
    fn injected_headers_are_taken_out_of_the_message_before_it_is_sent() {
        let mut message = call_with_injected(serde_json::json!({"X-User": "alice"}));
        let taken = take_injected_headers(&mut message);
        assert_eq!(taken, [("X-User".to_string(), "alice".to_string())]);
        let wire = serde_json::to_value(&message).unwrap();
        assert!(
            wire["params"]["_meta"].get(HEADERS_META_KEY).is_none(),
            "{wire}"
        );
        assert_eq!(wire["params"]["_meta"]["trace"], "keep", "{wire}");
        // A second look finds nothing.
        assert!(take_injected_headers(&mut message).is_empty());
    }

    #[test]
    fn a_failed_authorization_is_not_retried_by_reconnecting() {
        use rmcp::transport::auth::AuthError;
        let failed = StreamableHttpError::<reqwest::Error>::Auth(AuthError::AuthorizationFailed(
            "the user declined".into(),
        ));
        let (kind, message) = describe_transport_error(&DynamicTransportError::new::<
            rmcp::transport::StreamableHttpClientTransport<reqwest::Client>,
            rmcp::RoleClient,
        >(failed));
        assert_eq!(kind, FailureKind::Configuration);
        assert!(message.contains("the user declined"), "{message}");
        let flaky = AuthError::TokenRefreshFailed("connection reset".into());
        assert_eq!(classify_auth(&flaky), FailureKind::Connection);
    }

    #[test]
    fn injected_values_that_are_not_strings_are_ignored() {
        let mut message = call_with_injected(serde_json::json!({"X-Count": 3, "X-Ok": "y"}));
        let taken = take_injected_headers(&mut message);
        assert_eq!(taken, [("X-Ok".to_string(), "y".to_string())]);
    }
}
