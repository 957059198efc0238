//! Malformed HTTP requests get JSON-RPC's error codes.
//!
//! rmcp answers any body it cannot read as an MCP message with `415 Unsupported Media Type`
//! and a plain-text line, so a client cannot tell a body that is not JSON from JSON that is
//! not a JSON-RPC message, nor either from a wrong `Content-Type`. JSON-RPC names these
//! cases, and the MCP transport says a malformed request gets HTTP 400 with a JSON-RPC error
//! body:
//!
//! - a body that is not JSON: HTTP 400, `-32700` (parse error), `id: null`;
//! - JSON that is not a JSON-RPC message MCP knows: HTTP 400, `-32600` (invalid request),
//!   with the request's `id` when it has a usable one;
//! - a body over the size limit: HTTP 413;
//! - a wrong `Content-Type` on a body that is fine stays rmcp's 415.
//!
//! The body is read once into shared bytes; the JSON syntax check walks it without building
//! anything, and only a request rmcp refused is examined further.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The largest request body accepted (rmcp's default, set explicitly so both agree).
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// JSON-RPC: the body is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON is not a valid request.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// A server error (JSON-RPC reserves -32000 to -32099 for them): no room for a session.
pub(crate) const SERVER_BUSY: i64 = -32000;

/// An HTTP response carrying a JSON-RPC error.
pub(crate) fn json_rpc_error(status: StatusCode, code: i64, id: Value, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The axum middleware: see the module docs.
pub(crate) async fn json_rpc_errors(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is unreadable or larger than {MAX_BODY_BYTES} bytes"),
        )
            .into_response();
    };
    if let Err(err) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        return json_rpc_error(
            StatusCode::BAD_REQUEST,
            PARSE_ERROR,
            Value::Null,
            &format!("Parse error: the body is not JSON ({err})"),
        );
    }
    let declared_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        });
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    // With a JSON content type, rmcp's 415 means it could not read the JSON as a message.
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE && declared_json {
        return invalid_request(&bytes);
    }
    response
}

/// The -32600 answer for JSON that is not a JSON-RPC message MCP knows.
fn invalid_request(body: &Bytes) -> Response {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    let why = match &value {
        Value::Array(_) => "a batch (MCP sends one message per request)",
        Value::Object(map) if map.get("jsonrpc") != Some(&json!("2.0")) => {
            "an object without \"jsonrpc\": \"2.0\""
        }
        Value::Object(map) if !map.contains_key("method") && !map.contains_key("id") => {
            "an object with neither a method nor an id"
        }
        Value::Object(_) => "a message of an unknown method or with malformed params",
        _ => "not an object",
    };
    json_rpc_error(
        StatusCode::BAD_REQUEST,
        INVALID_REQUEST,
        id,
        &format!("Invalid Request: the body is JSON but not a JSON-RPC message MCP knows: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_json(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn an_invalid_request_keeps_a_usable_id() {
        let response = invalid_request(&Bytes::from_static(br#"{"jsonrpc":"1.0","id":7}"#));
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body = body_json(response).await;
        assert_eq!(body["error"]["code"], INVALID_REQUEST);
        assert_eq!(body["id"], 7);

        // An id that is not a string or a number is not echoed.
        let response = invalid_request(&Bytes::from_static(br#"{"id":{"x":1}}"#));
        assert_eq!(body_json(response).await["id"], Value::Null);
    }
}
