//! The two framework tools over a [`KnowledgeBase`]: `knowledge_search(query)` and
//! `agentic_knowledge_search(query, filter)`.
//!
//! Both return ranked chunks, each headed by its citation (`path:10-24`, or the URL) and its
//! heading path, whole chunks only, within [`KnowledgeToolOptions::max_chars`]; the first
//! line says how they were ranked (BM25 only, or hybrid), and with a query rewriter the next
//! says what was searched (the rewritten query, or the question when the rewrite failed).
//! The agentic tool's description
//! lists the fields and operators its filter may use; a filter that names anything else, or
//! carries values of the wrong type, is an invalid-arguments error the model sees and can
//! correct, and never reaches the store (see [`Filter`](crate::Filter)).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use crate::base::{KnowledgeBase, SearchResults};
use crate::filter::FieldType;
use crate::rewrite::QueryRewrite;

/// The name of the plain search tool.
pub const KNOWLEDGE_SEARCH: &str = "knowledge_search";
/// The name of the search tool with a metadata filter.
pub const AGENTIC_KNOWLEDGE_SEARCH: &str = "agentic_knowledge_search";

/// The longest query the tools accept, in characters (also what a rewriter is sent).
const MAX_QUERY_CHARS: usize = crate::rewrite::MAX_QUESTION_CHARS;

/// How the knowledge tools answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnowledgeToolOptions {
    /// Chunks returned when the model does not say (default 5).
    pub default_k: usize,
    /// The most chunks one call may ask for (default 20).
    pub max_k: usize,
    /// The size budget of one answer, in characters (default 12,000); whole chunks are
    /// added while they fit, and the first is cut to fit if it alone is larger.
    pub max_chars: usize,
}

impl Default for KnowledgeToolOptions {
    fn default() -> Self {
        KnowledgeToolOptions {
            default_k: 5,
            max_k: 20,
            max_chars: 12_000,
        }
    }
}

/// Arguments of `knowledge_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// What to look for, in words.
    query: String,
    /// How many chunks to return.
    #[serde(default)]
    k: Option<usize>,
}

/// Arguments of `agentic_knowledge_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FilteredArgs {
    /// What to look for, in words.
    query: String,
    /// A metadata filter (see the tool description).
    #[serde(default)]
    filter: Option<Value>,
    /// How many chunks to return.
    #[serde(default)]
    k: Option<usize>,
}

/// Both tools over `base`: `knowledge_search`, then `agentic_knowledge_search`.
pub fn knowledge_tools(
    base: Arc<KnowledgeBase>,
    options: KnowledgeToolOptions,
) -> Result<Vec<DynTool>, ToolError> {
    Ok(vec![
        knowledge_search_tool(base.clone(), options)?,
        agentic_knowledge_search_tool(base, options)?,
    ])
}

/// `knowledge_search(query, k?)`.
pub fn knowledge_search_tool(
    base: Arc<KnowledgeBase>,
    options: KnowledgeToolOptions,
) -> Result<DynTool, ToolError> {
    let description = format!(
        "Searches the knowledge base (project documents and sources) and returns the most \
         relevant passages, each with its citation (path and lines, a PDF's page, or URL). Ranking: {}.",
        base.mode().describe()
    );
    let tool = FunctionTool::returning_output(
        KNOWLEDGE_SEARCH,
        &description,
        move |_ctx: ToolContext, args: SearchArgs| {
            let base = base.clone();
            async move { run(&base, options, &args.query, args.k, None).await }
        },
    )?
    .map_declaration(|d| d.read_only().idempotent().closed_world());
    Ok(Arc::new(tool))
}

/// `agentic_knowledge_search(query, filter?, k?)`: the filter's fields and operators are
/// listed in the description and checked on every call.
pub fn agentic_knowledge_search_tool(
    base: Arc<KnowledgeBase>,
    options: KnowledgeToolOptions,
) -> Result<DynTool, ToolError> {
    let fields: Vec<String> = base
        .fields()
        .iter()
        .map(|f| {
            let ops = match f.kind {
                FieldType::String => "$eq $ne $in $nin $contains (substring) $prefix",
                FieldType::Number => "$eq $ne $in $nin $gt $gte $lt $lte",
                FieldType::Bool => "$eq $ne",
                FieldType::StringList => "$eq/$contains (has element) $in $nin",
            };
            format!(
                "- {} ({:?}): {}; operators {ops}",
                f.name, f.kind, f.description
            )
        })
        .collect();
    let description = format!(
        "Searches the knowledge base like knowledge_search, keeping only passages whose \
         metadata passes `filter`. Ranking: {}.\n\
         A filter is a JSON object: {{\"field\": value}} (equals), \
         {{\"field\": {{\"$op\": value}}}}, {{\"$and\": [...]}}, {{\"$or\": [...]}}, \
         {{\"$not\": {{...}}}}. Example: {{\"source\": {{\"$prefix\": \"docs/\"}}, \"kind\": \"markdown\"}}.\n\
         Fields:\n{}",
        base.mode().describe(),
        fields.join("\n")
    );
    let tool = FunctionTool::returning_output(
        AGENTIC_KNOWLEDGE_SEARCH,
        &description,
        move |_ctx: ToolContext, args: FilteredArgs| {
            let base = base.clone();
            async move {
                let filter = match &args.filter {
                    None | Some(Value::Null) => None,
                    Some(value) => Some(
                        base.parse_filter(value)
                            .map_err(|e| ToolError::invalid_arguments(e.to_string()))?,
                    ),
                };
                run(&base, options, &args.query, args.k, filter.as_ref()).await
            }
        },
    )?
    .map_declaration(|d| d.read_only().idempotent().closed_world());
    Ok(Arc::new(tool))
}

async fn run(
    base: &KnowledgeBase,
    options: KnowledgeToolOptions,
    query: &str,
    k: Option<usize>,
    filter: Option<&crate::Filter>,
) -> Result<ToolOutput, ToolError> {
    let query = query.trim();
    if query.is_empty() {
        return Err(ToolError::invalid_arguments("query is empty"));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(ToolError::invalid_arguments(format!(
            "query is longer than {MAX_QUERY_CHARS} characters; ask in fewer words"
        )));
    }
    let k = k
        .unwrap_or(options.default_k)
        .clamp(1, options.max_k.max(1));
    let rewrite = base.rewrite_query(query).await;
    let results = base
        .search(rewrite.query(query), k, filter)
        .await
        .map_err(ToolError::failed)?;
    Ok(render(&results, &rewrite, options.max_chars))
}

/// The answer: a mode line, what was searched when a rewriter is set, then each hit under
/// its citation, within `max_chars`.
pub(crate) fn render(
    results: &SearchResults,
    rewrite: &QueryRewrite,
    max_chars: usize,
) -> ToolOutput {
    let mut text = format!("Ranking: {}.\n", results.mode.describe());
    if let Some(line) = rewrite.describe() {
        text.push_str(&line);
        text.push('\n');
    }
    if results.hits.is_empty() {
        text.push_str("No passage matched.");
        return ToolOutput::text(text).with_structured(json!({
            "mode": results.mode,
            "rewrite": rewrite,
            "hits": [],
        }));
    }
    let mut listed = Vec::new();
    let mut left_out = 0;
    for (i, hit) in results.hits.iter().enumerate() {
        let c = &hit.chunk;
        let mut head = format!("\n[{}] {}", i + 1, c.citation());
        if !c.heading_path.is_empty() {
            head.push_str(" — ");
            head.push_str(&c.heading_path.join(" > "));
        } else if let Some(title) = &c.title {
            head.push_str(" — ");
            head.push_str(title);
        }
        head.push('\n');
        let used = text.chars().count();
        let need = head.chars().count() + c.text.chars().count() + 1;
        if used + need > max_chars {
            if listed.is_empty() {
                // The best hit alone is over budget: its beginning, marked as cut.
                let room = max_chars.saturating_sub(used + head.chars().count() + 40);
                let body: String = c.text.chars().take(room).collect();
                text.push_str(&head);
                text.push_str(&body);
                text.push_str("\n[… passage cut to the size budget]\n");
                listed.push(hit);
                left_out = results.hits.len() - 1;
                break;
            }
            left_out = results.hits.len() - i;
            break;
        }
        text.push_str(&head);
        text.push_str(&c.text);
        text.push('\n');
        listed.push(hit);
    }
    if left_out > 0 {
        text.push_str(&format!(
            "\n[{left_out} more passages left out to stay within the size budget]\n"
        ));
    }
    let structured: Vec<Value> = listed
        .iter()
        .map(|h| {
            json!({
                "citation": h.chunk.citation(),
                "source": h.chunk.source,
                "lines": h.chunk.lines.map(|(a, b)| [a, b]),
                "pages": h.chunk.pages.map(|(a, b)| [a, b]),
                "heading_path": h.chunk.heading_path,
                "title": h.chunk.title,
                "score": h.score,
            })
        })
        .collect();
    ToolOutput::text(text).with_structured(json!({
        "mode": results.mode,
        "rewrite": rewrite,
        "hits": structured,
    }))
}
