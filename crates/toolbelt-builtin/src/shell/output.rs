//! Capped command output: keeps the head and the tail of what a command printed and reports
//! how much was cut from the middle.
//!
//! A command may print gigabytes; a model can read a few tens of thousands of characters. The
//! start of the output usually says what the command did and the end says how it finished,
//! so both are kept.

/// Bytes kept per character of the cap. UTF-8 needs at most four bytes per character, so
/// keeping four bytes per character guarantees that the decoded head and tail are long enough.
const BYTES_PER_CHAR: usize = 4;

/// Collects a byte stream and renders at most `max_chars` characters of it: the first half
/// and the last half, with a marker naming how many characters were left out.
///
/// Memory stays bounded (about `8 * max_chars` bytes) however much is pushed.
///
/// ```
/// use toolbelt_builtin::shell::CappedOutput;
///
/// let mut out = CappedOutput::new(10);
/// out.push(b"0123456789abcdefghij");
/// let text = out.render();
/// assert!(text.text.starts_with("01234"));
/// assert!(text.text.ends_with("fghij"));
/// assert_eq!(text.omitted_chars, 10);
/// ```
#[derive(Debug, Clone)]
pub struct CappedOutput {
    max_chars: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total_chars: usize,
    total_bytes: u64,
}

/// The rendered form of a [`CappedOutput`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedOutput {
    /// The text shown: everything, or the head, a marker line and the tail.
    pub text: String,
    /// How many characters were left out of the middle (0 when nothing was cut).
    pub omitted_chars: usize,
    /// How many bytes were pushed in total.
    pub total_bytes: u64,
}

impl CappedOutput {
    /// The most characters it renders.
    pub fn max_chars(&self) -> usize {
        self.max_chars
    }

    /// An empty buffer that renders at most `max_chars` characters (at least 2).
    pub fn new(max_chars: usize) -> Self {
        Self {
            max_chars: max_chars.max(2),
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total_chars: 0,
            total_bytes: 0,
        }
    }

    /// Appends bytes as they arrive.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        // A UTF-8 character starts at every byte that is not a continuation byte; invalid
        // bytes count as one character each, as lossy decoding renders them.
        self.total_chars += bytes.iter().filter(|b| (**b & 0xC0) != 0x80).count();
        let head_cap = self.head_chars() * BYTES_PER_CHAR;
        let room = head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        if rest.is_empty() {
            return;
        }
        let tail_cap = self.tail_chars() * BYTES_PER_CHAR;
        let rest = if rest.len() > tail_cap {
            &rest[rest.len() - tail_cap..]
        } else {
            rest
        };
        let overflow = (self.tail.len() + rest.len()).saturating_sub(tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(rest);
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }

    fn head_chars(&self) -> usize {
        self.max_chars / 2
    }

    fn tail_chars(&self) -> usize {
        self.max_chars - self.head_chars()
    }

    /// Renders the output, cutting the middle when it is longer than the cap.
    pub fn render(&self) -> RenderedOutput {
        let mut all = self.head.clone();
        let contiguous = self.total_bytes == (self.head.len() + self.tail.len()) as u64;
        if contiguous {
            all.extend(self.tail.iter());
            let text = String::from_utf8_lossy(&all);
            let chars = text.chars().count();
            if chars <= self.max_chars {
                return RenderedOutput {
                    text: text.into_owned(),
                    omitted_chars: 0,
                    total_bytes: self.total_bytes,
                };
            }
            let head: String = text.chars().take(self.head_chars()).collect();
            let tail: String = text.chars().skip(chars - self.tail_chars()).collect();
            return self.joined(head, tail, chars - self.head_chars() - self.tail_chars());
        }
        let head_text = String::from_utf8_lossy(&self.head);
        let head: String = head_text.chars().take(self.head_chars()).collect();
        let tail_bytes: Vec<u8> = self.tail.iter().copied().collect();
        // The ring may start in the middle of a character: skip its continuation bytes so
        // the tail does not begin with a replacement character.
        let start = tail_bytes
            .iter()
            .position(|b| (*b & 0xC0) != 0x80)
            .unwrap_or(tail_bytes.len());
        let tail_text = String::from_utf8_lossy(&tail_bytes[start..]);
        let tail_len = tail_text.chars().count();
        let tail: String = tail_text
            .chars()
            .skip(tail_len.saturating_sub(self.tail_chars()))
            .collect();
        let shown = head.chars().count() + tail.chars().count();
        self.joined(head, tail, self.total_chars.saturating_sub(shown))
    }

    fn joined(&self, head: String, tail: String, omitted: usize) -> RenderedOutput {
        let mut text = head;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("\n... [{omitted} characters omitted] ...\n\n"));
        text.push_str(&tail);
        RenderedOutput {
            text,
            omitted_chars: omitted,
            total_bytes: self.total_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut out = CappedOutput::new(100);
        out.push("héllo ".as_bytes());
        out.push(b"world");
        let r = out.render();
        assert_eq!(r.text, "héllo world");
        assert_eq!(r.omitted_chars, 0);
    }

    #[test]
    fn long_output_keeps_head_and_tail_in_many_small_pushes() {
        let mut out = CappedOutput::new(20);
        for i in 0..10_000 {
            out.push(format!("{:04}\n", i % 10_000).as_bytes());
        }
        let r = out.render();
        assert!(r.text.starts_with("0000\n0001\n"), "{}", r.text);
        assert!(r.text.ends_with("9998\n9999\n"), "{}", r.text);
        assert_eq!(r.omitted_chars, 50_000 - 20);
    }

    #[test]
    fn multibyte_characters_are_never_split() {
        let mut out = CappedOutput::new(6);
        for _ in 0..1000 {
            out.push("é".as_bytes());
        }
        let r = out.render();
        assert!(!r.text.contains('\u{FFFD}'));
        assert!(r.text.starts_with("ééé"));
        assert!(r.text.ends_with("ééé"));
        assert_eq!(r.omitted_chars, 994);
    }
}
