//! The plan tool, `TodoWrite`, in Claude Code's shape: the model replaces its whole task list
//! with each call (`content`, `status` pending / in_progress / completed, `activeForm`), and
//! the list is kept per session: per [`ReadScope`](crate::fs::ReadScope) when the call names
//! one (each MCP session of `toolbelt serve`), else one list for the tool set.
//!
//! The result tells the model the list was saved; the user's view (`user_text`) is the list
//! as a checklist, which `toolbelt run` and `chat` print on stderr, and the structured result
//! holds the old and the new list for a UI. Lists are bounded: at most [`MAX_TODOS`] items of
//! at most [`MAX_TODO_CHARS`] characters each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

/// The most items a list may hold.
pub const MAX_TODOS: usize = 200;
/// The longest `content` or `activeForm`, in characters.
pub const MAX_TODO_CHARS: usize = 2000;

const DESCRIPTION: &str = "Creates and updates a structured task list for the current session, \
to plan multi-step work and show the user your progress. Each call replaces the whole list. \
Use it for tasks of three or more steps or when the user gives several tasks; skip it for a \
single trivial one. Each item has content (the task, imperative: \"Run the tests\"), \
activeForm (the same in the present continuous: \"Running the tests\") and status: pending, \
in_progress or completed. Keep exactly one item in_progress while you work, mark an item \
completed as soon as it is done (not in batches), and only when it is fully done.";

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One task of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TodoItem {
    /// The task, in the imperative ("Run the tests").
    pub content: String,
    /// Where the task stands.
    pub status: TodoStatus,
    /// The task in the present continuous, shown while it is in progress ("Running the
    /// tests").
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

/// Arguments of TodoWrite.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TodoWriteArgs {
    /// The updated task list (it replaces the previous one).
    pub todos: Vec<TodoItem>,
}

/// The lists of a tool set's sessions.
#[derive(Debug, Default)]
pub struct Plans {
    lists: Mutex<HashMap<String, Vec<TodoItem>>>,
}

impl Plans {
    /// The list of `session` (`None`: calls that name no session).
    pub fn get(&self, session: Option<&str>) -> Vec<TodoItem> {
        self.lock()
            .get(session.unwrap_or_default())
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces the list of `session`, returning the one it replaces.
    fn replace(&self, session: Option<&str>, todos: Vec<TodoItem>) -> Vec<TodoItem> {
        let key = session.unwrap_or_default().to_string();
        let mut lists = self.lock();
        if todos.is_empty() {
            lists.remove(&key).unwrap_or_default()
        } else {
            lists.insert(key, todos).unwrap_or_default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<TodoItem>>> {
        self.lists.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The TodoWrite tool, keeping its lists in `plans`.
pub fn todo_write_tool(plans: Arc<Plans>) -> Result<DynTool, ToolError> {
    let tool = FunctionTool::returning_output(
        "TodoWrite",
        DESCRIPTION,
        move |ctx: ToolContext, args: TodoWriteArgs| {
            let plans = plans.clone();
            async move { Ok::<_, ToolError>(todo_write(&plans, &ctx, args)) }
        },
    )?
    // It changes nothing outside the session: no approval, offered in read-only mode.
    .map_declaration(|d| d.read_only().closed_world().concurrency_safe(false));
    Ok(Arc::new(tool))
}

fn todo_write(plans: &Plans, ctx: &ToolContext, args: TodoWriteArgs) -> ToolOutput {
    if let Err(message) = check(&args.todos) {
        return ToolOutput::error(message);
    }
    let scope = ctx.get::<crate::fs::ReadScope>().map(|s| s.0.clone());
    let old = plans.replace(scope.as_deref(), args.todos.clone());
    ToolOutput::text(
        "Todos have been modified successfully. Ensure that you continue to use the todo list \
         to track your progress. Please proceed with the current tasks if applicable",
    )
    .with_user_text(checklist(&args.todos))
    .with_structured(json!({"oldTodos": old, "newTodos": args.todos}))
}

fn check(todos: &[TodoItem]) -> Result<(), String> {
    if todos.len() > MAX_TODOS {
        return Err(format!(
            "the list has {} items, more than the limit of {MAX_TODOS}",
            todos.len()
        ));
    }
    for (i, todo) in todos.iter().enumerate() {
        let n = i + 1;
        if todo.content.trim().is_empty() {
            return Err(format!("item {n} has an empty content"));
        }
        for (field, text) in [
            ("content", &todo.content),
            ("activeForm", &todo.active_form),
        ] {
            if text.chars().count() > MAX_TODO_CHARS {
                return Err(format!(
                    "item {n}'s {field} is longer than {MAX_TODO_CHARS} characters"
                ));
            }
        }
    }
    Ok(())
}

/// The list as people read it: one line per item, the one in progress by its active form.
pub fn checklist(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Todo list cleared\n".to_string();
    }
    let mut out = String::new();
    for todo in todos {
        let line = match todo.status {
            TodoStatus::Pending => format!("☐ {}", todo.content),
            TodoStatus::InProgress => {
                let shown = if todo.active_form.trim().is_empty() {
                    &todo.content
                } else {
                    &todo.active_form
                };
                format!("▶ {shown}")
            }
            TodoStatus::Completed => format!("☑ {}", todo.content),
        };
        // One line per item, whatever the model put in it.
        out.push_str(&line.replace(['\n', '\r'], " "));
        out.push('\n');
    }
    out
}
