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
//!
//! The folder is another user's way in: a `<hash>.json` link planted there would make a
//! process (root's, say) read the link's target as tokens and chmod it, and a planted file
//! would be used as this user's tokens. So the folder is opened once per operation with
//! `O_NOFOLLOW` and checked on that handle (this user's, not writable by group or others:
//! anything else is refused with an error saying so), and every file in it is opened from
//! the handle with `O_NOFOLLOW` and checked with `fstat` (a regular file of this user's, at
//! most 1 MiB; mode bits are tightened on the handle, never through a path).

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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
        let Some(folder) = Folder::open(self.dir()?, false)? else {
            return Ok(None);
        };
        let mut file = match folder.open_file(self.name(), libc::O_RDONLY | libc::O_NONBLOCK, 0) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(refusal(&self.path, "token file", &err)),
        };
        check_token_file(&file, &self.path)?;
        let mut text = Vec::new();
        (&mut file)
            .take(MAX_TOKEN_FILE_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|err| format!("cannot read {}: {err}", self.path.display()))?;
        if text.len() as u64 > MAX_TOKEN_FILE_BYTES {
            return Err(format!(
                "{} is larger than {MAX_TOKEN_FILE_BYTES} bytes: not a token file",
                self.path.display()
            ));
        }
        let record: TokenRecord = serde_json::from_slice(&text)
            .map_err(|err| format!("{} is not a token file: {err}", self.path.display()))?;
        if record.url != self.url {
            // Never hand one server's tokens to another, whatever the file name says.
            return Ok(None);
        }
        Ok(Some(record))
    }

    /// The folder the file is in.
    fn dir(&self) -> Result<&Path, String> {
        self.path
            .parent()
            .ok_or_else(|| format!("{} has no directory", self.path.display()))
    }

    /// The file's name in its folder.
    fn name(&self) -> &std::ffi::OsStr {
        self.path.file_name().unwrap_or_default()
    }

    /// Replaces the file with `record`, atomically and with mode 0600.
    pub fn write(&self, record: &TokenRecord) -> Result<(), String> {
        let folder = Folder::open(self.dir()?, true)?.ok_or("the token folder vanished")?;
        let text = serde_json::to_vec_pretty(record).map_err(|err| err.to_string())?;
        // Unique per process and per write, so concurrent writers never share a temp file.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let temp = format!(
            ".{}.{}.{}.tmp",
            self.name().to_string_lossy(),
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        );
        let written = (|| {
            let mut file = folder.open_file(
                temp.as_ref(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                0o600,
            )?;
            file.write_all(&text)?;
            file.sync_all()?;
            // A link planted under the file's name is replaced, never written through.
            folder.rename(temp.as_ref(), self.name())?;
            folder.sync()
        })();
        if let Err(err) = written {
            let _ = folder.unlink(temp.as_ref());
            return Err(format!("cannot write {}: {err}", self.path.display()));
        }
        Ok(())
    }

    /// Deletes the file and its refresh lock (logging out); a missing file is not an error.
    pub fn remove(&self) -> Result<bool, String> {
        let Some(folder) = Folder::open(self.dir()?, false)? else {
            return Ok(false);
        };
        let _ = folder.unlink(self.lock_name().as_ref());
        match folder.unlink(self.name()) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(err) => Err(format!("cannot remove {}: {err}", self.path.display())),
        }
    }

    /// The name of the file whose `flock` serialises refreshes across processes.
    fn lock_name(&self) -> String {
        format!(
            "{}.lock",
            self.path.file_stem().unwrap_or_default().to_string_lossy()
        )
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

/// Opens (creating, mode 0600, never through a link) and exclusively locks `name` in the
/// token folder `dir`; closing the file unlocks it.
fn lock_file(dir: &Path, name: &str) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let path = dir.join(name);
    let folder = Folder::open(dir, true)?.ok_or("the token folder vanished")?;
    let file = folder
        .open_file(name.as_ref(), libc::O_RDWR | libc::O_CREAT, 0o600)
        .map_err(|err| refusal(&path, "lock file", &err))?;
    check_owned_regular(&file, &path, "lock file")?;
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

/// The most a token file may hold (a real one is a few KiB).
const MAX_TOKEN_FILE_BYTES: u64 = 1024 * 1024;

/// The token folder, opened without following a link and checked on its handle, so what was
/// checked is what the files are opened in (see the module docs).
struct Folder {
    handle: std::fs::File,
}

impl Folder {
    /// Opens `dir`, first creating it (mode 0700) when `create`; `None` when it does not
    /// exist and `create` is false. Refuses a link, another user's folder, and a folder
    /// other users may write to.
    fn open(dir: &Path, create: bool) -> Result<Option<Self>, String> {
        if create {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        }
        let handle = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir)
        {
            Ok(handle) => handle,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(err) => return Err(refusal(dir, "token folder", &err)),
        };
        let meta = handle
            .metadata()
            .map_err(|err| format!("cannot inspect {}: {err}", dir.display()))?;
        let refuse = |why: String| {
            Err(format!(
                "refusing the OAuth token folder {}: {why}; use a folder of your own that only \
                 you can write (chmod 700), or name one with {TOKEN_DIR_VAR}",
                dir.display()
            ))
        };
        if meta.uid() != effective_uid() {
            return refuse(format!("it belongs to another user (uid {})", meta.uid()));
        }
        if meta.mode() & 0o022 != 0 {
            return refuse(format!(
                "other users may write to it (mode {:o})",
                meta.mode() & 0o7777
            ));
        }
        Ok(Some(Self { handle }))
    }

    /// Opens `name` in the folder with `flags` (and `mode` when creating), never following
    /// a link: a link there fails with `ELOOP`.
    fn open_file(
        &self,
        name: &std::ffi::OsStr,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> std::io::Result<std::fs::File> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let name = c_name(name)?;
        // SAFETY: `name` is a valid C string and the folder's descriptor is open; the result
        // is checked before it is owned.
        let fd = unsafe {
            libc::openat(
                self.handle.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { std::fs::File::from_raw_fd(fd) })
    }

    /// Renames `from` to `to` inside the folder (replacing `to`, link or not).
    fn rename(&self, from: &std::ffi::OsStr, to: &std::ffi::OsStr) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let (from, to) = (c_name(from)?, c_name(to)?);
        let fd = self.handle.as_raw_fd();
        // SAFETY: valid C strings and an open descriptor.
        if unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes `name` from the folder (a link itself, never its target).
    fn unlink(&self, name: &std::ffi::OsStr) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let name = c_name(name)?;
        // SAFETY: a valid C string and an open descriptor.
        if unsafe { libc::unlinkat(self.handle.as_raw_fd(), name.as_ptr(), 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes the folder's entries (a rename) durable.
    fn sync(&self) -> std::io::Result<()> {
        self.handle.sync_all()
    }
}

/// A file name as C wants it; a name with a NUL byte cannot be a token file's.
fn c_name(name: &std::ffi::OsStr) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in a file name"))
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why `path` (a `what`) could not be opened; a link gets a message of its own.
fn refusal(path: &Path, what: &str, err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ELOOP) => format!(
            "refusing the OAuth {what} {}: it is a symbolic link (token files are never opened \
             through one)",
            path.display()
        ),
        _ => format!("cannot open the OAuth {what} {}: {err}", path.display()),
    }
}

/// Checks, on the open handle, that `file` is a regular file of this user's.
fn check_owned_regular(file: &std::fs::File, path: &Path, what: &str) -> Result<(), String> {
    let meta = file
        .metadata()
        .map_err(|err| format!("cannot inspect {}: {err}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "refusing the OAuth {what} {}: it is not a regular file",
            path.display()
        ));
    }
    if meta.uid() != effective_uid() {
        return Err(format!(
            "refusing the OAuth {what} {}: it belongs to another user (uid {})",
            path.display(),
            meta.uid()
        ));
    }
    Ok(())
}

/// A token file is this user's regular file; one that others could read (copied in, or
/// made before a umask change) is made private, on its handle, before its tokens are used.
fn check_token_file(file: &std::fs::File, path: &Path) -> Result<(), String> {
    check_owned_regular(file, path, "token file")?;
    let mode = file.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
    if mode & 0o077 != 0 {
        tracing::warn!(
            "{} was readable by other users; setting mode 0600",
            path.display()
        );
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|err| format!("cannot make {} private: {err}", path.display()))?;
    }
    Ok(())
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
        let dir = self
            .dir()
            .map_err(AuthError::CredentialStoreError)?
            .to_path_buf();
        let name = self.lock_name();
        let across_processes = tokio::task::spawn_blocking(move || lock_file(&dir, &name))
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
