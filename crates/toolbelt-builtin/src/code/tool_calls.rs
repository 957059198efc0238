//! Code that calls tools: inside an `execute_code` program, the tools it may call are
//! functions (`tools.Grep(pattern="TODO")` in Python, `tools.Grep({pattern: "TODO"})` in
//! JavaScript), so a model writes one program that makes many calls and returns only what it
//! prints.
//!
//! Each call travels as a JSON line over a FIFO pair in the call's folder of the shell's
//! private temp dir (a file open, so it works in every sandbox mode, where sockets do not) and
//! is made through a [`ToolCaller`], the executor, so validation, hooks, permission rules,
//! lanes and the audit log apply to it exactly as to a call from the model. A refused or
//! failed call raises `ToolError` inside the program with the reason. Nothing a tool returns
//! reaches the model unless the program prints it.
//!
//! Off by default ([`CodeToolAccess::None`]); the host names the tools a program may call and
//! binds its executor with [`BuiltinToolSet::bind_tool_caller`](crate::BuiltinToolSet::bind_tool_caller).
//! `execute_code` itself is never callable from code. Python and JavaScript programs only
//! (not bash, not the persistent Python session).

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::unix::pipe;
use toolbelt_core::{Declaration, DynTool, ToolCaller, ToolContext, ToolError};

/// The longest request line a program may send (a tool's arguments).
const MAX_REQUEST_BYTES: u64 = 1024 * 1024;
/// The most tool calls one program may make.
const MAX_CALLS_PER_PROGRAM: usize = 1000;
/// The longest tool summary in a signature line.
const MAX_SUMMARY_CHARS: usize = 100;

/// Which tools an `execute_code` program may call (`--code-tools NAMES|all`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CodeToolAccess {
    /// None: programs cannot call tools (the default).
    #[default]
    None,
    /// Every tool the executor can run, but `execute_code`.
    All,
    /// Only these tools.
    Only(Vec<String>),
}

impl CodeToolAccess {
    /// Whether a program may call `name`.
    pub fn allows(&self, name: &str) -> bool {
        name != super::TOOL_NAME
            && match self {
                CodeToolAccess::None => false,
                CodeToolAccess::All => true,
                CodeToolAccess::Only(names) => names.iter().any(|n| n == name),
            }
    }
}

impl FromStr for CodeToolAccess {
    type Err = String;

    /// `all`, `none`, or tool names separated by commas.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "all" => Ok(CodeToolAccess::All),
            "none" | "" => Ok(CodeToolAccess::None),
            list => {
                let names: Vec<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = names
                    .iter()
                    .find(|n| toolbelt_core::ToolName::new(n.as_str()).is_err())
                {
                    return Err(format!("{bad:?} is not a tool name"));
                }
                Ok(CodeToolAccess::Only(names))
            }
        }
    }
}

/// What connects a program's tool calls to the executor: the allow-list, and the caller the
/// host binds once its executor exists.
pub(crate) struct ToolBridge {
    access: CodeToolAccess,
    caller: OnceLock<Arc<dyn ToolCaller>>,
}

impl fmt::Debug for ToolBridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolBridge")
            .field("access", &self.access)
            .field("bound", &self.caller.get().is_some())
            .finish()
    }
}

/// A program's request: one tool call.
#[derive(Deserialize)]
struct Request {
    tool: String,
    #[serde(default)]
    arguments: Value,
}

impl ToolBridge {
    /// A bridge for `access`, or `None` when programs may call no tool.
    pub(crate) fn new(access: &CodeToolAccess) -> Option<Arc<Self>> {
        (*access != CodeToolAccess::None).then(|| {
            Arc::new(Self {
                access: access.clone(),
                caller: OnceLock::new(),
            })
        })
    }

    /// Binds the caller; a second bind is ignored (the first executor keeps the calls).
    pub(crate) fn bind(&self, caller: Arc<dyn ToolCaller>) {
        let _ = self.caller.set(caller);
    }

    /// The paragraph of `execute_code`'s description that lists the callable tools among
    /// `known` (the built-in tools) with their Python signatures.
    pub(crate) fn describe(&self, known: &[DynTool]) -> String {
        let mut text = String::from(
            "\n\nIn python and javascript programs (not bash, not the session) tools are \
             functions: Python `r = tools.Grep(pattern=\"TODO\")` returns the tool's text \
             (r.structured holds its structured result), JavaScript \
             `tools.Grep({pattern: \"TODO\"})` returns the text; a refused or failed call \
             raises ToolError with the reason; `tools.call(name, **args)` calls any allowed \
             tool by name. Every call passes the same checks as a direct call, and only what \
             the program prints is returned, so use this to make many calls and return a \
             summary.",
        );
        match &self.access {
            CodeToolAccess::All => text.push_str(" Every tool but execute_code may be called."),
            CodeToolAccess::Only(names) => {
                text.push_str(&format!(" Callable tools: {}.", names.join(", ")));
            }
            CodeToolAccess::None => {}
        }
        let mut lines: Vec<String> = known
            .iter()
            .filter(|t| self.access.allows(t.name()))
            .map(|t| python_signature(t.declaration()))
            .collect();
        lines.sort();
        if !lines.is_empty() {
            text.push_str("\nSignatures:\n");
            text.push_str(&lines.join("\n"));
        }
        text
    }

    /// Makes the FIFO pair in `dir` and answers the program's calls on it until the returned
    /// future is dropped (when the program has ended). `calls` counts the calls made.
    pub(crate) fn open(&self, dir: &Path) -> Result<Channel, ToolError> {
        let failed =
            |e: std::io::Error| ToolError::failed(format!("could not open the tool channel: {e}"));
        let requests = dir.join("tool-requests");
        let results = dir.join("tool-results");
        for fifo in [&requests, &results] {
            rustix::fs::mkfifoat(
                rustix::fs::CWD,
                fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
            )
            .map_err(|e| failed(e.into()))?;
        }
        // Read-write on both: opening never waits for the program, and a program that has
        // not opened its end yet (or closed it) is never seen as end-of-file.
        let receiver = pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&requests)
            .map_err(failed)?;
        let sender = pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&results)
            .map_err(failed)?;
        Ok(Channel {
            environment: format!(
                "TOOLBELT_TOOL_REQUESTS={} TOOLBELT_TOOL_RESULTS={}",
                super::quote(&requests),
                super::quote(&results)
            ),
            receiver,
            sender,
            calls: AtomicUsize::new(0),
        })
    }

    /// Answers one request line.
    async fn answer(&self, ctx: &ToolContext, line: &[u8], n: usize) -> Value {
        let request: Request = match serde_json::from_slice(line) {
            Ok(request) => request,
            Err(e) => return refusal(format!("the request is not valid JSON: {e}")),
        };
        if !self.access.allows(&request.tool) {
            return refusal(match &self.access {
                CodeToolAccess::Only(names) => format!(
                    "{} is not one of the tools this code may call ({})",
                    request.tool,
                    names.join(", ")
                ),
                _ => format!("{} cannot be called from code", request.tool),
            });
        }
        if n >= MAX_CALLS_PER_PROGRAM {
            return refusal(format!(
                "a program may make at most {MAX_CALLS_PER_PROGRAM} tool calls"
            ));
        }
        let Some(caller) = self.caller.get() else {
            return refusal(
                "tools cannot be called here: the host did not connect execute_code to its \
                 executor"
                    .to_string(),
            );
        };
        let arguments = match request.arguments {
            Value::Null => "{}".to_string(),
            other => other.to_string(),
        };
        let call_id = format!("{}.code-{n}", ctx.call_id().unwrap_or("execute_code"));
        let child = ctx
            .child()
            .with_call_id(call_id)
            .with_tool_name(request.tool.as_str());
        match caller.call_tool(child, &request.tool, &arguments).await {
            Ok(out) if out.is_error => refusal(out.llm_text()),
            Ok(out) => json!({"ok": true, "text": out.llm_text(), "structured": out.structured}),
            Err(e) => refusal(e.to_string()),
        }
    }
}

/// A failed call's reply.
fn refusal(error: String) -> Value {
    json!({"ok": false, "error": error})
}

/// One program's open tool channel.
pub(crate) struct Channel {
    /// The variables that name the FIFOs, as `NAME=VALUE` words for a bash command line.
    pub(crate) environment: String,
    receiver: pipe::Receiver,
    sender: pipe::Sender,
    calls: AtomicUsize,
}

impl Channel {
    /// How many tool calls the program made.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    /// Answers calls until dropped; returns only if the channel itself fails.
    pub(crate) async fn serve(&mut self, bridge: &ToolBridge, ctx: &ToolContext) -> ToolError {
        let mut reader = BufReader::new(&mut self.receiver);
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = (&mut reader)
                .take(MAX_REQUEST_BYTES + 1)
                .read_until(b'\n', &mut line)
                .await;
            if let Err(e) = read {
                return ToolError::failed(format!("the tool channel failed: {e}"));
            }
            let reply = if line.last() != Some(&b'\n') && line.len() as u64 > MAX_REQUEST_BYTES {
                // Skip the rest of the oversized line, so the next request starts clean.
                let mut rest = Vec::new();
                let _ = reader.read_until(b'\n', &mut rest).await;
                refusal(format!(
                    "a tool request may be at most {MAX_REQUEST_BYTES} bytes"
                ))
            } else {
                let n = self.calls.fetch_add(1, Ordering::Relaxed);
                bridge.answer(ctx, &line, n).await
            };
            let mut text = reply.to_string();
            text.push('\n');
            if let Err(e) = self.sender.write_all(text.as_bytes()).await {
                return ToolError::failed(format!("the tool channel failed: {e}"));
            }
        }
    }
}

/// `Grep(pattern: str, path: str = None) - Searches file contents…`
fn python_signature(declaration: &Declaration) -> String {
    let schema = &declaration.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params = Vec::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let mut optional = Vec::new();
        for (name, property) in properties {
            let kind = python_type(property);
            if required.contains(&name.as_str()) {
                params.push(format!("{name}: {kind}"));
            } else {
                optional.push(format!("{name}: {kind} = None"));
            }
        }
        params.extend(optional);
    }
    let summary: String = declaration
        .description
        .split(". ")
        .next()
        .unwrap_or_default()
        .chars()
        .take(MAX_SUMMARY_CHARS)
        .collect();
    format!(
        "tools.{}({}) - {}",
        declaration.name,
        params.join(", "),
        summary.trim_end_matches('.')
    )
}

fn python_type(property: &Value) -> &'static str {
    let kind = match property.get("type") {
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null"),
        Some(kind) => kind.as_str(),
        None => None,
    };
    match kind {
        Some("string") => "str",
        Some("integer") => "int",
        Some("number") => "float",
        Some("boolean") => "bool",
        Some("array") => "list",
        Some("object") => "dict",
        _ => "Any",
    }
}

/// Runs the program file given as its first argument with `tools` and `ToolError` defined.
pub(crate) const PYTHON_PRELUDE: &str = r#"import json, os, runpy, sys, threading

class ToolError(Exception):
    """A tool call the program made was refused or failed; the message says why."""

class ToolResult(str):
    """A tool's text, as the model would read it; .structured holds its structured result."""
    structured = None

class _Tools:
    def __init__(self):
        self._pipes = None
        self._lock = threading.Lock()

    def call(self, name, **arguments):
        with self._lock:
            if self._pipes is None:
                self._pipes = (
                    open(os.environ["TOOLBELT_TOOL_REQUESTS"], "w", encoding="utf-8"),
                    open(os.environ["TOOLBELT_TOOL_RESULTS"], "r", encoding="utf-8"),
                )
            requests, results = self._pipes
            requests.write(json.dumps({"tool": name, "arguments": arguments}) + "\n")
            requests.flush()
            line = results.readline()
        if not line:
            raise ToolError("the tool channel closed")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ToolError(reply.get("error") or "the call failed")
        result = ToolResult(reply.get("text") or "")
        result.structured = reply.get("structured")
        return result

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda **arguments: self.call(name, **arguments)

tools = _Tools()
program = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(program, init_globals={"tools": tools, "ToolError": ToolError}, run_name="__main__")
"#;

/// Runs the program file given as its first argument with `tools` and `ToolError` global.
pub(crate) const JAVASCRIPT_PRELUDE: &str = r#""use strict";
const fs = require("fs");
const path = require("path");
class ToolError extends Error {}
let pipes = null;
let buffered = Buffer.alloc(0);
function readLine(fd) {
  const chunk = Buffer.alloc(65536);
  for (;;) {
    const end = buffered.indexOf(10);
    if (end >= 0) {
      const line = buffered.subarray(0, end).toString("utf8");
      buffered = buffered.subarray(end + 1);
      return line;
    }
    const n = fs.readSync(fd, chunk, 0, chunk.length, null);
    if (n === 0) throw new ToolError("the tool channel closed");
    buffered = Buffer.concat([buffered, chunk.subarray(0, n)]);
  }
}
function call(name, args) {
  if (pipes === null) {
    pipes = [fs.openSync(process.env.TOOLBELT_TOOL_REQUESTS, "w"), fs.openSync(process.env.TOOLBELT_TOOL_RESULTS, "r")];
  }
  fs.writeSync(pipes[0], JSON.stringify({ tool: name, arguments: args || {} }) + "\n");
  const reply = JSON.parse(readLine(pipes[1]));
  if (!reply.ok) throw new ToolError(reply.error || "the call failed");
  return reply.text || "";
}
globalThis.ToolError = ToolError;
globalThis.tools = new Proxy({ call }, {
  get(target, name) {
    if (name in target) return target[name];
    if (typeof name !== "string" || name === "then") return undefined;
    return (args) => call(name, args);
  },
});
const program = path.resolve(process.argv[2]);
process.argv.splice(1, 1);
require(program);
"#;
