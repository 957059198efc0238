//! An aggregated server's requests to its client (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`), passed on to the client of the call that made
//! them.
//!
//! The upstream sessions declare elicitation (form and URL), sampling (with tools) and roots,
//! because a client that connects later may offer them. When a request comes, it goes to a
//! client that declared the capability, and that client's answer (or JSON-RPC error) is the
//! server's answer, unchanged:
//!
//! - MCP's messages do not say which call a server's request belongs to (the SDKs send it on
//!   the call's own stream over streamable HTTP, and nothing marks it over stdio), so it goes
//!   to the client whose `tools/call` to that server is in flight; when several are, the most
//!   recent one (with calls of several clients to one server at once, the request can reach
//!   the client of another call: that is the limit of what the protocol tells).
//! - If that client did not declare the capability, the server gets an error (-32601) saying
//!   so, and nothing is asked of another client.
//! - With no call of that server in flight (a server asking on its own), the most recently
//!   connected client that declared the capability answers; with none, an error.
//! - A sampling request that carries tools (`tools`, `toolChoice`) needs a client that
//!   declared `sampling.tools`; one that declared plain sampling gets no tools it would not
//!   understand, the server gets the error instead.
//! - `roots/list` with no client offering roots is answered with the set's own roots (for
//!   `toolbelt serve`, its `--dir`).
//!
//! A forwarded request ends with the call it belongs to: when that call is cancelled or
//! finishes first, or the server cancels its request, the client is sent
//! `notifications/cancelled` for it.

// Sampling and roots are deprecated in rmcp's newest protocol (SEP-2577) but are what
// clients and servers on 2025-06-18 and 2025-11-25 use.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use rmcp::ErrorData as RpcError;
use rmcp::model::{
    ClientCapabilities, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, ErrorCode,
    ListRootsRequest, ListRootsResult, ServerRequest,
};
use rmcp::model::{GetExtensions, RequestId};
use rmcp::service::{OriginatingRequestId, Peer, PeerRequestOptions, RoleServer};
use tokio_util::sync::CancellationToken;

use super::relay::Relay;
use crate::abandon::CancelOnDrop;
use crate::client::handler::RequestRelay;

/// The client of a `tools/call` in progress, carried in the call's context so that an
/// aggregated server's requests during the call can reach it.
#[derive(Clone)]
pub(crate) struct CallingClient {
    pub(crate) peer: Peer<RoleServer>,
    /// Cancelled when the call is (the client cancelled it, or its session ended).
    pub(crate) call: CancellationToken,
    /// The call's JSON-RPC id: requests made for the call travel on its response stream.
    pub(crate) request: RequestId,
}

/// The calls in flight to one aggregated server, oldest first.
#[derive(Default)]
pub(crate) struct CallsInFlight {
    next: AtomicU64,
    calls: Mutex<Vec<(u64, CallingClient)>>,
}

/// Keeps a call in its server's list while it runs.
pub(crate) struct InFlight {
    calls: Arc<CallsInFlight>,
    id: u64,
}

impl CallsInFlight {
    /// Records a call of `client` until the returned guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>, client: CallingClient) -> InFlight {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.calls).push((id, client));
        InFlight {
            calls: self.clone(),
            id,
        }
    }

    /// The client of the most recent call, if any call is in flight.
    fn latest(&self) -> Option<CallingClient> {
        lock(&self.calls).last().map(|(_, client)| client.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.calls.calls).retain(|(id, _)| *id != self.id);
    }
}

/// A capability a server's request needs from the client.
#[derive(Clone, Copy)]
pub(crate) enum Feature {
    FormElicitation,
    UrlElicitation,
    Sampling,
    SamplingTools,
    Roots,
}

impl Feature {
    fn name(self) -> &'static str {
        match self {
            Feature::FormElicitation => "elicitation",
            Feature::UrlElicitation => "URL elicitation",
            Feature::Sampling => "sampling",
            Feature::SamplingTools => "sampling with tools",
            Feature::Roots => "roots",
        }
    }

    pub(crate) fn declared_by(self, peer: &Peer<RoleServer>) -> bool {
        peer.peer_info()
            .is_some_and(|info| self.declared_in(&info.capabilities))
    }

    fn declared_in(self, capabilities: &ClientCapabilities) -> bool {
        match self {
            // An empty `elicitation` object means form elicitation (the 2025-06-18 form).
            Feature::FormElicitation => capabilities
                .elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
            Feature::UrlElicitation => capabilities
                .elicitation
                .as_ref()
                .is_some_and(|e| e.url.is_some()),
            Feature::Sampling => capabilities.sampling.is_some(),
            Feature::SamplingTools => capabilities
                .sampling
                .as_ref()
                .is_some_and(|s| s.tools.is_some()),
            Feature::Roots => capabilities.roots.is_some(),
        }
    }
}

/// Where a request goes: a client, and the call whose end abandons the request.
pub(crate) struct Target {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) call: Option<CancellationToken>,
    /// The client's call the request belongs to, if any.
    pub(crate) request: Option<RequestId>,
}

/// Passes the aggregated servers' requests to the clients (holding the relay weakly: the
/// relay owns the servers, which own this).
pub(crate) struct ClientRequests(pub(crate) Weak<Relay>);

impl ClientRequests {
    /// The client a request of `server` needing `feature` goes to, or the error the server
    /// gets.
    fn route(&self, server: &str, feature: Feature) -> Result<Target, RpcError> {
        let relay = self
            .0
            .upgrade()
            .ok_or_else(|| RpcError::internal_error("toolbelt serve is shutting down", None))?;
        let in_call = relay
            .upstreams()
            .get(server)
            .and_then(|upstream| upstream.calls.latest());
        if let Some(client) = in_call {
            if !feature.declared_by(&client.peer) || client.peer.is_transport_closed() {
                return Err(not_offered(format!(
                    "the client that called this tool through toolbelt serve does not offer {} \
                     (it did not declare the capability)",
                    feature.name()
                )));
            }
            return Ok(Target {
                peer: client.peer,
                call: Some(client.call),
                request: Some(client.request),
            });
        }
        relay
            .live_peers()
            .into_iter()
            .rev()
            .find(|peer| feature.declared_by(peer))
            .map(|peer| Target {
                peer,
                call: None,
                request: None,
            })
            .ok_or_else(|| {
                not_offered(format!(
                    "no client of toolbelt serve offers {} (none declared the capability)",
                    feature.name()
                ))
            })
    }
}

impl RequestRelay for ClientRequests {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, Result<ElicitResult, RpcError>> {
        let feature = match request {
            ElicitRequestParams::UrlElicitationParams { .. } => Feature::UrlElicitation,
            _ => Feature::FormElicitation,
        };
        let target = self.route(server, feature);
        Box::pin(async move {
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(request));
            match forward(target?, request, feature).await? {
                ClientResult::ElicitResult(result) => Ok(result),
                _ => Err(unexpected(feature)),
            }
        })
    }

    fn create_message(
        &self,
        server: &str,
        request: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, RpcError>> {
        let feature = if request.tools.is_some() || request.tool_choice.is_some() {
            Feature::SamplingTools
        } else {
            Feature::Sampling
        };
        let target = self.route(server, feature);
        Box::pin(async move {
            let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(request));
            match forward(target?, request, feature).await? {
                ClientResult::CreateMessageResult(result) => Ok(*result),
                _ => Err(unexpected(feature)),
            }
        })
    }

    fn list_roots(
        &self,
        server: &str,
    ) -> BoxFuture<'static, Option<Result<ListRootsResult, RpcError>>> {
        // No client offering roots is not an error: the set's own roots answer.
        let target = self.route(server, Feature::Roots).ok();
        Box::pin(async move {
            let target = target?;
            let request = ServerRequest::ListRootsRequest(ListRootsRequest {
                method: Default::default(),
                extensions: Default::default(),
            });
            Some(match forward(target, request, Feature::Roots).await {
                Ok(ClientResult::ListRootsResult(result)) => Ok(result),
                Ok(_) => Err(unexpected(Feature::Roots)),
                Err(err) => Err(err),
            })
        })
    }
}

/// Sends `request` to the target client and waits for its answer, until the call it belongs
/// to ends. Abandoning it (the call ended, or the future was dropped because the server
/// cancelled its request) tells the client with `notifications/cancelled`.
pub(crate) async fn forward(
    target: Target,
    mut request: ServerRequest,
    feature: Feature,
) -> Result<ClientResult, RpcError> {
    if let Some(call) = &target.request {
        // Over streamable HTTP the request then rides the call's own response stream (as a
        // request made inside the call's handler would), not the client's `GET` stream,
        // which another replica may hold.
        request
            .extensions_mut()
            .insert(OriginatingRequestId(call.clone()));
    }
    // Sent from a task of its own: here we are inside the handler of the aggregated
    // server's request, and rmcp would mark ours as belonging to that one (its id means
    // nothing to our client) in place of the call it belongs to.
    let peer = target.peer.clone();
    let handle = tokio::spawn(async move {
        peer.send_request_with_option(request, PeerRequestOptions::no_options())
            .await
    })
    .await
    .map_err(|err| {
        RpcError::internal_error(
            format!("sending the {} request: {err}", feature.name()),
            None,
        )
    })?
    .map_err(|err| failed(feature, err))?;
    let abandon = CancelOnDrop::new(
        target.peer.clone(),
        handle.id.clone(),
        "the aggregated server's call ended",
    );
    let call_ended = async {
        match &target.call {
            Some(call) => call.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let answer = tokio::select! {
        answer = handle.await_response() => answer,
        _ = call_ended => {
            return Err(RpcError::internal_error(
                format!("the call this {} request belongs to ended first", feature.name()),
                None,
            ));
        }
    };
    abandon.disarm();
    answer.map_err(|err| failed(feature, err))
}

/// The client's own JSON-RPC error unchanged; any other failure named.
fn failed(feature: Feature, err: rmcp::ServiceError) -> RpcError {
    match err {
        rmcp::ServiceError::McpError(data) => data,
        other => RpcError::internal_error(
            format!(
                "passing the {} request on to the client of toolbelt serve failed: {other}",
                feature.name()
            ),
            None,
        ),
    }
}

fn unexpected(feature: Feature) -> RpcError {
    RpcError::internal_error(
        format!(
            "the client of toolbelt serve answered the {} request with something else",
            feature.name()
        ),
        None,
    )
}

fn not_offered(message: String) -> RpcError {
    RpcError::new(ErrorCode::METHOD_NOT_FOUND, message, None)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
