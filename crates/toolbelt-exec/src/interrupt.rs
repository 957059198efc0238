//! Running a future until it finishes or a token fires, with a grace period so the future
//! can see the cancellation and clean up.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toolbelt_core::ToolError;

/// Runs `work` to completion unless `token` fires first. Then `work` keeps being polled for
/// up to `grace` (it observes the cancelled token and may stop cleanly) and is dropped; the
/// result is `interrupted`.
pub(crate) async fn until_cancelled<T, F>(
    work: F,
    token: &CancellationToken,
    grace: Duration,
    interrupted: ToolError,
) -> Result<T, ToolError>
where
    F: Future<Output = Result<T, ToolError>>,
{
    let work = std::pin::pin!(work);
    let mut work = work;
    tokio::select! {
        biased;
        result = &mut work => result,
        () = token.cancelled() => {
            let _ = tokio::time::timeout(grace, &mut work).await;
            Err(interrupted)
        }
    }
}
