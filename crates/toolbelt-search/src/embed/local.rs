//! [`LocalEmbedder`]: a BERT-family sentence-transformers model run on the CPU with candle.
//!
//! The model comes from a folder on disk (`config.json`, `tokenizer.json`,
//! `model.safetensors`, optionally `sentence_bert_config.json` and `1_Pooling/config.json`),
//! never from the network. The computation is what sentence-transformers does for such a
//! folder: word pieces truncated to the model's maximum length, the transformer, mean (or CLS)
//! pooling over the attention mask, then L2 normalisation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use serde_json::Value;
use tokenizers::Tokenizer;

use super::Embedder;
use crate::SearchError;

/// The environment variable [`LocalEmbedder::from_env`] reads the model folder from.
pub const EMBEDDER_DIR_ENV: &str = "TOOLBELT_EMBEDDER_DIR";
/// Texts per forward pass. Texts are sorted by length before batching, so a batch pads to
/// similar lengths; larger batches gained nothing measurable on 2 cores (see BENCHMARKS.md).
const BATCH: usize = 32;

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
    bert: BertModel,
    tokenizer: Tokenizer,
    max_len: usize,
    pad_id: u32,
    pooling: Pooling,
    device: Device,
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
    let config: Config = serde_json::from_value(config_json.clone())
        .map_err(|e| fail(&config_path, format!("not a BERT config: {e}")))?;
    let max_positions = config_json["max_position_embeddings"]
        .as_u64()
        .map_or(512, |n| n as usize);

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
    let pad_id = config_json["pad_token_id"].as_u64().unwrap_or(0) as u32;

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
    let device = Device::Cpu;
    let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
        .map_err(|e| fail(&weights_path, format!("not safetensors: {e}")))?;
    let bert = BertModel::load(vb, &config).map_err(|e| {
        fail(
            &weights_path,
            format!("weights do not fit config.json: {e}"),
        )
    })?;

    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(LocalEmbedder {
        model: Arc::new(Model {
            bert,
            tokenizer,
            max_len,
            pad_id,
            pooling,
            device,
        }),
        model_id: format!("local:{name}:{}", &digest.as_str()[..16]),
    })
}

/// Refuses configs candle's BERT cannot run: RoBERTa, DistilBERT and others load the same
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
    /// Embeds all texts: tokenized, sorted by length, run in batches, put back in order.
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| format!("tokenizer: {e}"))?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].get_ids().len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH) {
            let rows: Vec<&tokenizers::Encoding> = batch.iter().map(|&i| &encodings[i]).collect();
            let vectors = self.forward(&rows).map_err(|e| format!("model: {e}"))?;
            for (&i, vector) in batch.iter().zip(vectors) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    fn forward(&self, rows: &[&tokenizers::Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let width = rows.iter().map(|e| e.get_ids().len()).max().unwrap_or(0);
        let n = rows.len();
        let mut ids = vec![self.pad_id; n * width];
        let mut types = vec![0u32; n * width];
        let mut mask = vec![0u32; n * width];
        for (r, enc) in rows.iter().enumerate() {
            let len = enc.get_ids().len();
            let at = r * width;
            ids[at..at + len].copy_from_slice(enc.get_ids());
            types[at..at + len].copy_from_slice(enc.get_type_ids());
            mask[at..at + len].copy_from_slice(enc.get_attention_mask());
        }
        let shape = (n, width);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let types = Tensor::from_vec(types, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let hidden = self.bert.forward(&ids, &types, Some(&mask))?; // (n, width, hidden)
        let pooled = match self.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean => {
                let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, width, 1)
                let sum = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, hidden)
                // At least one token ([CLS]) is always present, so the count is never 0.
                let count = mask.sum(1)?.clamp(1e-9, f64::MAX)?; // (n, 1)
                sum.broadcast_div(&count)?
            }
        };
        let norm = pooled
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12, f64::MAX)?;
        pooled.broadcast_div(&norm)?.to_vec2::<f32>()
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
