//! Artifacts in S3-compatible object storage (feature `s3`): AWS S3, MinIO, Ceph, R2, moto.
//!
//! Each artifact is one object, `PREFIX/ID.txt` in the bucket, written by one PUT (S3 never
//! shows half an object). A read is one ranged GET of the bytes the slice needs plus the few
//! around it that a cut at character boundaries looks at ([`super::window_for`]): reading
//! 16 KiB of a 50 MiB artifact moves about 16 KiB, never the whole object, and a server that
//! answers a ranged GET with the whole object or more bytes than asked is refused.
//!
//! Ids are checked before they reach a key ([`super::checked_id`]: letters, digits, `-`,
//! `_`), so no id read from a model (`../x`, `%2e%2e`, `/etc/passwd`, control characters,
//! a 10 KB id) can name an object outside the prefix; such an id is reported like an
//! unknown one and no request is made.
//!
//! Every call ends within the store's timeout (60 s unless set), retries included: a dead
//! or silent endpoint is an error naming the location, never a hang.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientConfigKey, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload,
    RetryConfig,
};
use toolbelt_core::ToolError;

use super::{
    ArtifactRef, ArtifactSlice, ArtifactStore, checked_id, new_artifact_id, slice_window,
    unknown_artifact, window_for,
};

/// How long one store call may take unless [`S3ArtifactStoreBuilder::timeout`] says
/// otherwise, retries included.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest wait for a connection, within the call's timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How many times a failed request (connection refused, 5xx, timeout) is sent again.
const MAX_RETRIES: usize = 3;

/// The largest object one PUT may write (S3's limit for a single PUT: 5 GiB).
const MAX_PUT_BYTES: usize = 5 << 30;

/// Artifacts as objects under a prefix of an S3 bucket.
///
/// Built from a location `s3://BUCKET/PREFIX` and the usual AWS settings:
/// [`S3ArtifactStore::from_env`] reads `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL` and the
/// other `AWS_*` variables `object_store` knows; [`S3ArtifactStore::builder`] takes them as
/// arguments. A plain `http://` endpoint is accepted on a loopback address (a local MinIO
/// or moto) or when asked for (`AWS_ALLOW_HTTP=true`, [`S3ArtifactStoreBuilder::allow_http`]);
/// anywhere else credentials and artifacts would cross the network unencrypted, so building
/// the store fails.
///
/// ```no_run
/// # async fn demo() -> Result<(), toolbelt_core::ToolError> {
/// use toolbelt_exec::{ArtifactStore, S3ArtifactStore};
///
/// let store = S3ArtifactStore::builder("s3://artifacts/agent-runs")?
///     .endpoint("http://127.0.0.1:9000")
///     .credentials("access-key", "secret-key")
///     .build()?;
/// let artifact = store.put("Grep", "a long result".repeat(10_000)).await?;
/// let slice = store.read(&artifact.id, 0, 100).await?;
/// assert_eq!(slice.text.len(), 100);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct S3ArtifactStore {
    store: std::sync::Arc<AmazonS3>,
    prefix: Path,
    location: String,
    timeout: Duration,
}

// Only the location and the timeout: the client's settings hold the credentials.
impl std::fmt::Debug for S3ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3ArtifactStore")
            .field("location", &self.location)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl S3ArtifactStore {
    /// A store at `location` (`s3://BUCKET` or `s3://BUCKET/PREFIX`) configured by the
    /// `AWS_*` environment variables.
    pub fn from_env(location: &str) -> Result<Self, ToolError> {
        S3ArtifactStoreBuilder::new(location, AmazonS3Builder::from_env())?.build()
    }

    /// A builder for a store at `location` (`s3://BUCKET` or `s3://BUCKET/PREFIX`) that
    /// reads nothing from the environment.
    pub fn builder(location: &str) -> Result<S3ArtifactStoreBuilder, ToolError> {
        S3ArtifactStoreBuilder::new(location, AmazonS3Builder::new())
    }

    /// The location, `s3://BUCKET/PREFIX`.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn key_of(&self, id: &str) -> Path {
        self.prefix.clone().join(format!("{id}.txt"))
    }

    /// Runs one store call within the timeout.
    async fn bounded<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| {
                Err(ToolError::failed(format!(
                    "{what} at {}: no answer within {:?}",
                    self.location, self.timeout
                )))
            })
    }

    async fn ranged_read(
        &self,
        id: &str,
        offset: usize,
        length: usize,
    ) -> Result<ArtifactSlice, ToolError> {
        let key = self.key_of(id);
        let window = window_for(offset, length);
        let range = GetRange::Bounded(window.start as u64..window.end as u64);
        let failed = |err: object_store::Error| {
            ToolError::failed(format!(
                "cannot read artifact {id} at {}: {err}",
                self.location
            ))
        };
        let result = match self
            .store
            .get_opts(&key, GetOptions::new().with_range(Some(range)))
            .await
        {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Err(unknown_artifact(id)),
            Err(err) => {
                // S3 refuses a range that starts at or past the end (416); the artifact's size
                // says whether that was it (an empty slice at the end) or a real failure.
                return match self.store.head(&key).await {
                    Ok(meta) if window.start as u64 >= meta.size => Ok(ArtifactSlice {
                        text: String::new(),
                        offset: usize::try_from(meta.size).unwrap_or(usize::MAX),
                        total_bytes: usize::try_from(meta.size).unwrap_or(usize::MAX),
                    }),
                    Err(object_store::Error::NotFound { .. }) => Err(unknown_artifact(id)),
                    _ => Err(failed(err)),
                };
            }
        };
        let total_bytes = usize::try_from(result.meta.size).unwrap_or(usize::MAX);
        let window_start = usize::try_from(result.range.start).unwrap_or(usize::MAX);
        let expected = usize::try_from(result.range.end - result.range.start).unwrap_or(0);
        // object_store checked that the answer is the range asked for (206, Content-Range);
        // the body is read up to that length and no further.
        let mut bytes = Vec::with_capacity(expected.min(window.len()));
        let mut body = result.into_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(failed)?;
            if bytes.len() + chunk.len() > expected {
                return Err(ToolError::failed(format!(
                    "cannot read artifact {id} at {}: the server sent more than the {expected} \
                     bytes of the range asked for",
                    self.location
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        slice_window(&bytes, window_start, total_bytes, offset, length)
    }
}

#[async_trait]
impl ArtifactStore for S3ArtifactStore {
    async fn put(&self, _tool_name: &str, content: String) -> Result<ArtifactRef, ToolError> {
        let bytes = content.len();
        if bytes > MAX_PUT_BYTES {
            return Err(ToolError::failed(format!(
                "cannot store a {bytes}-byte artifact at {}: one object holds at most {MAX_PUT_BYTES} bytes",
                self.location
            )));
        }
        let id = new_artifact_id();
        let key = self.key_of(&id);
        let put = async {
            self.store
                .put(&key, PutPayload::from(content))
                .await
                .map_err(|err| {
                    ToolError::failed(format!(
                        "cannot store the artifact at {}: {err}",
                        self.location
                    ))
                })
        };
        self.bounded("cannot store the artifact", put).await?;
        Ok(ArtifactRef { id, bytes })
    }

    async fn read(
        &self,
        id: &str,
        offset: usize,
        length: usize,
    ) -> Result<ArtifactSlice, ToolError> {
        let id = checked_id(id)?;
        let what = format!("cannot read artifact {id}");
        self.bounded(&what, self.ranged_read(id, offset, length))
            .await
    }
}

/// Settings of an [`S3ArtifactStore`] beyond its location; see [`S3ArtifactStore::builder`].
pub struct S3ArtifactStoreBuilder {
    s3: AmazonS3Builder,
    bucket: String,
    prefix: Path,
    allow_http: bool,
    timeout: Duration,
}

// object_store's builder prints the secret key in its `Debug`: never shown.
impl std::fmt::Debug for S3ArtifactStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3ArtifactStoreBuilder")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix.as_ref())
            .field("allow_http", &self.allow_http)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl S3ArtifactStoreBuilder {
    fn new(location: &str, s3: AmazonS3Builder) -> Result<Self, ToolError> {
        let (bucket, prefix) = parse_location(location)?;
        Ok(Self {
            s3,
            bucket,
            prefix,
            allow_http: false,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// The endpoint of an S3-compatible service (`https://minio.example:9000`); AWS S3's
    /// regional endpoint when none is set.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.s3 = self.s3.with_endpoint(url);
        self
    }

    /// The region (default `us-east-1`).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.s3 = self.s3.with_region(region);
        self
    }

    /// A static access key and secret.
    pub fn credentials(
        mut self,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
    ) -> Self {
        self.s3 = self
            .s3
            .with_access_key_id(access_key_id)
            .with_secret_access_key(secret_access_key);
        self
    }

    /// Accepts a plain `http://` endpoint on a non-loopback address (loopback is always
    /// accepted).
    pub fn allow_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }

    /// The longest one put or read may take, retries included (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The store. Fails on a plain-HTTP endpoint that is neither loopback nor allowed, and
    /// on settings `object_store` refuses (a key without its secret, a bad endpoint URL).
    /// Nothing is sent before the first put or read.
    pub fn build(self) -> Result<S3ArtifactStore, ToolError> {
        let location = if self.prefix.as_ref().is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        };
        let endpoint = self.s3.get_config_value(&AmazonS3ConfigKey::Endpoint);
        let http_asked = self.allow_http
            || self
                .s3
                .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let plain_http = match &endpoint {
            Some(endpoint) => endpoint_is_plain_http(endpoint)?,
            None => None,
        };
        let allow_http = match plain_http {
            Some(loopback) if !loopback && !http_asked => {
                return Err(ToolError::failed(format!(
                    "the S3 endpoint {} for {location} is plain HTTP on a non-loopback host: \
                     credentials and artifacts would cross the network unencrypted. Use an \
                     https:// endpoint, or set AWS_ALLOW_HTTP=true if the network is trusted",
                    endpoint.unwrap_or_default()
                )));
            }
            Some(_) => true,
            None => false,
        };
        let timeout = self.timeout.max(Duration::from_millis(1));
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: timeout,
        };
        let millis = |d: Duration| format!("{}ms", d.as_millis());
        let store = self
            .s3
            .with_bucket_name(&self.bucket)
            .with_allow_http(allow_http)
            .with_retry(retry)
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                millis(timeout),
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                millis(CONNECT_TIMEOUT.min(timeout)),
            )
            .build()
            .map_err(|err| ToolError::failed(format!("cannot open {location}: {err}")))?;
        Ok(S3ArtifactStore {
            store: std::sync::Arc::new(store),
            prefix: self.prefix,
            location,
            timeout,
        })
    }
}

/// Splits `s3://BUCKET/PREFIX` into the bucket and the key prefix. The prefix is parsed as
/// an object path: no `.` or `..` segment, no empty segment, no control character.
fn parse_location(location: &str) -> Result<(String, Path), ToolError> {
    let bad = |why: &str| {
        ToolError::failed(format!(
            "{location:?} is not an S3 location s3://BUCKET/PREFIX: {why}"
        ))
    };
    let rest = location
        .strip_prefix("s3://")
        .ok_or_else(|| bad("it does not start with s3://"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !bucket_ok {
        return Err(bad(
            "a bucket name has 3 to 63 lowercase letters, digits, '-' and '.'",
        ));
    }
    let prefix = prefix.trim_end_matches('/');
    let prefix = Path::parse(prefix).map_err(|err| bad(&err.to_string()))?;
    Ok((bucket.to_string(), prefix))
}

/// `None` for an `https://` endpoint, `Some(is_loopback)` for an `http://` one; any other
/// scheme is an error.
fn endpoint_is_plain_http(endpoint: &str) -> Result<Option<bool>, ToolError> {
    let url = url::Url::parse(endpoint)
        .map_err(|err| ToolError::failed(format!("the S3 endpoint {endpoint:?}: {err}")))?;
    match url.scheme() {
        "https" => Ok(None),
        "http" => Ok(Some(match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            None => false,
        })),
        other => Err(ToolError::failed(format!(
            "the S3 endpoint {endpoint:?} has the scheme {other:?}; use https:// (or http:// \
             on loopback)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_name_a_valid_bucket_and_a_prefix_without_dot_segments() {
        let (bucket, prefix) = parse_location("s3://my-bucket/runs/2024/").unwrap();
        assert_eq!(
            (bucket.as_str(), prefix.as_ref()),
            ("my-bucket", "runs/2024")
        );
        let (_, prefix) = parse_location("s3://my-bucket").unwrap();
        assert_eq!(prefix.as_ref(), "");
        for bad in [
            "my-bucket/x",
            "s3://",
            "s3://UPPER",
            "s3://ab",
            "s3://b/../x",
            "s3://bucket/a/../../x",
            "s3://bucket/a//b",
            "s3://bucket/a/./b",
            "s3://bucket/a\u{7}b",
            "s3://bu/cket",
        ] {
            assert!(parse_location(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn plain_http_is_allowed_on_loopback_only_unless_asked_for() {
        let build = |endpoint: &str, allow: bool| {
            S3ArtifactStore::builder("s3://bucket/p")
                .unwrap()
                .endpoint(endpoint)
                .credentials("k", "s")
                .allow_http(allow)
                .build()
        };
        for loopback in [
            "http://127.0.0.1:5000",
            "http://127.8.0.1",
            "http://[::1]:9000",
            "http://localhost:9000",
        ] {
            build(loopback, false).unwrap();
        }
        let err = build("http://10.0.0.5:9000", false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unencrypted") && err.contains("AWS_ALLOW_HTTP"),
            "{err}"
        );
        build("http://10.0.0.5:9000", true).unwrap();
        build("https://10.0.0.5:9000", false).unwrap();
        assert!(build("ftp://127.0.0.1", true).is_err());
    }

    #[test]
    fn debug_output_never_shows_the_secret_key() {
        let builder = S3ArtifactStore::builder("s3://bucket/p")
            .unwrap()
            .endpoint("http://127.0.0.1:5000")
            .credentials("AKIDEXAMPLE", "wJalrXUtnFEMI-very-secret");
        assert!(!format!("{builder:?}").contains("very-secret"));
        let store = builder.build().unwrap();
        let shown = format!("{store:?}");
        assert!(
            !shown.contains("very-secret") && shown.contains("s3://bucket/p"),
            "{shown}"
        );
    }
}
