//! [`LocalFileOps`]: the local file system, confined to a base directory with checks at use
//! time (see [`crate::confine`] for the guarantee and its limits).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{DirEntry, FileContents, FileKind, FileOps, FileStat, FsError, WalkOptions};
use crate::confine::{Confinement, PathError, split_parent};

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
            if path == c.base() {
                let fd = c.open_dir(&path)?;
                let st = rustix::fs::fstat(&fd).map_err(|e| c.io_error(&path, e.into()))?;
                return Ok(Some(stat_from(&st)));
            }
            let found = at_path(c, &path, false, |dir, name| {
                let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
                if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                    return Err(loop_error());
                }
                Ok(stat_from(&st))
            });
            match found {
                Ok(stat) => Ok(Some(stat)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await
    }

    async fn read(&self, path: &Path, max_size: Option<u64>) -> Result<FileContents, FsError> {
        let path = path.to_path_buf();
        self.blocking(move |c| {
            if path == c.base() {
                return Err(FsError::IsDirectory {
                    path: c.display_path(&path),
                });
            }
            let fd = at_path(c, &path, false, |dir, name| {
                // NONBLOCK: opening a FIFO must not hang; regular files ignore it.
                let flags = OFlags::RDONLY
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC
                    | OFlags::NOCTTY
                    | OFlags::NONBLOCK;
                Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
            })?;
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
            let mut bytes = Vec::with_capacity(stat.size as usize);
            File::from(fd)
                .read_to_end(&mut bytes)
                .map_err(|e| c.io_error(&path, e))?;
            Ok(FileContents { bytes, stat })
        })
        .await
    }

    async fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<FileStat, FsError> {
        let path = path.to_path_buf();
        let bytes = bytes.to_vec();
        self.blocking(move |c| {
            if path == c.base() {
                return Err(FsError::IsDirectory {
                    path: c.display_path(&path),
                });
            }
            let written = at_path(c, &path, true, |dir, name| replace_file(dir, name, &bytes));
            match written {
                Err(FsError::Other { message, .. }) if message == IS_DIRECTORY => {
                    Err(FsError::IsDirectory {
                        path: c.display_path(&path),
                    })
                }
                other => other,
            }
        })
        .await
    }

    async fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, FsError> {
        let dir = dir.to_path_buf();
        self.blocking(move |c| {
            let fd = c.open_dir(&dir)?;
            let entries =
                rustix::fs::Dir::read_from(&fd).map_err(|e| c.io_error(&dir, e.into()))?;
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

    async fn walk(&self, root: &Path, options: WalkOptions) -> Result<Vec<PathBuf>, FsError> {
        let root = root.to_path_buf();
        self.blocking(move |c| {
            // Verify the root on a handle before walking it.
            drop(c.open_dir(&root)?);
            let mut files = Vec::new();
            for entry in crate::search::rules::walk_builder(&root, options.include_ignored).build()
            {
                let entry = entry.map_err(|e| FsError::Other {
                    path: c.display_path(&root),
                    message: e.to_string(),
                })?;
                if entry.file_type().is_some_and(|t| t.is_file()) {
                    files.push(entry.into_path());
                }
            }
            files.sort();
            Ok(files)
        })
        .await
    }
}

/// Marker message for "the target is a directory" inside [`replace_file`].
const IS_DIRECTORY: &str = "is a directory";

/// Writes `bytes` to a fresh temporary file next to `name` and renames it over `name`, all
/// relative to the verified directory handle `dir`.
fn replace_file(dir: &OwnedFd, name: &OsStr, bytes: &[u8]) -> io::Result<FileStat> {
    let existing_mode = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => return Err(loop_error()),
            FileType::Directory => return Err(io::Error::other(IS_DIRECTORY)),
            _ => Some(st.st_mode & 0o7777),
        },
        Err(rustix::io::Errno::NOENT) => None,
        Err(e) => return Err(e.into()),
    };
    let temp = temp_name(name);
    let create_mode = Mode::from_raw_mode(existing_mode.unwrap_or(0o666));
    let fd = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        create_mode,
    )?;
    let result = (|| -> io::Result<()> {
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        // The umask applied at creation; set the old file's bits exactly.
        if let Some(mode) = existing_mode {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        }
        file.sync_all()?;
        drop(file);
        rustix::fs::renameat(dir, temp.as_str(), dir, name)?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return Err(e);
    }
    // Make the rename itself durable; a failure here does not undo the write.
    let _ = rustix::fs::fsync(dir);
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

fn loop_error() -> io::Error {
    io::Error::from(rustix::io::Errno::LOOP)
}

/// Runs `op` on `path`'s final name relative to a verified handle of its parent. When the
/// final name turned into a symlink since it was resolved (`ELOOP` under `O_NOFOLLOW`), the
/// path is resolved again, once: an escape is then refused as outside the base.
fn at_path<T>(
    c: &Confinement,
    path: &Path,
    create_parents: bool,
    op: impl Fn(&OwnedFd, &OsStr) -> io::Result<T>,
) -> Result<T, FsError> {
    let mut current = path.to_path_buf();
    for attempt in 0..2 {
        let (parent, name) = split_parent(&current).ok_or_else(|| PathError::Invalid {
            path: c.display_path(&current),
            reason: "the path has no file name",
        })?;
        let dir = if create_parents {
            c.open_or_create_dir(parent)?
        } else {
            match c.open_dir(parent) {
                Ok(dir) => dir,
                Err(e) if e.is_not_found() || is_not_dir(&e) => {
                    return Err(FsError::NotFound {
                        path: c.display_path(path),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        };
        match op(&dir, name) {
            Ok(value) => return Ok(value),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                if attempt == 0 {
                    current = c.resolve(&current.to_string_lossy())?;
                    continue;
                }
                return Err(PathError::OutsideBase {
                    path: c.display_path(path),
                }
                .into());
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(FsError::NotFound {
                    path: c.display_path(path),
                });
            }
            Err(e) if e.to_string() == IS_DIRECTORY => {
                return Err(FsError::Other {
                    path: c.display_path(path),
                    message: IS_DIRECTORY.to_string(),
                });
            }
            Err(e) => return Err(c.io_error(path, e).into()),
        }
    }
    Err(PathError::OutsideBase {
        path: c.display_path(path),
    }
    .into())
}

fn is_not_dir(e: &PathError) -> bool {
    matches!(e, PathError::Io { source, .. } if source.kind() == io::ErrorKind::NotADirectory)
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
    }
}
