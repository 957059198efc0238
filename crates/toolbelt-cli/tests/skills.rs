//! `toolbelt skills list|show` and the skills and project rules `run` puts into the
//! instructions (`--no-rules`, `--skills-dir`), with the built binary and the scripted model.

use crate::run_support;

use std::path::Path;
use std::process::Command;

use run_support::{output, text, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

fn write_skill(folder: &Path, name: &str, front_matter: &str, body: &str) {
    let dir = folder.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\n{front_matter}\n---\n{body}"),
    )
    .unwrap();
}

/// A repository with AGENTS.md and a project skill, a broken skill, a HOME with a user skill.
fn layout() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("repo");
    let home = root.path().join("home");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::write(project.join("AGENTS.md"), "Always answer in French.\n").unwrap();
    let skills = project.join(".toolbelt/skills");
    write_skill(
        &skills,
        "pdf-tools",
        "name: pdf-tools\ndescription: Extract text from PDF files.",
        "Run scripts/extract.py. BODY-MARKER\n",
    );
    write_skill(&skills, "broken", "name: broken", "no description");
    write_skill(
        &home.join(".toolbelt/skills"),
        "notes",
        "name: notes\ndescription: Keep meeting notes.",
        "Notes go in notes/.\n",
    );
    (root, project, home)
}

fn skills_command(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .env("HOME", home)
        .env_remove("TOOLBELT_LOG")
        .args(args);
    command
}

#[tokio::test]
async fn skills_list_shows_each_skill_and_names_the_broken_ones_file_and_field() {
    let (_root, project, home) = layout();
    let project_arg = project.to_str().unwrap();
    let out = output(
        skills_command(&home, &["skills", "list", "--dir", project_arg]),
        "",
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with("notes\tKeep meeting notes.\t"),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("pdf-tools\tExtract text from PDF files.\t"),
        "{stdout}"
    );
    assert!(
        stderr.contains("broken/SKILL.md: description: is required"),
        "{stderr}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a broken skill fails the listing"
    );
}

#[tokio::test]
async fn skills_show_prints_the_body_and_an_unknown_name_is_a_usage_error() {
    let (_root, project, home) = layout();
    let project_arg = project.to_str().unwrap();
    let out = output(
        skills_command(
            &home,
            &["skills", "show", "pdf-tools", "--dir", project_arg],
        ),
        "",
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.starts_with("name: pdf-tools\ndescription: Extract text from PDF files.\n"));
    assert!(
        stdout.ends_with("Run scripts/extract.py. BODY-MARKER\n"),
        "{stdout}"
    );

    let out = output(
        skills_command(&home, &["skills", "show", "nope", "--dir", project_arg]),
        "",
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no skill named \"nope\"; found: notes, pdf-tools"));
}

async fn first_instruction(project: &Path, home: &Path, extra: &[&str]) -> String {
    let server = ScriptedServer::start([Reply::text("Bonjour.")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, project);
    command
        .env("HOME", home)
        .args(["run", "hello", "--dir"])
        .arg(project)
        .args(extra);
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests = server.requests();
    let offered = requests[0].tool_names();
    assert!(offered.iter().any(|t| t == "skill_load"), "{offered:?}");
    requests[0].messages()[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_puts_project_rules_and_skill_descriptions_in_the_instructions_unless_no_rules() {
    let (_root, project, home) = layout();
    let instruction = first_instruction(&project, &home, &[]).await;
    let agents = std::fs::canonicalize(&project).unwrap().join("AGENTS.md");
    assert!(
        instruction.contains(&format!(
            "## {}\n\nAlways answer in French.",
            agents.display()
        )),
        "{instruction}"
    );
    assert!(instruction.contains("- pdf-tools: Extract text from PDF files."));
    assert!(instruction.contains("- notes: Keep meeting notes."));
    assert!(
        !instruction.contains("BODY-MARKER"),
        "bodies only on skill_load"
    );

    let instruction = first_instruction(&project, &home, &["--no-rules"]).await;
    assert!(
        !instruction.contains("Always answer in French."),
        "{instruction}"
    );
    assert!(instruction.contains("- pdf-tools: Extract text from PDF files."));
}

#[tokio::test(flavor = "multi_thread")]
async fn skills_dir_adds_a_folder_searched_first() {
    let (root, project, home) = layout();
    let extra = root.path().join("extra");
    write_skill(
        &extra,
        "pdf-tools",
        "name: pdf-tools\ndescription: The team's PDF skill.",
        "team body",
    );
    let instruction =
        first_instruction(&project, &home, &["--skills-dir", extra.to_str().unwrap()]).await;
    assert!(
        instruction.contains("- pdf-tools: The team's PDF skill."),
        "{instruction}"
    );
    assert!(!instruction.contains("Extract text from PDF files."));
}

#[tokio::test]
async fn claude_code_skill_folders_are_found_and_an_empty_search_names_where_it_looked() {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("repo");
    let home = root.path().join("home");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let project_arg = project.to_str().unwrap();

    let out = output(
        skills_command(&home, &["skills", "list", "--dir", project_arg]),
        "",
    )
    .await;
    assert_eq!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    for folder in [
        project.join(".toolbelt/skills"),
        project.join(".claude/skills"),
        home.join(".toolbelt/skills"),
        home.join(".claude/skills"),
    ] {
        assert!(
            stderr.contains(&folder.display().to_string()),
            "{folder:?} not named: {stderr}"
        );
    }

    write_skill(
        &project.join(".claude/skills"),
        "review",
        "name: review\ndescription: Review a pull request.",
        "Read the diff first.\n",
    );
    write_skill(
        &home.join(".claude/skills"),
        "standup",
        "name: standup\ndescription: Write the standup note.",
        "Three lines.\n",
    );
    let out = output(
        skills_command(&home, &["skills", "list", "--dir", project_arg]),
        "",
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("review\tReview a pull request."),
        "{stdout}"
    );
    assert!(
        stdout.contains("standup\tWrite the standup note."),
        "{stdout}"
    );
}
