//! `run --artifacts`: a tool result too large for the model is kept in a folder or in S3
//! (moto, feature `s3`), the model sees a preview with its `artifact://` reference and is
//! offered `artifact_read`; a store this build lacks is a usage error.

use crate::run_support;

use run_support::{output, project, read_file, text, tool_contents, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// Writes `big.txt` (about 120 KB) into `dir` and returns its text.
fn big_file(dir: &std::path::Path) -> String {
    let text: String = (0..1500)
        .map(|i| {
            format!(
                "{i:05} {}\n",
                "the quick brown fox jumps over the lazy dog ".repeat(2)
            )
        })
        .collect();
    std::fs::write(dir.join("big.txt"), &text).unwrap();
    text
}

/// The `artifact://ID` reference in a tool result, as its id.
fn artifact_id(result: &str) -> String {
    let start = result
        .find("artifact://")
        .unwrap_or_else(|| panic!("no artifact reference in {result}"))
        + "artifact://".len();
    result[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_result_goes_to_the_artifacts_folder_and_the_model_sees_a_preview() {
    let dir = project();
    let full = big_file(dir.path());
    let store = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &read_file(dir.path(), "big.txt")),
        Reply::text("It is long."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "Read big.txt", "--tools", "Read", "--artifacts"])
        .arg(store.path())
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let requests = server.requests();
    let mut offered = requests[0].tool_names();
    offered.sort();
    assert_eq!(
        offered,
        ["Read", "artifact_read"],
        "artifact_read joins --tools"
    );
    let results = tool_contents(&requests[1]);
    assert!(
        results[0].len() < 4 * 1024 && results[0].contains("[Result truncated"),
        "the model sees a preview: {} bytes",
        results[0].len()
    );
    let id = artifact_id(&results[0]);
    let stored = std::fs::read_to_string(store.path().join(format!("{id}.txt"))).unwrap();
    assert!(
        stored.len() > full.len(),
        "Read's numbered lines are all kept"
    );
    assert!(stored.contains("01499 the quick brown fox"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_artifact_scheme_is_a_usage_error() {
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hi", "--artifacts", "ftp://host/x", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--artifacts ftp://"),
        "{}",
        text(&out.stderr)
    );
    assert!(server.requests().is_empty(), "the model was never called");
}

#[cfg(not(feature = "s3"))]
#[tokio::test(flavor = "multi_thread")]
async fn an_s3_location_without_the_s3_feature_is_a_usage_error_naming_it() {
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hi", "--artifacts", "s3://bucket/prefix", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--features s3"), "{stderr}");
}

#[cfg(feature = "s3")]
#[tokio::test(flavor = "multi_thread")]
async fn a_large_result_goes_to_s3_configured_by_the_aws_environment() {
    use toolbelt::exec::{ArtifactStore, S3ArtifactStore};

    let endpoint =
        toolbelt_testkit::service_url("TOOLBELT_TEST_S3_ENDPOINT", "http://127.0.0.1:5000");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let bucket = format!("toolbelt-cli-{:x}-{nanos:x}", std::process::id());
    let created = reqwest::Client::new()
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .await
        .unwrap();
    assert!(created.status().is_success(), "{}", created.status());

    let dir = project();
    let full = big_file(dir.path());
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &read_file(dir.path(), "big.txt")),
        Reply::text("It is long."),
    ])
    .await
    .unwrap();
    let location = format!("s3://{bucket}/runs");
    let mut command = toolbelt(&server, dir.path());
    command
        .env("AWS_ENDPOINT_URL", &endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .args(["run", "Read big.txt", "--artifacts", &location, "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let results = tool_contents(&server.requests()[1]);
    let id = artifact_id(&results[0]);
    let store = S3ArtifactStore::builder(&location)
        .unwrap()
        .endpoint(&endpoint)
        .credentials("testing", "testing")
        .build()
        .unwrap();
    let slice = store.read(&id, 0, 1_000_000).await.unwrap();
    assert!(slice.total_bytes > full.len() && slice.next_offset().is_none());
    assert!(slice.text.contains("01499 the quick brown fox"));
}
