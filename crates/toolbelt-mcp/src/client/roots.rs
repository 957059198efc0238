//! Roots: the directories (or other URIs) the client tells a server it may work in
//! (`roots/list`), and `notifications/roots/list_changed` when they change.
//!
//! The client declares the `roots` capability (with `listChanged`) only when roots are set
//! ([`McpToolSetBuilder::roots`](super::McpToolSetBuilder::roots)); they can be replaced
//! later with [`McpToolSet::set_roots`](super::McpToolSet::set_roots).

// Roots are deprecated in rmcp's newest protocol (SEP-2577) but are what servers on
// 2025-06-18 and 2025-11-25 use.
#![allow(deprecated)]

use std::path::Path;
use std::sync::{Arc, RwLock};

/// One root: a URI (`file:///…` for a directory) and an optional name for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The root's URI.
    pub uri: String,
    /// A name to show, if any.
    pub name: Option<String>,
}

impl Root {
    /// A root with this URI and no name.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: None,
        }
    }

    /// The directory `path` as a `file://` root (relative paths are taken from the current
    /// directory; the URI ends with `/` and percent-encodes what a URI may not contain).
    pub fn directory(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let absolute = std::path::absolute(path.as_ref())?;
        let url = url::Url::from_directory_path(&absolute).map_err(|()| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} cannot be written as a file URI", absolute.display()),
            )
        })?;
        Ok(Self::new(String::from(url)))
    }

    /// Sets the name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// The roots a set answers `roots/list` with, shared by its sessions so that a change
/// reaches the live one.
pub(crate) type SharedRoots = Arc<RwLock<Vec<Root>>>;

/// The roots as rmcp's answer to `roots/list`.
pub(crate) fn list_result(roots: &SharedRoots) -> rmcp::model::ListRootsResult {
    let roots = roots.read().unwrap_or_else(|e| e.into_inner());
    rmcp::model::ListRootsResult::new(
        roots
            .iter()
            .map(|root| {
                let mut wire = rmcp::model::Root::new(root.uri.clone());
                wire.name = root.name.clone();
                wire
            })
            .collect(),
    )
}
