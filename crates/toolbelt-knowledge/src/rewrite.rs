//! Query rewriting: the question the model asks the knowledge tools turned into a better
//! search query before the base is searched (the spec's knowledge search rewrites the
//! question first). Off unless a [`QueryRewriter`] is set with
//! [`KnowledgeBase::with_query_rewriter`](crate::KnowledgeBase::with_query_rewriter).
//!
//! A rewrite is a guess, so it may only improve a search, never break one: an answer that
//! fails, is empty, takes longer than [`REWRITE_TIME_LIMIT`] or is longer than
//! [`MAX_REWRITE_CHARS`] is dropped, the question is searched as asked, and the tool result
//! says so (a model that reads "searched for …" can tell a poor rewrite from a poor base).
//! Only the answer's first non-empty line is kept, without wrapping quotes or control
//! characters, whoever the rewriter is.
//!
//! `ModelQueryRewriter` (feature `rewrite`) asks a `toolbelt_model` model: a short system
//! prompt and the question (cut to [`MAX_QUESTION_CHARS`]), one non-streamed answer of at
//! most [`MAX_REWRITE_TOKENS`] tokens at temperature 0.

use std::time::Duration;

use serde::Serialize;

/// The longest question sent to a rewriter, in characters (the tools refuse longer ones).
pub const MAX_QUESTION_CHARS: usize = 2_000;
/// The longest rewritten query kept, in characters; a longer answer is not a query.
pub const MAX_REWRITE_CHARS: usize = 300;
/// How long a rewrite may take before the question is searched as asked.
pub const REWRITE_TIME_LIMIT: Duration = Duration::from_secs(30);
/// The most tokens [`ModelQueryRewriter`] lets the model answer with.
pub const MAX_REWRITE_TOKENS: u32 = 96;

/// Turns a question into a search query; see the [module docs](self).
#[async_trait::async_trait]
pub trait QueryRewriter: Send + Sync {
    /// The search query for `question`, or why there is none (the question is then searched
    /// as asked, and the tool result carries the reason).
    async fn rewrite(&self, question: &str) -> Result<String, String>;
}

/// What became of the question before a search; see [`KnowledgeBase::rewrite_query`](crate::KnowledgeBase::rewrite_query).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum QueryRewrite {
    /// No rewriter is set: the question is searched as asked.
    AsAsked,
    /// The rewriter's query is searched instead of the question.
    Rewritten {
        /// The query searched.
        query: String,
    },
    /// The rewrite failed; the question is searched as asked.
    Failed {
        /// Why, in a line.
        reason: String,
    },
}

impl QueryRewrite {
    /// The text to search: the rewritten query, or `question`.
    pub fn query<'a>(&'a self, question: &'a str) -> &'a str {
        match self {
            QueryRewrite::Rewritten { query } => query,
            QueryRewrite::AsAsked | QueryRewrite::Failed { .. } => question,
        }
    }

    /// One line for the tool result; `None` when no rewriter is set.
    pub fn describe(&self) -> Option<String> {
        match self {
            QueryRewrite::AsAsked => None,
            QueryRewrite::Rewritten { query } => Some(format!(
                "Searched for: {query:?} (the question rewritten by the model)."
            )),
            QueryRewrite::Failed { reason } => Some(format!(
                "Query rewriting failed ({reason}); searched for the question as asked."
            )),
        }
    }
}

/// Asks `rewriter` within the time limit and checks its answer (see the module docs).
pub(crate) async fn rewrite_with(rewriter: &dyn QueryRewriter, question: &str) -> QueryRewrite {
    let question = toolbelt_core::text::shorten(question, MAX_QUESTION_CHARS);
    let answer = match tokio::time::timeout(REWRITE_TIME_LIMIT, rewriter.rewrite(&question)).await {
        Err(_) => Err(format!(
            "no answer within {} s",
            REWRITE_TIME_LIMIT.as_secs()
        )),
        Ok(answer) => answer,
    };
    match answer.and_then(|answer| checked(&answer)) {
        Ok(query) => QueryRewrite::Rewritten { query },
        Err(reason) => {
            tracing::info!("knowledge query rewrite failed: {reason}");
            QueryRewrite::Failed {
                reason: toolbelt_core::text::shorten(&reason, 200).into_owned(),
            }
        }
    }
}

/// The query in a rewriter's answer: its first non-empty line, without wrapping quotes,
/// backticks or control characters; refused when empty or over [`MAX_REWRITE_CHARS`].
fn checked(answer: &str) -> Result<String, String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty());
    let Some(line) = line else {
        return Err("the rewrite is empty".into());
    };
    let line = line
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '“' | '”'))
        .trim();
    let query: String = line.chars().filter(|c| !c.is_control()).collect();
    if query.is_empty() {
        return Err("the rewrite is empty".into());
    }
    let chars = query.chars().count();
    if chars > MAX_REWRITE_CHARS {
        return Err(format!(
            "the rewrite is {chars} characters long, more than {MAX_REWRITE_CHARS}"
        ));
    }
    Ok(query)
}

#[cfg(feature = "rewrite")]
pub use model::ModelQueryRewriter;

#[cfg(feature = "rewrite")]
mod model {
    use futures::StreamExt;
    use toolbelt_model::{DynModel, GenerationConfig, Message, Request};

    use super::{MAX_REWRITE_TOKENS, QueryRewriter};

    /// What the model is told; the question follows as the user message.
    const INSTRUCTION: &str = "You turn a question into a search query for a knowledge base \
        of project documents, searched by keywords and by meaning. Answer with the query \
        alone, on one line, at most 30 words: the names, terms and likely synonyms the \
        documents that answer it would use. No explanation, no quotes.";

    /// A [`QueryRewriter`] that asks a model (feature `rewrite`); see the
    /// [module docs](super).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolbelt_knowledge::{KnowledgeBase, MemoryStore, ModelQueryRewriter};
    /// use toolbelt_model::{OpenAiConfig, OpenAiModel};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let model = OpenAiModel::new(OpenAiConfig::new("http://127.0.0.1:8000/v1", "qwen3"))?;
    /// let base = KnowledgeBase::new(Arc::new(MemoryStore::new()))
    ///     .with_query_rewriter(Arc::new(ModelQueryRewriter::new(Arc::new(model))));
    /// # let _ = base;
    /// # Ok(()) }
    /// ```
    pub struct ModelQueryRewriter {
        model: DynModel,
    }

    impl std::fmt::Debug for ModelQueryRewriter {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("ModelQueryRewriter")
                .field("model", &self.model.name())
                .finish()
        }
    }

    impl ModelQueryRewriter {
        /// Rewrites with `model`.
        pub fn new(model: DynModel) -> Self {
            ModelQueryRewriter { model }
        }
    }

    #[async_trait::async_trait]
    impl QueryRewriter for ModelQueryRewriter {
        async fn rewrite(&self, question: &str) -> Result<String, String> {
            let config = GenerationConfig {
                stream: false,
                temperature: Some(0.0),
                max_tokens: Some(MAX_REWRITE_TOKENS),
                ..GenerationConfig::default()
            };
            let request = Request::new(vec![Message::system(INSTRUCTION), Message::user(question)])
                .with_config(config);
            let mut stream = self
                .model
                .generate(request)
                .await
                .map_err(|e| format!("the model failed: {e}"))?;
            let mut answer = None;
            while let Some(item) = stream.next().await {
                let response = item.map_err(|e| format!("the model failed: {e}"))?;
                if !response.partial {
                    answer = response.message.map(|m| m.content);
                }
            }
            answer.ok_or_else(|| "the model's response ended without a message".to_string())
        }
    }
}
