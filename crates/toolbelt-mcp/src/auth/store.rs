//! Tokens on disk: one file per server, readable by its owner only, replaced atomically.
//!
//! A file holds what a later process needs to use and refresh the tokens without a new
//! login: the server's URL (checked on load, so a misplaced file is never sent to another
//! server), the authorization server's metadata, the client (its id, and the secret a
//! registration may have issued), and rmcp's [`StoredCredentials`] (access and refresh
//! token, granted scopes, when they were received). The file is named after a SHA-256 of
//! the URL, so two servers never share one.
//!
//! Writes go to a temporary file created with mode 0600 beside the target, are synced, and
//! are renamed over it: a crash leaves the old file or the new one, never half of one, and
//! at no moment can another user read the tokens. The directory is created with mode 0700.
//! Refreshes take turns across processes through an `flock` on `<file>.lock`.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::transport::auth::{
    AuthError, AuthorizationMetadata, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The environment variable that moves the token directory (tests, several profiles).
pub const TOKEN_DIR_VAR: &str = "TOOLBELT_OAUTH_DIR";

/// The directory token files live in when neither the configuration nor
/// [`TOKEN_DIR_VAR`] names one: `$XDG_STATE_HOME/toolbelt/oauth`, else
/// `~/.local/state/toolbelt/oauth`.
pub fn default_token_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(TOKEN_DIR_VAR).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".local/state")))?;
    Some(state.join("toolbelt").join("oauth"))
}

/// What one server's token file holds.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct TokenRecord {
    /// The MCP server's URL the tokens were issued for.
    pub url: String,
    /// The authorization server's metadata found at login.
    pub metadata: AuthorizationMetadata,
    /// The client id used at login (pre-registered or registered dynamically).
    pub client_id: String,
    /// The client secret, when the registration issued one or the configuration gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The tokens, once a code has been exchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<StoredCredentials>,
}

/// The token file of one server, and rmcp's credential store over it.
#[derive(Clone)]
pub(crate) struct TokenFile {
    url: String,
    path: PathBuf,
    /// Serialises this process's refreshes and read-modify-writes of the file.
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl TokenFile {
    /// The file for the server at `url` in `dir`.
    pub fn new(dir: &Path, url: &str) -> Self {
        let digest = Sha256::digest(url.as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        Self {
            url: url.to_string(),
            path: dir.join(format!("{name}.json")),
            lock: Arc::default(),
        }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record, if the file exists and belongs to this server.
    pub fn read(&self) -> Result<Option<TokenRecord>, String> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("cannot read {}: {err}", self.path.display())),
        };
        self.tighten_permissions();
        let record: TokenRecord = serde_json::from_slice(&text)
            .map_err(|err| format!("{} is not a token file: {err}", self.path.display()))?;
        if record.url != self.url {
            // Never hand one server's tokens to another, whatever the file name says.
            return Ok(None);
        }
        Ok(Some(record))
    }

    /// A file another user could read (copied in, or made before a umask change) is made
    /// private before its tokens are used.
    fn tighten_permissions(&self) {
        if let Ok(meta) = std::fs::metadata(&self.path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                "{} was readable by other users; setting mode 0600",
                self.path.display()
            );
            let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600));
        }
    }

    /// Replaces the file with `record`, atomically and with mode 0600.
    pub fn write(&self, record: &TokenRecord) -> Result<(), String> {
        let dir = self
            .path
            .parent()
            .ok_or_else(|| format!("{} has no directory", self.path.display()))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let text = serde_json::to_vec_pretty(record).map_err(|err| err.to_string())?;
        // Unique per process and per write, so concurrent writers never share a temp file.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let temp = dir.join(format!(
            ".{}.{}.{}.tmp",
            self.path.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&temp, &self.path)?;
            std::fs::File::open(dir)?.sync_all()
        })();
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(format!("cannot write {}: {err}", self.path.display()));
        }
        Ok(())
    }

    /// Deletes the file and its refresh lock (logging out); a missing file is not an error.
    pub fn remove(&self) -> Result<bool, String> {
        let _ = std::fs::remove_file(self.path.with_extension("lock"));
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(err) => Err(format!("cannot remove {}: {err}", self.path.display())),
        }
    }

    fn update(&self, change: impl FnOnce(&mut TokenRecord)) -> Result<(), AuthError> {
        let mut record = self
            .read()
            .map_err(AuthError::CredentialStoreError)?
            .ok_or_else(|| {
                AuthError::CredentialStoreError(format!(
                    "{} is missing: log in again",
                    self.path.display()
                ))
            })?;
        change(&mut record);
        self.write(&record).map_err(AuthError::CredentialStoreError)
    }
}

/// Opens (creating, mode 0600) and exclusively locks `path`; closing the file unlocks it.
fn lock_file(path: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|err| format!("cannot open {}: {err}", path.display()))?;
    loop {
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(file);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("cannot lock {}: {err}", path.display()));
        }
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let record = self.read().map_err(AuthError::CredentialStoreError)?;
        Ok(record.and_then(|r| r.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|record| record.credentials = Some(credentials))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(|record| record.credentials = None)
    }

    /// One refresh at a time per server, across processes too (`serve` and a `toolbelt mcp`
    /// command may share a file): an authorization server that rotates refresh tokens
    /// rejects the second use of one, which would throw both processes back to a login.
    /// The process's own lock first, then an exclusive `flock` on `<file>.lock`, held until
    /// the refreshed tokens are saved.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let in_process = self.lock.clone().lock_owned().await;
        let path = self.path.with_extension("lock");
        let across_processes = tokio::task::spawn_blocking(move || lock_file(&path))
            .await
            .map_err(|err| AuthError::CredentialStoreError(err.to_string()))?
            .map_err(AuthError::CredentialStoreError)?;
        Ok(Some(CredentialRefreshGuard::new((
            in_process,
            across_processes,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn record(url: &str) -> TokenRecord {
        TokenRecord {
            url: url.into(),
            metadata: AuthorizationMetadata::default(),
            client_id: "client".into(),
            client_secret: Some("s3cret".into()),
            credentials: None,
        }
    }

    #[test]
    fn a_token_file_is_private_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("state/oauth");
        let file = TokenFile::new(&nested, "https://mcp.example/mcp");
        file.write(&record("https://mcp.example/mcp")).unwrap();
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(&nested).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        file.write(&record("https://mcp.example/mcp")).unwrap();
        let names: Vec<_> = std::fs::read_dir(&nested).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
        assert_eq!(file.read().unwrap().unwrap().client_id, "client");
    }

    #[test]
    fn a_file_recorded_for_another_url_is_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let mine = TokenFile::new(dir.path(), "https://a.example/mcp");
        let other = TokenFile::new(dir.path(), "https://b.example/mcp");
        assert_ne!(mine.path(), other.path());
        // A file copied over another server's name is ignored, not sent to it.
        other.write(&record("https://b.example/mcp")).unwrap();
        std::fs::copy(other.path(), mine.path()).unwrap();
        assert!(mine.read().unwrap().is_none());
    }

    #[tokio::test]
    async fn refreshes_of_one_server_take_turns_even_from_separate_handles() {
        let dir = tempfile::tempdir().unwrap();
        // Two handles share no in-process lock, as two processes would not.
        let first = TokenFile::new(dir.path(), "https://a.example/mcp");
        let second = TokenFile::new(dir.path(), "https://a.example/mcp");
        let held = first.acquire_refresh_guard().await.unwrap();
        let waiting = tokio::spawn(async move { second.acquire_refresh_guard().await.is_ok() });
        let early = tokio::time::timeout(Duration::from_millis(300), async {
            while !waiting.is_finished() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            early.is_err(),
            "the second refresh waits while the first holds the lock"
        );
        drop(held);
        assert!(waiting.await.unwrap(), "and goes on once it is released");
    }

    #[test]
    fn a_readable_token_file_is_made_private_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile::new(dir.path(), "https://a.example/mcp");
        file.write(&record("https://a.example/mcp")).unwrap();
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(file.read().unwrap().is_some());
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
