//! [`LocalFileOps`]: the local file system, every file opened beneath a handle of the base
//! directory (see [`crate::confine`] for the guarantee and its limits).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use rustix::fs::{Access, AtFlags, FileType, Mode, OFlags};

use super::{DirEntry, FileContents, FileKind, FileOps, FileStat, FsError, WalkOptions};
use crate::confine::Confinement;

/// The local file system below a base directory.
///
/// Blocking system calls run on tokio's blocking pool, so the tools stay responsive.
///
/// ```
/// use toolbelt_builtin::fs::{FileOps, LocalFileOps};
///
/// let dir = tempfile::tempdir()?;
/// let ops = LocalFileOps::new(dir.path())?;
/// assert!(ops.resolve("../elsewhere").is_err());
/// assert!(ops.resolve("notes/todo.md").is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct LocalFileOps {
    confinement: Confinement,
}

impl LocalFileOps {
    /// Confines the file tools to `base`, an existing directory.
    pub fn new(base: impl AsRef<Path>) -> io::Result<Self> {
        Ok(Self {
            confinement: Confinement::new(base)?,
        })
    }

    /// Uses an existing confinement (for tests that pick its resolver, see
    /// [`Confinement::with_resolver`]).
    #[doc(hidden)]
    pub fn with_confinement(confinement: Confinement) -> Self {
        Self { confinement }
    }

    /// The confinement rules in use.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, FsError>
    where
        T: Send + 'static,
        F: FnOnce(&Confinement) -> Result<T, FsError> + Send + 'static,
    {
        let confinement = self.confinement.clone();
        tokio::task::spawn_blocking(move || f(&confinement))
            .await
            .map_err(|e| FsError::Other {
                path: String::new(),
                message: format!("file operation did not complete: {e}"),
            })?
    }
}

#[async_trait]
impl FileOps for LocalFileOps {
    fn base_dir(&self) -> &Path {
        self.confinement.base()
    }

    fn resolve(&self, path: &str) -> Result<PathBuf, FsError> {
        Ok(self.confinement.resolve(path)?)
    }

    fn display_path(&self, resolved: &Path) -> String {
        self.confinement.display_path(resolved)
    }

    async fn stat(&self, path: &Path) -> Result<Option<FileStat>, FsError> {
        let path = path.to_path_buf();
        self.blocking(move |c| {
            // O_PATH: metadata only, nothing is read and no device is opened.
            match c.open(&path, OFlags::PATH) {
                Ok(fd) => {
                    let st = rustix::fs::fstat(&fd).map_err(|e| c.io_error(&path, e.into()))?;
                    Ok(Some(stat_from(&st)))
                }
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    async fn read(&self, path: &Path, max_size: Option<u64>) -> Result<FileContents, FsError> {
        let path = path.to_path_buf();
        self.blocking(move |c| {
            // NONBLOCK: opening a FIFO must not hang; regular files ignore it.
            let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK;
            let fd = match c.open(&path, flags) {
                Ok(fd) => fd,
                Err(e) if e.is_not_found() => {
                    return Err(FsError::NotFound {
                        path: c.display_path(&path),
                    });
                }
                Err(e) => return Err(e.into()),
            };
            let st = rustix::fs::fstat(&fd).map_err(|e| c.io_error(&path, e.into()))?;
            let stat = stat_from(&st);
            match stat.kind {
                FileKind::File => {}
                FileKind::Dir => {
                    return Err(FsError::IsDirectory {
                        path: c.display_path(&path),
                    });
                }
                _ => {
                    return Err(FsError::NotAFile {
                        path: c.display_path(&path),
                    });
                }
            }
            if let Some(max) = max_size
                && stat.size > max
            {
                return Err(FsError::TooLarge {
                    path: c.display_path(&path),
                    size: stat.size,
                    max,
                });
            }
            // The size was checked on this handle, but the file may grow while it is read
            // (or report a size it does not have, as /proc files do): read one byte past the
            // limit at most, and refuse if it came.
            // The reported size only sizes the first allocation (it may be false, or huge
            // for a sparse file read without a limit).
            let mut bytes = Vec::with_capacity(stat.size.min(INITIAL_READ_CAPACITY) as usize);
            let file = File::from(fd);
            match max_size {
                Some(max) => (&file).take(max.saturating_add(1)).read_to_end(&mut bytes),
                None => (&file).read_to_end(&mut bytes),
            }
            .map_err(|e| c.io_error(&path, e))?;
            if let Some(max) = max_size
                && bytes.len() as u64 > max
            {
                let now = rustix::fs::fstat(&file).map_or(0, |st| st.st_size as u64);
                return Err(FsError::TooLarge {
                    path: c.display_path(&path),
                    size: now.max(bytes.len() as u64),
                    max,
                });
            }
            // What was read is the file's content now; its size is what was read.
            let stat = FileStat {
                size: bytes.len() as u64,
                ..stat
            };
            Ok(FileContents { bytes, stat })
        })
        .await
    }

    async fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<FileStat, FsError> {
        let path = path.to_path_buf();
        let bytes = bytes.to_vec();
        self.blocking(move |c| {
            let is_directory = || FsError::IsDirectory {
                path: c.display_path(&path),
            };
            // The final name may become a symlink between locating and replacing it; locate
            // it again then (a symlink is followed by the rule, or refused).
            for _ in 0..4 {
                let (dir, name) = c.parent_for_write(&path)?;
                let Some(name) = name else {
                    return Err(is_directory());
                };
                match replace_file(&dir, &name, &bytes) {
                    Ok(stat) => return Ok(stat),
                    Err(Replace::IsDirectory) => return Err(is_directory()),
                    Err(Replace::ReadOnly) => {
                        return Err(FsError::Other {
                            path: c.display_path(&path),
                            message: READ_ONLY.to_string(),
                        });
                    }
                    Err(Replace::BecameSymlink) => continue,
                    Err(Replace::Io(e)) => return Err(c.io_error(&path, e).into()),
                }
            }
            Err(c
                .io_error(&path, io::Error::from(rustix::io::Errno::LOOP))
                .into())
        })
        .await
    }

    async fn remove(&self, path: &Path) -> Result<(), FsError> {
        let path = path.to_path_buf();
        self.blocking(move |c| {
            let shown = || c.display_path(&path);
            // The parent is opened beneath the base (symlinks on the way followed by the
            // rule); the last name is unlinked relative to it, so a final symlink is removed
            // itself and its target, wherever it points, is not touched.
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(FsError::IsDirectory { path: shown() });
            };
            let dir = c.open(parent, OFlags::PATH | OFlags::DIRECTORY)?;
            match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                    return Err(FsError::IsDirectory { path: shown() });
                }
                Ok(_) => {}
                Err(rustix::io::Errno::NOENT) => return Err(FsError::NotFound { path: shown() }),
                Err(e) => return Err(c.io_error(&path, e.into()).into()),
            }
            // Without AT_REMOVEDIR: a directory swapped in since the check is refused too.
            rustix::fs::unlinkat(&dir, name, AtFlags::empty())
                .map_err(|e| FsError::from(c.io_error(&path, e.into())))
        })
        .await
    }

    async fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, FsError> {
        let dir = dir.to_path_buf();
        self.blocking(move |c| {
            let fd = c.open(&dir, OFlags::RDONLY | OFlags::DIRECTORY)?;
            let entries = rustix::fs::Dir::new(fd).map_err(|e| c.io_error(&dir, e.into()))?;
            let mut out = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| c.io_error(&dir, e.into()))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == "." || name == ".." {
                    continue;
                }
                let kind = kind_from(entry.file_type());
                out.push(DirEntry { name, kind });
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
        .await
    }

    async fn fingerprint(&self, path: &Path) -> Option<String> {
        let path = path.to_path_buf();
        self.blocking(move |c| Ok(super::fingerprint::local_fingerprint(c, &path)))
            .await
            .ok()
            .flatten()
    }

    async fn walk(&self, root: &Path, options: WalkOptions) -> Result<Vec<PathBuf>, FsError> {
        let root = root.to_path_buf();
        self.blocking(move |c| {
            let other = |message: String| FsError::Other {
                path: c.display_path(&root),
                message,
            };
            let global = std::sync::Arc::new(crate::search::rules::global_excludes());
            let filters = crate::search::rules::Filters::new(
                c.base(),
                options.include_ignored,
                None,
                &[],
                None,
                global,
            )
            .map_err(|e| other(e.to_string()))?;
            Ok(crate::search::walk::files(c, &root, &filters)?)
        })
        .await
    }
}

/// The most a read allocates up front from the size the file reports.
const INITIAL_READ_CAPACITY: u64 = 64 * 1024 * 1024;

/// What a refused write says: the file's permission bits grant nobody write access (even
/// root, who could override them, respects them).
const READ_ONLY: &str = "file is read-only";

/// Why [`replace_file`] did not replace.
enum Replace {
    IsDirectory,
    ReadOnly,
    /// The name turned into a symlink since it was located.
    BecameSymlink,
    Io(io::Error),
}

impl From<rustix::io::Errno> for Replace {
    fn from(errno: rustix::io::Errno) -> Self {
        Replace::Io(errno.into())
    }
}

impl From<io::Error> for Replace {
    fn from(e: io::Error) -> Self {
        Replace::Io(e)
    }
}

/// Writes `bytes` to a fresh temporary file next to `name` and renames it over `name`, all
/// relative to the confined directory handle `dir`. An existing file keeps its owner (where
/// the process may set it) and its permission bits without setuid and setgid; a file whose
/// bits grant no write access, or that this process may not write, is refused. The
/// temporary file is removed on every failure.
fn replace_file(dir: &OwnedFd, name: &OsStr, bytes: &[u8]) -> Result<FileStat, Replace> {
    let existing = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => return Err(Replace::BecameSymlink),
            FileType::Directory => return Err(Replace::IsDirectory),
            _ => Some(st),
        },
        Err(rustix::io::Errno::NOENT) => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(st) = &existing {
        let no_write_bits = st.st_mode & 0o222 == 0;
        let denied = rustix::fs::accessat(dir, name, Access::WRITE_OK, AtFlags::EACCESS).is_err();
        if no_write_bits || denied {
            return Err(Replace::ReadOnly);
        }
    }
    // Kept bits: never setuid or setgid (a root process would otherwise leave a setuid file
    // with content a model chose).
    let kept_mode = existing.as_ref().map(|st| st.st_mode & 0o1777);
    let temp = temp_name(name);
    let fd = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(kept_mode.unwrap_or(0o666)),
    )?;
    let result = (|| -> io::Result<()> {
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        if let Some(st) = &existing {
            // Keep the owner where allowed (root replacing a user's file); a change of owner
            // clears setuid bits, so the mode is set after it.
            let _ = rustix::fs::fchown(
                &file,
                Some(rustix::fs::Uid::from_raw(st.st_uid)),
                Some(rustix::fs::Gid::from_raw(st.st_gid)),
            );
        }
        // The umask applied at creation; set the kept bits exactly.
        if let Some(mode) = kept_mode {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        }
        file.sync_all()?;
        drop(file);
        rustix::fs::renameat(dir, temp.as_str(), dir, name)?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return Err(e.into());
    }
    // Make the rename itself durable (the handle is O_PATH, so open the directory for it);
    // a failure here does not undo the write.
    if let Ok(readable) = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let _ = rustix::fs::fsync(&readable);
    }
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(stat_from(&st))
}

/// A temporary name in the same directory, unique within this process and across processes.
fn temp_name(name: &OsStr) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let lossy = name.to_string_lossy();
    // Keep the whole name under the usual 255-byte limit.
    let mut stem: String = String::new();
    for ch in lossy.chars() {
        if stem.len() + ch.len_utf8() > 120 {
            break;
        }
        stem.push(ch);
    }
    format!(".{stem}.{}.{n}.toolbelt-tmp", std::process::id())
}

fn kind_from(file_type: FileType) -> FileKind {
    match file_type {
        FileType::RegularFile => FileKind::File,
        FileType::Directory => FileKind::Dir,
        FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

fn stat_from(st: &rustix::fs::Stat) -> FileStat {
    let modified = if st.st_mtime >= 0 {
        Some(SystemTime::UNIX_EPOCH + Duration::new(st.st_mtime as u64, st.st_mtime_nsec as u32))
    } else {
        None
    };
    FileStat {
        kind: kind_from(FileType::from_raw_mode(st.st_mode)),
        size: st.st_size as u64,
        modified,
        mode: st.st_mode & 0o7777,
        owner: Some(st.st_uid),
    }
}
