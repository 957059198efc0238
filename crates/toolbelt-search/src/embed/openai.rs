//! [`OpenAiEmbedder`]: an OpenAI-compatible `POST {base}/embeddings` client.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Embedder, check_vectors};
use crate::SearchError;

/// The most texts sent in one request by default (OpenAI accepts 2,048; local servers often
/// far fewer, and smaller requests fail and time out in smaller pieces).
const DEFAULT_BATCH: usize = 64;
/// How long one request may take by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest response body read. 64 texts × 3,072 dimensions as JSON is about 4 MB; a
/// server sending far more is broken or hostile and must not exhaust memory.
const MAX_BODY: usize = 64 << 20;
/// How much of an error body is quoted in the error.
const MAX_QUOTE: usize = 500;

/// Embeds texts with an OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, llama.cpp,
/// Ollama, LiteLLM, …).
///
/// Texts are sent in batches of [`batch_size`](Self::batch_size); each answer is checked (one
/// vector per input, indices in range, one dimension, finite numbers), and a non-200 answer
/// is an error quoting the server's message.
///
/// ```
/// use toolbelt_search::embed::{Embedder, OpenAiEmbedder};
/// let embedder = OpenAiEmbedder::new("http://127.0.0.1:8000/v1", "text-embedding-3-small")
///     .api_key("sk-…")
///     .dimensions(256);
/// assert_eq!(
///     embedder.model_id(),
///     "openai:http://127.0.0.1:8000/v1#text-embedding-3-small/256"
/// );
/// ```
pub struct OpenAiEmbedder {
    client: Result<reqwest::Client, String>,
    url: String,
    model: String,
    model_id: String,
    api_key: Option<String>,
    batch: usize,
    timeout: Duration,
    dimensions: Option<usize>,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the API key.
        f.debug_struct("OpenAiEmbedder")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("batch", &self.batch)
            .field("timeout", &self.timeout)
            .field("dimensions", &self.dimensions)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// An embedder for `model` at `base_url` (the URL that `/embeddings` is appended to,
    /// e.g. `https://host/v1`).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let base = base_url.into().trim_end_matches('/').to_owned();
        let model = model.into();
        // Building the client only fails when the TLS backend cannot start; that is reported
        // by the first embed call rather than making construction fallible.
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| format!("cannot start an HTTP client: {e}"));
        let mut embedder = Self {
            client,
            url: format!("{base}/embeddings"),
            model_id: String::new(),
            model,
            api_key: None,
            batch: DEFAULT_BATCH,
            timeout: DEFAULT_TIMEOUT,
            dimensions: None,
        };
        embedder.model_id = embedder.make_model_id(&base);
        embedder
    }

    /// Sends `Authorization: Bearer <key>`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// At most this many texts per request (default 64, at least 1).
    pub fn batch_size(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// How long one request may take, connecting included (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Asks for vectors of this size (models that support shortening, e.g.
    /// text-embedding-3) and checks that the answer has it. Part of the model id.
    pub fn dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = Some(dimensions);
        let base = self.url.trim_end_matches("/embeddings").to_owned();
        self.model_id = self.make_model_id(&base);
        self
    }

    fn make_model_id(&self, base: &str) -> String {
        // The base URL is part of the id: one model name on two servers may be two models.
        match self.dimensions {
            Some(d) => format!("openai:{base}#{}/{d}", self.model),
            None => format!("openai:{base}#{}", self.model),
        }
    }

    async fn embed_batch(
        &self,
        client: &reqwest::Client,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, SearchError> {
        let mut body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        if let Some(d) = self.dimensions {
            body["dimensions"] = json!(d);
        }
        let mut request = client.post(&self.url).timeout(self.timeout).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let fail = |what: String| SearchError::Embedder(format!("{}: {what}", self.url));
        let mut response = request.send().await.map_err(|e| fail(describe(&e)))?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| fail(describe(&e)))? {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(fail(format!("answer larger than {} MiB", MAX_BODY >> 20)));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(fail(format!(
                "server answered {status}: {}",
                error_message(&bytes)
            )));
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            fail(format!(
                "answer is not JSON ({e}): {}",
                quote(&String::from_utf8_lossy(&bytes))
            ))
        })?;
        let vectors = parse_data(&value, texts.len()).map_err(fail)?;
        check_vectors(&self.url, texts.len(), &vectors, self.dimensions)?;
        Ok(vectors)
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, SearchError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let client = self
            .client
            .as_ref()
            .map_err(|e| SearchError::Embedder(e.clone()))?;
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch) {
            vectors.extend(self.embed_batch(client, batch).await?);
        }
        Ok(vectors)
    }
}

/// The vectors of an embeddings answer, ordered by their `index` (servers may reorder).
fn parse_data(value: &Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = value.get("data").and_then(Value::as_array).ok_or_else(|| {
        format!(
            "answer has no \"data\" array: {}",
            quote(&value.to_string())
        )
    })?;
    if data.len() != expected {
        return Err(format!(
            "answer has {} embeddings for {expected} texts",
            data.len()
        ));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        // `index` is optional in some servers' answers; then the order is the input order.
        let index = match item.get("index") {
            None | Some(Value::Null) => position,
            Some(v) => v
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .filter(|i| *i < expected)
                .ok_or_else(|| format!("embedding {position} has index {v}, out of range"))?,
        };
        let numbers = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                format!("embedding {position} is not an array of numbers (base64 is not supported)")
            })?;
        let vector = numbers
            .iter()
            .map(|n| n.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| format!("embedding {position} holds something other than numbers"))?;
        if slots[index].replace(vector).is_some() {
            return Err(format!("two embeddings have index {index}"));
        }
    }
    // Exactly `expected` items with distinct in-range indices fill every slot.
    Ok(slots.into_iter().flatten().collect())
}

/// The server's own words from an error body (`{"error": {"message"}}`, `{"error": "…"}`,
/// `{"message"}`, `{"detail"}`), else the body itself, shortened.
fn error_message(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        return quote(&text);
    };
    let message = value
        .pointer("/error/message")
        .or_else(|| value.get("error").filter(|e| e.is_string()))
        .or_else(|| value.get("message"))
        .or_else(|| value.get("detail"))
        .and_then(Value::as_str);
    quote(message.unwrap_or(&text))
}

fn quote(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    toolbelt_core::text::shorten(text, MAX_QUOTE + 1).into_owned()
}

/// A transport error with its causes (reqwest's top-level message alone says little).
fn describe(error: &reqwest::Error) -> String {
    let what = if error.is_timeout() {
        "request timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        return toolbelt_core::error_chain(error);
    };
    match std::error::Error::source(error) {
        Some(cause) => format!("{what}: {}", toolbelt_core::error_chain(cause)),
        None => what.to_owned(),
    }
}
