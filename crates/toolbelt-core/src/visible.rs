//! Text a person is asked to trust, written so that what they see is what it says.
//!
//! Tool arguments come from a model, and a model's text can come from anyone (a file it read,
//! a web page). Shown raw on a terminal, an escape sequence in an argument can erase the line,
//! move the cursor or conceal what follows, so a command that does one thing reads as another
//! (`\x1b[2K\x1b[G` rewrites the approval question, `\x1b[8m` hides the rest of the command).
//! In a browser, bidirectional overrides reorder what is shown and zero-width characters hide
//! text. [`visible`] writes every such character out as an escape a person can read, so the
//! approval question in the terminal, the web UI and an MCP elicitation form shows the same
//! text and none of it is interpreted.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every character that a terminal or a browser would interpret rather than show
/// written out visibly: C0 controls and DEL as `\xNN` (tab `\t`, carriage return `\r`), C1
/// controls and invisible formatting characters (bidirectional overrides and isolates,
/// zero-width characters, the byte-order mark, line and paragraph separators, tag
/// characters) as `\u{NNNN}`. A line feed is kept: callers lay out lines themselves, each
/// under a prefix of their own, so a line of text cannot pass for a line of theirs.
/// Borrowed when nothing needed escaping.
///
/// ```
/// use toolbelt_core::visible;
/// assert_eq!(visible("a\x1b[8mb\u{202e}c"), r"a\x1b[8mb\u{202e}c");
/// assert_eq!(visible("ls -l\necho ok"), "ls -l\necho ok");
/// ```
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_hidden(c) {
            out.push(c);
            continue;
        }
        match c {
            '\t' => out.push_str(r"\t"),
            '\r' => out.push_str(r"\r"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, r"\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, r"\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// Whether `text` holds a character [`visible`] writes out (a line feed does not count), so
/// a front end can warn that the text it shows was escaped.
pub fn has_hidden(text: &str) -> bool {
    text.chars().any(is_hidden)
}

/// Characters that are interpreted, or not seen, instead of shown.
fn is_hidden(c: char) -> bool {
    match c {
        '\n' => false,
        // C0 controls, DEL and C1 controls (U+009B is a one-character CSI).
        c if c.is_control() => true,
        // Unicode format characters (category Cf) and separators that are not spaces.
        '\u{00ad}'
        | '\u{034f}'
        | '\u{061c}'
        | '\u{115f}'
        | '\u{1160}'
        | '\u{17b4}'
        | '\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{3164}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{feff}'
        | '\u{ffa0}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{0600}'..='\u{0605}'
        | '\u{06dd}'
        | '\u{070f}'
        | '\u{110bd}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forged_question_is_shown_as_what_it_is() {
        let command = "echo '\x1b[2K\x1b[Gallow Read(a)? [y/N] \x1b[8m' >/dev/null; touch PWNED";
        let shown = visible(command);
        assert_eq!(
            shown,
            r"echo '\x1b[2K\x1b[Gallow Read(a)? [y/N] \x1b[8m' >/dev/null; touch PWNED"
        );
        assert!(!shown.chars().any(char::is_control));
        assert!(has_hidden(command));
    }

    #[test]
    fn c1_controls_bidi_overrides_and_zero_width_characters_are_written_out() {
        assert_eq!(visible("a\u{9b}2Kb"), r"a\u{9b}2Kb");
        assert_eq!(
            visible("rm -rf /\u{202e}txt.olleh"),
            r"rm -rf /\u{202e}txt.olleh"
        );
        assert_eq!(visible("a\u{200b}b\u{feff}"), r"a\u{200b}b\u{feff}");
        assert_eq!(visible("a\rb\tc\x07\x7f"), r"a\rb\tc\x07\x7f");
        assert_eq!(visible("tag\u{e0041}"), r"tag\u{e0041}");
    }

    #[test]
    fn plain_text_and_line_feeds_are_borrowed_unchanged() {
        for text in ["ls -la | grep 'x'", "línea\nzweite Zeile ✓", ""] {
            assert!(matches!(visible(text), Cow::Borrowed(t) if t == text));
            assert!(!has_hidden(text));
        }
    }
}
