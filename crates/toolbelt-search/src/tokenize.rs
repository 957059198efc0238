//! Turning tool names and text into index terms.
//!
//! Tool names carry most of a tool's meaning but are written as identifiers
//! (`getCurrentWeather`, `fs.read_file`, `HTTPServer2`), so every piece of text is split the
//! same way: on anything that is not a letter or digit, where lower case turns to upper case,
//! before the last capital of a run followed by lower case (`HTTPServer` → `http`, `server`),
//! and where letters meet digits. Words are lowercased; [`terms`] then drops a short list of
//! English stop words. Stemming ([`crate::stem`]) and synonyms ([`crate::synonyms`]) are
//! applied to these words by the index.

/// Splits a tool name (or any text) into lowercase words, keeping every word.
///
/// ```
/// use toolbelt_search::tokenize::name_words;
/// assert_eq!(name_words("getCurrentWeather"), ["get", "current", "weather"]);
/// assert_eq!(name_words("fs.read_file"), ["fs", "read", "file"]);
/// assert_eq!(name_words("HTTPServer2-status"), ["http", "server", "2", "status"]);
/// ```
pub fn name_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, &mut String::new(), |w| out.push(w.to_owned()));
    out
}

/// The words of `text` the index looks at: [`name_words`] without stop words (before
/// stemming).
///
/// ```
/// use toolbelt_search::tokenize::terms;
/// assert_eq!(terms("Lists the files in a directory"), ["lists", "files", "directory"]);
/// ```
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, &mut String::new(), |t| out.push(t.to_owned()));
    out
}

/// Calls `f` with each word of `text` that is not a stop word, reusing `buf` so no word is
/// allocated.
pub(crate) fn for_each_term(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for_each_word(text, buf, |word| {
        if !is_stop_word(word) {
            f(word);
        }
    });
}

/// Calls `f` with each lowercase word of `text` (split as the module doc says).
fn for_each_word(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    #[derive(Clone, Copy, PartialEq)]
    enum Class {
        Lower,
        Upper,
        Digit,
        Other,
    }
    fn class(c: char) -> Class {
        if c.is_ascii_digit() || (c.is_numeric() && !c.is_alphabetic()) {
            Class::Digit
        } else if c.is_uppercase() {
            Class::Upper
        } else if c.is_alphanumeric() {
            Class::Lower
        } else {
            Class::Other
        }
    }
    buf.clear();
    let mut emit = |buf: &mut String| {
        if !buf.is_empty() {
            f(buf);
            buf.clear();
        }
    };
    let mut chars = text.chars().peekable();
    let mut prev = Class::Other;
    while let Some(c) = chars.next() {
        let here = class(c);
        if here == Class::Other {
            emit(buf);
            prev = here;
            continue;
        }
        let boundary = match (prev, here) {
            (Class::Lower, Class::Upper) => true,
            (Class::Digit, Class::Upper | Class::Lower) => true,
            (Class::Upper | Class::Lower, Class::Digit) => true,
            // The last capital of a run starts a new word when lower case follows.
            (Class::Upper, Class::Upper) => chars.peek().map(|&n| class(n)) == Some(Class::Lower),
            _ => false,
        };
        if boundary {
            emit(buf);
        }
        if c.is_ascii() {
            buf.push(c.to_ascii_lowercase());
        } else {
            buf.extend(c.to_lowercase());
        }
        prev = here;
    }
    emit(buf);
}

/// Common English words that carry no meaning for picking a tool.
///
/// Kept short on purpose: words like "get", "list", "find", "all" or "new" do distinguish
/// tools and stay in.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do", "does",
    "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "our", "she", "should", "so", "some", "such",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will",
    "with", "would", "you", "your",
];

fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }
}
