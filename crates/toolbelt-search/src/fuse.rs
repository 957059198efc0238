//! Reciprocal rank fusion: one ranking from several, by rank alone.
//!
//! BM25 scores and cosine similarities live on different scales, so fusing them by score
//! needs calibration that does not carry across catalogs. Reciprocal rank fusion (Cormack,
//! Clarke and Büttcher, 2009) uses only positions: a tool at rank `r` (1-based) of a list
//! earns `1 / (k + r)` from it, and the earnings add up. `k` = 60 (the paper's value,
//! [`DEFAULT_RRF_K`]) keeps one list's top result from outweighing agreement between lists.

use std::collections::HashMap;

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
    let mut scores: HashMap<&str, f64> = HashMap::new();
    for list in lists {
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (i, hit) in list.iter().enumerate() {
            if !seen.insert(hit.name.as_str()) {
                continue;
            }
            let rank = i as f64 + 1.0;
            *scores.entry(hit.name.as_str()).or_insert(0.0) += 1.0 / (k as f64 + rank);
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
