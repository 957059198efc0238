//! `execute_code`: runs a Python, JavaScript or bash program exactly as `Bash` runs a command.
//!
//! The program is written to a file in the shell tools' private temp dir and started as
//! `python3 -u FILE`, `node FILE` or `bash FILE` through the same [`ShellTools`] state as
//! `Bash`: the same process backend, sandbox, containment, environment policy, output cap,
//! timeouts (milliseconds; default two minutes, at most ten) and kill sequence, so a timeout
//! ends the program and every process it started. A command policy is checked against the
//! interpreter's command line and, for bash, against the code itself; a policy that allows
//! `python3` or `node` allows whatever the program then does, as it would for `Bash`.
//!
//! Each call gets an empty output folder, named by `$OUTPUT_DIR`, in the private temp dir
//! (writable in every sandbox mode, kept until the tool set is dropped). The regular files
//! found in it after the run are returned: images (PNG, JPEG, GIF, WebP, by their bytes) as
//! image blocks, others as paths with their sizes. Symlinks there are never followed.
//!
//! The program runs in the base directory; standard output and standard error are merged in
//! the order written. The tool is offered with `Bash` and under the same rules (not in
//! read-only mode).
//!
//! With [`CodeToolAccess`] other than `None`, Python and JavaScript programs call tools as
//! functions, each call through the host's executor ([`tool_calls`]).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolbelt_core::{ContentBlock, DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use crate::shell::{ShellState, ShellTools};

mod session;
pub mod tool_calls;

pub(crate) use session::PythonSession;
pub use tool_calls::CodeToolAccess;
pub(crate) use tool_calls::ToolBridge;

/// The tool's name.
pub(crate) const TOOL_NAME: &str = "execute_code";

/// The most output files listed per call.
const MAX_LISTED_FILES: usize = 50;
/// The largest image returned as a block.
const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// The most image bytes returned per call.
const MAX_TOTAL_IMAGE_BYTES: u64 = 10 * 1024 * 1024;

/// The languages `execute_code` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Language {
    /// Python 3, run with `python3 -u`.
    Python,
    /// JavaScript, run with `node`.
    #[serde(alias = "js", alias = "node")]
    Javascript,
    /// A bash script.
    #[serde(alias = "sh", alias = "shell")]
    Bash,
}

impl Language {
    fn interpreter(self) -> &'static str {
        match self {
            Language::Python => "python3 -u",
            Language::Javascript => "node",
            Language::Bash => "bash",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Language::Python => "py",
            Language::Javascript => "js",
            Language::Bash => "sh",
        }
    }
}

/// Arguments of `execute_code`.
#[derive(Debug, Deserialize, JsonSchema)]
struct ExecuteCodeArgs {
    /// The language of the program: python, javascript or bash.
    language: Language,
    /// The program's source code.
    #[serde(default)]
    code: String,
    /// Timeout in milliseconds (default 120000, at most 600000; zero or negative means the
    /// default).
    #[serde(default)]
    timeout: Option<i64>,
    /// Python only: run in the persistent session, where variables, imports and functions
    /// survive between calls (default false: a fresh process per call).
    #[serde(default)]
    session: Option<bool>,
    /// With session: start a fresh session first, dropping every variable (code may then
    /// be empty).
    #[serde(default)]
    restart: Option<bool>,
}

const DESCRIPTION: &str = "Runs a program (python, javascript or bash) in the project \
directory with the same sandbox and limits as Bash, and returns its combined stdout and \
stderr and its exit code. Files the program writes to the folder named by the OUTPUT_DIR \
environment variable are returned: images as images, other files as paths with sizes. \
The program is killed, with everything it started, when the timeout passes (milliseconds; \
default 2 minutes, at most 10). Each call is a fresh process, unless session is true \
(Python only): then the code runs in one long-lived interpreter where variables survive \
between calls; restart=true starts it afresh. A timeout or crash restarts the session and \
says so.";

/// The `execute_code` tool, running programs as `shell`'s `Bash` runs commands, and its
/// Python session (close it with the tool set; dropping the tool kills it too). With a
/// `bridge`, programs call the tools it allows; `known` (the other built-in tools) gives the
/// signatures listed in the description.
pub(crate) fn execute_code_tool(
    shell: &ShellTools,
    bridge: Option<Arc<ToolBridge>>,
    known: &[DynTool],
) -> Result<(DynTool, Arc<PythonSession>), ToolError> {
    let state = shell.state().clone();
    let session = Arc::new(PythonSession::new(state.clone()));
    let tool_session = session.clone();
    let calls = Arc::new(AtomicU64::new(0));
    let mut description = DESCRIPTION.to_string();
    if let Some(bridge) = &bridge {
        description.push_str(&bridge.describe(known));
    }
    let tool = FunctionTool::returning_output(
        TOOL_NAME,
        &description,
        move |ctx: ToolContext, args: ExecuteCodeArgs| {
            let state = state.clone();
            let session = tool_session.clone();
            let bridge = bridge.clone();
            let n = calls.fetch_add(1, Ordering::Relaxed);
            async move { execute(&state, &session, bridge.as_deref(), &ctx, n, args).await }
        },
    )?
    .map_declaration(|d| d.destructive().open_world().concurrency_safe(false));
    Ok((Arc::new(tool), session))
}

async fn execute(
    state: &ShellState,
    session: &PythonSession,
    bridge: Option<&ToolBridge>,
    ctx: &ToolContext,
    n: u64,
    args: ExecuteCodeArgs,
) -> Result<ToolOutput, ToolError> {
    let in_session = args.session.unwrap_or(false);
    let restart = args.restart.unwrap_or(false);
    if (in_session || restart) && args.language != Language::Python {
        return Err(ToolError::invalid_arguments(
            "session and restart are for python only",
        ));
    }
    if args.code.trim().is_empty() && !restart {
        return Err(ToolError::invalid_arguments("code is empty"));
    }
    if in_session || restart {
        let output_dir = state.private_temp_dir().join(format!("exec-{n}/outputs"));
        std::fs::create_dir_all(&output_dir)
            .map_err(|e| ToolError::failed(format!("could not prepare the output folder: {e}")))?;
        let mut out = session
            .run(ctx, &args.code, restart, args.timeout, &output_dir)
            .await?;
        attach_outputs(&mut out, &output_dir);
        return Ok(out);
    }
    if args.language == Language::Bash {
        state.check_policy(&args.code)?;
    }
    let call_dir = state.private_temp_dir().join(format!("exec-{n}"));
    let output_dir = call_dir.join("outputs");
    let source = call_dir.join(format!("main.{}", args.language.extension()));
    let prepare_failed =
        |e: std::io::Error| ToolError::failed(format!("could not prepare the program: {e}"));
    std::fs::create_dir_all(&output_dir)
        .and_then(|()| std::fs::write(&source, args.code.as_bytes()))
        .map_err(prepare_failed)?;
    let prelude = match (bridge, args.language) {
        (Some(_), Language::Python) => Some(("prelude.py", tool_calls::PYTHON_PRELUDE)),
        (Some(_), Language::Javascript) => Some(("prelude.js", tool_calls::JAVASCRIPT_PRELUDE)),
        _ => None,
    };
    let Some((prelude_name, prelude_code)) = prelude else {
        let command = format!(
            "OUTPUT_DIR={} exec {} {}",
            quote(&output_dir),
            args.language.interpreter(),
            quote(&source)
        );
        let result = state.run_command(ctx, &command, args.timeout).await;
        let _ = std::fs::remove_file(&source);
        let mut out = result?;
        attach_outputs(&mut out, &output_dir);
        return Ok(out);
    };
    let bridge = bridge.expect("a prelude is chosen only with a bridge");
    let prelude = call_dir.join(prelude_name);
    std::fs::write(&prelude, prelude_code).map_err(prepare_failed)?;
    let mut channel = bridge.open(&call_dir)?;
    let command = format!(
        "OUTPUT_DIR={} {} exec {} {} {}",
        quote(&output_dir),
        channel.environment,
        args.language.interpreter(),
        quote(&prelude),
        quote(&source)
    );
    let run = state.run_command(ctx, &command, args.timeout);
    // The program's calls are answered while it runs; when it ends, a call still in flight
    // is dropped (cancelled) with the serving future.
    let result = {
        let serve = channel.serve(bridge, ctx);
        tokio::pin!(serve);
        tokio::select! {
            result = run => result,
            failure = &mut serve => Err(failure),
        }
    };
    for file in [&source, &prelude] {
        let _ = std::fs::remove_file(file);
    }
    let mut out = result?;
    attach_outputs(&mut out, &output_dir);
    out.meta
        .get_or_insert_with(Default::default)
        .insert("tool_calls".into(), json!(channel.calls()));
    Ok(out)
}

/// `path` quoted for bash.
pub(crate) fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// Adds the regular files of `dir` to `out`: images as blocks, all as a listing.
fn attach_outputs(out: &mut ToolOutput, dir: &Path) {
    let mut files = Vec::new();
    collect_files(dir, &mut files);
    files.sort_by(|a, b| a.0.cmp(&b.0));
    if files.is_empty() {
        return;
    }
    let found = files.len();
    let mut listing = Vec::new();
    let mut image_bytes = 0u64;
    let mut text = String::from("\nOutput files:");
    for (path, file) in files.into_iter().take(MAX_LISTED_FILES) {
        let Some((bytes, size)) = read_regular(file, MAX_IMAGE_BYTES) else {
            continue;
        };
        let mime = bytes.as_deref().and_then(image_mime);
        text.push_str(&format!("\n- {} ({size} bytes)", path.display()));
        let mut entry = json!({"path": path.display().to_string(), "bytes": size});
        if let (Some(mime), Some(bytes)) = (mime, &bytes)
            && image_bytes + size <= MAX_TOTAL_IMAGE_BYTES
        {
            image_bytes += size;
            out.blocks.push(ContentBlock::image(
                mime,
                base64::engine::general_purpose::STANDARD.encode(bytes),
            ));
            entry["mime_type"] = json!(mime);
            text.push_str(" [returned as an image]");
        }
        listing.push(entry);
    }
    if found > MAX_LISTED_FILES {
        text.push_str(&format!(
            "\n({} more files not listed)",
            found - MAX_LISTED_FILES
        ));
    }
    if let toolbelt_core::Payload::Text(llm) = &mut out.for_llm {
        llm.push_str(&text);
    }
    out.meta
        .get_or_insert_with(Default::default)
        .insert("output_files".into(), json!(listing));
}

/// Every regular file below `dir`, opened, with its path. No symbolic link is followed at
/// any level, `dir` itself included: each folder and file is opened from its parent folder's
/// descriptor with `O_NOFOLLOW`, so a program (or a thread the Python session left running)
/// that swaps a folder for a link out, even while this runs, gets nothing from outside read.
fn collect_files(dir: &Path, files: &mut Vec<(PathBuf, std::fs::File)>) {
    use rustix::fs::{CWD, Dir, FileType, Mode, OFlags, fstat, openat};
    use std::os::unix::ffi::OsStrExt as _;
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let Ok(root) = openat(CWD, dir, flags | OFlags::DIRECTORY, Mode::empty()) else {
        return;
    };
    let mut pending = vec![(dir.to_path_buf(), root)];
    while let Some((folder, fd)) = pending.pop() {
        let Ok(entries) = Dir::read_from(&fd) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let Ok(child) = openat(&fd, name, flags, Mode::empty()) else {
                continue; // A symbolic link (ELOOP), gone, or not readable.
            };
            let Ok(st) = fstat(&child) else {
                continue;
            };
            let path = folder.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => pending.push((path, child)),
                FileType::RegularFile => files.push((path, std::fs::File::from(child))),
                _ => {}
            }
            if files.len() > 10 * MAX_LISTED_FILES {
                return;
            }
        }
    }
}

/// A regular file's size and, when it is at most `max` bytes, its bytes.
fn read_regular(mut file: std::fs::File, max: u64) -> Option<(Option<Vec<u8>>, u64)> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let size = meta.len();
    if size > max {
        return Some((None, size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.by_ref().take(max).read_to_end(&mut bytes).ok()?;
    Some((Some(bytes), size))
}

/// The image MIME type from the magic bytes, for the formats a model can look at.
fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    crate::fs::read::image_mime(bytes)
}
