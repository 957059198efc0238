//! Skills: found in their folders, listed by name and description only, loaded on demand,
//! their files readable inside the skill folder and nowhere else; front matter errors.

use crate::ext_support;

use std::sync::Arc;

use ext_support::write_skill;
use toolbelt_agent::{EventKind, Extension, Extensions, LlmAgent, RunOptions, Runner};
use toolbelt_core::{Tool, ToolContext};
use toolbelt_ext::{SkillsConfig, SkillsExtension, discover};
use toolbelt_model::testing::{Reply, ScriptedServer};

const PDF_BODY: &str = "# PDF tools\n\nRun scripts/extract.py on the file. SECRET-STEP-42.\n";

/// A project folder with one skill (`pdf-tools`, with a script) and a user folder with a
/// clashing `pdf-tools` and a `notes` skill.
fn layout() -> (tempfile::TempDir, SkillsConfig) {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("project/.toolbelt/skills");
    let user = root.path().join("home/.toolbelt/skills");
    let pdf = write_skill(
        &project,
        "pdf-tools",
        "name: pdf-tools\ndescription: Extract text and tables from PDF files.",
        PDF_BODY,
    );
    std::fs::create_dir_all(pdf.join("scripts")).unwrap();
    std::fs::write(pdf.join("scripts/extract.py"), "print('extracting')\n").unwrap();
    write_skill(
        &user,
        "pdf-tools",
        "name: pdf-tools\ndescription: The user's older PDF skill.",
        "old body",
    );
    write_skill(
        &user,
        "notes",
        "name: notes\ndescription: Keep meeting notes.\nallowed-tools: Read Write",
        "Write notes in notes/.",
    );
    let config = SkillsConfig::new()
        .folder(project, false)
        .folder(user, true);
    (root, config)
}

#[tokio::test]
async fn skills_are_found_nearest_first_with_a_warning_on_a_name_clash() {
    let (_root, config) = layout();
    let found = discover(&config).await;
    let names: Vec<&str> = found.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["notes", "pdf-tools"]);
    let pdf = found.get("pdf-tools").unwrap();
    assert_eq!(pdf.description, "Extract text and tables from PDF files.");
    assert!(pdf.dir.ends_with("project/.toolbelt/skills/pdf-tools"));
    assert!(
        found
            .warnings
            .iter()
            .any(|w| w.contains("skill pdf-tools") && w.contains("shadowed")),
        "{:?}",
        found.warnings
    );
    let notes = found.get("notes").unwrap();
    assert_eq!(
        notes.allowed_tools.as_deref(),
        Some(&["Read".to_string(), "Write".to_string()][..])
    );
    assert!(found.errors.is_empty(), "{:?}", found.errors);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_names_and_descriptions_are_in_the_instructions_and_skill_load_returns_the_body() {
    let (_root, config) = layout();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "skill_load", r#"{"name":"pdf-tools"}"#),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let extensions =
        Extensions::init([Arc::new(SkillsExtension::new(config)) as Arc<dyn Extension>])
            .await
            .unwrap();
    let agent = LlmAgent::builder("assistant")
        .instruction("Help.")
        .model(ext_support::model(server.base_url()))
        .with_extensions(&extensions)
        .build()
        .unwrap();
    let events = Runner::new("app", Arc::new(agent))
        .run("u", "s", "extract report.pdf", RunOptions::new())
        .collect_all()
        .await;
    extensions.close().await.unwrap();

    let requests = server.requests();
    let first = requests[0].messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(first.starts_with("Help.\n\n# Skills"), "{first}");
    assert!(first.contains("- pdf-tools: Extract text and tables from PDF files."));
    assert!(first.contains("- notes: Keep meeting notes."));
    assert!(
        !first.contains("SECRET-STEP-42"),
        "the body is disclosed only on load"
    );
    assert_eq!(requests[0].tool_names(), ["skill_load", "skill_read"]);

    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!result.is_error, "{}", result.content);
    assert!(result.content.starts_with(PDF_BODY), "{}", result.content);
    assert!(result.content.contains("- scripts/extract.py"));
    // The second request carries the body as the tool's answer.
    let tool_message = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("SECRET-STEP-42")
    );
}

async fn skill_tool(extension: &SkillsExtension, name: &str) -> toolbelt_core::DynTool {
    extension
        .tools()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test]
async fn skill_read_reads_the_skills_files_and_refuses_paths_and_symlinks_leading_out() {
    let (root, config) = layout();
    let pdf = root.path().join("project/.toolbelt/skills/pdf-tools");
    std::fs::write(root.path().join("project/secret.txt"), "top secret\n").unwrap();
    std::os::unix::fs::symlink(
        root.path().join("project/secret.txt"),
        pdf.join("escape.txt"),
    )
    .unwrap();
    let extension = SkillsExtension::new(config);
    extension.init().await.unwrap();
    let read = skill_tool(&extension, "skill_read").await;

    let ok = read
        .call(
            ToolContext::new(),
            r#"{"skill":"pdf-tools","file_path":"scripts/extract.py"}"#,
        )
        .await
        .unwrap();
    assert!(!ok.is_error, "{}", ok.llm_text());
    assert_eq!(ok.llm_text(), "     1\tprint('extracting')\n");

    for outside in [
        "../../../secret.txt",
        root.path().join("project/secret.txt").to_str().unwrap(),
        "escape.txt",
    ] {
        let args = serde_json::json!({"skill": "pdf-tools", "file_path": outside}).to_string();
        let refused = read.call(ToolContext::new(), &args).await.unwrap();
        assert!(
            refused.is_error,
            "{outside} was read: {}",
            refused.llm_text()
        );
        assert!(
            !refused.llm_text().contains("top secret"),
            "{outside}: {}",
            refused.llm_text()
        );
    }
    let unknown = read
        .call(ToolContext::new(), r#"{"skill":"nope","file_path":"x"}"#)
        .await
        .unwrap();
    assert!(unknown.is_error);
    assert!(
        unknown.llm_text().contains("notes, pdf-tools"),
        "{}",
        unknown.llm_text()
    );
}

#[tokio::test]
async fn a_skill_md_that_is_a_symlink_out_of_its_folder_is_not_read() {
    let root = tempfile::tempdir().unwrap();
    let skills = root.path().join("skills");
    std::fs::create_dir_all(skills.join("sneaky")).unwrap();
    std::fs::write(
        root.path().join("outside.md"),
        "---\nname: sneaky\ndescription: outside\n---\nbody",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        root.path().join("outside.md"),
        skills.join("sneaky/SKILL.md"),
    )
    .unwrap();
    let found = discover(&SkillsConfig::new().folder(&skills, false)).await;
    assert!(found.skills.is_empty());
    assert_eq!(found.errors.len(), 1);
    assert_eq!(found.errors[0].field, "read");
}

/// Discovers one skill folder `name` holding `front_matter`, and returns the error.
async fn error_for(name: &str, front_matter: &str) -> toolbelt_ext::SkillError {
    let root = tempfile::tempdir().unwrap();
    write_skill(root.path(), name, front_matter, "body");
    let found = discover(&SkillsConfig::new().folder(root.path(), false)).await;
    assert!(found.skills.is_empty(), "{front_matter} was accepted");
    assert_eq!(found.errors.len(), 1);
    let error = found.errors[0].clone();
    assert!(error.path.ends_with(format!("{name}/SKILL.md")), "{error}");
    error
}

#[tokio::test]
async fn front_matter_errors_name_the_file_and_the_field() {
    let long = "x".repeat(1025);
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("a", "description: no name".into(), "name", "is required"),
        ("Bad_Name", "name: Bad_Name\ndescription: d".into(), "name", "lowercase"),
        ("other", "name: pdf\ndescription: d".into(), "name", "folder name `other`"),
        ("a", "name: a".into(), "description", "is required"),
        ("a", "name: a\ndescription: \"  \"".into(), "description", "is required"),
        ("a", format!("name: a\ndescription: {long}"), "description", "at most 1024"),
        ("a", "name: a\ndescription: [1, 2]".into(), "description", "must be a string"),
        ("a", "name: a\ndescription: d\nallowed-tools: {x: 1}".into(), "allowed-tools", "list"),
        ("a", "name: a\ndescription: d\nmcp: [1]".into(), "mcp", "mapping"),
        ("a", "name: [unclosed".into(), "front matter", "not valid YAML"),
        (
            "a",
            "name: a\ndescription: d\nmcp:\n  w:\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: \"${OPENAI_API_KEY}\"}".into(),
            "mcp.w",
            "OPENAI_API_KEY",
        ),
        (
            "a",
            "name: a\ndescription: d\nmcp:\n  local:\n    command: sh".into(),
            "mcp.local",
            "trusted skills folder",
        ),
    ];
    for (folder, front_matter, field, problem) in cases {
        let error = error_for(folder, &front_matter).await;
        assert_eq!(error.field, field, "{front_matter}: {error}");
        assert!(
            error.problem.contains(problem),
            "{front_matter}: expected {problem:?} in {error}"
        );
    }
    // No front matter at all.
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("plain")).unwrap();
    std::fs::write(root.path().join("plain/SKILL.md"), "# Just text\n").unwrap();
    let found = discover(&SkillsConfig::new().folder(root.path(), false)).await;
    assert_eq!(found.errors[0].field, "front matter");
}

#[tokio::test]
async fn unknown_front_matter_keys_are_warned_about_not_refused() {
    let root = tempfile::tempdir().unwrap();
    write_skill(
        root.path(),
        "a",
        "name: a\ndescription: d\nlicense: MIT\nmetadata: {author: me}\nmodel: fast",
        "body",
    );
    let found = discover(&SkillsConfig::new().folder(root.path(), false)).await;
    assert_eq!(found.skills.len(), 1);
    assert_eq!(found.warnings.len(), 1, "{:?}", found.warnings);
    assert!(found.warnings[0].contains("unknown front matter key `model`"));
}
