//! Unified diffs of an edit, for the user's view of Write and Edit.

/// A unified diff (three lines of context) from `old` to `new`, headed `a/path`, `b/path`.
/// Empty when nothing changed.
pub fn unified(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn diffs_show_removed_and_added_lines() {
        let d = super::unified("f.txt", "a\nb\nc\n", "a\nB\nc\n");
        assert!(
            d.starts_with("--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n"),
            "{d}"
        );
        assert!(d.contains("-b\n+B\n"), "{d}");
    }
}
