//! Selection: the at most `max_tools` candidates a turn keeps, by a model or by the index.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::Ordering;

use toolbelt_core::Declaration;
use toolbelt_model::Message;

use super::{Inner, Strategy, deferred, latest_question, llm};
use crate::Invocation;

/// The selected names and the key of the inputs they were chosen from. The previous
/// selection of the run is reused when the key is the same (same question, same candidates),
/// so the tool rounds of one answer cost one search.
pub(super) async fn select(
    inner: &Inner,
    strategy: &Strategy,
    inv: &Invocation,
    messages: &[Message],
    candidates: &[&Declaration],
    previous: Option<(u64, Vec<String>)>,
) -> Result<(u64, Vec<String>), String> {
    let Some((_, question)) = latest_question(messages) else {
        // Nothing to search for: keep every candidate.
        let all = candidates.iter().map(|d| d.name.to_string()).collect();
        return Ok((0, all));
    };
    let key = selection_key(question, candidates, inner.max_tools);
    if let Some((previous_key, names)) = previous
        && previous_key == key
    {
        return Ok((key, names));
    }
    let names = match strategy {
        Strategy::Llm { model } => {
            let listed: Vec<(&str, &str)> = candidates
                .iter()
                .map(|d| (d.name.as_str(), d.description.as_str()))
                .collect();
            llm::choose(model, Some(inv), question, &listed, inner.max_tools).await?
        }
        Strategy::Index { method, rewrite } => {
            let query = match rewrite {
                Some(model) => llm::rewrite(model, inv, question).await?,
                None => question.to_string(),
            };
            let allowed: HashSet<&str> = candidates.iter().map(|d| d.name.as_str()).collect();
            let everything = inner.indexed.load(Ordering::Relaxed).max(candidates.len());
            let hits = inner
                .index
                .lock()
                .await
                .search(&query, everything, *method)
                .await
                .map_err(|e| format!("the tool index search failed: {e}"))?;
            hits.into_iter()
                .filter(|hit| deferred::matches(hit, *method))
                .map(|hit| hit.name)
                .filter(|name| allowed.contains(name.as_str()))
                .take(inner.max_tools)
                .collect()
        }
    };
    Ok((key, names))
}

/// A hash of what a selection depends on.
fn selection_key(question: &str, candidates: &[&Declaration], max_tools: usize) -> u64 {
    let mut hasher = DefaultHasher::new();
    question.hash(&mut hasher);
    max_tools.hash(&mut hasher);
    for declaration in candidates {
        declaration.name.as_str().hash(&mut hasher);
        declaration.description.hash(&mut hasher);
    }
    hasher.finish()
}
