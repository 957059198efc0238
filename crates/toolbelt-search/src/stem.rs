//! An English suffix-stripping stemmer for index terms, so `creating`, `created`, `creates`
//! and `creation` meet `create` in one stem (`creat`).
//!
//! Written for this crate in the manner of Porter's algorithm: a word is read as runs of
//! consonants (C) and vowels (V), its *measure* is the number of VC pairs after an optional
//! leading C, and a suffix is only stripped when what remains is long enough by that measure.
//! The steps, in order:
//!
//! 1. plurals and verb endings: `-sses`, `-ies`, `-s`; `-eed`, `-ed`, `-ing` (with an `e`
//!    restored or a doubled consonant undone: `hoping` → `hope`, `running` → `run`); a final
//!    `y` after a vowel-bearing stem becomes `i` (`query`, `queries` → `queri`);
//! 2. derivational endings mapped to a shorter one: `-ational` → `-ate`, `-ization` → `-ize`,
//!    `-fulness` → `-ful`, `-ously` → `-ous`, …;
//! 3. `-icate`, `-ative`, `-alize`, `-ical`, `-ful`, `-ness`;
//! 4. `-al`, `-ance`, `-er`, `-ment`, `-ion`, `-ive`, `-ize`, … when the stem stays long;
//! 5. a final `e` and a double `l` on long stems.
//!
//! Guards that keep short or unusual words whole: words of three letters or fewer, words with
//! anything but ASCII letters (digits, non-Latin scripts) and words longer than
//! [`MAX_STEMMED_LEN`] bytes are returned as they are, so the cost of a word is bounded and a
//! pathological word is never walked more than a few times. `-ss`, `-us` and `-is` endings
//! keep their `s` (`class`, `status`, `analysis`).

/// Words longer than this (in bytes) are not stemmed: no English word needs it, and it bounds
/// the work per word.
pub const MAX_STEMMED_LEN: usize = 40;

/// The stem of a lowercase `word`, written into `buf` when it differs from the word.
///
/// ```
/// use toolbelt_search::stem::stem;
/// let mut buf = String::new();
/// assert_eq!(stem("creating", &mut buf), "creat");
/// assert_eq!(stem("create", &mut buf), "creat");
/// assert_eq!(stem("events", &mut buf), "event");
/// assert_eq!(stem("status", &mut buf), "status");
/// ```
pub fn stem<'a>(word: &'a str, buf: &'a mut String) -> &'a str {
    if word.len() <= 3
        || word.len() > MAX_STEMMED_LEN
        || !word.bytes().all(|b| b.is_ascii_lowercase())
    {
        return word;
    }
    let mut w = Word(word.as_bytes().to_vec());
    w.plurals();
    w.verb_endings();
    w.final_y();
    w.derivational();
    w.adjectival();
    w.long_suffixes();
    w.final_e_and_ll();
    if w.0 == word.as_bytes() {
        return word;
    }
    buf.clear();
    // Only ASCII letters were removed or appended, so the bytes are valid UTF-8.
    buf.extend(w.0.iter().map(|&b| b as char));
    buf
}

/// A word being stemmed, as ASCII lowercase bytes.
struct Word(Vec<u8>);

impl Word {
    fn consonant_at(&self, i: usize) -> bool {
        match self.0[i] {
            b'a' | b'e' | b'i' | b'o' | b'u' => false,
            // `y` is a vowel after a consonant (`query`), a consonant at the start or after a
            // vowel (`yes`, `player`).
            b'y' => i == 0 || !self.consonant_at(i - 1),
            _ => true,
        }
    }

    /// The number of vowel-consonant pairs in the first `len` bytes.
    fn measure(&self, len: usize) -> usize {
        let mut m = 0;
        let mut i = 0;
        while i < len && self.consonant_at(i) {
            i += 1;
        }
        loop {
            while i < len && !self.consonant_at(i) {
                i += 1;
            }
            if i >= len {
                return m;
            }
            while i < len && self.consonant_at(i) {
                i += 1;
            }
            m += 1;
        }
    }

    fn has_vowel(&self, len: usize) -> bool {
        (0..len).any(|i| !self.consonant_at(i))
    }

    /// The first `len` bytes end in a double consonant (`tt`, `ss`).
    fn double_consonant(&self, len: usize) -> bool {
        len >= 2 && self.0[len - 1] == self.0[len - 2] && self.consonant_at(len - 1)
    }

    /// The first `len` bytes end consonant-vowel-consonant, the last not `w`, `x` or `y`
    /// (`hop`, `fil`): the shape of a short stem that lost an `e`.
    fn cvc(&self, len: usize) -> bool {
        len >= 3
            && self.consonant_at(len - 1)
            && !self.consonant_at(len - 2)
            && self.consonant_at(len - 3)
            && !matches!(self.0[len - 1], b'w' | b'x' | b'y')
    }

    fn ends(&self, suffix: &str) -> bool {
        self.0.ends_with(suffix.as_bytes())
    }

    /// The length of the word without `suffix` (which it must end with).
    fn stem_len(&self, suffix: &str) -> usize {
        self.0.len() - suffix.len()
    }

    fn replace_end(&mut self, suffix_len: usize, with: &str) {
        self.0.truncate(self.0.len() - suffix_len);
        self.0.extend_from_slice(with.as_bytes());
    }

    /// Replaces the first suffix of `rules` the word ends with, when the stem before it has
    /// a measure above `min_measure`. Only the first matching suffix is considered.
    fn map_suffix(&mut self, rules: &[(&str, &str)], min_measure: usize) {
        for &(suffix, with) in rules {
            if self.ends(suffix) {
                let len = self.stem_len(suffix);
                if self.measure(len) > min_measure {
                    self.replace_end(suffix.len(), with);
                }
                return;
            }
        }
    }

    fn plurals(&mut self) {
        if self.ends("sses") || self.ends("ies") {
            self.replace_end(2, ""); // `addresses` → `address`, `queries` → `queri`
        } else if self.ends("s") && !self.ends("ss") && !self.ends("us") && !self.ends("is") {
            self.replace_end(1, "");
        }
    }

    fn verb_endings(&mut self) {
        if self.ends("eed") {
            if self.measure(self.stem_len("eed")) > 0 {
                self.replace_end(1, "");
            }
            return;
        }
        let suffix = if self.ends("ed") {
            "ed"
        } else if self.ends("ing") {
            "ing"
        } else {
            return;
        };
        let len = self.stem_len(suffix);
        if !self.has_vowel(len) {
            return; // `string`, `red`
        }
        self.replace_end(suffix.len(), "");
        if self.ends("at") || self.ends("bl") || self.ends("iz") {
            self.0.push(b'e'); // `creating` → `create`, `enabled` → `enable`
        } else if self.double_consonant(len) && !matches!(self.0[len - 1], b'l' | b's' | b'z') {
            self.0.pop(); // `running` → `run`, but `calling` → `call`
        } else if self.measure(len) == 1 && self.cvc(len) {
            self.0.push(b'e'); // `filed` → `file`
        }
    }

    fn final_y(&mut self) {
        let len = self.0.len();
        if self.ends("y") && self.has_vowel(len - 1) {
            self.0[len - 1] = b'i';
        }
    }

    fn derivational(&mut self) {
        // Checked longest first within each shared ending.
        const RULES: &[(&str, &str)] = &[
            ("ational", "ate"),
            ("tional", "tion"),
            ("enci", "ence"),
            ("anci", "ance"),
            ("izer", "ize"),
            ("abli", "able"),
            ("alli", "al"),
            ("entli", "ent"),
            ("eli", "e"),
            ("ousli", "ous"),
            ("ization", "ize"),
            ("ation", "ate"),
            ("ator", "ate"),
            ("alism", "al"),
            ("iveness", "ive"),
            ("fulness", "ful"),
            ("ousness", "ous"),
            ("aliti", "al"),
            ("iviti", "ive"),
            ("biliti", "ble"),
        ];
        // The suffixes overlap (`ization` ends like `ation`), so the longest match wins.
        let best = RULES
            .iter()
            .filter(|(suffix, _)| self.ends(suffix))
            .max_by_key(|(suffix, _)| suffix.len());
        if let Some(&(suffix, with)) = best {
            self.map_suffix(&[(suffix, with)], 0);
        }
    }

    fn adjectival(&mut self) {
        self.map_suffix(
            &[
                ("icate", "ic"),
                ("ative", ""),
                ("alize", "al"),
                ("iciti", "ic"),
                ("ical", "ic"),
                ("ful", ""),
                ("ness", ""),
            ],
            0,
        );
    }

    fn long_suffixes(&mut self) {
        // Longest first where one suffix ends another (`ement`, `ment`, `ent`).
        const SUFFIXES: &[&str] = &[
            "ement", "ance", "ence", "able", "ible", "ment", "ant", "ent", "ism", "ate", "iti",
            "ous", "ive", "ize", "ion", "al", "er", "ic", "ou",
        ];
        let Some(&suffix) = SUFFIXES.iter().find(|s| self.ends(s)) else {
            return;
        };
        let len = self.stem_len(suffix);
        if self.measure(len) <= 1 {
            return;
        }
        // `-ion` only after `s` or `t` (`conversion`, `creation`), not in `region`.
        if suffix == "ion" && !matches!(self.0.get(len.wrapping_sub(1)), Some(b's' | b't')) {
            return;
        }
        self.replace_end(suffix.len(), "");
    }

    fn final_e_and_ll(&mut self) {
        let len = self.0.len();
        if self.ends("e") {
            let m = self.measure(len - 1);
            if m > 1 || (m == 1 && !self.cvc(len - 1)) {
                self.0.pop();
            }
        }
        let len = self.0.len();
        if self.ends("ll") && self.measure(len) > 1 {
            self.0.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stems(word: &str) -> String {
        stem(word, &mut String::new()).to_owned()
    }

    #[test]
    fn inflections_of_one_verb_meet_in_one_stem() {
        for group in [
            &["create", "creates", "created", "creating"][..],
            &["delete", "deleted", "deleting", "deletes", "deletion"],
            &["event", "events"],
            &["file", "files", "filed", "filing"],
            &["query", "queries"],
            &["run", "running", "runs"],
            &["schedule", "scheduled", "scheduling", "schedules"],
            &["convert", "converted", "converter", "converts"],
            &["calculate", "calculating", "calculation", "calculator"],
            &["email", "emails", "emailed"],
            &["hope", "hoping"],
        ] {
            let want = stems(group[0]);
            for word in group {
                assert_eq!(stems(word), want, "{word} in {group:?}");
            }
        }
    }

    #[test]
    fn short_unusual_and_s_ending_words_stay_whole() {
        for word in [
            "get", "new", "ssh", "status", "analysis", "class", "string", "ring", "sha256",
            "écrire", "news",
        ] {
            let got = stems(word);
            assert!(
                got == word || word == "news" && got == "new",
                "{word} became {got}"
            );
        }
    }

    #[test]
    fn distinct_tool_words_stay_apart() {
        for (a, b) in [
            ("user", "use"),
            ("search", "seat"),
            ("read", "ready"),
            ("list", "listen"),
        ] {
            assert_ne!(stems(a), stems(b), "{a} and {b}");
        }
    }

    #[test]
    fn long_and_pathological_words_are_bounded() {
        let long = "ing".repeat(100_000);
        assert_eq!(stems(&long), long);
        let at_limit = format!("{}ing", "abc".repeat(12));
        assert!(stems(&at_limit).len() <= at_limit.len());
        for word in [
            "ies",
            "sses",
            "eed",
            "ying",
            "yyyyyyyy",
            "eeeeeeeeeeeeeed",
            "ationalization",
        ] {
            let _ = stems(word);
        }
    }
}
