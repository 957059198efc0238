//! Telling the peer that a request we sent was abandoned, whichever side we are: the client
//! dropping a `tools/call`, or `serve` dropping a request it forwarded to its own client.

use rmcp::Peer;
use rmcp::model::{CancelledNotification, CancelledNotificationParam, RequestId};
use rmcp::service::ServiceRole;

/// Sends `notifications/cancelled` for request `id` when dropped, unless disarmed first
/// (the answer arrived).
pub(crate) struct CancelOnDrop<R: ServiceRole>
where
    R::Not: From<CancelledNotification>,
{
    peer: Option<Peer<R>>,
    id: RequestId,
    reason: &'static str,
}

impl<R: ServiceRole> CancelOnDrop<R>
where
    R::Not: From<CancelledNotification>,
{
    /// Armed: dropping it cancels request `id` on `peer`, saying `reason`.
    pub(crate) fn new(peer: Peer<R>, id: RequestId, reason: &'static str) -> Self {
        Self {
            peer: Some(peer),
            id,
            reason,
        }
    }

    /// The request was answered: nothing to cancel.
    pub(crate) fn disarm(mut self) {
        self.peer = None;
    }
}

impl<R: ServiceRole> Drop for CancelOnDrop<R>
where
    R::Not: From<CancelledNotification>,
{
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let param =
            CancelledNotificationParam::new(Some(self.id.clone()), Some(self.reason.into()));
        // Drop cannot wait: the notification goes out from a task of its own.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer
                    .send_notification(CancelledNotification::new(param).into())
                    .await;
            });
        }
    }
}
