//! Serving over stdio: one client, JSON-RPC on stdin/stdout. Nothing else may write to stdout,
//! so logs go to stderr.

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use super::ToolServer;

/// Serves `server` on this process's stdin and stdout until the client disconnects or
/// `shutdown` is cancelled.
pub async fn serve_stdio(
    server: ToolServer,
    shutdown: CancellationToken,
) -> Result<(), std::io::Error> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("MCP initialization failed: {e}")))?;
    let stop = running.cancellation_token();
    tokio::select! {
        quit = running.waiting() => {
            quit.map_err(|e| std::io::Error::other(format!("MCP session ended with an error: {e}")))?;
        }
        _ = shutdown.cancelled() => stop.cancel(),
    }
    Ok(())
}
