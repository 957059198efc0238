//! [`Bm25Index`]: an in-process inverted index over tool documents, ranked by BM25.
//!
//! Each tool is one document made of four fields: the name (split into words, see
//! [`crate::tokenize`]), the description, the parameter names and the parameter descriptions.
//! A term's frequency in a document is the weighted sum of its frequencies in the fields, and
//! the document length is the weighted sum of field lengths (a simple BM25F), so a word in the
//! name counts for more than the same word deep in a parameter description.
//!
//! Words are matched three ways, each weaker than the one before (the weights are
//! [`Tuning`]'s, chosen on BFCL's dev queries; see BENCHMARKS.md, "Tool search"):
//!
//! 1. as written: each word is indexed as it is, and a query word scores its exact form at
//!    weight 1;
//! 2. by stem ([`crate::stem`]): each word is also indexed as its stem in a term space of its
//!    own, so "creating events" finds `create_event`, at a lower weight, so a tool with the
//!    query's exact word keeps its lead;
//! 3. by synonym ([`crate::synonyms`]): a query word's synonyms are looked up by stem at a
//!    lower weight still, so "mail bob" finds `send_email`, but only adds candidates: a tool
//!    with the query's own word outranks one that only has a synonym of it.
//!
//! What makes a query fast is decided at indexing time: each term has a posting list of
//! `(slot, weighted tf)` in a flat vector, each slot's length sits in a dense vector, and a
//! query walks the postings of its terms into one score array, then selects the top `k`. A
//! query allocates its score array and candidate list once, never per posting.
//!
//! Updates are incremental: [`Bm25Index::upsert`] replaces a tool's postings and
//! [`Bm25Index::remove`] drops them; freed slots are reused, so an index that follows a
//! changing tool set (MCP `list_changed`) does not grow without bound.

use std::collections::HashMap;

use crate::doc::{Hit, ToolDoc};
use crate::stem::stem;
use crate::synonyms::synonyms_of;
use crate::tokenize::for_each_term;

/// How words are stemmed ([`crate::stem`]) in a [`Bm25Index`].
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stemming {
    /// Words are indexed and matched as they are.
    Off,
    /// Every word is replaced by its stem, in documents and queries alike.
    Replace,
    /// Each word is indexed twice, as it is and as its stem (in a term space of its own); a
    /// query word scores its exact form at weight 1 and its stem at `weight`, so an exact
    /// match keeps its lead over a match by stem only.
    Alongside {
        /// The weight of a match by stem, against 1 for the exact word.
        weight: f32,
    },
}

/// BM25 parameters and field weights.
///
/// Not part of the stable API: exposed for the benchmark that tuned the defaults on the BFCL
/// dev queries (`cargo bench --bench bfcl -- --tune`, and `--tune-stems` for stemming and
/// synonyms); see BENCHMARKS.md, "Tool search".
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation (0 = none, 1 = full).
    pub b: f32,
    /// Weight of a term in the tool's name.
    pub name: f32,
    /// Weight of a term in the description.
    pub description: f32,
    /// Weight of a term in a parameter name.
    pub param_name: f32,
    /// Weight of a term in a parameter description.
    pub param_description: f32,
    /// Whether and how terms are stemmed.
    pub stemming: Stemming,
    /// The weight of a query word's synonyms ([`crate::synonyms`]), against 1 for the word
    /// itself; 0 turns query expansion off. Synonyms are matched by stem, so they need
    /// stemming on.
    pub synonym_weight: f32,
}

impl Tuning {
    /// The tuning of releases before stemming and synonyms (for the benchmark's "before" row).
    pub fn exact_words_only() -> Self {
        Tuning {
            stemming: Stemming::Off,
            synonym_weight: 0.0,
            ..Tuning::default()
        }
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            k1: 1.2,
            b: 0.9,
            name: 2.0,
            description: 1.0,
            param_name: 0.5,
            param_description: 0.5,
            stemming: Stemming::Alongside { weight: 0.75 },
            synonym_weight: 0.1,
        }
    }
}

/// Prefixes a stem in [`Stemming::Alongside`]'s term space; words never contain it.
const STEM_MARK: char = '~';

/// One entry of a term's posting list.
#[derive(Debug, Clone, Copy)]
struct Posting {
    slot: u32,
    tf: f32,
}

/// What the index keeps per live document, to remove it again.
#[derive(Debug)]
struct Entry {
    name: String,
    /// The distinct term ids of the document (whose posting lists hold its slot).
    terms: Vec<u32>,
}

/// An inverted index over [`ToolDoc`]s ranked by BM25; see the [module docs](self).
#[derive(Debug)]
pub struct Bm25Index {
    tuning: Tuning,
    term_ids: HashMap<Box<str>, u32>,
    postings: Vec<Vec<Posting>>,
    /// Per slot: the live document, or `None` for a free slot.
    entries: Vec<Option<Entry>>,
    /// Per slot: the weighted document length (0 for a free slot).
    lengths: Vec<f32>,
    free: Vec<u32>,
    by_name: HashMap<String, u32>,
    total_length: f64,
}

impl Default for Bm25Index {
    fn default() -> Self {
        Self::new()
    }
}

impl Bm25Index {
    /// An empty index with the default (tuned) parameters.
    pub fn new() -> Self {
        Self::with_tuning(Tuning::default())
    }

    /// An empty index with the given parameters (for the tuning benchmark).
    #[doc(hidden)]
    pub fn with_tuning(tuning: Tuning) -> Self {
        Bm25Index {
            tuning,
            term_ids: HashMap::new(),
            postings: Vec::new(),
            entries: Vec::new(),
            lengths: Vec::new(),
            free: Vec::new(),
            by_name: HashMap::new(),
            total_length: 0.0,
        }
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Whether a tool of this name is indexed.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Adds `doc`, or replaces the tool of the same name.
    pub fn upsert(&mut self, doc: &ToolDoc) {
        self.remove(&doc.name);
        let t = self.tuning;
        // Weighted term frequencies of this document, summed over its fields.
        let mut tf: HashMap<u32, f32> = HashMap::new();
        let mut length = 0.0f32;
        let mut buf = String::new();
        let mut stem_buf = String::new();
        let mut key = String::new();
        let mut add = |index: &mut Self, text: &str, weight: f32| {
            for_each_term(text, &mut buf, |word| {
                let mut count = |id: u32| *tf.entry(id).or_insert(0.0) += weight;
                match t.stemming {
                    Stemming::Off => count(index.term_id(word)),
                    Stemming::Replace => count(index.term_id(stem(word, &mut stem_buf))),
                    Stemming::Alongside { .. } => {
                        count(index.term_id(word));
                        stem_key(stem(word, &mut stem_buf), &mut key);
                        count(index.term_id(&key));
                    }
                }
                // The length counts words, not the extra stem terms.
                length += weight;
            });
        };
        add(self, &doc.name, t.name);
        add(self, &doc.description, t.description);
        for p in doc.params() {
            add(self, p.name, t.param_name);
            add(self, p.description, t.param_description);
        }

        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.entries.push(None);
                self.lengths.push(0.0);
                (self.entries.len() - 1) as u32
            }
        };
        let mut terms: Vec<u32> = tf.keys().copied().collect();
        terms.sort_unstable();
        for &id in &terms {
            self.postings[id as usize].push(Posting { slot, tf: tf[&id] });
        }
        self.entries[slot as usize] = Some(Entry {
            name: doc.name.clone(),
            terms,
        });
        self.lengths[slot as usize] = length;
        self.total_length += f64::from(length);
        self.by_name.insert(doc.name.clone(), slot);
    }

    /// Removes the tool named `name`; false when it was not indexed.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(slot) = self.by_name.remove(name) else {
            return false;
        };
        if let Some(entry) = self.entries[slot as usize].take() {
            for id in entry.terms {
                self.postings[id as usize].retain(|p| p.slot != slot);
            }
        }
        self.total_length -= f64::from(self.lengths[slot as usize]);
        if self.by_name.is_empty() {
            // Keep rounding from accumulating across many updates.
            self.total_length = 0.0;
        }
        self.lengths[slot as usize] = 0.0;
        self.free.push(slot);
        true
    }

    /// The best `k` tools for `query`, best first; ties are broken by name so results are
    /// deterministic. Tools sharing no term with the query are not returned.
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit> {
        let live = self.by_name.len();
        if k == 0 || live == 0 {
            return Vec::new();
        }
        let Tuning { k1, b, .. } = self.tuning;
        let n = live as f32;
        let avg_length = (self.total_length / live as f64) as f32;
        let inv_avg = if avg_length > 0.0 {
            1.0 / avg_length
        } else {
            0.0
        };

        let mut scores = vec![0.0f32; self.entries.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut score_term = |term: &str, weight: f32| {
            let Some(&id) = self.term_ids.get(term) else {
                return;
            };
            let postings = &self.postings[id as usize];
            if postings.is_empty() {
                return;
            }
            let df = postings.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            let lift = weight * idf * (k1 + 1.0);
            for p in postings {
                let slot = p.slot as usize;
                let norm = k1 * (1.0 - b + b * self.lengths[slot] * inv_avg);
                let s = &mut scores[slot];
                if *s == 0.0 {
                    touched.push(p.slot);
                }
                *s += lift * p.tf / (p.tf + norm);
            }
        };
        let mut buf = String::new();
        let mut stem_buf = String::new();
        let mut key = String::new();
        let synonym_weight = self.tuning.synonym_weight;
        for_each_term(query, &mut buf, |word| {
            let stem_weight = match self.tuning.stemming {
                Stemming::Off => {
                    score_term(word, 1.0);
                    return;
                }
                Stemming::Replace => 1.0,
                Stemming::Alongside { weight } => {
                    score_term(word, 1.0);
                    weight
                }
            };
            let stemmed = stem(word, &mut stem_buf);
            // Where a stem is looked up: its own term space, or among the (stemmed) words.
            let alongside = matches!(self.tuning.stemming, Stemming::Alongside { .. });
            let mut lookup = |s: &str, weight: f32| {
                if alongside {
                    stem_key(s, &mut key);
                    score_term(&key, weight);
                } else {
                    score_term(s, weight);
                }
            };
            lookup(stemmed, stem_weight);
            if synonym_weight > 0.0 {
                for synonym in synonyms_of(stemmed) {
                    lookup(synonym, synonym_weight);
                }
            }
        });

        let name_of = |slot: u32| {
            self.entries[slot as usize]
                .as_ref()
                .map_or("", |e| e.name.as_str())
        };
        let better = |a: &u32, b: &u32| {
            scores[*b as usize]
                .total_cmp(&scores[*a as usize])
                .then_with(|| name_of(*a).cmp(name_of(*b)))
        };
        if touched.len() > k {
            touched.select_nth_unstable_by(k - 1, better);
            touched.truncate(k);
        }
        touched.sort_unstable_by(better);
        touched
            .into_iter()
            .map(|slot| Hit {
                name: name_of(slot).to_owned(),
                score: scores[slot as usize],
            })
            .collect()
    }

    fn term_id(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.term_ids.get(term) {
            return id;
        }
        let id = self.postings.len() as u32;
        self.postings.push(Vec::new());
        self.term_ids.insert(term.into(), id);
        id
    }
}

/// Writes the key of `stem` in [`Stemming::Alongside`]'s term space into `key`.
fn stem_key(stem: &str, key: &mut String) {
    key.clear();
    key.push(STEM_MARK);
    key.push_str(stem);
}
