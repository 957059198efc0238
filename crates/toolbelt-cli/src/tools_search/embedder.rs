//! The embedder flags (`--embedder-dir`, `--embedder-url`, `--embedder-model`,
//! `--embedding-cache`), one definition shared by `tools search` and the `--tool-search
//! embed|hybrid` of `run`, `chat` and `serve`, and the embedding index they build.
//!
//! Tool vectors are cached on disk in an SQLite file, by default
//! `$XDG_CACHE_HOME/toolbelt/embeddings.sqlite` (`~/.cache/toolbelt/…` without it). A user
//! cache rather than a file next to the `--session`: a vector depends only on the model and
//! the tool's declaration, not on the conversation, so every run, chat and project reuses
//! what any of them embedded (`--session` is optional, too). The keys are the model id and
//! the declaration's content hash, so a changed tool or another model never reads a stale
//! vector.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use toolbelt::search::embed::{
    Embedder, EmbeddingIndex, MemoryVectorStore, OpenAiEmbedder, SqliteVectorStore, VectorStore,
};

use crate::common::CliError;

/// The environment variable naming the local embedder's model folder.
const EMBEDDER_DIR_ENV: &str = "TOOLBELT_EMBEDDER_DIR";
/// The environment variable holding the API key for `--embedder-url`, when it needs one.
const EMBEDDER_KEY_ENV: &str = "TOOLBELT_EMBEDDER_API_KEY";
/// The cache file's name inside the user's cache folder.
const CACHE_FILE: &str = "toolbelt/embeddings.sqlite";

/// Where tool embeddings come from and where they are cached.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct EmbedderArgs {
    /// A sentence-transformers model folder (config.json, tokenizer.json,
    /// model.safetensors) for the local embedder; default: $TOOLBELT_EMBEDDER_DIR. Needs a
    /// build with feature `local-embedder`.
    #[arg(long, value_name = "DIR", conflicts_with = "embedder_url")]
    embedder_dir: Option<PathBuf>,
    /// An OpenAI-compatible server's base URL for /embeddings (API key from
    /// $TOOLBELT_EMBEDDER_API_KEY when set).
    #[arg(long, value_name = "URL", requires = "embedder_model")]
    embedder_url: Option<String>,
    /// The embedding model to ask --embedder-url for.
    #[arg(long, value_name = "NAME", requires = "embedder_url")]
    embedder_model: Option<String>,
    /// The SQLite file caching tool embeddings across runs (default:
    /// $XDG_CACHE_HOME/toolbelt/embeddings.sqlite, or ~/.cache/toolbelt/embeddings.sqlite).
    #[arg(long, value_name = "FILE")]
    embedding_cache: Option<PathBuf>,
}

impl EmbedderArgs {
    /// Whether an embedder is named (by a flag or $TOOLBELT_EMBEDDER_DIR), without loading it.
    pub(crate) fn check(&self, flag: &str) -> Result<(), CliError> {
        if self.embedder_url.is_some() || self.model_dir().is_some() {
            Ok(())
        } else {
            Err(no_embedder(flag))
        }
    }

    /// The embedder the flags name, over the on-disk cache. `flag` names the option that
    /// asked for embeddings, for the error when no embedder is named.
    pub(crate) fn index(&self, flag: &str) -> Result<EmbeddingIndex, CliError> {
        let embedder = self.embedder(flag)?;
        Ok(EmbeddingIndex::new(embedder, self.store()?))
    }

    fn model_dir(&self) -> Option<PathBuf> {
        self.embedder_dir.clone().or_else(|| {
            std::env::var_os(EMBEDDER_DIR_ENV)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
        })
    }

    fn embedder(&self, flag: &str) -> Result<Arc<dyn Embedder>, CliError> {
        if let (Some(url), Some(model)) = (&self.embedder_url, &self.embedder_model) {
            let mut embedder = OpenAiEmbedder::new(url.clone(), model.clone());
            if let Ok(key) = std::env::var(EMBEDDER_KEY_ENV)
                && !key.is_empty()
            {
                embedder = embedder.api_key(key);
            }
            return Ok(Arc::new(embedder));
        }
        match self.model_dir() {
            Some(dir) => local_embedder(dir),
            None => Err(no_embedder(flag)),
        }
    }

    /// The cache: `--embedding-cache`, which must open, or the default file, which may not
    /// (no home folder, a read-only one): then vectors live for this process only, with a
    /// warning, since the search still works, only slower to start next time.
    fn store(&self) -> Result<Arc<dyn VectorStore>, CliError> {
        if let Some(path) = &self.embedding_cache {
            return open_cache(path).map_err(|e| CliError::usage(format!("--embedding-cache {e}")));
        }
        let opened = match default_cache() {
            Some(path) => open_cache(&path),
            None => Err("no cache folder: neither $XDG_CACHE_HOME nor $HOME is set".to_owned()),
        };
        match opened {
            Ok(store) => Ok(store),
            Err(why) => {
                eprintln!(
                    "toolbelt: warning: tool embeddings are not cached on disk ({why}); \
                     choose a file with --embedding-cache FILE"
                );
                Ok(Arc::new(MemoryVectorStore::new()))
            }
        }
    }
}

fn no_embedder(flag: &str) -> CliError {
    CliError::usage(format!(
        "{flag} needs an embedder: --embedder-dir DIR (or ${EMBEDDER_DIR_ENV}) \
         or --embedder-url URL --embedder-model NAME"
    ))
}

/// `$XDG_CACHE_HOME/toolbelt/embeddings.sqlite` (an absolute XDG path only, as the spec
/// says), else `$HOME/.cache/toolbelt/embeddings.sqlite`.
fn default_cache() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let base = var("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| {
            var("HOME")
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join(CACHE_FILE))
}

/// Opens (or creates) the cache file, creating its folder private to the user (the names and
/// descriptions of the tools a user has configured are nobody else's business).
fn open_cache(path: &Path) -> Result<Arc<dyn VectorStore>, String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let store = SqliteVectorStore::open(path).map_err(|e| e.to_string())?;
    Ok(Arc::new(store))
}

#[cfg(feature = "local-embedder")]
fn local_embedder(dir: PathBuf) -> Result<Arc<dyn Embedder>, CliError> {
    let embedder = toolbelt::search::embed::LocalEmbedder::load(&dir)
        .map_err(|e| CliError::usage(format!("{}: {e}", dir.display())))?;
    Ok(Arc::new(embedder))
}

#[cfg(not(feature = "local-embedder"))]
fn local_embedder(dir: PathBuf) -> Result<Arc<dyn Embedder>, CliError> {
    Err(CliError::usage(format!(
        "the local embedder ({}) needs a toolbelt built with feature `local-embedder`; \
         or use --embedder-url URL --embedder-model NAME",
        dir.display()
    )))
}
