//! `--artifacts`: where `run` and `chat` keep tool results too large to show the model, so
//! the model sees a preview and reads the rest with the `artifact_read` tool.

use std::sync::Arc;

use clap::Args;
use toolbelt::exec::{ArtifactOffload, DynArtifactStore, FsArtifactStore, Registry};

use crate::common::CliError;

/// The flag choosing the artifact store.
#[derive(Args, Debug, Clone, Default)]
pub struct ArtifactArgs {
    /// Keep tool results over 50 KiB out of the conversation: the model sees their first
    /// 2 KiB and reads on with the artifact_read tool. They are kept in this folder, or in
    /// S3-compatible object storage at s3://BUCKET/PREFIX (builds with feature s3; keys,
    /// region and endpoint from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
    /// AWS_ENDPOINT_URL). Without it results go to the model whole.
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    pub artifacts: Option<String>,
}

impl ArtifactArgs {
    /// The offload `--artifacts` asks for, its `artifact_read` tool registered in
    /// `registry`; `None` without the flag. A scheme this build lacks is a usage error.
    pub fn offload(&self, registry: &Registry) -> Result<Option<ArtifactOffload>, CliError> {
        let Some(target) = &self.artifacts else {
            return Ok(None);
        };
        let offload = ArtifactOffload::new(store_from(target)?);
        registry
            .register(offload.read_tool())
            .map_err(|e| CliError::usage(format!("--artifacts: {e}")))?;
        Ok(Some(offload))
    }
}

fn store_from(target: &str) -> Result<DynArtifactStore, CliError> {
    if target.starts_with("s3://") {
        return s3_store(target);
    }
    if let Some((scheme, _)) = target.split_once("://") {
        return Err(CliError::usage(format!(
            "--artifacts {scheme}://…: not a store this toolbelt knows (a folder, or \
             s3://BUCKET/PREFIX)"
        )));
    }
    let store = FsArtifactStore::new(target)
        .map_err(|e| CliError::failed(format!("--artifacts {target}: {e}")))?;
    Ok(Arc::new(store))
}

#[cfg(feature = "s3")]
fn s3_store(target: &str) -> Result<DynArtifactStore, CliError> {
    let store = toolbelt::exec::S3ArtifactStore::from_env(target)
        .map_err(|e| CliError::usage(format!("--artifacts: {e}")))?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "s3"))]
fn s3_store(target: &str) -> Result<DynArtifactStore, CliError> {
    Err(CliError::usage(format!(
        "--artifacts {target}: this toolbelt was built without S3 support; rebuild it with \
         --features s3"
    )))
}
