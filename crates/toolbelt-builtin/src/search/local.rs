//! [`LocalSearch`]: Glob and Grep in-process, on ripgrep's own libraries (`ignore` for the
//! walk rules, `grep-regex`, `grep-searcher` and `grep-printer`), so the output is the output
//! `rg --sort path` prints for the same options. The walk itself is confined
//! (`search::walk`): every directory and file is opened relative to its parent's handle.
//!
//! Files are searched in parallel in whatever order the threads reach them; each file's
//! output is offered to a selection that keeps only what the limit can still select
//! (the files with the smallest paths), so a small `head_limit` bounds memory by the limit,
//! not by the size of the tree, and the selected results are the same on every run.

use std::collections::{BTreeMap, BinaryHeap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use globset::GlobBuilder;
use grep_printer::{StandardBuilder, SummaryBuilder, SummaryKind};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::gitignore::Gitignore;
use ignore::types::TypesBuilder;

use super::rules::{self, Filters};
use super::walk::{self, FileRef};
use super::{
    GlobQuery, GlobResults, GrepOutputMode, GrepQuery, GrepResults, SearchBackend, SearchError,
};
use crate::confine::{Confinement, PathError};

/// In-process search below a base directory (the default backend).
///
/// ```
/// use toolbelt_builtin::search::LocalSearch;
/// let dir = tempfile::tempdir()?;
/// let search = LocalSearch::new(dir.path())?.with_threads(2);
/// # let _ = search;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct LocalSearch {
    confinement: Confinement,
    threads: usize,
    /// The global git excludes file, read on first use.
    global: Arc<OnceLock<Arc<Gitignore>>>,
}

impl LocalSearch {
    /// Searches below `base` (canonicalized and opened now); paths are shown relative to it.
    pub fn new(base: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(Self::with_confinement(Confinement::new(base)?))
    }

    /// Searches with an existing confinement (for tests that pick its resolver, see
    /// [`Confinement::with_resolver`]).
    #[doc(hidden)]
    pub fn with_confinement(confinement: Confinement) -> Self {
        Self {
            confinement,
            threads: 0,
            global: Arc::new(OnceLock::new()),
        }
    }

    /// Uses `threads` walker threads (0, the default, picks one per core).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Runs a content search on the calling thread (it blocks; the async trait method runs
    /// it on the blocking pool).
    pub fn grep_blocking(&self, query: &GrepQuery) -> Result<GrepResults, SearchError> {
        grep(self, query)
    }

    /// Runs a file-name search on the calling thread.
    pub fn glob_blocking(&self, query: &GlobQuery) -> Result<GlobResults, SearchError> {
        glob(self, query)
    }

    fn base(&self) -> &Path {
        self.confinement.base()
    }

    fn filters(
        &self,
        include_ignored: bool,
        user_glob: Option<&str>,
        hidden: &[String],
        types: Option<ignore::types::Types>,
    ) -> Result<Filters, SearchError> {
        if let Some(glob) = user_glob {
            super::check_glob_len(glob)?;
        }
        let global = self
            .global
            .get_or_init(|| Arc::new(rules::global_excludes()))
            .clone();
        Filters::new(
            self.base(),
            include_ignored,
            user_glob,
            hidden,
            types,
            global,
        )
        .map_err(|e| SearchError::InvalidGlob(super::short_message(e)))
    }
}

#[async_trait]
impl SearchBackend for LocalSearch {
    fn searches_local_files(&self) -> bool {
        true
    }

    async fn grep(&self, query: GrepQuery) -> Result<GrepResults, SearchError> {
        let this = self.clone();
        super::run_blocking(move || this.grep_blocking(&query)).await
    }

    async fn glob(&self, query: GlobQuery) -> Result<GlobResults, SearchError> {
        let this = self.clone();
        super::run_blocking(move || this.glob_blocking(&query)).await
    }
}

/// The regex matcher with rg's defaults for these options.
pub(crate) fn build_matcher(query: &GrepQuery) -> Result<RegexMatcher, SearchError> {
    super::check_regex_len(&query.pattern)?;
    let mut builder = RegexMatcherBuilder::new();
    builder
        .size_limit(super::REGEX_SIZE_LIMIT)
        .dfa_size_limit(super::REGEX_SIZE_LIMIT)
        .case_insensitive(query.case_insensitive)
        .multi_line(true)
        .unicode(true)
        .octal(false);
    if query.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(&query.pattern).map_err(|e| {
        // grep-regex reports syntax errors against the pattern as it rewrote it (wrapped in
        // `(?:…)`); parsing the pattern as given points the caret at what the model wrote.
        let message = match regex_syntax::ast::parse::Parser::new().parse(&query.pattern) {
            Err(syntax) => syntax.to_string(),
            Ok(_) => e.to_string(),
        };
        SearchError::InvalidRegex(super::short_message(message))
    })
}

fn build_searcher(query: &GrepQuery) -> Searcher {
    let content = query.output_mode == GrepOutputMode::Content;
    SearcherBuilder::new()
        .line_number(content && query.line_numbers)
        .multi_line(query.multiline)
        .before_context(if content { query.before_context } else { 0 })
        .after_context(if content { query.after_context } else { 0 })
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build()
}

/// Keeps the part of a sorted answer that an offset and a limit can still select.
struct Selection {
    /// Results (lines) needed: offset + limit; `None` keeps everything.
    needed: Option<usize>,
    /// Whether a `--` line separates consecutive files (content mode with context).
    separated: bool,
    /// Kept file outputs, in path order.
    files: BTreeMap<PathBuf, Vec<String>>,
    kept_lines: usize,
    total_lines: usize,
    files_with_output: usize,
}

impl Selection {
    fn new(needed: Option<usize>, separated: bool) -> Self {
        Self {
            needed,
            separated,
            files: BTreeMap::new(),
            kept_lines: 0,
            total_lines: 0,
            files_with_output: 0,
        }
    }

    /// Whether a file at `path` could still be selected (so is worth keeping).
    fn could_select(&self, path: &Path) -> bool {
        match self.needed {
            None => true,
            Some(needed) => {
                self.kept_lines < needed
                    || self
                        .files
                        .last_key_value()
                        .is_some_and(|(last, _)| path < last.as_path())
            }
        }
    }

    fn offer(&mut self, path: PathBuf, lines: Vec<String>) {
        if lines.is_empty() {
            return;
        }
        self.total_lines += lines.len();
        self.files_with_output += 1;
        if !self.could_select(&path) {
            return;
        }
        self.kept_lines += lines.len();
        self.files.insert(path, lines);
        if let Some(needed) = self.needed {
            // Drop the last files while the others alone still cover what is needed.
            while let Some((_, last)) = self.files.last_key_value() {
                if self.kept_lines - last.len() >= needed {
                    self.kept_lines -= last.len();
                    self.files.pop_last();
                } else {
                    break;
                }
            }
        }
    }

    fn finish(self, offset: usize, limit: Option<usize>, skipped_outside: usize) -> GrepResults {
        let separators = if self.separated {
            self.files_with_output.saturating_sub(1)
        } else {
            0
        };
        let total = self.total_lines + separators;
        let end = limit.map(|l| offset.saturating_add(l));
        let selected = |index: usize| index >= offset && end.is_none_or(|end| index < end);
        let mut lines = Vec::new();
        let mut index = 0usize;
        for (i, (_, file_lines)) in self.files.into_iter().enumerate() {
            if self.separated && i > 0 {
                if selected(index) {
                    lines.push("--".to_string());
                }
                index += 1;
            }
            for line in file_lines {
                if selected(index) {
                    lines.push(line);
                }
                index += 1;
            }
            if end.is_some_and(|end| index >= end) {
                break;
            }
        }
        GrepResults {
            lines,
            total,
            skipped_outside,
        }
    }
}

/// A refused or unusable search root, as the tools show it.
fn root_error(e: PathError) -> SearchError {
    SearchError::Path(e.to_string())
}

fn grep(search: &LocalSearch, query: &GrepQuery) -> Result<GrepResults, SearchError> {
    let matcher = build_matcher(query)?;
    let types = match &query.file_type {
        Some(name) => Some(
            TypesBuilder::new()
                .add_defaults()
                .select(name)
                .build()
                .map_err(|_| SearchError::UnknownType(name.clone()))?,
        ),
        None => None,
    };
    let filters = search.filters(
        query.include_ignored,
        query.glob.as_deref(),
        &query.hidden,
        types,
    )?;
    let base = search.base();
    let needed = query.head_limit.map(|l| query.offset.saturating_add(l));
    let separated = query.output_mode == GrepOutputMode::Content
        && (query.before_context > 0 || query.after_context > 0);
    let selection = Mutex::new(Selection::new(needed, separated));
    let outcome = walk::walk(
        &search.confinement,
        &query.root,
        &filters,
        search.threads,
        || {
            let matcher = matcher.clone();
            let mut searcher = build_searcher(query);
            let selection = &selection;
            let mode = query.output_mode;
            let mut standard = StandardBuilder::new()
                .heading(false)
                .path(true)
                .separator_search(None)
                .build_no_color(Vec::<u8>::new());
            let summary_kind = match mode {
                GrepOutputMode::Count => SummaryKind::Count,
                _ => SummaryKind::PathWithMatch,
            };
            let mut summary = SummaryBuilder::new()
                .kind(summary_kind)
                .path(true)
                .build_no_color(Vec::<u8>::new());
            move |file: FileRef<'_>| {
                // Unreadable files are skipped, as rg skips them (it reports on stderr).
                let Some(opened) = file.open() else {
                    return;
                };
                let shown = file.path.strip_prefix(base).unwrap_or(file.path);
                let result = match mode {
                    GrepOutputMode::Content => {
                        let sink = standard.sink_with_path(&matcher, shown);
                        searcher.search_file(&matcher, &opened, sink)
                    }
                    _ => {
                        let sink = summary.sink_with_path(&matcher, shown);
                        searcher.search_file(&matcher, &opened, sink)
                    }
                };
                let buffer = match mode {
                    GrepOutputMode::Content => std::mem::take(standard.get_mut().get_mut()),
                    _ => std::mem::take(summary.get_mut().get_mut()),
                };
                if result.is_err() || buffer.is_empty() {
                    return;
                }
                let lines = split_lines(&buffer);
                selection
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .offer(shown.to_path_buf(), lines);
            }
        },
    )
    .map_err(root_error)?;
    let selection = selection.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(selection.finish(query.offset, query.head_limit, outcome.skipped_outside))
}

/// Printer output split into lines without their terminators.
fn split_lines(buffer: &[u8]) -> Vec<String> {
    let body = buffer.strip_suffix(b"\n").unwrap_or(buffer);
    body.split(|b| *b == b'\n')
        .map(|line| String::from_utf8_lossy(line).into_owned())
        .collect()
}

fn glob(search: &LocalSearch, query: &GlobQuery) -> Result<GlobResults, SearchError> {
    super::check_glob_len(&query.pattern)?;
    let matcher = GlobBuilder::new(&query.pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| SearchError::InvalidGlob(super::short_message(e)))?
        .compile_matcher();
    let filters = search.filters(query.include_ignored, None, &query.hidden, None)?;
    let base = search.base();
    // The smallest `limit` paths seen so far, largest on top.
    let heap: Mutex<BinaryHeap<String>> = Mutex::new(BinaryHeap::new());
    let total = AtomicUsize::new(0);
    let root = &query.root;
    let limit = query.limit;
    let outcome = walk::walk(&search.confinement, root, &filters, search.threads, || {
        |file: FileRef<'_>| {
            let Ok(relative) = file.path.strip_prefix(root) else {
                return;
            };
            if !matcher.is_match(relative) {
                return;
            }
            total.fetch_add(1, Ordering::Relaxed);
            let shown = file
                .path
                .strip_prefix(base)
                .unwrap_or(file.path)
                .to_string_lossy()
                .into_owned();
            let mut heap = heap.lock().unwrap_or_else(|p| p.into_inner());
            match limit {
                Some(limit) if heap.len() >= limit => {
                    if heap.peek().is_some_and(|top| shown < *top) {
                        heap.pop();
                        heap.push(shown);
                    }
                }
                _ => heap.push(shown),
            }
        }
    })
    .map_err(root_error)?;
    let mut paths = heap
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_vec();
    paths.sort();
    if query.limit == Some(0) {
        paths.clear();
    }
    Ok(GlobResults {
        paths,
        total: total.into_inner(),
        skipped_outside: outcome.skipped_outside,
    })
}
