//! Path confinement: every path a tool touches must resolve inside the base directory.
//!
//! # The guarantee
//!
//! A [`Confinement`] is built from a base directory, which it canonicalizes once. Paths are
//! checked twice:
//!
//! 1. **Up front**, [`Confinement::resolve`] turns a model-supplied path (relative to the base
//!    or absolute) into an absolute path with every symlink and `..` resolved, and refuses it
//!    with "path is outside the base directory" unless the result lies inside the base. This
//!    gives the model a clear message before anything happens.
//! 2. **At use time**, every file operation goes through a *verified directory handle*:
//!    [`Confinement::open_dir`] opens the parent directory and then asks the kernel where that
//!    handle really points (`/proc/self/fd` on Linux; elsewhere by comparing the handle's
//!    device and inode with those of the canonicalized path). The file itself is then opened,
//!    created, renamed or inspected *relative to that handle* (`openat`, `renameat`, `statat`)
//!    with `O_NOFOLLOW`, so the last component is never followed as a symlink either.
//!
//! So a directory or file swapped for a symlink between the check and the use cannot redirect
//! the operation outside the base: the swapped directory fails verification, and a swapped
//! final component fails `O_NOFOLLOW` (the operation then re-resolves the path once and
//! reports "path is outside the base directory" if it now leaves the base).
//!
//! # Limits
//!
//! - **Hard links**: a hard link inside the base to a file outside it is indistinguishable
//!   from an ordinary file, and is read like one. (Writes replace the link with a new file by
//!   `rename`, so they never write through it.) Do not let untrusted parties create hard links
//!   in the base directory.
//! - **Mount points**: a file system mounted inside the base is treated as inside.
//! - **Directory walks** (Glob, Grep) start at a checked directory and never follow symlinks
//!   below it, but a directory swapped *during* a long walk may expose the names (not the
//!   contents followed through symlinks) of the files it now points to. They never write.
//! - This is a guard against a confused or misled model, not a sandbox for hostile code:
//!   a process that can run commands (the Bash tool) is not confined by it.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// Why a path was refused or could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path (after resolving symlinks and `..`) leaves the base directory.
    #[error("path is outside the base directory: {path}")]
    OutsideBase {
        /// The path as the caller gave it.
        path: String,
    },
    /// The path is empty or otherwise unusable.
    #[error("invalid path {path:?}: {reason}")]
    Invalid {
        /// The path as the caller gave it.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An I/O error while resolving or opening.
    #[error("{path}: {source}")]
    Io {
        /// The path being worked on, relative to the base where possible.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl PathError {
    /// Whether the error means "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        matches!(self, PathError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// A base directory and the rules for staying inside it. Cheap to clone.
#[derive(Clone)]
pub struct Confinement {
    base: PathBuf,
}

impl fmt::Debug for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Confinement")
            .field("base", &self.base)
            .finish()
    }
}

impl Confinement {
    /// Confines to `base`, which must be an existing directory; it is canonicalized now.
    pub fn new(base: impl AsRef<Path>) -> io::Result<Self> {
        let base = std::fs::canonicalize(base.as_ref())?;
        if !base.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", base.display()),
            ));
        }
        Ok(Self { base })
    }

    /// The canonical base directory.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Whether an absolute, symlink-free path lies inside the base (or is the base).
    pub fn contains(&self, resolved: &Path) -> bool {
        resolved.starts_with(&self.base)
    }

    /// `resolved` relative to the base, for display ("." for the base itself).
    pub fn display_path(&self, resolved: &Path) -> String {
        match resolved.strip_prefix(&self.base) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => resolved.to_string_lossy().into_owned(),
        }
    }

    /// Resolves a caller's path (relative to the base, or absolute) to an absolute path with
    /// symlinks and `..` resolved, refusing anything outside the base. The path need not
    /// exist: its longest existing ancestor is canonicalized and the rest appended.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        if path.is_empty() {
            return Err(PathError::Invalid {
                path: path.to_string(),
                reason: "the path is empty",
            });
        }
        if path.contains('\0') {
            return Err(PathError::Invalid {
                path: path.to_string(),
                reason: "the path contains a NUL byte",
            });
        }
        let joined = self.base.join(path);
        let resolved = canonicalize_allowing_missing(&joined).map_err(|source| PathError::Io {
            path: path.to_string(),
            source,
        })?;
        if self.contains(&resolved) {
            Ok(resolved)
        } else {
            Err(PathError::OutsideBase {
                path: path.to_string(),
            })
        }
    }

    /// Opens the directory `dir` and verifies, on the open handle, that it lies inside the
    /// base. File operations relative to the returned handle cannot leave the base through a
    /// symlink swapped into `dir`'s path.
    pub fn open_dir(&self, dir: &Path) -> Result<OwnedFd, PathError> {
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| self.io_error(dir, errno.into()))?;
        self.verify_dir_handle(&fd, dir)?;
        Ok(fd)
    }

    /// Opens (creating missing directories as needed) the directory `dir`, verified as in
    /// [`Confinement::open_dir`]. Each missing directory is created relative to the verified
    /// handle of its parent.
    pub fn open_or_create_dir(&self, dir: &Path) -> Result<OwnedFd, PathError> {
        match self.open_dir(dir) {
            Ok(fd) => Ok(fd),
            Err(err) if err.is_not_found() => {
                let (parent, name) = split_parent(dir).ok_or_else(|| PathError::OutsideBase {
                    path: dir.to_string_lossy().into_owned(),
                })?;
                if !self.contains(parent) {
                    return Err(PathError::OutsideBase {
                        path: self.display_path(dir),
                    });
                }
                let parent_fd = self.open_or_create_dir(parent)?;
                match rustix::fs::mkdirat(&parent_fd, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) => {}
                    Err(rustix::io::Errno::EXIST) => {}
                    Err(errno) => return Err(self.io_error(dir, errno.into())),
                }
                let fd = rustix::fs::openat(
                    &parent_fd,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|errno| self.io_error(dir, errno.into()))?;
                Ok(fd)
            }
            Err(err) => Err(err),
        }
    }

    /// Checks that an open directory handle points inside the base.
    fn verify_dir_handle(&self, fd: &OwnedFd, opened_as: &Path) -> Result<(), PathError> {
        if let Some(real) = real_path_of(fd) {
            return if self.contains(&real) {
                Ok(())
            } else {
                Err(PathError::OutsideBase {
                    path: self.display_path(opened_as),
                })
            };
        }
        // No /proc: compare the handle's identity with the canonical path's.
        let canonical =
            std::fs::canonicalize(opened_as).map_err(|e| self.io_error(opened_as, e))?;
        let outside = || PathError::OutsideBase {
            path: self.display_path(opened_as),
        };
        if !self.contains(&canonical) {
            return Err(outside());
        }
        let by_path =
            rustix::fs::stat(&canonical).map_err(|e| self.io_error(opened_as, e.into()))?;
        let by_handle = rustix::fs::fstat(fd).map_err(|e| self.io_error(opened_as, e.into()))?;
        if by_path.st_dev == by_handle.st_dev && by_path.st_ino == by_handle.st_ino {
            Ok(())
        } else {
            Err(outside())
        }
    }

    /// An I/O error naming `path` relative to the base.
    pub(crate) fn io_error(&self, path: &Path, source: io::Error) -> PathError {
        PathError::Io {
            path: self.display_path(path),
            source,
        }
    }
}

/// Where an open handle really points, when the platform can say (Linux `/proc/self/fd`).
fn real_path_of(fd: &OwnedFd) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let link = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
        let real = std::fs::read_link(link).ok()?;
        // A removed directory reads as "<path> (deleted)"; treat it as unknown.
        if real.is_absolute() && !real.to_string_lossy().ends_with(" (deleted)") {
            return Some(real);
        }
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        None
    }
}

/// Splits an absolute path into its parent and final name (`None` for `/` or `..` endings).
pub(crate) fn split_parent(path: &Path) -> Option<(&Path, &OsStr)> {
    let name = path.file_name()?;
    let parent = path.parent()?;
    Some((parent, name))
}

/// Resolves `path` component by component: each existing prefix is canonicalized (so
/// symlinks are followed where they really are), and once a component is missing the rest
/// is appended lexically (missing directories cannot be symlinks, so that is exact).
fn canonicalize_allowing_missing(path: &Path) -> io::Result<PathBuf> {
    resolve_with_depth(path, 0)
}

/// How many dangling symlinks may chain before resolution gives up (as the kernel's ELOOP).
const MAX_SYMLINK_DEPTH: usize = 40;

fn resolve_with_depth(path: &Path, depth: usize) -> io::Result<PathBuf> {
    if depth > MAX_SYMLINK_DEPTH {
        return Err(io::Error::other("too many levels of symbolic links"));
    }
    let mut real = PathBuf::new();
    let mut missing = false;
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => real.push(component.as_os_str()),
            Component::CurDir => {}
            // `real` is symlink-free, so its lexical parent is its physical parent.
            Component::ParentDir => {
                real.pop();
            }
            Component::Normal(name) => {
                let candidate = real.join(name);
                if missing {
                    real = candidate;
                    continue;
                }
                match std::fs::symlink_metadata(&candidate) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        match std::fs::canonicalize(&candidate) {
                            Ok(target) => real = target,
                            // A dangling link: resolve where it points, so that a link to a
                            // missing file outside the base is seen as outside.
                            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                                let target = std::fs::read_link(&candidate)?;
                                real = resolve_with_depth(&real.join(target), depth + 1)?;
                                missing = !real.exists();
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(_) => real = std::fs::canonicalize(&candidate)?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        missing = true;
                        real = candidate;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_paths_resolve_lexically_below_their_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confinement::new(dir.path()).unwrap();
        let r = c.resolve("a/b/../c.txt").unwrap();
        assert_eq!(r, c.base().join("a/c.txt"));
        assert!(matches!(
            c.resolve("a/../../x"),
            Err(PathError::OutsideBase { .. })
        ));
    }

    #[test]
    fn empty_paths_are_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confinement::new(dir.path()).unwrap();
        assert!(matches!(c.resolve(""), Err(PathError::Invalid { .. })));
    }
}
