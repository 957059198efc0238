//! Cancellation of one call: a token of its own, the caller's cancellation forwarded to it,
//! and a grace period so the work can see the cancellation and clean up.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toolbelt_core::{ToolContext, ToolError};

/// Gives `ctx` a cancellation token of its own. Returns the new context, the caller's token
/// and the call's token.
///
/// The call's token is deliberately not a child in the caller's token tree: linking a child
/// takes a lock and updates the parent's list when it is made and again when it is dropped,
/// which was the largest single cost of a call through the executor. Instead, whoever runs
/// the work forwards the caller's cancellation with [`until_cancelled`] while it waits, so
/// the tool still sees it, and cancelling the call's own token (a timeout) never reaches the
/// caller or the call's siblings.
pub(crate) fn own_token(ctx: ToolContext) -> (ToolContext, CancellationToken, CancellationToken) {
    let caller = ctx.cancellation().clone();
    let own = CancellationToken::new();
    (ctx.with_cancellation(own.clone()), caller, own)
}

/// Runs `work` to completion unless `caller` fires first. Then `own` (the token the work
/// watches) is cancelled, `work` keeps being polled for up to `grace` so it can stop cleanly,
/// and is dropped; the result is `interrupted`.
pub(crate) async fn until_cancelled<T, F>(
    work: F,
    caller: &CancellationToken,
    own: &CancellationToken,
    grace: Duration,
    interrupted: ToolError,
) -> Result<T, ToolError>
where
    F: Future<Output = Result<T, ToolError>>,
{
    let mut work = std::pin::pin!(work);
    tokio::select! {
        biased;
        result = &mut work => result,
        () = caller.cancelled() => {
            own.cancel();
            let _ = tokio::time::timeout(grace, &mut work).await;
            Err(interrupted)
        }
    }
}
