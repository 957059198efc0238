//! The S3 artifact store against a real S3 endpoint (moto in server mode, started by
//! `.ci/start-services`; `TOOLBELT_TEST_S3_ENDPOINT` points elsewhere). Each test makes its
//! own bucket with a random suffix, so tests run in parallel and reruns never collide.

use std::hash::{BuildHasher, Hasher};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use object_store::ObjectStoreExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolbelt_core::ToolError;
use toolbelt_exec::{ArtifactStore, MemoryArtifactStore, S3ArtifactStore};

/// The upper bound on any one store call in these tests: far above what a call takes, low
/// enough that a hang fails the test instead of stalling the suite.
const NO_HANG: Duration = Duration::from_secs(60);

fn endpoint() -> String {
    toolbelt_testkit::service_url("TOOLBELT_TEST_S3_ENDPOINT", "http://127.0.0.1:5000")
}

/// A fresh bucket on the endpoint, `toolbelt-test-<random>`.
async fn new_bucket(endpoint: &str) -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    let bucket = format!("toolbelt-test-{:016x}", hasher.finish());
    let response = reqwest::Client::new()
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .await
        .expect("the S3 endpoint answers");
    assert!(
        response.status().is_success(),
        "creating bucket {bucket}: {}",
        response.status()
    );
    bucket
}

/// A plain `object_store` client of `bucket`, to put and get objects directly (not
/// through the store under test).
fn direct(endpoint: &str, bucket: &str) -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .with_bucket_name(bucket)
        .build()
        .unwrap()
}

/// Puts `body` at `key` of `bucket` directly.
async fn put_object(endpoint: &str, bucket: &str, key: &str, body: &str) {
    direct(endpoint, bucket)
        .put(&key.into(), body.to_string().into())
        .await
        .unwrap();
}

/// Gets the object at `key` directly, `None` when there is none.
async fn get_object(endpoint: &str, bucket: &str, key: &str) -> Option<String> {
    match direct(endpoint, bucket).get(&key.into()).await {
        Ok(result) => Some(String::from_utf8(result.bytes().await.unwrap().to_vec()).unwrap()),
        Err(object_store::Error::NotFound { .. }) => None,
        Err(err) => panic!("getting {key}: {err}"),
    }
}

fn store_at(endpoint: &str, location: &str) -> S3ArtifactStore {
    S3ArtifactStore::builder(location)
        .unwrap()
        .endpoint(endpoint)
        .region("us-east-1")
        .credentials("testing", "testing")
        .build()
        .unwrap()
}

/// Text of `size` bytes mixing 1- to 4-byte characters, so cuts land inside characters.
fn mixed_text(size: usize) -> String {
    let mut text = String::with_capacity(size + 16);
    let mut line = 0;
    while text.len() < size {
        text += &format!("{line:07} aé€😀\n");
        line += 1;
    }
    let mut end = size;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

/// A TCP proxy on 127.0.0.1 in front of the S3 endpoint counting the bytes each way, to see
/// what a read really moves.
struct CountingProxy {
    addr: SocketAddr,
    to_server: Arc<AtomicU64>,
    to_client: Arc<AtomicU64>,
    accept: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    async fn start(endpoint: &str) -> Self {
        let authority = endpoint
            .split("://")
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap();
        let upstream = authority.to_socket_addrs().unwrap().next().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let to_server = Arc::new(AtomicU64::new(0));
        let to_client = Arc::new(AtomicU64::new(0));
        let (up, down) = (to_server.clone(), to_client.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, up.clone()));
                tokio::spawn(pump(server_read, client_write, down.clone()));
            }
        });
        Self {
            addr,
            to_server,
            to_client,
            accept,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// (bytes sent to the server, bytes sent back) so far.
    fn counts(&self) -> (u64, u64) {
        (
            self.to_server.load(Ordering::SeqCst),
            self.to_client.load(Ordering::SeqCst),
        )
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    count: Arc<AtomicU64>,
) {
    let mut buf = vec![0; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                count.fetch_add(n as u64, Ordering::SeqCst);
                if to.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

async fn bounded<T>(call: impl Future<Output = T>) -> T {
    tokio::time::timeout(NO_HANG, call)
        .await
        .expect("a store call finished within the bound")
}

#[tokio::test]
async fn ranged_reads_at_the_start_middle_and_past_the_end_match_the_memory_store() {
    let endpoint = endpoint();
    let bucket = new_bucket(&endpoint).await;
    let store = store_at(&endpoint, &format!("s3://{bucket}/runs/today"));
    let reference = MemoryArtifactStore::new();
    let text = mixed_text(10_000);
    let artifact = bounded(store.put("Grep", text.clone())).await.unwrap();
    let expected = reference.put("Grep", text.clone()).await.unwrap();
    assert_eq!(artifact.bytes, text.len());

    // The object is where the location says, holding exactly the text.
    let key = format!("runs/today/{}.txt", artifact.id);
    assert_eq!(
        get_object(&endpoint, &bucket, &key).await.as_deref(),
        Some(&*text)
    );

    // Start, middle (cuts inside characters included), the last bytes, past the end.
    let len = text.len();
    for (offset, length) in [
        (0, 10),
        (0, 1),
        (1, 0),
        (4_999, 100),
        (5_001, 7),
        (len - 3, 100),
        (len, 10),
        (len + 5, 10),
        (usize::MAX, usize::MAX),
    ] {
        let got = bounded(store.read(&artifact.id, offset, length))
            .await
            .unwrap();
        let want = reference.read(&expected.id, offset, length).await.unwrap();
        assert_eq!(got, want, "offset {offset}, length {length}");
    }
    let past = bounded(store.read(&artifact.id, len + 5, 10))
        .await
        .unwrap();
    assert_eq!((past.text.as_str(), past.next_offset()), ("", None));

    // The whole artifact URI is accepted as an id, as by the other stores.
    let slice = bounded(store.read(&artifact.uri(), 0, 7)).await.unwrap();
    assert_eq!(slice.text, text[..7]);

    // An empty artifact reads as an empty slice (S3 refuses any range of an empty object).
    let empty = bounded(store.put("Grep", String::new())).await.unwrap();
    let slice = bounded(store.read(&empty.id, 0, 10)).await.unwrap();
    assert_eq!((slice.text.as_str(), slice.total_bytes), ("", 0));
}

#[tokio::test]
async fn a_large_artifact_read_in_pieces_is_what_was_put() {
    let endpoint = endpoint();
    let bucket = new_bucket(&endpoint).await;
    let store = store_at(&endpoint, &format!("s3://{bucket}/big"));
    let text = mixed_text(3 * 1024 * 1024 + 11);
    let artifact = bounded(store.put("Bash", text.clone())).await.unwrap();

    let mut read = String::new();
    let mut offset = 0;
    let mut pieces = 0;
    loop {
        let slice = bounded(store.read(&artifact.id, offset, 50 * 1024))
            .await
            .unwrap();
        assert_eq!(slice.offset, offset, "pieces follow each other");
        assert_eq!(slice.total_bytes, text.len());
        read += &slice.text;
        pieces += 1;
        match slice.next_offset() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert!(read == text, "the pieces put together are the artifact");
    assert!(pieces > 60, "read in 50 KiB pieces, got {pieces}");
}

#[tokio::test]
async fn a_ranged_read_moves_the_slice_not_the_whole_object() {
    let endpoint = endpoint();
    let bucket = new_bucket(&endpoint).await;
    let proxy = CountingProxy::start(&endpoint).await;
    let store = store_at(&proxy.url(), &format!("s3://{bucket}/ranged"));
    let text = mixed_text(4 * 1024 * 1024);
    let artifact = bounded(store.put("Read", text.clone())).await.unwrap();
    let (sent, _) = proxy.counts();
    assert!(sent >= text.len() as u64, "the put went through the proxy");

    let before = proxy.counts().1;
    let slice = bounded(store.read(&artifact.id, 2 * 1024 * 1024, 1_000))
        .await
        .unwrap();
    let moved = proxy.counts().1 - before;
    assert!(slice.text.len() >= 990 && text[slice.offset..].starts_with(&slice.text));
    // 1 KB of body and the response's headers; a whole-object GET would move 4 MiB.
    assert!(
        moved < 16 * 1024,
        "reading 1,000 bytes of a 4 MiB artifact moved {moved} bytes from the server"
    );
}

#[tokio::test]
async fn hostile_ids_are_refused_before_any_request_and_cannot_leave_the_prefix() {
    let endpoint = endpoint();
    let bucket = new_bucket(&endpoint).await;
    // Objects a hostile id would like to reach: outside the prefix, and beside it.
    put_object(&endpoint, &bucket, "secret.txt", "root secret").await;
    put_object(&endpoint, &bucket, "other/secret.txt", "other secret").await;
    put_object(&endpoint, &bucket, "runs/a/.hidden.txt", "dot").await;
    let proxy = CountingProxy::start(&endpoint).await;
    let store = store_at(&proxy.url(), &format!("s3://{bucket}/runs/a"));

    let long = "a".repeat(129);
    let hostile = [
        "../secret",
        "../../secret",
        "../../other/secret",
        "..%2fsecret",
        "%2e%2e/secret",
        "%2E%2E%2Fsecret",
        "/secret",
        "/etc/passwd",
        "artifact://../secret",
        "secret.txt",
        ".hidden",
        "runs/a/../../secret",
        "a\u{0}b",
        "a\nb",
        "a\u{7f}",
        "é",
        "a b",
        "a\\..\\secret",
        long.as_str(),
        "",
    ];
    for id in hostile {
        let err = bounded(store.read(id, 0, 100)).await.unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments { .. }),
            "{id:?}: {err:?}"
        );
        let message = err.to_string();
        assert!(message.len() < 300, "{id:?} echoed at length: {message}");
    }
    assert_eq!(
        proxy.counts(),
        (0, 0),
        "no hostile id reached the server at all"
    );

    // The control: a valid id does reach the server (the proxy sees it).
    let err = bounded(store.read("secret", 0, 100)).await.unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
    assert!(proxy.counts().0 > 0, "the valid id was asked for");
    // ... and `secret` names runs/a/secret.txt, not the bucket's secret.txt.
    assert_eq!(
        get_object(&endpoint, &bucket, "secret.txt")
            .await
            .as_deref(),
        Some("root secret")
    );
}

#[tokio::test]
async fn an_unknown_id_is_an_error_naming_it() {
    let endpoint = endpoint();
    let bucket = new_bucket(&endpoint).await;
    let store = store_at(&endpoint, &format!("s3://{bucket}/p"));
    store.put("x", "something".into()).await.unwrap();
    let err = bounded(store.read("0123456789abcdef0000", 0, 10))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
    assert!(err.to_string().contains("0123456789abcdef0000"), "{err}");
}

#[tokio::test]
async fn a_dead_endpoint_is_a_clear_error_and_never_a_hang() {
    // Nothing listens on a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = S3ArtifactStore::builder("s3://no-such-server/p")
        .unwrap()
        .endpoint(format!("http://127.0.0.1:{port}"))
        .credentials("testing", "testing")
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let err = bounded(store.put("x", "text".into())).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("cannot store the artifact at s3://no-such-server/p"),
        "{message}"
    );
    assert!(message.contains(&port.to_string()), "{message}");
    let err = bounded(store.read("abc", 0, 10)).await.unwrap_err();
    assert!(
        matches!(err, ToolError::Failed(_)),
        "a dead endpoint is not an unknown artifact: {err:?}"
    );
    assert!(
        err.to_string().contains("cannot read artifact abc"),
        "{err}"
    );
}

#[tokio::test]
async fn a_silent_endpoint_fails_within_the_timeout() {
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let store = S3ArtifactStore::builder("s3://silent-server/p")
        .unwrap()
        .endpoint(format!("http://127.0.0.1:{port}"))
        .credentials("testing", "testing")
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = bounded(store.put("x", "text".into())).await.unwrap_err();
    assert!(err.to_string().contains("s3://silent-server/p"), "{err}");
    let err = bounded(store.read("abc", 0, 10)).await.unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    drop(silent);
}

#[tokio::test]
async fn an_executor_offloads_a_large_result_to_s3_and_artifact_read_returns_it() {
    let endpoint = endpoint();
    let bucket = new_bucket(&endpoint).await;
    let location = format!("s3://{bucket}/offload");
    let store = Arc::new(store_at(&endpoint, &location));
    let artifact = crate::artifact::round_trip(store).await;

    // The result is an object in the bucket, and another store over the same location
    // (another process, another replica) reads it back.
    let key = format!("offload/{}.txt", artifact.id);
    let object = get_object(&endpoint, &bucket, &key).await.unwrap();
    assert_eq!(object.len(), artifact.bytes);
    let other = store_at(&endpoint, &location);
    let slice = bounded(other.read(&artifact.id, 0, 100)).await.unwrap();
    assert_eq!(slice.text, object[..100]);
}
