//! Sending one `tools/call`: rmcp's request, read leniently, cancelled when abandoned.
//!
//! rmcp's own `call_tool` refuses a whole result when one content block is of a type it does
//! not know (the result no longer parses as a `CallToolResult`, so rmcp reports an
//! unexpected response). Here the raw result rmcp hands back in that case is read block by
//! block instead (see [`lenient_call_result`]).

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};

use super::mapping::lenient_call_result;
use crate::abandon::CancelOnDrop;

/// Sends `tools/call` and waits for its result. Dropping the future before the answer sends
/// `notifications/cancelled` for the request.
pub(super) async fn call_tool(
    peer: Peer<RoleClient>,
    params: CallToolRequestParams,
) -> Result<CallToolResult, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await?;
    let guard = CancelOnDrop::new(peer, handle.id.clone(), "request abandoned by the caller");
    let result = handle.await_response().await;
    guard.disarm();
    match result? {
        ServerResult::CallToolResult(result) => Ok(result),
        // No content at all is an empty result.
        ServerResult::EmptyResult(_) => Ok(CallToolResult::default()),
        ServerResult::CustomResult(raw) => {
            lenient_call_result(raw.0).ok_or(ServiceError::UnexpectedResponse)
        }
        _ => Err(ServiceError::UnexpectedResponse),
    }
}
