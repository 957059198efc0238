//! [`LocalEmbedder`]: a BERT-family sentence-transformers model run on the CPU.
//!
//! The model comes from a folder on disk (`config.json`, `tokenizer.json`,
//! `model.safetensors`, optionally `sentence_bert_config.json` and `1_Pooling/config.json`),
//! never from the network. The computation is what sentence-transformers does for such a
//! folder: word pieces truncated to the model's maximum length, the transformer, mean (or CLS)
//! pooling over the text's tokens, then L2 normalisation.
//!
//! candle reads the weights; the transformer is our own forward pass (`encoder`), which packs
//! the texts of a call without padding and runs its element-wise steps vectorised (`kernels`):
//! on the 1,424 BFCL tools it embeds about 8× faster than candle's `BertModel` did (see
//! BENCHMARKS.md, "Embedding index build").

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use serde_json::Value;
use tokenizers::Tokenizer;

use super::Embedder;
use crate::SearchError;

mod encoder;
mod kernels;

use encoder::{Activation, Encoder, Sequence, Shape};

/// The environment variable [`LocalEmbedder::from_env`] reads the model folder from.
pub const EMBEDDER_DIR_ENV: &str = "TOOLBELT_EMBEDDER_DIR";
/// Most word pieces in one forward pass. Texts are packed without padding, so this only
/// bounds memory (the feed-forward activations of 4,096 tokens of MiniLM take 25 MB) while
/// keeping the matrix products large enough to run at full speed on every core.
const TOKENS_PER_PASS: usize = 4096;

/// How token vectors become one sentence vector (from `1_Pooling/config.json`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pooling {
    /// The mean of the token vectors under the attention mask.
    Mean,
    /// The first token's (`[CLS]`) vector.
    Cls,
}

/// Embeds texts on the CPU with a sentence-transformers BERT model folder, such as
/// all-MiniLM-L6-v2.
///
/// Loading reads the whole weights file (about 90 MB for MiniLM) and hashes it into the
/// [model id](Embedder::model_id), so cached vectors are never reused across different weights.
/// [`embed`](Embedder::embed) runs on a blocking thread, never stalling the async runtime.
///
/// ```no_run
/// use toolbelt_search::embed::{Embedder, LocalEmbedder};
/// # async fn demo() -> Result<(), toolbelt_search::SearchError> {
/// let embedder = LocalEmbedder::load("/models/all-MiniLM-L6-v2")?;
/// let vectors = embedder.embed(&["read a file".to_owned()]).await?;
/// assert_eq!(vectors[0].len(), 384);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LocalEmbedder {
    model: Arc<Model>,
    model_id: String,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("max_len", &self.model.max_len)
            .field("pooling", &self.model.pooling)
            .finish_non_exhaustive()
    }
}

struct Model {
    encoder: Encoder,
    tokenizer: Tokenizer,
    max_len: usize,
    pooling: Pooling,
    hidden: usize,
}

impl LocalEmbedder {
    /// Loads the model folder `dir`. Missing or unreadable files, a config that is not BERT
    /// and weights that do not fit the config are errors naming the file.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, SearchError> {
        load(dir.as_ref())
    }

    /// Loads the folder named by `TOOLBELT_EMBEDDER_DIR`.
    pub fn from_env() -> Result<Self, SearchError> {
        match std::env::var_os(EMBEDDER_DIR_ENV) {
            Some(dir) if !dir.is_empty() => Self::load(PathBuf::from(dir)),
            _ => Err(SearchError::Embedder(format!(
                "{EMBEDDER_DIR_ENV} is not set: point it at a sentence-transformers model folder \
                 (config.json, tokenizer.json, model.safetensors)"
            ))),
        }
    }

    /// The longest input in word pieces; longer texts are cut to it.
    pub fn max_len(&self) -> usize {
        self.model.max_len
    }
}

fn load(dir: &Path) -> Result<LocalEmbedder, SearchError> {
    let file = |name: &str| dir.join(name);
    let fail =
        |path: &Path, what: String| SearchError::Embedder(format!("{}: {what}", path.display()));
    let read = |path: &Path| std::fs::read(path).map_err(|e| fail(path, e.to_string()));

    let config_path = file("config.json");
    let config_bytes = read(&config_path)?;
    let config_json: Value = serde_json::from_slice(&config_bytes)
        .map_err(|e| fail(&config_path, format!("not JSON: {e}")))?;
    check_bert(&config_json).map_err(|what| fail(&config_path, what))?;
    let shape = bert_shape(&config_json).map_err(|what| fail(&config_path, what))?;
    let max_positions = shape.positions;

    // sentence-transformers' own limit (256 for MiniLM) wins over the position table's size.
    let st_path = file("sentence_bert_config.json");
    let max_len = match std::fs::read(&st_path) {
        Ok(bytes) => serde_json::from_slice::<Value>(&bytes)
            .map_err(|e| fail(&st_path, format!("not JSON: {e}")))?["max_seq_length"]
            .as_u64()
            .map_or(max_positions, |n| (n as usize).min(max_positions)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => max_positions,
        Err(e) => return Err(fail(&st_path, e.to_string())),
    };
    if max_len < 2 {
        return Err(fail(
            &config_path,
            format!("maximum length {max_len} is too small"),
        ));
    }

    let pooling_path = file("1_Pooling/config.json");
    let (pooling, pooling_bytes) = match std::fs::read(&pooling_path) {
        Ok(bytes) => (
            pooling_mode(&bytes).map_err(|what| fail(&pooling_path, what))?,
            bytes,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Pooling::Mean, Vec::new()),
        Err(e) => return Err(fail(&pooling_path, e.to_string())),
    };

    let tokenizer_path = file("tokenizer.json");
    let tokenizer_bytes = read(&tokenizer_path)?;
    let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes)
        .map_err(|e| fail(&tokenizer_path, format!("not a tokenizer: {e}")))?;
    // Padding is done per batch below; truncation to the model's limit, keeping the special
    // tokens, as sentence-transformers does.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: max_len,
            ..Default::default()
        }))
        .map_err(|e| fail(&tokenizer_path, format!("cannot truncate: {e}")))?;

    let weights_path = file("model.safetensors");
    // Read, not memory-mapped: a file changed under a mapping is undefined behaviour.
    let weights = read(&weights_path)?;
    let mut hasher = blake3::Hasher::new();
    for part in [
        &config_bytes[..],
        &tokenizer_bytes,
        &pooling_bytes,
        &(max_len as u64).to_le_bytes(),
        &weights,
    ] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize().to_hex();
    let tensors = candle_core::safetensors::load_buffer(&weights, &Device::Cpu)
        .map_err(|e| fail(&weights_path, format!("not safetensors: {e}")))?;
    drop(weights);
    let hidden = shape.hidden;
    let encoder =
        Encoder::load(shape, &mut weights_by_name(&tensors, &config_json)).map_err(|e| {
            fail(
                &weights_path,
                format!("weights do not fit config.json: {e}"),
            )
        })?;
    drop(tensors);

    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(LocalEmbedder {
        model: Arc::new(Model {
            encoder,
            tokenizer,
            max_len,
            pooling,
            hidden,
        }),
        model_id: format!("local:{name}:{}", &digest.as_str()[..16]),
    })
}

/// Refuses configs the encoder cannot run: RoBERTa, DistilBERT and others load the same
/// way in Python but differ in layout or positions, and would give wrong vectors silently.
fn check_bert(config: &Value) -> Result<(), String> {
    let model_type = config["model_type"].as_str();
    let architectures: Vec<&str> = config["architectures"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let is_bert = match model_type {
        Some(t) => t == "bert",
        None => architectures.iter().any(|a| a.starts_with("Bert")),
    };
    if is_bert {
        Ok(())
    } else {
        Err(format!(
            "model_type {} (architectures {architectures:?}) is not BERT; the local embedder runs \
             BERT models only",
            model_type.map_or_else(|| "missing".to_owned(), |t| format!("{t:?}"))
        ))
    }
}

/// The shape numbers of a BERT `config.json`. Only absolute positions and the erf GELU or
/// ReLU activations are supported: anything else would give wrong vectors without an error.
fn bert_shape(config: &Value) -> Result<Shape, String> {
    let number = |key: &str| -> Result<usize, String> {
        config[key]
            .as_u64()
            .filter(|&n| n > 0 && n <= 1 << 20)
            .map(|n| n as usize)
            .ok_or_else(|| format!("{key} is missing or not a positive integer"))
    };
    if let Some(kind) = config["position_embedding_type"].as_str()
        && kind != "absolute"
    {
        return Err(format!(
            "position_embedding_type {kind:?} is not supported (absolute only)"
        ));
    }
    let activation = match config["hidden_act"].as_str() {
        Some("gelu") => Activation::Gelu,
        Some("relu") => Activation::Relu,
        other => {
            return Err(format!(
                "hidden_act {other:?} is not supported (gelu or relu)"
            ));
        }
    };
    Ok(Shape {
        vocab: number("vocab_size")?,
        hidden: number("hidden_size")?,
        layers: number("num_hidden_layers")?,
        heads: number("num_attention_heads")?,
        intermediate: number("intermediate_size")?,
        positions: config["max_position_embeddings"]
            .as_u64()
            .map_or(Ok(512), |_| number("max_position_embeddings"))?,
        token_types: config["type_vocab_size"]
            .as_u64()
            .map_or(Ok(2), |_| number("type_vocab_size"))?,
        eps: config["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32,
        activation,
    })
}

/// Looks tensors up by their `BertModel` names, under the prefix the file uses (none,
/// `bert.` as in `BertForMaskedLM` checkpoints, or the model type), checks their shape and
/// returns their values as `f32`.
fn weights_by_name<'a>(
    tensors: &'a HashMap<String, Tensor>,
    config: &Value,
) -> impl FnMut(&str, &[usize]) -> Result<Vec<f32>, String> + 'a {
    let probe = "embeddings.word_embeddings.weight";
    let mut prefixes = vec![String::new(), "bert.".to_owned()];
    if let Some(kind) = config["model_type"].as_str() {
        prefixes.push(format!("{kind}."));
    }
    let prefix = prefixes
        .into_iter()
        .find(|p| tensors.contains_key(&format!("{p}{probe}")))
        .unwrap_or_default();
    move |name, dims| {
        let full = format!("{prefix}{name}");
        let tensor = tensors
            .get(&full)
            .ok_or_else(|| format!("tensor {full} is missing"))?;
        if tensor.dims() != dims {
            return Err(format!(
                "tensor {full} has shape {:?}, expected {dims:?}",
                tensor.dims()
            ));
        }
        tensor
            .to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| format!("tensor {full}: {e}"))
    }
}

fn pooling_mode(bytes: &[u8]) -> Result<Pooling, String> {
    let config: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let on = |key: &str| config[key].as_bool().unwrap_or(false);
    match (
        on("pooling_mode_mean_tokens"),
        on("pooling_mode_cls_token"),
        on("pooling_mode_max_tokens") || on("pooling_mode_mean_sqrt_len_tokens"),
    ) {
        (true, false, false) => Ok(Pooling::Mean),
        (false, true, false) => Ok(Pooling::Cls),
        _ => Err("only mean or CLS pooling (one of them) is supported".to_owned()),
    }
}

impl Model {
    /// Embeds all texts: tokenized, packed into passes of at most [`TOKENS_PER_PASS`] word
    /// pieces, pooled and normalised.
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| format!("tokenizer: {e}"))?;
        let mut out = Vec::with_capacity(texts.len());
        let mut start = 0;
        while start < encodings.len() {
            let mut end = start;
            let mut tokens = 0;
            while end < encodings.len()
                && (end == start || tokens + encodings[end].len() <= TOKENS_PER_PASS)
            {
                tokens += encodings[end].len();
                end += 1;
            }
            out.extend(self.pass(&encodings[start..end])?);
            start = end;
        }
        Ok(out)
    }

    /// One forward pass over `encodings` (unpadded: the tokenizer's padding is off), then
    /// pooling and L2 normalisation of each text's vector.
    fn pass(&self, encodings: &[tokenizers::Encoding]) -> Result<Vec<Vec<f32>>, String> {
        let sequences: Vec<Sequence<'_>> = encodings
            .iter()
            .map(|e| Sequence {
                ids: e.get_ids(),
                types: e.get_type_ids(),
            })
            .collect();
        let hidden = self
            .encoder
            .forward(&sequences)
            .map_err(|e| format!("model: {e}"))?;
        let h = self.hidden;
        let mut rows = hidden.chunks_exact(h);
        let mut vectors = Vec::with_capacity(encodings.len());
        for seq in &sequences {
            let tokens: Vec<&[f32]> = rows.by_ref().take(seq.ids.len()).collect();
            let mut pooled = vec![0.0f32; h];
            match self.pooling {
                Pooling::Cls => {
                    if let Some(first) = tokens.first() {
                        pooled.copy_from_slice(first);
                    }
                }
                Pooling::Mean => {
                    for token in &tokens {
                        for (p, &v) in pooled.iter_mut().zip(*token) {
                            *p += v;
                        }
                    }
                    // An empty text still has [CLS] and [SEP]; max(1) keeps this finite.
                    let count = tokens.len().max(1) as f32;
                    pooled.iter_mut().for_each(|p| *p /= count);
                }
            }
            let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            pooled.iter_mut().for_each(|p| *p /= norm);
            vectors.push(pooled);
        }
        Ok(vectors)
    }
}

#[async_trait::async_trait]
impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, SearchError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let model = self.model.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || model.embed(&texts))
            .await
            .map_err(|e| SearchError::Embedder(format!("embedding task failed: {e}")))?
            .map_err(|e| SearchError::Embedder(format!("{}: {e}", self.model_id)))
    }
}
