//! The legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp has no client for.
//!
//! The client GETs an event stream; the server's first event, `endpoint`, names the URL to
//! POST JSON-RPC messages to (resolved against the stream's URL exactly as configured, so
//! `/messages/?session_id=…` and `message?sessionId=…` both work); replies and server
//! messages arrive as `message` events on the stream.

use std::sync::Arc;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::delivery::DeliveryLog;
use super::{parse_header, take_injected_headers};
use crate::error::{FailureKind, McpError, Step, classify_reqwest, classify_status};

/// How many server messages may wait unread.
const INBOX_CAPACITY: usize = 256;

/// Why sending on the SSE transport failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseTransportError {
    /// The message endpoint no longer knows the session (the server restarted or expired it).
    #[error("the session is gone (HTTP 404 from the message endpoint)")]
    SessionExpired,
    /// The message endpoint answered with another failure status.
    #[error("HTTP {status} from the message endpoint")]
    Status {
        /// The status code.
        status: u16,
    },
    /// The request itself failed.
    #[error(transparent)]
    Request(#[from] reqwest::Error),
    /// A message could not be serialized.
    #[error("could not serialize a message: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// A connected legacy SSE session.
pub(crate) struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    inbox: mpsc::Receiver<ServerJsonRpcMessage>,
    deliveries: Arc<DeliveryLog>,
    _reader: DropGuard,
}

/// Opens the event stream at `url` and waits for the `endpoint` event.
pub(crate) async fn connect(
    server: &str,
    client: reqwest::Client,
    url: &str,
    headers: HeaderMap,
    deliveries: Arc<DeliveryLog>,
) -> Result<SseTransport, McpError> {
    let base = Url::parse(url).map_err(|err| {
        McpError::new(
            server,
            Step::Connect,
            FailureKind::Configuration,
            format!("{url:?} is not a valid URL: {err}"),
        )
    })?;
    let response = client
        .get(base.clone())
        .headers(headers.clone())
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|err| {
            McpError::new(
                server,
                Step::Connect,
                classify_reqwest(&err),
                format!("GET {base} failed: {}", error_chain(&err)),
            )
            .with_source(err)
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err(McpError::new(
            server,
            Step::Connect,
            classify_status(status, false),
            format!("GET {base} answered HTTP {status}"),
        )
        .with_source(SseTransportError::Status {
            status: status.as_u16(),
        }));
    }
    let mut events = response.bytes_stream().eventsource();
    let endpoint = loop {
        match events.next().await {
            Some(Ok(event)) if event.event == "endpoint" => {
                let target = event.data.trim();
                break base.join(target).map_err(|err| {
                    McpError::new(
                        server,
                        Step::Connect,
                        FailureKind::Protocol,
                        format!("the endpoint event {target:?} is not a usable URL: {err}"),
                    )
                })?;
            }
            Some(Ok(_)) => continue,
            Some(Err(err)) => {
                return Err(McpError::new(
                    server,
                    Step::Connect,
                    FailureKind::Connection,
                    format!("the event stream failed before the endpoint event: {err}"),
                ));
            }
            None => {
                return Err(McpError::new(
                    server,
                    Step::Connect,
                    FailureKind::Protocol,
                    "the event stream ended without an endpoint event (is this an SSE MCP server?)",
                ));
            }
        }
    };
    tracing::debug!(server, %endpoint, "SSE session endpoint");

    let (tx, inbox) = mpsc::channel(INBOX_CAPACITY);
    let stop = CancellationToken::new();
    let reader_stop = stop.clone();
    let server_name = server.to_string();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = reader_stop.cancelled() => break,
                event = events.next() => event,
            };
            match event {
                Some(Ok(event)) if event.event == "message" || event.event.is_empty() => {
                    match serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
                        Ok(message) => {
                            if tx.send(message).await.is_err() {
                                break;
                            }
                        }
                        Err(err) => tracing::warn!(
                            server = %server_name,
                            "ignoring an SSE message that is not JSON-RPC: {err}"
                        ),
                    }
                }
                Some(Ok(_)) => continue,
                Some(Err(err)) => {
                    tracing::debug!(server = %server_name, "SSE stream failed: {err}");
                    break;
                }
                None => break,
            }
        }
        // Dropping `tx` tells the session the transport is closed.
    });

    Ok(SseTransport {
        client,
        endpoint,
        headers,
        inbox,
        deliveries,
        _reader: stop.drop_guard(),
    })
}

pub(crate) use toolbelt_core::error_chain;

impl Transport<RoleClient> for SseTransport {
    type Error = SseTransportError;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let mut headers = self.headers.clone();
        for (name, value) in take_injected_headers(&mut item) {
            match parse_header(&name, &value) {
                Ok((name, value)) => {
                    headers.insert(name, value);
                }
                Err(problem) => tracing::warn!("dropping an injected header: {problem}"),
            }
        }
        let deliveries = self.deliveries.clone();
        async move {
            // Noted here, when the POST really starts: rmcp may drop this future unpolled
            // when the session ends first.
            let ticket = deliveries.sending(&mut item);
            let body = serde_json::to_vec(&item);
            let sent = client
                .post(endpoint)
                .headers(headers)
                .header(CONTENT_TYPE, "application/json")
                .body(body?)
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(err) => {
                    // A connection that was never made carried nothing.
                    if err.is_connect() {
                        deliveries.refused(ticket);
                    }
                    return Err(err.into());
                }
            };
            match response.status() {
                status if status.is_success() => Ok(()),
                StatusCode::NOT_FOUND => {
                    // The server does not know the session: it did not take the message.
                    deliveries.refused(ticket);
                    Err(SseTransportError::SessionExpired)
                }
                status => Err(SseTransportError::Status {
                    status: status.as_u16(),
                }),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.inbox.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inbox.close();
        Ok(())
    }
}
