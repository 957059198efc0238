//! Turning tool names and text into index terms.
//!
//! Tool names carry most of a tool's meaning but are written as identifiers
//! (`getCurrentWeather`, `fs.read_file`, `HTTPServer2`), so every piece of text is split the
//! same way: on anything that is not a letter or digit, where lower case turns to upper case,
//! before the last capital of a run followed by lower case (`HTTPServer` → `http`, `server`),
//! and where letters meet digits. Words are lowercased; [`terms`] then drops a short list of
//! English stop words. A light plural stemmer exists for measurement but is off by default:
//! it did not raise recall on the BFCL dev queries (see BENCHMARKS.md, "Tool search").

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

/// The index terms of `text`, as the default index makes them: [`name_words`] without stop
/// words.
///
/// ```
/// use toolbelt_search::tokenize::terms;
/// assert_eq!(terms("Lists the files in a directory"), ["lists", "files", "directory"]);
/// ```
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, &mut String::new(), false, |t| out.push(t.to_owned()));
    out
}

/// Calls `f` with each index term of `text` (stemmed when `stemming`), reusing `buf` so no
/// term is allocated.
pub(crate) fn for_each_term(text: &str, buf: &mut String, stemming: bool, mut f: impl FnMut(&str)) {
    let mut stem_buf = String::new();
    for_each_word(text, buf, |word| {
        if is_stop_word(word) {
            return;
        }
        if stemming {
            f(stem(word, &mut stem_buf));
        } else {
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

/// A light plural stemmer (after Harman's S-stemmer): `queries` → `query`, `files` → `file`,
/// `boxes` → `box`; words of four letters or fewer, and `-ss`/`-us`/`-is` endings, stay.
fn stem<'a>(word: &'a str, buf: &'a mut String) -> &'a str {
    if word.len() <= 4 || !word.is_ascii() {
        return word;
    }
    if let Some(base) = word.strip_suffix("ies")
        && !base.ends_with(['e', 'a'])
    {
        buf.clear();
        buf.push_str(base);
        buf.push('y');
        return buf;
    }
    for suffix in ["sses", "xes", "ches", "shes"] {
        if word.ends_with(suffix) {
            return &word[..word.len() - 2];
        }
    }
    if word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
    {
        return &word[..word.len() - 1];
    }
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn stemmer_folds_plurals_only() {
        let mut buf = String::new();
        for (word, want) in [
            ("queries", "query"),
            ("files", "file"),
            ("boxes", "box"),
            ("matches", "match"),
            ("addresses", "address"),
            ("status", "status"),
            ("analysis", "analysis"),
            ("class", "class"),
            ("news", "news"),
        ] {
            assert_eq!(stem(word, &mut buf), want, "{word}");
        }
    }
}
