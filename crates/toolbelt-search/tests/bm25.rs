//! BM25 over tool documents: how names are split, how a realistic catalog ranks, and how
//! incremental updates change results.

use serde_json::json;
use toolbelt_search::tokenize::{name_words, terms};
use toolbelt_search::{Bm25Index, ToolDoc, Tuning};

#[test]
fn names_split_on_case_digits_and_separators() {
    let cases: &[(&str, &[&str])] = &[
        ("get_current_weather", &["get", "current", "weather"]),
        ("getCurrentWeather", &["get", "current", "weather"]),
        ("GetCurrentWeather", &["get", "current", "weather"]),
        ("fs.read-file/v2", &["fs", "read", "file", "v", "2"]),
        ("HTTPServerStatus", &["http", "server", "status"]),
        ("parseJSON", &["parse", "json"]),
        ("sha256sum", &["sha", "256", "sum"]),
        (
            "mcp__github__create_issue",
            &["mcp", "github", "create", "issue"],
        ),
        ("ÉcrireFichier", &["écrire", "fichier"]),
        ("__", &[]),
    ];
    for (name, want) in cases {
        assert_eq!(name_words(name), *want, "{name}");
    }
}

#[test]
fn index_terms_drop_stop_words_but_keep_tool_verbs() {
    assert_eq!(
        terms("Get all the issues of a repository and list them"),
        ["get", "all", "issues", "repository", "list"]
    );
}

/// A small catalog shaped like what MCP servers really expose.
fn catalog() -> Vec<ToolDoc> {
    vec![
        ToolDoc::new(
            "read_text_file",
            "Read the complete contents of a file from the file system as text.",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "head": {"type": "number", "description": "Only the first N lines"}}}),
        ),
        ToolDoc::new(
            "write_file",
            "Create a new file or completely overwrite an existing file with new content.",
            json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}}}),
        ),
        ToolDoc::new(
            "list_directory",
            "Get a detailed listing of all files and directories in a specified path.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ),
        ToolDoc::new(
            "github.create_issue",
            "Create a new issue in a GitHub repository.",
            json!({"type": "object", "properties": {
                "owner": {"type": "string"}, "repo": {"type": "string"},
                "title": {"type": "string"}, "body": {"type": "string"},
                "labels": {"type": "array", "items": {"type": "string"}}}}),
        ),
        ToolDoc::new(
            "github.search_code",
            "Search for code across GitHub repositories.",
            json!({"type": "object", "properties": {"q": {"type": "string",
                "description": "Search query using GitHub code search syntax"}}}),
        ),
        ToolDoc::new(
            "getCurrentWeather",
            "Current conditions for a location.",
            json!({"type": "object", "properties": {
                "location": {"type": "string", "description": "City name, e.g. Paris"},
                "units": {"type": "string", "enum": ["celsius", "fahrenheit"],
                          "description": "Temperature unit"}}}),
        ),
        ToolDoc::new(
            "create_entities",
            "Create multiple new entities in the knowledge graph.",
            json!({"type": "object", "properties": {"entities": {"type": "array", "items": {
                "type": "object", "properties": {
                    "name": {"type": "string", "description": "The name of the entity"},
                    "observations": {"type": "array", "items": {"type": "string"}}}}}}}),
        ),
        ToolDoc::new(
            "browser_take_screenshot",
            "Take a screenshot of the current page.",
            json!({"type": "object", "properties": {
                "fullPage": {"type": "boolean", "description": "Capture the full scrollable page"}}}),
        ),
    ]
}

fn index_of(docs: &[ToolDoc]) -> Bm25Index {
    let mut index = Bm25Index::new();
    for d in docs {
        index.upsert(d);
    }
    index
}

#[test]
fn realistic_catalog_ranks_the_right_tool_first() {
    let index = index_of(&catalog());
    assert_eq!(index.len(), 8);
    for (query, want) in [
        (
            "read the file notes.txt and show me its text",
            "read_text_file",
        ),
        ("write the summary to a new file", "write_file"),
        ("which files are in the src directory?", "list_directory"),
        ("open a GitHub issue about the crash", "github.create_issue"),
        (
            "find code that calls parse_config in our repos",
            "github.search_code",
        ),
        (
            "how warm is it in Paris right now, in celsius",
            "getCurrentWeather",
        ),
        (
            "remember these people as entities in the knowledge graph",
            "create_entities",
        ),
        (
            "capture a screenshot of the full page",
            "browser_take_screenshot",
        ),
        // A query written like a name finds the name.
        ("getCurrentWeather", "getCurrentWeather"),
    ] {
        let hits = index.search(query, 3);
        assert_eq!(
            hits.first().map(|h| h.name.as_str()),
            Some(want),
            "{query:?} gave {hits:?}"
        );
        assert!(
            hits.windows(2).all(|w| w[0].score >= w[1].score),
            "{hits:?}"
        );
    }
}

#[test]
fn search_returns_at_most_k_and_nothing_for_unknown_words() {
    let index = index_of(&catalog());
    assert_eq!(index.search("file", 2).len(), 2);
    assert!(index.search("file", 0).is_empty());
    assert!(index.search("zyxwvut qqq", 5).is_empty());
    assert!(
        index.search("the of a", 5).is_empty(),
        "stop words alone match nothing"
    );
    assert!(index.search("", 5).is_empty());
    assert!(Bm25Index::new().search("file", 5).is_empty());
}

#[test]
fn upsert_and_remove_change_results() {
    let mut index = index_of(&catalog());
    assert_eq!(
        index.search("screenshot", 1)[0].name,
        "browser_take_screenshot"
    );

    // A tool set change (MCP list_changed): the browser tool goes away.
    assert!(index.remove("browser_take_screenshot"));
    assert!(!index.remove("browser_take_screenshot"), "already gone");
    assert!(index.search("screenshot", 5).is_empty());
    assert_eq!(index.len(), 7);

    // A new tool arrives and is found; its slot is reused.
    index.upsert(&ToolDoc::new(
        "desktop.capture_screen",
        "Capture a screenshot of the whole desktop.",
        json!({}),
    ));
    assert_eq!(
        index.search("screenshot", 1)[0].name,
        "desktop.capture_screen"
    );
    assert_eq!(index.len(), 8);

    // Re-upserting a changed description replaces the old text entirely.
    index.upsert(&ToolDoc::new(
        "desktop.capture_screen",
        "Record audio from the microphone.",
        json!({}),
    ));
    assert_eq!(index.len(), 8);
    assert!(index.search("screenshot", 5).is_empty());
    assert_eq!(
        index.search("record audio", 1)[0].name,
        "desktop.capture_screen"
    );
}

#[test]
fn ties_are_broken_by_name_so_results_are_deterministic() {
    let mut index = Bm25Index::new();
    for name in ["zeta", "alpha", "mid"] {
        index.upsert(&ToolDoc::new(name, "Send an email", json!({})));
    }
    let names: Vec<_> = index
        .search("email", 3)
        .into_iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(names, ["alpha", "mid", "zeta"]);
}

#[test]
fn hostile_documents_cost_their_size_and_do_not_crash() {
    // A schema nested far deeper than the walk goes, and a huge description.
    let mut deep = json!({"type": "object", "properties": {"bedrock": {"type": "string"}}});
    for _ in 0..100 {
        deep = json!({"type": "object", "properties": {"layer": deep}});
    }
    deep = json!({"type": "object", "properties": {"surface": deep}});
    let mut index = Bm25Index::new();
    index.upsert(&ToolDoc::new("deep", "nested", deep));
    index.upsert(&ToolDoc::new("big", "word ".repeat(200_000), json!(null)));
    assert_eq!(index.search("surface layer", 1)[0].name, "deep");
    assert!(
        index.search("bedrock", 1).is_empty(),
        "beyond the depth bound"
    );
    assert_eq!(index.search("word", 1)[0].name, "big");
}

/// The tools of an assistant with mail, files and a calendar, as in issue 34.
fn assistant_tools() -> Vec<ToolDoc> {
    vec![
        ToolDoc::new(
            "send_email",
            "Send an email to one or more recipients.",
            json!({"type": "object", "properties": {
                "to": {"type": "string", "description": "Recipient address"},
                "subject": {"type": "string"}, "body": {"type": "string"}}}),
        ),
        ToolDoc::new(
            "read_inbox",
            "Read the newest emails in the inbox.",
            json!({"type": "object", "properties": {"limit": {"type": "integer"}}}),
        ),
        ToolDoc::new(
            "file_upload",
            "Upload a local file to cloud storage.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ),
        ToolDoc::new(
            "create_event",
            "Add an event to the user's calendar.",
            json!({"type": "object", "properties": {
                "title": {"type": "string"}, "start": {"type": "string"}}}),
        ),
        ToolDoc::new(
            "list_events",
            "Upcoming calendar entries.",
            json!({"type": "object", "properties": {"days": {"type": "integer"}}}),
        ),
        ToolDoc::new(
            "delete_file",
            "Delete a file from cloud storage.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ),
        ToolDoc::new(
            "remove_contact",
            "Remove a person from the address book.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        ),
    ]
}

fn names(hits: &[toolbelt_search::Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn mail_bob_finds_send_email_through_a_synonym() {
    let index = index_of(&assistant_tools());
    let hits = index.search("mail bob", 3);
    assert_eq!(names(&hits).first(), Some(&"send_email"), "{hits:?}");

    // Exact words alone (the index before synonyms) find no tool at all for it.
    let mut exact = Bm25Index::with_tuning(Tuning::exact_words_only());
    for d in assistant_tools() {
        exact.upsert(&d);
    }
    assert!(exact.search("mail bob", 3).is_empty());
}

#[test]
fn word_stems_match_other_inflections() {
    let index = index_of(&assistant_tools());
    // "creating" reaches create_event only by its stem; "events" is list_events's own word,
    // which keeps the lead an exact match has. Exact words alone miss create_event.
    let hits = index.search("creating events", 3);
    assert_eq!(
        names(&hits)[..2],
        ["list_events", "create_event"],
        "{hits:?}"
    );
    let mut exact = Bm25Index::with_tuning(Tuning::exact_words_only());
    for d in assistant_tools() {
        exact.upsert(&d);
    }
    assert_eq!(names(&exact.search("creating events", 3)), ["list_events"]);

    for (query, want) in [
        ("creating an event", "create_event"),
        ("created an event yesterday", "create_event"),
        ("uploading files", "file_upload"),
        ("deleting the files", "delete_file"),
        ("emailing the team", "send_email"),
    ] {
        let hits = index.search(query, 3);
        assert_eq!(names(&hits).first(), Some(&want), "{query:?} gave {hits:?}");
    }
}

#[test]
fn an_exact_match_outranks_a_synonym_only_match() {
    let index = index_of(&assistant_tools());
    // "remove" is remove_contact's own word and a synonym of delete_file's: both are found,
    // the exact one first and by a margin.
    let hits = index.search("remove", 5);
    assert_eq!(names(&hits), ["remove_contact", "delete_file"], "{hits:?}");
    assert!(hits[0].score > 2.0 * hits[1].score, "{hits:?}");
    // And the other way round.
    let hits = index.search("delete", 5);
    assert_eq!(names(&hits), ["delete_file", "remove_contact"], "{hits:?}");

    // An exact word and its stem outrank a match by stem only.
    let hits = index.search("events", 5);
    assert_eq!(names(&hits)[0], "list_events", "{hits:?}");
    assert!(names(&hits).contains(&"create_event"), "{hits:?}");
}

#[test]
fn huge_queries_and_pathological_words_are_answered_without_panic() {
    let mut index = index_of(&assistant_tools());
    // A document made of one pathological word, and one of many suffixes.
    index.upsert(&ToolDoc::new("odd", "ing".repeat(50_000), json!(null)));
    index.upsert(&ToolDoc::new(
        "suffixes",
        "ationalizationsnessesfulnessing ".repeat(1_000),
        json!(null),
    ));
    let queries = [
        "a".repeat(100_000),
        "ing".repeat(33_334),
        "mail ".repeat(20_000),
        "yyyyyyyy eeeeed ies sses ".repeat(4_000),
        "é".repeat(50_000),
        (0..20_000).map(|i| format!("w{i} ")).collect::<String>(),
    ];
    for query in &queries {
        assert!(query.len() >= 100_000, "{}", query.len());
        let hits = index.search(query, 5);
        assert!(hits.len() <= 5);
    }
    assert_eq!(
        index.search(&"mail ".repeat(20_000), 1)[0].name,
        "send_email"
    );
}
