//! Whether a request reached the server: what decides if a call may be sent again after the
//! connection was lost.
//!
//! A `tools/call` that failed because the connection went away may have run on the server
//! (the server may have died *after* doing the work), so sending it again to a new server
//! process could do the work twice: append a line twice, charge a card twice. Only a call
//! that provably never reached the server is safe to re-send, and that is something only the
//! transport knows. So each call carries a ticket: the client puts the ticket's number in a
//! private `_meta` key of the request (as it does for injected headers), and the transport
//! takes it out just before writing and records what happened:
//!
//! - never handed to the transport (the session was already gone): never reached;
//! - the write failed in a way that proves the server did not get it (a refused connection,
//!   a closed pipe, a 404 for an unknown session): never reached;
//! - anything else (written, being written, a write that failed half-way or with an unclear
//!   error): may have reached the server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::ClientJsonRpcMessage;
use serde_json::Value;

use super::take_private_meta;

/// The private `_meta` key carrying a call's ticket number; removed before the message is
/// written, so it never reaches the server.
pub(crate) const DELIVERY_META_KEY: &str = "dev.toolbelt/delivery-ticket";

/// What is known of one request's delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// Not yet given to the transport.
    Queued,
    /// Being written, or written: the server may have it.
    Sent,
    /// The write failed before the server could have received the request.
    Refused,
}

/// The delivery of every ticketed request of one session.
#[derive(Debug, Default)]
pub(crate) struct DeliveryLog {
    next: AtomicU64,
    states: Mutex<HashMap<u64, Delivery>>,
}

impl DeliveryLog {
    fn states(&self) -> MutexGuard<'_, HashMap<u64, Delivery>> {
        self.states.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new ticket for one request; put [`Ticket::meta`] in the request's `_meta`.
    pub fn ticket(self: &Arc<Self>) -> Ticket {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.states().insert(number, Delivery::Queued);
        Ticket {
            log: self.clone(),
            number,
        }
    }

    /// Called by a transport just before it writes `message`: takes the ticket out of the
    /// message and records it as sent. Returns the ticket's number for [`Self::refused`].
    pub fn sending(&self, message: &mut ClientJsonRpcMessage) -> Option<u64> {
        let number = take_ticket(message)?;
        if let Some(state) = self.states().get_mut(&number) {
            *state = Delivery::Sent;
        }
        Some(number)
    }

    /// Called by a transport whose write of ticket `number` failed in a way that proves the
    /// server never received the request.
    pub fn refused(&self, number: Option<u64>) {
        if let Some(number) = number
            && let Some(state) = self.states().get_mut(&number)
        {
            *state = Delivery::Refused;
        }
    }
}

/// One request's ticket; forgotten by the log when dropped.
#[derive(Debug)]
pub(crate) struct Ticket {
    log: Arc<DeliveryLog>,
    number: u64,
}

impl Ticket {
    /// The `_meta` entry that carries the ticket in the request.
    pub fn meta(&self) -> (String, Value) {
        (DELIVERY_META_KEY.to_string(), Value::from(self.number))
    }

    /// Whether the server may have received the request (see the module docs).
    pub fn may_have_reached_server(&self) -> bool {
        self.log.states().get(&self.number) == Some(&Delivery::Sent)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.log.states().remove(&self.number);
    }
}

/// Removes the ticket from a `tools/call` request.
fn take_ticket(message: &mut ClientJsonRpcMessage) -> Option<u64> {
    take_private_meta(message, DELIVERY_META_KEY).and_then(|v| v.as_u64())
}

#[cfg(test)]
pub(crate) mod tests {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, JsonRpcMessage, JsonRpcRequest,
        RequestId,
    };

    use super::*;

    /// A `tools/call` request carrying `ticket`, as the client sends it to a transport (shared
    /// by the transports' unit tests).
    pub(crate) fn call_with(ticket: &Ticket) -> ClientJsonRpcMessage {
        let (key, value) = ticket.meta();
        let mut meta = serde_json::Map::new();
        meta.insert(key, value);
        let mut params = CallToolRequestParams::new("append");
        params.meta = Some(rmcp::model::RequestMetaObject::from(meta));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        JsonRpcMessage::Request(JsonRpcRequest::new(RequestId::Number(1), request))
    }

    #[test]
    fn a_ticket_is_taken_out_before_writing_and_records_the_attempt() {
        let log = Arc::new(DeliveryLog::default());
        let ticket = log.ticket();
        assert!(!ticket.may_have_reached_server(), "not yet written");
        let mut message = call_with(&ticket);
        let number = log.sending(&mut message);
        assert!(number.is_some());
        let wire = serde_json::to_value(&message).unwrap();
        assert!(
            wire["params"]["_meta"].get(DELIVERY_META_KEY).is_none(),
            "{wire}"
        );
        assert!(ticket.may_have_reached_server());
        log.refused(number);
        assert!(
            !ticket.may_have_reached_server(),
            "a refused write never arrived"
        );
        drop(ticket);
        assert!(log.states().is_empty(), "a dropped ticket is forgotten");
    }
}
