//! stdio: a line that is not JSON gets JSON-RPC's parse error.
//!
//! rmcp skips a stdin line it cannot parse and says nothing, so a client that sent a broken
//! line waits for an answer that never comes. JSON-RPC's answer is a `-32700` (parse error)
//! response with `id: null` (there is no id to read). This filter sits between the process's
//! stdin/stdout and rmcp: every line that is JSON (or blank) goes on to rmcp unchanged; every
//! other line is answered with a parse error, written between rmcp's own messages (whole
//! lines only, so the two never interleave).
//!
//! A peer that answers errors with garbage (a misconfigured client echoing what it reads)
//! could turn each parse error into another broken line and so into a storm. So parse errors
//! are rate-limited: at most [`ERRORS_PER_WINDOW`] per [`WINDOW`]; lines beyond that are
//! dropped without an answer, and the log says how many once the window ends. A line longer
//! than [`MAX_LINE_BYTES`] is answered with a parse error too (and not kept in memory
//! beyond that size).

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::malformed::{MAX_BODY_BYTES, PARSE_ERROR};

/// The longest line passed on (as the HTTP transport's body limit).
pub(crate) const MAX_LINE_BYTES: usize = MAX_BODY_BYTES;
/// The most parse errors answered per window.
pub(crate) const ERRORS_PER_WINDOW: u32 = 10;
/// The rate limit's window.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);

/// The pipe size between the filter and rmcp.
const PIPE_BYTES: usize = 64 * 1024;

/// The filter's two tasks.
pub(crate) struct LineFilter {
    input: JoinHandle<()>,
    output: JoinHandle<()>,
}

impl LineFilter {
    /// Starts filtering `input` (stdin) and writing to `output` (stdout). Returns what rmcp
    /// reads (stdin's JSON lines), what rmcp writes (passed to stdout line by line), and the
    /// filter.
    pub(crate) fn start<R, W>(
        input: R,
        output: W,
    ) -> (tokio::io::DuplexStream, tokio::io::DuplexStream, Self)
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (rmcp_reader, to_rmcp) = tokio::io::duplex(PIPE_BYTES);
        let (rmcp_writer, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
        let (errors_tx, errors_rx) = mpsc::channel::<String>(ERRORS_PER_WINDOW as usize);
        let filter = Self {
            input: tokio::spawn(filter_input(input, to_rmcp, errors_tx)),
            output: tokio::spawn(write_output(from_rmcp, errors_rx, output)),
        };
        (rmcp_reader, rmcp_writer, filter)
    }

    /// Waits (up to `limit`) for what rmcp wrote last to reach stdout, then stops reading.
    pub(crate) async fn finish(self, limit: Duration) {
        self.input.abort();
        let mut output = self.output;
        if tokio::time::timeout(limit, &mut output).await.is_err() {
            output.abort();
        }
    }
}

/// Passes JSON lines to rmcp and answers the others, until stdin ends.
async fn filter_input<R>(
    input: R,
    mut to_rmcp: tokio::io::DuplexStream,
    errors: mpsc::Sender<String>,
) where
    R: AsyncRead + Unpin,
{
    let mut input = BufReader::new(input);
    let mut limiter = RateLimit::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        // One byte over the limit tells a long line from one exactly at it.
        let read = (&mut input)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => return, // end of input: dropping `to_rmcp` ends rmcp's input
            Ok(_) => {}
            Err(err) => {
                tracing::warn!("reading stdin failed: {err}");
                return;
            }
        }
        let complete = line.ends_with(b"\n");
        if !complete && line.len() > MAX_LINE_BYTES {
            skip_rest_of_line(&mut input).await;
            answer(&errors, &mut limiter, "the line is longer than the limit").await;
            continue;
        }
        let text = line.trim_ascii();
        if text.is_empty() || serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok() {
            let mut forwarded = to_rmcp.write_all(&line).await;
            if forwarded.is_ok() && !complete {
                forwarded = to_rmcp.write_all(b"\n").await;
            }
            if forwarded.is_err() {
                return; // rmcp stopped reading: the session is over
            }
            continue;
        }
        let why = serde_json::from_slice::<serde::de::IgnoredAny>(text)
            .err()
            .map_or_else(String::new, |e| e.to_string());
        answer(&errors, &mut limiter, &why).await;
    }
}

/// Discards input up to and including the next newline.
async fn skip_rest_of_line<R: AsyncRead + Unpin>(input: &mut BufReader<R>) {
    loop {
        let buffer = match input.fill_buf().await {
            Ok([]) | Err(_) => return,
            Ok(buffer) => buffer,
        };
        match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return;
            }
            None => {
                let len = buffer.len();
                input.consume(len);
            }
        }
    }
}

/// Queues a parse error response, if the rate limit allows one now.
async fn answer(errors: &mpsc::Sender<String>, limiter: &mut RateLimit, why: &str) {
    if !limiter.allow(Instant::now()) {
        return;
    }
    let message = format!("Parse error: the line is not JSON ({why})");
    let response = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": PARSE_ERROR, "message": message},
    });
    let _ = errors.send(response.to_string()).await;
}

/// Writes rmcp's output and the parse errors to stdout, whole lines at a time, until rmcp
/// is done writing.
async fn write_output<W: AsyncWrite + Unpin>(
    from_rmcp: tokio::io::DuplexStream,
    mut errors: mpsc::Receiver<String>,
    mut output: W,
) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    let mut errors_open = true;
    loop {
        line.clear();
        tokio::select! {
            read = from_rmcp.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                }
            },
            error = errors.recv(), if errors_open => match error {
                Some(error) => {
                    line.extend_from_slice(error.as_bytes());
                    line.push(b'\n');
                }
                None => {
                    errors_open = false;
                    continue;
                }
            },
        }
        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            return; // the client closed stdout
        }
    }
    let _ = output.flush().await;
}

/// At most [`ERRORS_PER_WINDOW`] answers per [`WINDOW`].
#[derive(Default)]
struct RateLimit {
    window_start: Option<Instant>,
    answered: u32,
    dropped: u64,
}

impl RateLimit {
    fn allow(&mut self, now: Instant) -> bool {
        let expired = self
            .window_start
            .is_none_or(|start| now.duration_since(start) >= WINDOW);
        if expired {
            if self.dropped > 0 {
                tracing::warn!(
                    dropped = self.dropped,
                    "stdin lines that were not JSON went unanswered (more than {ERRORS_PER_WINDOW} per {WINDOW:?})"
                );
            }
            self.window_start = Some(now);
            self.answered = 0;
            self.dropped = 0;
        }
        if self.answered < ERRORS_PER_WINDOW {
            self.answered += 1;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_answers_a_burst_up_to_the_limit_then_again_in_the_next_window() {
        let mut limiter = RateLimit::default();
        let start = Instant::now();
        let answered = (0..100).filter(|_| limiter.allow(start)).count();
        assert_eq!(answered, ERRORS_PER_WINDOW as usize);
        assert!(limiter.allow(start + WINDOW), "a new window answers again");
    }
}
