//! [`Source`]: files and folders (by path or glob) or web pages (by URL) that feed a
//! knowledge base, and the walk that reads them.
//!
//! A URL source is read through a [`UrlFetcher`] the application gives the base (the command
//! line gives WebFetch's: its address guard refuses private and loopback addresses, its size
//! and time limits apply, HTML comes back as Markdown); the base itself opens no connection.
//! A page that cannot be fetched is counted as unreadable and its stored version is kept.
//!
//! Folders are walked by the `ignore` crate, as ripgrep walks them: `.gitignore`, `.ignore`
//! and git's exclude files are honoured and hidden files are skipped. Only files whose
//! extension names a [`DocKind`] are read; a file over [`MAX_FILE_BYTES`] or with a NUL byte
//! in its first 8 KiB (a binary) is skipped and counted, never read whole. A walk stops with
//! an error past [`MAX_FILES`] files, so a mistyped `/` cannot read a whole disk.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::KnowledgeError;
use crate::chunk::DocKind;

/// The largest text file a knowledge base reads (4 MiB); larger ones are skipped.
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// The largest PDF a knowledge base reads (16 MiB, as WebFetch); larger ones are skipped.
pub const MAX_PDF_BYTES: u64 = 16 << 20;
/// The most files one source may yield.
pub const MAX_FILES: usize = 200_000;

/// Files and folders to index: a path (a file, or a folder walked recursively) or a glob
/// (`docs/**/*.md`), with user fields every chunk of it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    location: String,
    fields: BTreeMap<String, Value>,
}

impl Source {
    /// A file, a folder, a glob (any of `*?[{` makes it one; the walk starts at the
    /// longest leading part without them), or an `http://` / `https://` URL (read through
    /// the base's [`UrlFetcher`]).
    pub fn new(location: impl Into<String>) -> Self {
        Source {
            location: location.into(),
            fields: BTreeMap::new(),
        }
    }

    /// Adds a user field to every chunk of this source (over the document's front matter).
    pub fn with_field(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fields.insert(name.into(), value.into());
        self
    }

    /// The path or glob as given.
    pub fn location(&self) -> &str {
        &self.location
    }
}

/// Reads the page a URL source names, for a knowledge base.
#[async_trait::async_trait]
pub trait UrlFetcher: Send + Sync {
    /// The document at `url` (HTML converted to Markdown or text), or why there is none.
    /// The fetcher owns the rules: which addresses it may reach, its size and time limits.
    async fn fetch(&self, url: &str) -> Result<FetchedDocument, String>;
}

/// A document a [`UrlFetcher`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedDocument {
    /// Its text.
    pub text: String,
    /// How to chunk it ([`DocKind::Markdown`] for a converted page).
    pub kind: DocKind,
}

/// Whether a source names a web page rather than a path.
pub(crate) fn is_url(location: &str) -> bool {
    let lower = location.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// What fetching the URL sources came to: the documents read, and the keys of those that
/// could not be (their stored versions are kept).
pub(crate) struct FetchedSources {
    pub(crate) files: Vec<LoadedFile>,
    pub(crate) failed: Vec<String>,
    pub(crate) too_large: usize,
}

/// Fetches every URL source of `sources`, one after another (a knowledge base is indexed
/// rarely; one page at a time keeps a fetcher's host from being flooded).
pub(crate) async fn fetch_urls(
    sources: &[Source],
    salt: &str,
    fetcher: Option<&dyn UrlFetcher>,
) -> Result<FetchedSources, KnowledgeError> {
    let mut out = FetchedSources {
        files: Vec::new(),
        failed: Vec::new(),
        too_large: 0,
    };
    let mut seen = std::collections::HashSet::new();
    for source in sources.iter().filter(|s| is_url(&s.location)) {
        let url = source.location.trim();
        if !seen.insert(url.to_string()) {
            continue;
        }
        let Some(fetcher) = fetcher else {
            return Err(KnowledgeError::source(
                url,
                "a URL source needs a fetcher (KnowledgeBase::with_url_fetcher; the command \
                 line uses WebFetch's)"
                    .to_string(),
            ));
        };
        match fetcher.fetch(url).await {
            Ok(document) if document.text.len() as u64 > MAX_FILE_BYTES => {
                tracing::warn!(%url, "skipped: larger than {MAX_FILE_BYTES} bytes");
                out.too_large += 1;
            }
            Ok(document) => out.files.push(LoadedFile {
                key: url.to_string(),
                kind: document.kind,
                hash: hash_file(
                    document.text.as_bytes(),
                    document.kind,
                    &source.fields,
                    salt,
                ),
                body: Body::Text(document.text),
                fields: source.fields.clone(),
            }),
            Err(message) => {
                tracing::warn!(%url, "skipped, the stored version kept: {message}");
                out.failed.push(url.to_string());
            }
        }
    }
    Ok(out)
}

/// One file read from a source.
#[derive(Debug)]
pub(crate) struct LoadedFile {
    /// The file's path as the walk found it: the source's key in the store.
    pub(crate) key: String,
    pub(crate) kind: DocKind,
    pub(crate) body: Body,
    pub(crate) fields: BTreeMap<String, Value>,
    /// SHA-256 of the bytes, the kind and the fields: unchanged means nothing to redo.
    pub(crate) hash: String,
}

/// What a file holds, as read by the walk.
#[derive(Debug)]
pub(crate) enum Body {
    /// Text, Markdown, code, HTML: read whole.
    Text(String),
    /// A PDF, hashed by the walk and read again only when it must be chunked (its text is
    /// extracted then, within the PDF reader's bounds), so a folder of PDFs is not held in
    /// memory at once.
    Pdf(PathBuf),
}

/// What a walk skipped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub(crate) too_large: usize,
    pub(crate) binary: usize,
}

fn is_glob(location: &str) -> bool {
    location.contains(['*', '?', '[', '{'])
}

/// The folder a glob's walk starts in: its leading components without glob characters.
fn glob_base(location: &str) -> PathBuf {
    let mut base = PathBuf::new();
    for part in Path::new(location).components() {
        if is_glob(&part.as_os_str().to_string_lossy()) {
            break;
        }
        base.push(part);
    }
    if base.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base
    }
}

/// Reads every file of `sources`, in walk order (sorted by path, so indexes are reproducible).
/// A file named by two sources is read once, with the fields of the first.
pub(crate) fn load(
    sources: &[Source],
    salt: &str,
) -> Result<(Vec<LoadedFile>, Skipped), KnowledgeError> {
    let mut files = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut skipped = Skipped::default();
    for source in sources.iter().filter(|s| !is_url(&s.location)) {
        let location = source.location.as_str();
        let fail = |message: String| KnowledgeError::source(location, message);
        let (root, glob) = if is_glob(location) {
            let glob = globset::GlobBuilder::new(location)
                .literal_separator(true)
                .build()
                .map_err(|e| fail(format!("bad glob: {e}")))?
                .compile_matcher();
            (glob_base(location), Some(glob))
        } else {
            (PathBuf::from(location), None)
        };
        let meta = std::fs::metadata(&root).map_err(|e| fail(e.to_string()))?;
        let mut paths: Vec<PathBuf> = Vec::new();
        if meta.is_file() {
            paths.push(root.clone());
        } else {
            let walk = ignore::WalkBuilder::new(&root)
                .sort_by_file_name(|a, b| a.cmp(b))
                .build();
            for entry in walk {
                let entry = entry.map_err(|e| fail(e.to_string()))?;
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    continue;
                }
                let path = entry.into_path();
                if let Some(glob) = &glob
                    && !glob.is_match(&path)
                {
                    continue;
                }
                if DocKind::from_path(&path).is_none() {
                    continue;
                }
                paths.push(path);
                if paths.len() > MAX_FILES {
                    return Err(fail(format!(
                        "more than {MAX_FILES} files; name a smaller folder or a glob"
                    )));
                }
            }
        }
        for path in paths {
            let key = path.to_string_lossy().into_owned();
            if !seen.insert(key.clone()) {
                continue;
            }
            let Some(kind) = DocKind::from_path(&path).or(meta.is_file().then_some(DocKind::Text))
            else {
                continue;
            };
            let Some(bytes) = read_bounded(&path, kind, &mut skipped).map_err(&fail)? else {
                continue;
            };
            let hash = hash_file(&bytes, kind, &source.fields, salt);
            let body = match kind {
                DocKind::Pdf => Body::Pdf(path),
                _ => Body::Text(String::from_utf8_lossy(&bytes).into_owned()),
            };
            files.push(LoadedFile {
                key,
                kind,
                body,
                fields: source.fields.clone(),
                hash,
            });
        }
    }
    Ok((files, skipped))
}

/// The file's bytes, or `None` when it is skipped (too large, binary; a PDF is binary, and
/// skipped when it has no PDF header).
fn read_bounded(
    path: &Path,
    kind: DocKind,
    skipped: &mut Skipped,
) -> Result<Option<Vec<u8>>, String> {
    let limit = if kind == DocKind::Pdf {
        MAX_PDF_BYTES
    } else {
        MAX_FILE_BYTES
    };
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    // One byte past the limit tells a file that grew since it was listed.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > limit {
        skipped.too_large += 1;
        tracing::warn!(path = %path.display(), "skipped: larger than {limit} bytes");
        return Ok(None);
    }
    if kind == DocKind::Pdf {
        if toolbelt_pdf::is_pdf(&bytes) {
            return Ok(Some(bytes));
        }
        skipped.binary += 1;
        return Ok(None);
    }
    if bytes[..bytes.len().min(8192)].contains(&0) {
        skipped.binary += 1;
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// SHA-256 over length-prefixed fields, hex.
pub(crate) fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

fn hash_file(bytes: &[u8], kind: DocKind, fields: &BTreeMap<String, Value>, salt: &str) -> String {
    let mut canonical = String::new();
    toolbelt_core::write_canonical_json(
        &mut canonical,
        &Value::Object(fields.clone().into_iter().collect()),
    );
    sha256_hex(&[
        bytes,
        kind.as_str().as_bytes(),
        canonical.as_bytes(),
        salt.as_bytes(),
    ])
}
