//! `toolbelt skills list|show NAME`: the skills an agent would be offered in `--dir`.
//!
//! `list` prints one line per skill (name, description, folder); `show` prints a skill's
//! front matter fields, its body and its files. Skills left out for errors in their front
//! matter are reported on stderr (with the file and field), and `list` then exits 1.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use toolbelt_ext::{Discovered, SkillsConfig, discover};

use crate::agent_cli::extensions::skills_config;
use crate::common::{CliError, EXIT_OK, EXIT_TOOL_FAILED, Outcome};

/// `toolbelt skills …`.
#[derive(Subcommand, Debug)]
pub enum SkillsCommand {
    /// The skills found: name, description and folder, one per line.
    List(SkillsArgs),
    /// One skill: its front matter, its instructions and its files.
    Show {
        /// The skill's name.
        name: String,
        #[command(flatten)]
        args: SkillsArgs,
    },
}

/// Where skills are looked for.
#[derive(Args, Debug)]
pub struct SkillsArgs {
    /// The project directory (its `.toolbelt/skills` and `.claude/skills` are searched).
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Also look for skills in DIR (searched first; repeatable).
    #[arg(long, value_name = "DIR")]
    skills_dir: Vec<PathBuf>,
}

impl SkillsArgs {
    async fn discover(&self) -> Discovered {
        self.discover_in(&skills_config(&self.skills_dir, &self.dir))
            .await
    }

    async fn discover_in(&self, config: &SkillsConfig) -> Discovered {
        let found = discover(config).await;
        for warning in &found.warnings {
            eprintln!("toolbelt: warning: {warning}");
        }
        for error in &found.errors {
            eprintln!("toolbelt: skill left out: {error}");
        }
        found
    }
}

/// Runs `toolbelt skills`.
pub async fn run(command: SkillsCommand) -> Outcome {
    match command {
        SkillsCommand::List(args) => {
            let config = skills_config(&args.skills_dir, &args.dir);
            let found = args.discover_in(&config).await;
            for skill in &found.skills {
                println!(
                    "{}\t{}\t{}",
                    skill.name,
                    skill.description,
                    skill.dir.display()
                );
            }
            if found.skills.is_empty() && found.errors.is_empty() {
                let folders: Vec<String> = config
                    .folders()
                    .iter()
                    .map(|f| f.path.display().to_string())
                    .collect();
                eprintln!(
                    "toolbelt: no skills found; looked in {} (a skill is a folder there \
                     holding SKILL.md)",
                    folders.join(", ")
                );
            }
            Ok(if found.errors.is_empty() {
                EXIT_OK
            } else {
                EXIT_TOOL_FAILED
            })
        }
        SkillsCommand::Show { name, args } => {
            let found = args.discover().await;
            let Some(skill) = found.get(&name) else {
                let names: Vec<&str> = found.skills.iter().map(|s| s.name.as_str()).collect();
                return Err(CliError::usage(format!(
                    "no skill named {name:?}; found: {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            };
            println!("name: {}", skill.name);
            println!("description: {}", skill.description);
            println!("folder: {}", skill.dir.display());
            if let Some(tools) = &skill.allowed_tools {
                println!("allowed-tools: {}", tools.join(" "));
            }
            for (server, _) in &skill.mcp {
                println!("mcp: {server}");
            }
            println!();
            print!("{}", skill.body());
            if !skill.body().ends_with('\n') {
                println!();
            }
            Ok(EXIT_OK)
        }
    }
}
