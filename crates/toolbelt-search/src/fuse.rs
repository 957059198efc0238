//! Reciprocal rank fusion: one ranking from several, by rank alone.
//!
//! BM25 scores and cosine similarities live on different scales, so fusing them by score
//! needs calibration that does not carry across catalogs. Reciprocal rank fusion (Cormack,
//! Clarke and Büttcher, 2009) uses only positions: a tool at rank `r` (1-based) of a list
//! earns `1 / (k + r)` from it, and the earnings add up. `k` = 60 (the paper's value,
//! [`DEFAULT_RRF_K`]) keeps one list's top result from outweighing agreement between lists.

use std::collections::{HashMap, HashSet};

use crate::doc::Hit;

/// The `k` of reciprocal rank fusion used by hybrid search.
pub const DEFAULT_RRF_K: usize = 60;

/// Fuses ranked lists (best first) into one, best first, scored by the sum of
/// `1 / (k + rank)` over the lists that hold each name. Ties are broken by name.
///
/// A name repeated within one list counts at its best rank only.
///
/// ```
/// use toolbelt_search::{Hit, reciprocal_rank_fusion};
/// let hit = |name: &str| Hit { name: name.into(), score: 0.0 };
/// let bm25 = vec![hit("read_file"), hit("write_file")];
/// let embed = vec![hit("write_file"), hit("list_dir")];
/// let fused = reciprocal_rank_fusion(&[bm25, embed], 60);
/// assert_eq!(fused[0].name, "write_file"); // in both lists
/// ```
pub fn reciprocal_rank_fusion(lists: &[Vec<Hit>], k: usize) -> Vec<Hit> {
    let weighted: Vec<(&[Hit], f64)> = lists.iter().map(|list| (list.as_slice(), 1.0)).collect();
    weighted_rank_fusion(&weighted, k as f64)
}

/// Reciprocal rank fusion with a weight per list: a tool at rank `r` of a list of weight `w`
/// earns `w / (k + r)`. Hybrid search weighs the embedding ranking above BM25's (see
/// [`crate::Method::Hybrid`]). A name repeated within one list counts at its best rank only.
///
/// ```
/// use toolbelt_search::{Hit, weighted_rank_fusion};
/// let hit = |name: &str| Hit { name: name.into(), score: 0.0 };
/// let bm25 = [hit("read_file"), hit("list_dir")];
/// let embed = [hit("list_dir"), hit("read_file")];
/// let fused = weighted_rank_fusion(&[(&bm25, 1.0), (&embed, 2.0)], 10.0);
/// assert_eq!(fused[0].name, "list_dir"); // first in the heavier list
/// ```
pub fn weighted_rank_fusion(lists: &[(&[Hit], f64)], k: f64) -> Vec<Hit> {
    let mut scores: HashMap<&str, f64> = HashMap::new();
    for (list, weight) in lists {
        let mut seen: HashSet<&str> = HashSet::new();
        for (i, hit) in list.iter().enumerate() {
            if !seen.insert(hit.name.as_str()) {
                continue;
            }
            let rank = i as f64 + 1.0;
            *scores.entry(hit.name.as_str()).or_insert(0.0) += weight / (k + rank);
        }
    }
    let mut fused: Vec<(&str, f64)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    fused
        .into_iter()
        .map(|(name, score)| Hit {
            name: name.to_owned(),
            score: score as f32,
        })
        .collect()
}
