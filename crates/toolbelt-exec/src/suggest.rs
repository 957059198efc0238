//! "Did you mean": close tool names by edit distance.

/// The Levenshtein distance between `a` and `b`, counted in characters, with ASCII case
/// differences costing nothing (models often get `read` for `Read`).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    // One row of the dynamic-programming table is enough.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// Up to `limit` names from `candidates` close to `wanted`, closest first (ties by name).
///
/// A name is "close" when its distance is at most a third of the longer name's length (at
/// least 2), or when one name contains the other, so `grep` suggests `Grep` and
/// `search_files` does not suggest `Read`.
pub fn suggest<'a, I>(wanted: &str, candidates: I, limit: usize) -> Vec<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let wanted_lower = wanted.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter_map(|name| {
            let distance = edit_distance(wanted, name);
            let longest = wanted.chars().count().max(name.chars().count());
            let lower = name.to_ascii_lowercase();
            let contains = !wanted_lower.is_empty()
                && (lower.contains(&wanted_lower) || wanted_lower.contains(&lower));
            (distance <= (longest / 3).max(2) || contains).then_some((distance, name))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(limit)
        .map(|(_, name)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(edit_distance("Read", "read"), 0);
    }

    #[test]
    fn suggestions_are_closest_first_and_capped_at_the_limit() {
        let names = ["Read", "ReadFile", "Grep", "Bash", "read_file", "Write"];
        assert_eq!(
            suggest("read", names, 3),
            vec!["Read", "ReadFile", "read_file"]
        );
        assert_eq!(suggest("reed", names, 3), vec!["Read"]);
        assert_eq!(suggest("grep", names, 3), vec!["Grep"]);
        assert!(suggest("deploy_production", names, 3).is_empty());
    }
}
