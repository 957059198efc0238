//! [`McpExtension`]: the servers of an `mcpServers` file as an extension contributing their
//! tool sets.

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use toolbelt_agent::Extension;
use toolbelt_agent::extension::BoxError;
use toolbelt_core::{DynToolSet, ToolSet};
use toolbelt_mcp::{McpServersFile, McpToolSet};

/// The servers of an `mcpServers` file (disabled ones left out), one [`McpToolSet`] each,
/// in the file's order (which decides who keeps a tool name on a clash). Named `mcp`.
///
/// `init` builds the sets (an entry that cannot be used fails it, naming the server); they
/// connect on first listing, as with `toolbelt --mcp-config`. `close` closes them all.
pub struct McpExtension {
    file: McpServersFile,
    sets: Mutex<Vec<std::sync::Arc<McpToolSet>>>,
}

impl McpExtension {
    /// The servers of `file`.
    pub fn new(file: McpServersFile) -> Self {
        Self {
            file,
            sets: Mutex::new(Vec::new()),
        }
    }

    /// Reads the `mcpServers` file at `path` (variables expanded from the environment).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, toolbelt_mcp::ConfigFileError> {
        McpServersFile::load(path).map(Self::new)
    }

    fn sets(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::Arc<McpToolSet>>> {
        self.sets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl Extension for McpExtension {
    fn name(&self) -> &str {
        "mcp"
    }

    async fn init(&self) -> Result<(), BoxError> {
        let mut sets = Vec::new();
        for (name, config) in self.file.servers() {
            let set = McpToolSet::builder(name.as_str(), config?).build()?;
            sets.push(std::sync::Arc::new(set));
        }
        *self.sets() = sets;
        Ok(())
    }

    async fn close(&self) -> Result<(), BoxError> {
        let sets = std::mem::take(&mut *self.sets());
        let mut failures = Vec::new();
        for set in sets {
            if let Err(error) = set.close().await {
                failures.push(format!("{}: {error}", set.name()));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; ").into())
        }
    }

    fn tool_sets(&self) -> Vec<DynToolSet> {
        self.sets()
            .iter()
            .map(|s| s.clone() as DynToolSet)
            .collect()
    }
}
