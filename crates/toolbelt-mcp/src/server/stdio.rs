//! Serving over stdio: one client, JSON-RPC on stdin/stdout. Nothing else may write to stdout,
//! so logs go to stderr.
//!
//! Reading stdin must never hold up a shutdown. Tokio's `stdin()` reads in the runtime's
//! blocking pool, and a read that never returns (a client that keeps stdin open while the
//! server is told to stop with SIGTERM) would keep the runtime from shutting down. So when
//! stdin and stdout are pipes (how MCP clients start servers) they are driven by the IO
//! reactor, non-blocking; otherwise (a terminal, a file) stdin is read on a plain thread that is
//! simply left behind at exit.
//!
//! Between the streams and rmcp sits a line filter (`line_filter.rs`): a line that is not
//! JSON gets a `-32700` parse error with `id: null` (rate-limited), where rmcp would skip it
//! silently.

use std::io::Read;
use std::os::fd::AsFd;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use super::ToolServer;
use super::line_filter::LineFilter;

/// Serves `server` on this process's stdin and stdout until the client disconnects or
/// `shutdown` is cancelled.
pub async fn serve_stdio(
    server: ToolServer,
    shutdown: CancellationToken,
) -> Result<(), std::io::Error> {
    let (reader, writer, filter) =
        if is_fifo(std::io::stdin().as_fd()) && is_fifo(std::io::stdout().as_fd()) {
            let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
            LineFilter::start(stdin, stdout)
        } else {
            LineFilter::start(stdin_on_a_thread()?, tokio::io::stdout())
        };
    let served = serve_filtered(server, reader, writer, &shutdown).await;
    // rmcp's last answers go out before the process ends.
    filter.finish(FLUSH_LIMIT).await;
    served
}

/// How long the end of the session waits for rmcp's last messages to reach stdout.
const FLUSH_LIMIT: Duration = Duration::from_secs(2);

async fn serve_filtered(
    server: ToolServer,
    reader: tokio::io::DuplexStream,
    writer: tokio::io::DuplexStream,
    shutdown: &CancellationToken,
) -> Result<(), std::io::Error> {
    let Some(running) = start(server.serve((reader, writer)), shutdown).await? else {
        return Ok(());
    };
    let stop = running.cancellation_token();
    tokio::select! {
        quit = running.waiting() => {
            quit.map_err(|e| std::io::Error::other(format!("MCP session ended with an error: {e}")))?;
        }
        _ = shutdown.cancelled() => stop.cancel(),
    }
    Ok(())
}

/// Waits for the `initialize` handshake, or for `shutdown` (then `None`).
async fn start<S, E>(
    serving: impl Future<Output = Result<S, E>>,
    shutdown: &CancellationToken,
) -> Result<Option<S>, std::io::Error>
where
    E: std::fmt::Display,
{
    tokio::select! {
        started = serving => started
            .map(Some)
            .map_err(|e| std::io::Error::other(format!("MCP initialization failed: {e}"))),
        _ = shutdown.cancelled() => Ok(None),
    }
}

/// Whether `fd` is a pipe.
fn is_fifo(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fd.try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|file| file.metadata())
        .is_ok_and(|metadata| metadata.file_type().is_fifo())
}

/// Stdin as an async reader fed by a plain thread (see the module docs for why).
fn stdin_on_a_thread() -> std::io::Result<tokio::io::DuplexStream> {
    const CHUNK: usize = 64 * 1024;
    let (mut writer, reader) = tokio::io::duplex(CHUNK);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    std::thread::Builder::new()
        .name("mcp-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; CHUNK];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tx.blocking_send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        tracing::warn!("reading stdin failed: {e}");
                        break;
                    }
                }
            }
        })?;
    tokio::spawn(async move {
        while let Some(chunk) = rx.recv().await {
            if writer.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // Dropping the writer is end of input for the reader.
    });
    Ok(reader)
}
