//! Progress of calls in flight: a call whose context watches progress
//! ([`ToolContext::wants_progress`]) gets the server's `notifications/progress` for its
//! request, in the order the server sent them and all before the call's result.
//!
//! rmcp handles each incoming notification in a task of its own, so notifications handed
//! over there can overtake each other and the result that followed them. Reports are
//! therefore taken where messages are still in order: [`ProgressTap`] wraps a session's
//! transport and delivers each progress notification as it reads it, before it reads the
//! next message.
//!
//! The route must exist before the server can report, yet rmcp picks the request's progress
//! token only when it sends the request. The call therefore opens its route first and marks
//! its request with the route's number in a private `_meta` entry; the tap takes that entry
//! out as the request goes to the transport, and binds the progress token rmcp put beside
//! it to the route. Reports for a token with no route (a finished call, another request)
//! are dropped: the protocol ends progress with the request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, GetMeta, JsonRpcMessage, JsonRpcNotification, ProgressToken,
    ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use toolbelt_core::{ProgressUpdate, ToolContext};

use crate::transport::take_private_meta;

/// The private `_meta` key naming the route of a `tools/call`; the tap removes it before the
/// request is written, so it never reaches the server.
const ROUTE_META_KEY: &str = "dev.toolbelt/progress-route";

/// The calls of one tool set that watch progress (shared by all its sessions).
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    next: AtomicU64,
    state: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    /// Open routes by number.
    open: HashMap<u64, ToolContext>,
    /// The route of each progress token in flight.
    tokens: HashMap<ProgressToken, u64>,
}

/// Keeps a route open while its call runs; dropping it closes the route, so later reports
/// for the call are dropped.
pub(crate) struct ProgressRoute {
    routes: Arc<ProgressRoutes>,
    number: u64,
}

impl ProgressRoutes {
    /// Opens a route to `ctx` when `ctx` watches progress. The call puts
    /// [`ProgressRoute::meta`] in its request's `_meta`.
    pub fn open(self: &Arc<Self>, ctx: &ToolContext) -> Option<ProgressRoute> {
        if !ctx.wants_progress() {
            return None;
        }
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().open.insert(number, ctx.clone());
        Some(ProgressRoute {
            routes: self.clone(),
            number,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Routes> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called as `message` goes to the transport: takes the route mark out of a request and
    /// binds the request's progress token to that route.
    fn sending(&self, message: &mut ClientJsonRpcMessage) {
        let Some(number) = take_private_meta(message, ROUTE_META_KEY).and_then(|v| v.as_u64())
        else {
            return;
        };
        let JsonRpcMessage::Request(request) = message else {
            return;
        };
        let Some(token) = request.request.get_meta().get_progress_token() else {
            return;
        };
        let mut routes = self.lock();
        if routes.open.contains_key(&number) {
            routes.tokens.insert(token, number);
        }
    }

    /// Hands one report to the call it belongs to, if that call still runs.
    fn deliver(&self, token: &ProgressToken, update: ProgressUpdate) {
        let ctx = {
            let routes = self.lock();
            routes
                .tokens
                .get(token)
                .and_then(|number| routes.open.get(number))
                .cloned()
        };
        match ctx {
            // Reports are delivered one at a time by the tap's reads, so they stay in order.
            Some(ctx) => ctx.report_progress(update),
            None => tracing::debug!(?token, "progress for no running call; ignored"),
        }
    }
}

impl ProgressRoute {
    /// The `_meta` entry that marks a request with this route.
    pub fn meta(&self) -> (String, Value) {
        (ROUTE_META_KEY.to_string(), Value::from(self.number))
    }
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        let mut routes = self.routes.lock();
        routes.open.remove(&self.number);
        let number = self.number;
        routes.tokens.retain(|_, route| *route != number);
    }
}

/// A session's transport that delivers progress notifications to their routes as it reads
/// them (see the module docs). Every message still reaches rmcp unchanged.
pub(crate) struct ProgressTap<T> {
    inner: T,
    routes: Arc<ProgressRoutes>,
}

impl<T> ProgressTap<T> {
    pub fn new(inner: T, routes: Arc<ProgressRoutes>) -> Self {
        Self { inner, routes }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Bound before the request is written, so before the server can report on it.
        self.routes.sending(&mut item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ServerNotification::ProgressNotification(progress),
            ..
        }) = &message
        {
            let params = &progress.params;
            let mut update = ProgressUpdate::new(params.progress);
            update.total = params.total;
            update.message = params.message.clone();
            self.routes.deliver(&params.progress_token, update);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::convert::Infallible;

    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, JsonRpcRequest, NumberOrString,
        ProgressNotification, ProgressNotificationParam, RequestId, ServerJsonRpcMessage,
    };

    use super::*;

    /// A transport that records what is sent and hands out scripted messages.
    #[derive(Default)]
    struct Scripted {
        sent: Arc<Mutex<Vec<ClientJsonRpcMessage>>>,
        incoming: VecDeque<ServerJsonRpcMessage>,
    }

    impl Transport<RoleClient> for Scripted {
        type Error = Infallible;

        fn send(
            &mut self,
            item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
            self.sent.lock().unwrap().push(item);
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.incoming.pop_front()
        }

        async fn close(&mut self) -> Result<(), Infallible> {
            Ok(())
        }
    }

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    /// A `tools/call` as rmcp writes it: progress token `n` in the request's meta, plus the
    /// route mark the call added.
    fn call(n: i64, route: Option<&ProgressRoute>) -> ClientJsonRpcMessage {
        let mut params = CallToolRequestParams::new("count");
        if let Some(route) = route {
            let (key, value) = route.meta();
            let mut meta = serde_json::Map::new();
            meta.insert(key, value);
            params.meta = Some(rmcp::model::RequestMetaObject::from(meta));
        }
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        request.get_meta_mut().set_progress_token(token(n));
        JsonRpcMessage::Request(JsonRpcRequest::new(RequestId::Number(n), request))
    }

    fn progress(n: i64, step: f64) -> ServerJsonRpcMessage {
        let params = ProgressNotificationParam::new(token(n), step);
        JsonRpcMessage::notification(ServerNotification::ProgressNotification(
            ProgressNotification::new(params),
        ))
    }

    fn watching() -> (ToolContext, Arc<Mutex<Vec<f64>>>) {
        let seen: Arc<Mutex<Vec<f64>>> = Arc::default();
        let record = seen.clone();
        let ctx = ToolContext::for_call("c").with_progress(Arc::new(move |u: ProgressUpdate| {
            record.lock().unwrap().push(u.progress);
        }));
        (ctx, seen)
    }

    #[tokio::test]
    async fn reports_reach_the_route_in_order_as_they_are_read_and_the_mark_never_leaves() {
        let routes = Arc::new(ProgressRoutes::default());
        let (ctx, seen) = watching();
        let route = routes.open(&ctx).unwrap();
        let mut scripted = Scripted::default();
        let sent = scripted.sent.clone();
        scripted.incoming = (1..=50).map(|step| progress(7, step as f64)).collect();
        scripted.incoming.push_back(progress(8, 99.0));
        let mut tap = ProgressTap::new(scripted, routes.clone());

        tap.send(call(7, Some(&route))).await.unwrap();
        let written = serde_json::to_string(&sent.lock().unwrap()[0]).unwrap();
        assert!(!written.contains(ROUTE_META_KEY), "{written}");
        assert!(written.contains("progressToken"), "{written}");

        for read in 1..=50 {
            assert!(tap.receive().await.is_some());
            // Delivered by the read itself, before the next message is read.
            assert_eq!(seen.lock().unwrap().len(), read);
        }
        // Another request's token is not this call's.
        tap.receive().await.unwrap();
        let expected: Vec<f64> = (1..=50).map(f64::from).collect();
        assert_eq!(*seen.lock().unwrap(), expected);

        drop(route);
        assert!(routes.lock().open.is_empty() && routes.lock().tokens.is_empty());
    }

    #[tokio::test]
    async fn a_report_after_the_call_ended_or_for_an_unmarked_request_is_dropped() {
        let routes = Arc::new(ProgressRoutes::default());
        let (ctx, seen) = watching();
        let route = routes.open(&ctx).unwrap();
        let scripted = Scripted {
            incoming: [progress(1, 1.0), progress(2, 1.0)].into(),
            ..Scripted::default()
        };
        let mut tap = ProgressTap::new(scripted, routes.clone());
        tap.send(call(1, Some(&route))).await.unwrap();
        tap.send(call(2, None)).await.unwrap();
        drop(route);
        tap.receive().await.unwrap();
        tap.receive().await.unwrap();
        assert!(seen.lock().unwrap().is_empty());
        assert!(routes.lock().tokens.is_empty());
    }
}
