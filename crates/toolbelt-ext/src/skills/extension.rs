//! [`SkillsExtension`]: skills offered to an agent with progressive disclosure.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use toolbelt_agent::Extension;
use toolbelt_agent::extension::BoxError;
use toolbelt_builtin::fs::read::{ReadArgs, read};
use toolbelt_builtin::shell::SandboxMode;
use toolbelt_builtin::{BuiltinEnv, BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::broker::SkillBroker;
use super::{Discovered, Skill, SkillsConfig, discover};

/// The most file names `skill_load` lists.
const MAX_LISTED_FILES: usize = 200;
/// How deep `skill_load` lists.
const MAX_LISTED_DEPTH: usize = 6;

/// Skills as an [`Extension`] named `skills`.
///
/// - **Instructions**: one fragment listing each skill's name and description (never its
///   body), and how to load one. No skills: no fragment and no tools.
/// - **Tools**: `skill_load {name}` returns the body and lists the skill's files;
///   `skill_read {skill, file_path, offset?, limit?}` is the built-in Read confined to the
///   skill's folder (a path outside it, or a symlink leading out, is refused as Read refuses
///   paths outside its base directory); and, when any skill declares MCP endpoints, the
///   broker's four tools (`mcp_list_servers`, `mcp_list_tools`, `mcp_inspect_tools`,
///   `mcp_call`), which reach only the endpoints of skills loaded so far, and of those only
///   the tools their `allowed-tools` lists (`server.tool` or `server.*`; every tool when the
///   skill has no `allowed-tools`). Other `allowed-tools` entries (such as `Read`) are shown,
///   not enforced: Toolbelt pre-approves nothing.
/// - **close** closes the MCP connections.
pub struct SkillsExtension {
    config: SkillsConfig,
    state: OnceLock<Arc<State>>,
}

struct State {
    found: Discovered,
    broker: Arc<SkillBroker>,
    /// Per skill, the file tools' environment rooted at its folder (made on first use).
    readers: Mutex<HashMap<String, BuiltinEnv>>,
}

impl SkillsExtension {
    /// Skills from `config`'s folders, found at init.
    pub fn new(config: SkillsConfig) -> Self {
        Self {
            config,
            state: OnceLock::new(),
        }
    }

    /// What init found (skills, errors, warnings); `None` before init.
    pub fn discovered(&self) -> Option<&Discovered> {
        self.state.get().map(|s| &s.found)
    }
}

#[async_trait]
impl Extension for SkillsExtension {
    fn name(&self) -> &str {
        "skills"
    }

    async fn init(&self) -> Result<(), BoxError> {
        let found = discover(&self.config).await;
        for warning in &found.warnings {
            tracing::warn!("{warning}");
        }
        for error in &found.errors {
            tracing::warn!("skill left out: {error}");
        }
        let state = State {
            found,
            broker: Arc::new(SkillBroker::new()?),
            readers: Mutex::new(HashMap::new()),
        };
        self.state
            .set(Arc::new(state))
            .map_err(|_| "the skills extension was initialised twice")?;
        Ok(())
    }

    async fn close(&self) -> Result<(), BoxError> {
        if let Some(state) = self.state.get() {
            state.broker.close().await;
        }
        Ok(())
    }

    fn instructions(&self) -> Vec<String> {
        let Some(state) = self.state.get() else {
            return Vec::new();
        };
        if state.found.skills.is_empty() {
            return Vec::new();
        }
        let mut text = String::from(
            "# Skills\n\nSkills are folders of instructions, scripts and resources for \
             particular tasks. When a task matches a skill's description, call skill_load \
             with its name first and follow what it says; read the files it lists with \
             skill_read.\n",
        );
        for skill in &state.found.skills {
            text.push_str(&format!("\n- {}: {}", skill.name, skill.description));
        }
        vec![text]
    }

    fn tools(&self) -> Vec<DynTool> {
        let Some(state) = self.state.get() else {
            return Vec::new();
        };
        if state.found.skills.is_empty() {
            return Vec::new();
        }
        let mut tools = Vec::new();
        match (load_tool(state.clone()), read_tool(state.clone())) {
            (Ok(load), Ok(read)) => tools.extend([load, read]),
            (Err(e), _) | (_, Err(e)) => tracing::error!(%e, "the skill tools could not be built"),
        }
        if state.found.skills.iter().any(|s| !s.mcp.is_empty()) {
            tools.extend(state.broker.tools());
        }
        tools
    }
}

/// Arguments of `skill_load`.
#[derive(Deserialize, JsonSchema)]
struct LoadArgs {
    /// The skill's name, as listed in the instructions.
    name: String,
}

/// Arguments of `skill_read`.
#[derive(Deserialize, JsonSchema)]
struct SkillReadArgs {
    /// The skill's name.
    skill: String,
    /// A file of the skill, relative to its folder (as `skill_load` lists them).
    file_path: String,
    /// The 1-based line to start from (long files only).
    #[serde(default)]
    offset: Option<usize>,
    /// How many lines to read (default 2000).
    #[serde(default)]
    limit: Option<usize>,
}

fn unknown(state: &State, name: &str) -> ToolOutput {
    let names: Vec<&str> = state.found.skills.iter().map(|s| s.name.as_str()).collect();
    ToolOutput::error(format!(
        "no skill named {name:?}; the skills are: {}",
        names.join(", ")
    ))
}

fn load_tool(state: Arc<State>) -> Result<DynTool, ToolError> {
    let tool = FunctionTool::returning_output(
        "skill_load",
        "Loads a skill by name: returns its instructions and lists its files (read them with \
         skill_read). Load a skill before doing a task its description covers.",
        move |_ctx: ToolContext, args: LoadArgs| {
            let state = state.clone();
            async move {
                let Some(skill) = state.found.get(&args.name) else {
                    return Ok::<_, ToolError>(unknown(&state, &args.name));
                };
                Ok(load(&state, skill))
            }
        },
    )?
    .map_declaration(|d| {
        d.read_only()
            .idempotent()
            .closed_world()
            .concurrency_safe(true)
    });
    Ok(Arc::new(tool))
}

/// The body, the file list and the endpoints made reachable.
fn load(state: &State, skill: &Skill) -> ToolOutput {
    let mut text = skill.body().to_string();
    let files = list_files(&skill.dir);
    if !files.is_empty() {
        text.push_str(&format!(
            "\n\n---\nFiles of skill {} (read them with skill_read):\n",
            skill.name
        ));
        for file in &files {
            text.push_str(&format!("- {file}\n"));
        }
    }
    if !skill.mcp.is_empty() {
        match state.broker.add_skill(skill) {
            Ok(servers) => text.push_str(&format!(
                "\nMCP servers now reachable with mcp_list_tools and mcp_call: {}\n",
                servers.join(", ")
            )),
            Err(error) => return ToolOutput::error(error),
        }
    }
    ToolOutput::text(text).with_user_text(format!("loaded skill {}", skill.name))
}

/// The skill's files, relative, sorted; symbolic links and SKILL.md left out.
fn list_files(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() && depth + 1 < MAX_LISTED_DEPTH {
                stack.push((path, depth + 1));
            } else if kind.is_file()
                && let Ok(relative) = path.strip_prefix(dir)
                && relative != Path::new("SKILL.md")
            {
                files.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    files.truncate(MAX_LISTED_FILES);
    files
}

fn read_tool(state: Arc<State>) -> Result<DynTool, ToolError> {
    let tool = FunctionTool::returning_output(
        "skill_read",
        "Reads a file of a skill (a path relative to the skill's folder, as skill_load lists \
         them), with line numbers like Read. Only the skill's own files can be read.",
        move |_ctx: ToolContext, args: SkillReadArgs| {
            let state = state.clone();
            async move {
                let Some(skill) = state.found.get(&args.skill) else {
                    return Ok::<_, ToolError>(unknown(&state, &args.skill));
                };
                let env = match reader(&state, skill) {
                    Ok(env) => env,
                    Err(e) => return Ok(ToolOutput::error(e.to_string())),
                };
                let args = ReadArgs {
                    file_path: args.file_path,
                    offset: args.offset,
                    limit: args.limit,
                    pages: None,
                };
                Ok(read(&env, args).await)
            }
        },
    )?
    .map_declaration(|d| {
        d.read_only()
            .idempotent()
            .closed_world()
            .concurrency_safe(true)
    });
    Ok(Arc::new(tool))
}

/// The built-in file tools' environment rooted at `skill`'s folder: read-only, no shell.
fn reader(state: &State, skill: &Skill) -> Result<BuiltinEnv, ToolError> {
    let mut readers = state.readers.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(env) = readers.get(&skill.name) {
        return Ok(env.clone());
    }
    let options = BuiltinOptions::new(&skill.dir)
        .with_name(format!("skill_{}", skill.name))
        .with_read_only(true)
        .with_sandbox(SandboxMode::Off)
        .with_web(toolbelt_builtin::web::WebOptions::disabled());
    let env = BuiltinToolSet::new(options)?.env().clone();
    readers.insert(skill.name.clone(), env.clone());
    Ok(env)
}
