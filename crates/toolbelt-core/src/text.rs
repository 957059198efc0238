//! Cutting text to a length, the one way every crate does it.
//!
//! Lengths count characters (Unicode scalar values), never bytes, so a cut never splits a
//! character and a limit means the same in every language. A cut is always marked: `…` where
//! a line must fit a width ([`shorten`]), `… [N more characters not shown]` where a reader
//! (often a model) should know how much is missing ([`cut_noted`]).

use std::borrow::Cow;

/// The first `max` characters of `text` (all of it when shorter), with no marker: for a
/// stored prefix whose cut the surrounding structure already says.
///
/// ```
/// assert_eq!(toolbelt_core::text::char_prefix("héllo", 2), "hé");
/// ```
pub fn char_prefix(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// `text` in at most `max` characters: whole when it fits, else its first `max - 1`
/// characters and `…`.
///
/// ```
/// use toolbelt_core::text::shorten;
/// assert_eq!(shorten("a long line", 6), "a lon…");
/// assert_eq!(shorten("short", 6), "short");
/// ```
pub fn shorten(text: &str, max: usize) -> Cow<'_, str> {
    let Some((end, _)) = text.char_indices().nth(max) else {
        return Cow::Borrowed(text);
    };
    let keep = char_prefix(&text[..end], max.saturating_sub(1));
    Cow::Owned(format!("{keep}…"))
}

/// The first `max` characters of `text` and, when more followed, a note of how many were
/// left out; also returns that number (0 when nothing was cut).
///
/// ```
/// use toolbelt_core::text::cut_noted;
/// let (kept, omitted) = cut_noted("abcdef", 4);
/// assert_eq!((kept.as_ref(), omitted), ("abcd… [2 more characters not shown]", 2));
/// ```
pub fn cut_noted(text: &str, max: usize) -> (Cow<'_, str>, usize) {
    let Some((end, _)) = text.char_indices().nth(max) else {
        return (Cow::Borrowed(text), 0);
    };
    let omitted = text[end..].chars().count();
    let noun = if omitted == 1 {
        "character"
    } else {
        "characters"
    };
    (
        Cow::Owned(format!(
            "{}… [{omitted} more {noun} not shown]",
            &text[..end]
        )),
        omitted,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_count_characters_and_never_split_one() {
        let text = "é".repeat(10);
        assert_eq!(char_prefix(&text, 3), "ééé");
        assert_eq!(shorten(&text, 4), "ééé…");
        assert_eq!(shorten(&text, 10), text);
        assert_eq!(cut_noted(&text, 9).1, 1);
        assert!(
            cut_noted(&text, 9)
                .0
                .ends_with("[1 more character not shown]")
        );
        assert_eq!(shorten("abc", 0), "…");
    }
}
