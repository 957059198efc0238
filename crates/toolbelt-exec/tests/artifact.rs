//! Artifact offload and the artifact_read tool.

use crate::common;

use std::sync::Arc;

use common::{any_object, tool};
use toolbelt_core::{Tool, ToolContext, ToolError, ToolMeta, ToolOutput};
use toolbelt_exec::{
    ARTIFACT_READ_TOOL, ArtifactOffload, ArtifactRef, ArtifactStore, DEFAULT_OFFLOAD_THRESHOLD,
    Executor, FsArtifactStore, MemoryArtifactStore, Registry, ToolCall,
};

/// A tool returning `size` bytes of numbered lines.
fn big(name: &str, size: usize, meta: ToolMeta) -> toolbelt_core::DynTool {
    tool(name, any_object(), meta, move |_, _| async move {
        let mut text = String::new();
        let mut line = 0;
        while text.len() < size {
            text += &format!("line {line:06} é\n");
            line += 1;
        }
        let mut end = size.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        Ok(ToolOutput::text(text))
    })
}

fn executor(
    store: Arc<dyn ArtifactStore>,
    offload: impl FnOnce(ArtifactOffload) -> ArtifactOffload,
) -> Executor {
    let registry = Arc::new(Registry::new());
    let offload = offload(ArtifactOffload::new(store));
    registry
        .register_all([
            big("big", 120 * 1024, ToolMeta::default()),
            big("small", 10 * 1024, ToolMeta::default()),
            big("excluded", 120 * 1024, ToolMeta::default()),
            big(
                "tight",
                2 * 1024,
                ToolMeta {
                    max_result_size: Some(1024),
                    ..ToolMeta::default()
                },
            ),
        ])
        .unwrap();
    registry.register(offload.read_tool()).unwrap();
    Executor::builder(registry)
        .artifact_offload(offload.exclude("excluded"))
        .build()
}

async fn read_back_everything(executor: &Executor, id: &str, first_offset: usize) -> String {
    let mut text = String::new();
    let mut offset = first_offset;
    loop {
        let args = format!(r#"{{"id": "artifact://{id}", "offset": {offset}, "length": 20000}}"#);
        let out = executor
            .invoke_tool(ToolContext::new(), ARTIFACT_READ_TOOL, &args)
            .await
            .unwrap();
        // The user view holds exactly the slice; the model view adds where to go next.
        let slice = out.user_text();
        assert!(out.llm_text().starts_with(&slice));
        text += &slice;
        if out.llm_text().ends_with("end of artifact]") {
            return text;
        }
        offset += slice.len();
    }
}

/// Offloads a 120 KiB result of an executor run to `store` and reads it all back with
/// `artifact_read`, checking every byte (also used by the S3 store's tests).
pub(crate) async fn round_trip(store: Arc<dyn ArtifactStore>) -> ArtifactRef {
    let executor = executor(store, |o| o);
    let full = big("x", 120 * 1024, ToolMeta::default())
        .call(ToolContext::new(), "{}")
        .await
        .unwrap()
        .llm_text();

    let result = executor
        .execute(ToolContext::new(), &ToolCall::new("c1", "big", "{}"))
        .await;
    let artifact = result
        .artifact
        .clone()
        .expect("a 120 KiB result is offloaded");
    assert_eq!(artifact.bytes, full.len());
    let model = result.model_text();
    assert!(
        model.len() < 4 * 1024,
        "the model sees a short preview, got {} bytes",
        model.len()
    );
    assert!(
        model.contains(&format!("artifact://{}", artifact.id)),
        "{model}"
    );
    assert!(
        model.contains(&full.len().to_string()),
        "the byte count is shown: {model}"
    );
    assert_eq!(result.user_text(), full, "the user keeps the full result");

    let preview_len = model.find("\n\n[Result truncated").unwrap();
    assert_eq!(&model[..preview_len], &full[..preview_len]);
    let rest = read_back_everything(&executor, &artifact.id, preview_len).await;
    assert_eq!(format!("{}{rest}", &full[..preview_len]), full);
    artifact
}

#[tokio::test]
async fn large_results_round_trip_through_the_memory_store() {
    round_trip(Arc::new(MemoryArtifactStore::new())).await;
}

#[tokio::test]
async fn large_results_round_trip_through_the_filesystem_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsArtifactStore::new(dir.path().join("artifacts")).unwrap();
    round_trip(Arc::new(store.clone())).await;
    let files: Vec<_> = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one artifact file, no temporary leftovers: {files:?}"
    );
}

#[tokio::test]
async fn small_and_excluded_results_stay_inline_and_max_result_size_lowers_the_threshold() {
    let store = Arc::new(MemoryArtifactStore::new());
    let executor = executor(store.clone(), |o| o);
    for (name, offloaded) in [("small", false), ("excluded", false), ("tight", true)] {
        let result = executor
            .execute(ToolContext::new(), &ToolCall::new("c", name, "{}"))
            .await;
        assert_eq!(result.artifact.is_some(), offloaded, "{name}");
    }
    assert_eq!(store.len(), 1);
    assert_eq!(DEFAULT_OFFLOAD_THRESHOLD, 50 * 1024);
}

#[tokio::test]
async fn artifact_read_refuses_unknown_and_path_like_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FsArtifactStore::new(dir.path()).unwrap());
    let executor = executor(store, |o| o);
    for id in ["nope", "../../etc/passwd", "artifact://a/b", ""] {
        let args = serde_json::json!({"id": id}).to_string();
        let err = executor
            .invoke_tool(ToolContext::new(), ARTIFACT_READ_TOOL, &args)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { .. }),
            "{id}: {err:?}"
        );
    }
    let err = executor
        .invoke_tool(ToolContext::new(), ARTIFACT_READ_TOOL, "{}")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::SchemaViolation { .. }), "{err:?}");
}

#[tokio::test]
async fn reads_never_split_a_character() {
    let store = MemoryArtifactStore::new();
    let artifact = store.put("t", "aé€😀z".to_string()).await.unwrap();
    // Offset 2 is inside "é": the slice starts at its first byte.
    let slice = store.read(&artifact.id, 2, 3).await.unwrap();
    assert_eq!(slice.offset, 1);
    assert_eq!(slice.text, "é");
    // A length too short for the next character still returns one character.
    let slice = store.read(&artifact.id, 3, 1).await.unwrap();
    assert_eq!(slice.text, "€");
    let slice = store.read(&artifact.id, 100, 10).await.unwrap();
    assert_eq!(slice.text, "");
    assert_eq!(slice.next_offset(), None);
}
