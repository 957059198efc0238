//! Project rules: AGENTS.md / CLAUDE.md from the project directory up to the repository
//! root, nearest last, with their paths, capped.

use toolbelt_agent::Extension;
use toolbelt_ext::{RulesConfig, RulesExtension, find_rules};

/// repo/.git, repo/AGENTS.md, repo/crates/AGENTS.md, repo/crates/app/{AGENTS,CLAUDE}.md, and
/// an AGENTS.md above the repository that must not be read.
fn nested() -> (tempfile::TempDir, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("AGENTS.md"), "ABOVE THE REPO\n").unwrap();
    let repo = root.path().join("repo");
    let app = repo.join("crates/app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(repo.join("AGENTS.md"), "root rule\n").unwrap();
    std::fs::write(repo.join("crates/AGENTS.md"), "crates rule\n").unwrap();
    std::fs::write(app.join("AGENTS.md"), "app rule\n").unwrap();
    std::fs::write(app.join("CLAUDE.md"), "app claude rule\n").unwrap();
    (root, app)
}

#[tokio::test]
async fn rules_are_merged_from_the_repository_root_down_to_the_project_nearest_last() {
    let (root, app) = nested();
    let rules = find_rules(&app, RulesConfig::default()).await;
    let repo = std::fs::canonicalize(root.path().join("repo")).unwrap();
    let paths: Vec<_> = rules.files.iter().map(|f| f.path.clone()).collect();
    assert_eq!(
        paths,
        [
            repo.join("AGENTS.md"),
            repo.join("crates/AGENTS.md"),
            repo.join("crates/app/AGENTS.md"),
            repo.join("crates/app/CLAUDE.md"),
        ]
    );
    let text = rules.instruction();
    assert!(
        !text.contains("ABOVE THE REPO"),
        "read past the repository root"
    );
    let order: Vec<usize> = ["root rule", "crates rule", "app rule", "app claude rule"]
        .iter()
        .map(|r| text.find(r).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(text.contains(&format!(
        "## {}\n\nroot rule",
        repo.join("AGENTS.md").display()
    )));
    assert!(rules.files.iter().all(|f| !f.truncated));
}

#[tokio::test]
async fn a_claude_md_linked_to_agents_md_is_read_once() {
    let (_root, app) = nested();
    std::fs::remove_file(app.join("CLAUDE.md")).unwrap();
    std::os::unix::fs::symlink("AGENTS.md", app.join("CLAUDE.md")).unwrap();
    let rules = find_rules(&app, RulesConfig::default()).await;
    assert_eq!(rules.instruction().matches("app rule").count(), 1);
}

#[tokio::test]
async fn each_file_and_the_total_are_capped_nearest_kept_and_cuts_marked() {
    let (_root, app) = nested();
    std::fs::write(app.join("AGENTS.md"), "é".repeat(100)).unwrap(); // 200 bytes
    let config = RulesConfig {
        max_file_bytes: 51,
        max_total_bytes: 80,
    };
    let rules = find_rules(&app, config).await;
    let app_rules = rules
        .files
        .iter()
        .find(|f| f.path.ends_with("crates/app/AGENTS.md"))
        .unwrap();
    assert!(app_rules.truncated);
    // Cut at a character boundary below 51 bytes: 25 characters of two bytes.
    assert!(app_rules.text.starts_with(&"é".repeat(25)));
    assert!(!app_rules.text.starts_with(&"é".repeat(26)));
    assert!(
        app_rules
            .text
            .ends_with("[… truncated: 50 of 200 bytes shown]")
    );
    // 50 bytes + "app claude rule\n" (16) leave 14 of the 80: "crates rule\n" (12) fits, then
    // the root's is cut to 2 bytes.
    let root_rules = &rules.files[0];
    assert!(root_rules.truncated);
    assert!(
        root_rules
            .text
            .starts_with("ro\n[… truncated: 2 of 10 bytes shown]")
    );
    // With nothing left, the farthest is left out with a mark.
    let tight = RulesConfig {
        max_file_bytes: 51,
        max_total_bytes: 66,
    };
    let rules = find_rules(&app, tight).await;
    assert!(
        rules.files[0].text.contains("left out"),
        "{:?}",
        rules.files[0]
    );
    assert!(rules.files[1].text.contains("left out"));
}

#[tokio::test]
async fn a_rules_file_linking_out_of_the_repository_is_not_read() {
    let (root, app) = nested();
    std::fs::write(root.path().join("private.txt"), "PRIVATE KEY\n").unwrap();
    std::fs::remove_file(app.join("CLAUDE.md")).unwrap();
    std::os::unix::fs::symlink(root.path().join("private.txt"), app.join("CLAUDE.md")).unwrap();
    let rules = find_rules(&app, RulesConfig::default()).await;
    assert!(!rules.instruction().contains("PRIVATE KEY"));
    assert_eq!(rules.warnings.len(), 1, "{:?}", rules.warnings);
    assert!(rules.warnings[0].contains("CLAUDE.md"));
}

#[tokio::test]
async fn the_extension_contributes_one_fragment_or_none() {
    let (_root, app) = nested();
    let extension = RulesExtension::new(&app);
    extension.init().await.unwrap();
    let fragments = extension.instructions();
    assert_eq!(fragments.len(), 1);
    assert!(fragments[0].starts_with("# Project rules"));

    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir(empty.path().join(".git")).unwrap();
    let extension = RulesExtension::new(empty.path());
    extension.init().await.unwrap();
    assert!(extension.instructions().is_empty());
}
