//! Reading newline-delimited text from a peer with a bound on each line.
//!
//! `BufReader::lines()` keeps a line in memory until its newline comes, so a peer that
//! writes a gigabyte without one costs a gigabyte (and aborts the process under a memory
//! cap). [`BoundedLines`] keeps at most `limit` bytes of a line: a longer one is reported as
//! [`Line::TooLong`] with its first `limit` bytes, and the rest of it can be skipped without
//! being kept ([`BoundedLines::skip_rest_of_line`]), so memory stays at the limit plus the
//! reader's buffer whatever the peer sends. Lines are bytes, not `String`s: a line that is
//! not UTF-8 is the caller's to judge (a parse error, a lossy log line), never an I/O error
//! that stops the reading.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

/// One line read by [`BoundedLines::next_line`], without its newline.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line (the last one may lack its newline).
    Whole(Vec<u8>),
    /// A line longer than the limit: its first `limit` bytes. The rest is still unread.
    TooLong(Vec<u8>),
}

/// Lines of at most `limit` bytes from `R` (see the module docs).
pub(crate) struct BoundedLines<R> {
    reader: BufReader<R>,
    limit: usize,
}

impl<R: AsyncRead + Unpin> BoundedLines<R> {
    /// Reads `reader`'s lines, keeping at most `limit` bytes of each.
    pub(crate) fn new(reader: R, limit: usize) -> Self {
        Self {
            reader: BufReader::new(reader),
            limit,
        }
    }

    /// The limit, in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The next line, or `None` at the end of the input.
    pub(crate) async fn next_line(&mut self) -> io::Result<Option<Line>> {
        let mut line = Vec::new();
        // One byte over the limit tells a long line from one exactly at it.
        let read = (&mut self.reader)
            .take(self.limit as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            return Ok(None);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            return Ok(Some(Line::Whole(line)));
        }
        if line.len() > self.limit {
            line.truncate(self.limit);
            return Ok(Some(Line::TooLong(line)));
        }
        Ok(Some(Line::Whole(line))) // the end of the input, without a newline
    }

    /// Discards input up to and including the next newline (the rest of a
    /// [`Line::TooLong`]), keeping none of it.
    pub(crate) async fn skip_rest_of_line(&mut self) -> io::Result<()> {
        loop {
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                return Ok(());
            }
            match buffer.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    self.reader.consume(at + 1);
                    return Ok(());
                }
                None => {
                    let len = buffer.len();
                    self.reader.consume(len);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], limit: usize) -> Vec<Line> {
        let mut lines = BoundedLines::new(input, limit);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            let long = matches!(line, Line::TooLong(_));
            out.push(line);
            if long {
                lines.skip_rest_of_line().await.unwrap();
            }
        }
        out
    }

    #[tokio::test]
    async fn lines_up_to_the_limit_are_whole_and_longer_ones_are_cut_and_skipped() {
        let lines = all(b"abcd\nabcde\nab\n\xff\xfe\nend", 4).await;
        assert_eq!(
            lines,
            vec![
                Line::Whole(b"abcd".to_vec()),
                Line::TooLong(b"abcd".to_vec()),
                Line::Whole(b"ab".to_vec()),
                Line::Whole(b"\xff\xfe".to_vec()),
                Line::Whole(b"end".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn a_long_line_without_a_newline_at_the_end_is_skipped_to_the_end() {
        let mut lines = BoundedLines::new(&b"0123456789"[..], 3);
        assert_eq!(
            lines.next_line().await.unwrap(),
            Some(Line::TooLong(b"012".to_vec()))
        );
        lines.skip_rest_of_line().await.unwrap();
        assert_eq!(lines.next_line().await.unwrap(), None);
    }
}
