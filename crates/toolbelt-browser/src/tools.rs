//! The six browser tools and the tool set that owns their browser.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use toolbelt_core::{
    ContentBlock, DynTool, FunctionTool, ToolContext, ToolError, ToolOutput, ToolSet,
};

use crate::browser::{Browser, BrowserError, Snapshot, render};
use crate::options::BrowserOptions;

/// Arguments of `browser_navigate`.
#[derive(Debug, Deserialize, JsonSchema)]
struct NavigateArgs {
    /// The http or https URL to open.
    url: String,
}

/// Arguments of a tool that takes none.
#[derive(Debug, Deserialize, JsonSchema)]
struct NoArgs {}

/// Arguments of `browser_click`.
#[derive(Debug, Deserialize, JsonSchema)]
struct ClickArgs {
    /// The element's reference from the last snapshot, such as `e12`.
    #[serde(rename = "ref")]
    reference: String,
}

/// Arguments of `browser_type`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TypeArgs {
    /// The field's reference from the last snapshot, such as `e12`.
    #[serde(rename = "ref")]
    reference: String,
    /// The text to type; it replaces what the field holds.
    text: String,
    /// Press Enter afterwards (submits most forms). Default false.
    #[serde(default)]
    submit: bool,
}

/// Browser tools driving one real Chromium, confined by WebFetch's network policy.
///
/// The browser starts on the first call (a fresh profile in a temporary directory, its own
/// process group), is restarted with a note after a crash, and is killed with its whole
/// process group by `browser_close`, by [`ToolSet::close`], and when the set is dropped. The
/// tools hold only a weak reference: once the set is gone they fail instead of starting a
/// browser nobody owns.
///
/// ```no_run
/// # async fn demo() -> Result<(), toolbelt_core::ToolError> {
/// use toolbelt_browser::{BrowserOptions, BrowserToolSet};
/// use toolbelt_core::{ToolContext, ToolSet};
///
/// let set = BrowserToolSet::new(BrowserOptions::default());
/// let tools = set.tools(&ToolContext::for_call("list")).await?;
/// let navigate = tools.iter().find(|t| t.name() == "browser_navigate").unwrap();
/// let page = navigate
///     .call(ToolContext::for_call("c1"), r#"{"url":"https://example.com/"}"#)
///     .await?;
/// println!("{}", page.llm_text());
/// set.close().await?;
/// # Ok(()) }
/// ```
pub struct BrowserToolSet {
    browser: Arc<Browser>,
    tools: Vec<DynTool>,
}

impl BrowserToolSet {
    /// A tool set; no browser starts until a tool is called.
    pub fn new(options: BrowserOptions) -> Self {
        let max_chars = options.max_snapshot_chars;
        let browser = Arc::new(Browser::new(options));
        let tools = build_tools(Arc::downgrade(&browser), max_chars)
            .expect("the browser tools' declarations are valid");
        Self { browser, tools }
    }

    /// The process id of the running browser's main process (also its process group id),
    /// or `None` when no browser runs.
    pub async fn browser_pid(&self) -> Option<u32> {
        self.browser.pid().await
    }
}

#[async_trait]
impl ToolSet for BrowserToolSet {
    fn name(&self) -> &str {
        "browser"
    }

    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Ok(self.tools.clone())
    }

    async fn close(&self) -> Result<(), ToolError> {
        self.browser.close().await;
        Ok(())
    }
}

fn upgrade(browser: &Weak<Browser>) -> Result<Arc<Browser>, ToolError> {
    browser
        .upgrade()
        .ok_or_else(|| ToolError::failed("the browser tool set was closed and dropped"))
}

fn to_tool_error(error: BrowserError) -> ToolError {
    match error {
        BrowserError::Refused(m) => ToolError::rejected(m),
        BrowserError::Invalid(m) => ToolError::invalid_arguments(m),
        e @ (BrowserError::Broken(_) | BrowserError::Failed(_)) => ToolError::failed(render(&e)),
    }
}

/// Renders a snapshot (capped) with the notes above it.
fn snapshot_output(snapshot: Snapshot, notes: Vec<String>, max_chars: usize) -> ToolOutput {
    let mut text = String::new();
    for note in &notes {
        text.push_str("Note: ");
        text.push_str(note);
        text.push('\n');
    }
    text.push_str(&format!(
        "Page: {}\nURL: {}\n\n",
        snapshot.title, snapshot.url
    ));
    text.push_str(&snapshot.outline);
    let mut cut = snapshot.truncated;
    if text.chars().count() > max_chars {
        let end = text
            .char_indices()
            .nth(max_chars)
            .map_or(text.len(), |(i, _)| i);
        text.truncate(end);
        cut = true;
    }
    if cut {
        text.push_str(&format!(
            "\n[snapshot cut: the page has more than {max_chars} characters of outline]"
        ));
    }
    ToolOutput::text(text)
}

fn build_tools(browser: Weak<Browser>, max_chars: usize) -> Result<Vec<DynTool>, ToolError> {
    let b = browser.clone();
    let navigate = FunctionTool::returning_output(
        "browser_navigate",
        "Opens a URL in the browser and returns the page's snapshot: its text and an outline \
         of its elements with references (e12) for browser_click and browser_type. Only http \
         and https; private and local addresses are refused.",
        move |_ctx: ToolContext, args: NavigateArgs| {
            let b = b.clone();
            async move {
                let (snapshot, notes) = upgrade(&b)?
                    .navigate(&args.url)
                    .await
                    .map_err(to_tool_error)?;
                Ok::<_, ToolError>(snapshot_output(snapshot, notes, max_chars))
            }
        },
    )?
    .map_declaration(|d| d.open_world().concurrency_safe(false));

    let b = browser.clone();
    let snapshot = FunctionTool::returning_output(
        "browser_snapshot",
        "Returns the current page's text and an outline of its elements with references (e12) \
         for browser_click and browser_type. References from earlier snapshots stop working.",
        move |_ctx: ToolContext, _args: NoArgs| {
            let b = b.clone();
            async move {
                let (snapshot, notes) = upgrade(&b)?.snapshot().await.map_err(to_tool_error)?;
                Ok::<_, ToolError>(snapshot_output(snapshot, notes, max_chars))
            }
        },
    )?
    .map_declaration(|d| d.read_only().concurrency_safe(false));

    let b = browser.clone();
    let click = FunctionTool::returning_output(
        "browser_click",
        "Clicks the element with the given reference from the last snapshot, waits for a page \
         it opens, and returns the new snapshot.",
        move |_ctx: ToolContext, args: ClickArgs| {
            let b = b.clone();
            async move {
                let (snapshot, notes) = upgrade(&b)?
                    .click(&args.reference)
                    .await
                    .map_err(to_tool_error)?;
                Ok::<_, ToolError>(snapshot_output(snapshot, notes, max_chars))
            }
        },
    )?
    .map_declaration(|d| d.open_world().concurrency_safe(false));

    let b = browser.clone();
    let type_tool = FunctionTool::returning_output(
        "browser_type",
        "Types text into a field (reference from the last snapshot), replacing its content; \
         with submit, presses Enter. Returns the new snapshot.",
        move |_ctx: ToolContext, args: TypeArgs| {
            let b = b.clone();
            async move {
                let (snapshot, notes) = upgrade(&b)?
                    .type_text(&args.reference, &args.text, args.submit)
                    .await
                    .map_err(to_tool_error)?;
                Ok::<_, ToolError>(snapshot_output(snapshot, notes, max_chars))
            }
        },
    )?
    .map_declaration(|d| d.open_world().concurrency_safe(false));

    let b = browser.clone();
    let screenshot = FunctionTool::returning_output(
        "browser_screenshot",
        "Takes a PNG screenshot of the visible part of the current page.",
        move |_ctx: ToolContext, _args: NoArgs| {
            let b = b.clone();
            async move {
                let (data, url, notes) = upgrade(&b)?.screenshot().await.map_err(to_tool_error)?;
                let mut text = String::new();
                for note in notes {
                    text.push_str(&format!("Note: {note}\n"));
                }
                text.push_str(&format!("Screenshot of {url}"));
                Ok::<_, ToolError>(
                    ToolOutput::text(text).with_block(ContentBlock::image("image/png", data)),
                )
            }
        },
    )?
    .map_declaration(|d| d.read_only().concurrency_safe(false));

    let b = browser;
    let close = FunctionTool::returning_output(
        "browser_close",
        "Closes the browser (every page and its processes). The next browser call starts a \
         new one with an empty profile.",
        move |_ctx: ToolContext, _args: NoArgs| {
            let b = b.clone();
            async move {
                let was_running = upgrade(&b)?.close().await;
                Ok::<_, ToolError>(ToolOutput::text(if was_running {
                    "The browser was closed."
                } else {
                    "No browser was running."
                }))
            }
        },
    )?
    .map_declaration(|d| d.idempotent().concurrency_safe(false));

    Ok(vec![
        Arc::new(navigate),
        Arc::new(snapshot),
        Arc::new(click),
        Arc::new(type_tool),
        Arc::new(screenshot),
        Arc::new(close),
    ])
}
