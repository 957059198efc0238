//! Path confinement: every file a tool touches is opened beneath a handle of the base
//! directory, and the kernel (or, where it cannot, a resolver that never lets the kernel follow
//! a symlink) checks that it stays there.
//!
//! # The guarantee
//!
//! A [`Confinement`] opens its base directory once and keeps the handle. Every later access
//! goes through that handle, never through a path the kernel resolves from `/`:
//!
//! - **Linux 5.6 and newer**: a file is opened with `openat2(base, path,
//!   RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`. The kernel resolves every component, follows
//!   symlinks, and fails the open if any step (a `..`, a relative or absolute symlink, a
//!   `/proc` magic link) would leave the base, with its own checks against concurrent renames.
//!   A path swapped for a symlink at any moment cannot redirect the open outside.
//! - **Where `openat2` is missing** (older kernels, seccomp filters that refuse it), and when
//!   the kernel refused a path, the path is resolved in user space, still race-free: each
//!   component is looked up with `fstatat`/`openat(O_PATH | O_NOFOLLOW)` relative to the
//!   handle of its parent, symlinks are read with `readlinkat` and their targets resolved by
//!   the same walk, and `..` returns to the handle the walk came from (never above the base).
//!   The final component is opened relative to its parent's handle with `O_NOFOLLOW`.
//!
//! **One rule for symlinks**, in every tool and both search backends: a symlink whose target
//! is inside the base is followed; one whose target is outside is refused ("path is outside
//! the base directory") by tools that take one path and skipped by the walks of Glob and Grep,
//! whose result says how many were skipped. An *absolute* symlink counts as inside when its
//! target, taken literally, starts with the base directory (canonical, or as it was given);
//! the rest of the target is then resolved beneath the base like any path. (`RESOLVE_BENEATH`
//! refuses absolute symlinks outright; such paths take the user-space resolver, which applies
//! this rule.) Absolute *paths* given by a caller follow the same literal rule.
//!
//! `..` is physical, as the kernel does it: `x/../lnk` first enters `x`, and when `x` does not
//! exist the path fails with "No such file or directory" (no lexical shortcut), whatever
//! follows. A trailing slash requires a directory: `file.txt/` fails with "Not a directory".
//!
//! A chain of symlinks is followed 40 links deep, as by the kernel; the 41st is "Too many
//! levels of symbolic links". `/proc` magic links (`/proc/PID/fd/N`, `cwd`, `root`, `exe`)
//! are never jumped through: the kernel refuses them (`RESOLVE_NO_MAGICLINKS`) and the
//! user-space walk reads them as the text they show, by the rule above. Opening never
//! blocks on a FIFO or reads a device: the tools open with `O_NONBLOCK` and use regular files
//! only (see [`crate::fs::LocalFileOps`] and the search walk).
//!
//! [`Confinement::resolve`] gives a model a clear message before anything happens and the
//! physical path the tools show; the confinement itself is the open at use time, so a path
//! that changed between the two is checked again where it is used.
//!
//! # Limits
//!
//! - **Hard links**: a hard link inside the base to a file outside it is indistinguishable
//!   from an ordinary file, and is read like one. (Writes replace the link with a new file by
//!   `rename`, so they never write through it.) Do not let untrusted parties create hard links
//!   in the base directory.
//! - **Mount points**: a file system mounted inside the base is treated as inside.
//! - **Directory renames on the fallback path**: without `openat2`, a directory that a
//!   concurrent process *renames* (not replaces by a symlink) from inside the base to outside
//!   while a path below it is being resolved can expose what that directory itself contains.
//!   `openat2` (Linux 5.6+) detects this; Linux only.
//! - **Ignore files above the base** (`.gitignore` of parent directories, the global git
//!   excludes file) are read by path, as `rg` reads them: they decide which files are skipped,
//!   they are never shown.
//! - This is a guard against a confused or misled model, not a sandbox for hostile code:
//!   a process that can run commands (the Bash tool) is not confined by it.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

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

/// The most symlinks one resolution follows, as the kernel's limit (then `ELOOP`).
const MAX_SYMLINKS: usize = 40;

/// Whether the kernel has `openat2` (cleared for the whole process on the first `ENOSYS`).
static KERNEL_BENEATH: AtomicBool = AtomicBool::new(true);

/// Which resolver a [`Confinement`] opens paths with.
///
/// For tests of the fallback only: users get [`Resolver::Kernel`] from [`Confinement::new`],
/// which falls back by itself where the kernel lacks `openat2`.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, with the user-space walk deciding
    /// what the kernel refuses (absolute symlinks, escapes).
    Kernel,
    /// The user-space walk alone, as on kernels without `openat2`.
    UserSpace,
}

/// Finds out once per process whether `openat2` works, so [`Confinement::resolver`] is true
/// from the start. A seccomp filter may refuse it with `EPERM` rather than `ENOSYS`: the
/// user-space walk is used then too (the same answer on every later call would otherwise
/// make every open fail).
fn probe_kernel_beneath(base_fd: &OwnedFd) {
    static PROBE: std::sync::Once = std::sync::Once::new();
    PROBE.call_once(|| {
        let probe = rustix::fs::openat2(
            base_fd,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        );
        if let Err(Errno::NOSYS | Errno::PERM) = probe {
            KERNEL_BENEATH.store(false, Ordering::Relaxed);
        }
    });
}

/// A base directory and the rules for staying inside it. Cheap to clone (the base handle is
/// shared).
#[derive(Clone)]
pub struct Confinement {
    inner: Arc<Inner>,
}

struct Inner {
    /// The canonical base directory.
    base: PathBuf,
    /// The base as the caller named it (absolute), also accepted as a prefix.
    given: PathBuf,
    /// The base directory's handle; every access starts here.
    base_fd: OwnedFd,
    /// Whether to try `openat2` first (off only in tests of the fallback).
    kernel: bool,
}

impl fmt::Debug for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Confinement")
            .field("base", &self.inner.base)
            .finish()
    }
}

/// How a resolution treats the path it is given.
#[derive(Debug, Clone, Copy, Default)]
struct Walk {
    /// Follow a symlink in the final component (by the rule).
    follow_last: bool,
    /// The path ended in `/`: the final object must be a directory.
    must_be_dir: bool,
    /// Create missing directories on the way (for writes).
    create_dirs: bool,
}

/// Where a resolution ended.
struct Resolved {
    /// Handles of the directories from below the base down to the parent of `last`.
    dirs: Vec<(OwnedFd, OsString)>,
    last: Last,
}

enum Last {
    /// The path names the directory on top of `dirs` (or the base when `dirs` is empty).
    Dir,
    /// The final component exists (a symlink only when it was not to be followed).
    Existing { name: OsString },
    /// The final component, and the components after it, do not exist.
    Missing { name: OsString, rest: Vec<OsString> },
}

/// A failed resolution, before it is named for the caller.
enum Refusal {
    Outside,
    Io(io::Error),
}

impl From<Errno> for Refusal {
    fn from(errno: Errno) -> Self {
        Refusal::Io(errno.into())
    }
}

impl Confinement {
    /// Confines to `base`, which must be an existing directory; it is canonicalized and
    /// opened now.
    pub fn new(base: impl AsRef<Path>) -> io::Result<Self> {
        Self::with_kernel(base.as_ref(), true)
    }

    /// Confines to `base` with the given resolver. For tests that must run the user-space
    /// resolver on a kernel that has `openat2`; check [`Confinement::resolver`] to see which
    /// one is in effect.
    #[doc(hidden)]
    pub fn with_resolver(base: impl AsRef<Path>, resolver: Resolver) -> io::Result<Self> {
        Self::with_kernel(base.as_ref(), resolver == Resolver::Kernel)
    }

    /// The resolver in effect: [`Resolver::Kernel`] only when asked for and the kernel has
    /// `openat2` (as far as this process has seen).
    #[doc(hidden)]
    pub fn resolver(&self) -> Resolver {
        if self.inner.kernel && KERNEL_BENEATH.load(Ordering::Relaxed) {
            Resolver::Kernel
        } else {
            Resolver::UserSpace
        }
    }

    fn with_kernel(base: &Path, kernel: bool) -> io::Result<Self> {
        let given = std::path::absolute(base)?;
        let canonical = std::fs::canonicalize(base)?;
        let base_fd = rustix::fs::open(
            &canonical,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| match errno {
            Errno::NOTDIR => io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", canonical.display()),
            ),
            other => other.into(),
        })?;
        if kernel {
            probe_kernel_beneath(&base_fd);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                base: canonical,
                given,
                base_fd,
                kernel,
            }),
        })
    }

    /// The canonical base directory.
    pub fn base(&self) -> &Path {
        &self.inner.base
    }

    /// Whether an absolute, symlink-free path lies inside the base (or is the base).
    pub fn contains(&self, resolved: &Path) -> bool {
        resolved.starts_with(&self.inner.base)
    }

    /// `resolved` relative to the base, for display ("." for the base itself).
    pub fn display_path(&self, resolved: &Path) -> String {
        match resolved.strip_prefix(&self.inner.base) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => resolved.to_string_lossy().into_owned(),
        }
    }

    /// Resolves a caller's path (relative to the base, or absolute) to the absolute, physical
    /// path it names, refusing anything outside the base. The final component need not
    /// exist, nor directories below it (they resolve literally), but a `..` after a missing
    /// directory is "No such file or directory", as for the kernel.
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
        let given = Path::new(path);
        let named = |refusal| self.refusal(path, refusal);
        let rel = self.relative(given).map_err(named)?;
        let walk = Walk {
            follow_last: true,
            must_be_dir: ends_in_slash(given),
            create_dirs: false,
        };
        let resolved = self.walk(rel, walk).map_err(named)?;
        let mut real = self.inner.base.clone();
        for (_, name) in &resolved.dirs {
            real.push(name);
        }
        match resolved.last {
            Last::Dir => {}
            Last::Existing { name, .. } => real.push(name),
            Last::Missing { name, rest } => {
                real.push(name);
                real.extend(rest);
            }
        }
        Ok(real)
    }

    /// Opens `path` (absolute inside the base, or relative to it) beneath the base with
    /// `flags`, following symlinks by the rule unless `flags` has `NOFOLLOW`. This is the
    /// confinement: the kernel's `RESOLVE_BENEATH` where it has it, the user-space walk
    /// otherwise.
    pub(crate) fn open(&self, path: &Path, flags: OFlags) -> Result<OwnedFd, PathError> {
        let rel = self.relative(path).map_err(|r| self.refusal_at(path, r))?;
        self.open_relative(rel, flags)
            .map_err(|r| self.refusal_at(path, r))
    }

    /// [`Confinement::open`] of a path relative to the base (which must not be absolute).
    fn open_relative(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Refusal> {
        let flags = flags | OFlags::CLOEXEC;
        if self.inner.kernel && KERNEL_BENEATH.load(Ordering::Relaxed) {
            let target: &OsStr = if rel.as_os_str().is_empty() {
                OsStr::new(".")
            } else {
                rel.as_os_str()
            };
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            match rustix::fs::openat2(&self.inner.base_fd, target, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(fd),
                // An escape, an absolute symlink, a symlink where none was to be followed,
                // or a concurrent rename: the walk below decides by the rule.
                Err(Errno::XDEV | Errno::LOOP | Errno::AGAIN) => {}
                Err(Errno::NOSYS) => KERNEL_BENEATH.store(false, Ordering::Relaxed),
                Err(errno) => return Err(errno.into()),
            }
        }
        let walk = Walk {
            follow_last: !flags.contains(OFlags::NOFOLLOW),
            must_be_dir: ends_in_slash(rel),
            create_dirs: false,
        };
        // The final name may turn into a symlink between the walk and the open; walk again
        // then (the open itself never follows it).
        for _ in 0..4 {
            let resolved = self.walk(rel, walk)?;
            let dir = resolved.top(self);
            let opened = match &resolved.last {
                Last::Dir => rustix::fs::openat(dir, ".", flags, Mode::empty()),
                Last::Existing { name, .. } => rustix::fs::openat(
                    dir,
                    name.as_os_str(),
                    flags | OFlags::NOFOLLOW,
                    Mode::empty(),
                ),
                Last::Missing { .. } => Err(Errno::NOENT),
            };
            match opened {
                Err(Errno::LOOP) if walk.follow_last => continue,
                // `O_PATH | O_NOFOLLOW` opens a symlink itself instead of failing with ELOOP:
                // a name swapped for a symlink since the walk must be followed by the rule,
                // not handed back as the link.
                Ok(fd) if walk.follow_last && flags.contains(OFlags::PATH) && is_symlink(&fd) => {
                    continue;
                }
                other => return other.map_err(Refusal::from),
            }
        }
        Err(Errno::LOOP.into())
    }

    /// The directory that holds `path`'s final object, opened beneath the base (creating
    /// missing directories), and that object's name; a final symlink is followed by the
    /// rule. `None` as the name means the path names a directory (the base, or a path
    /// ending in `..`).
    pub(crate) fn parent_for_write(
        &self,
        path: &Path,
    ) -> Result<(OwnedFd, Option<OsString>), PathError> {
        let named = |r| self.refusal_at(path, r);
        let rel = self.relative(path).map_err(named)?;
        let walk = Walk {
            follow_last: true,
            must_be_dir: ends_in_slash(rel),
            create_dirs: true,
        };
        let mut resolved = self.walk(rel, walk).map_err(named)?;
        let name = match resolved.last {
            Last::Dir => None,
            Last::Existing { name, .. } => Some(name),
            Last::Missing { name, rest } if rest.is_empty() => Some(name),
            // `create_dirs` creates every missing directory on the way.
            Last::Missing { .. } => return Err(named(Refusal::Io(Errno::NOENT.into()))),
        };
        let dir = match resolved.dirs.pop() {
            Some((fd, _)) => fd,
            None => rustix::fs::openat(
                &self.inner.base_fd,
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| named(e.into()))?,
        };
        Ok((dir, name))
    }

    /// `path` relative to the base: relative paths as they are, absolute ones when they
    /// start with the base (canonical or as given).
    fn relative<'p>(&self, path: &'p Path) -> Result<&'p Path, Refusal> {
        if path.is_relative() {
            return Ok(path);
        }
        path.strip_prefix(&self.inner.base)
            .or_else(|_| path.strip_prefix(&self.inner.given))
            .map_err(|_| Refusal::Outside)
    }

    /// Resolves `rel` beneath the base in user space, never letting the kernel follow a
    /// symlink: every lookup is relative to a directory handle reached from the base.
    fn walk(&self, rel: &Path, walk: Walk) -> Result<Resolved, Refusal> {
        let mut queue: VecDeque<OsString> = VecDeque::new();
        push_components(&mut queue, rel, false);
        let mut dirs: Vec<(OwnedFd, OsString)> = Vec::new();
        let mut links = 0usize;
        let mut last = Last::Dir;
        while let Some(part) = queue.pop_front() {
            let is_last = queue.is_empty();
            if part == ".." {
                if dirs.pop().is_none() {
                    return Err(Refusal::Outside);
                }
                last = Last::Dir;
                continue;
            }
            let parent = match dirs.last() {
                Some((fd, _)) => fd.as_fd(),
                None => self.inner.base_fd.as_fd(),
            };
            let kind = match rustix::fs::statat(parent, part.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(Errno::NOENT) => {
                    if queue.iter().any(|p| p == "..") {
                        // `..` after a missing directory: the kernel's answer, not a shortcut.
                        return Err(Errno::NOENT.into());
                    }
                    if walk.create_dirs && !is_last {
                        match rustix::fs::mkdirat(
                            parent,
                            part.as_os_str(),
                            Mode::from_raw_mode(0o777),
                        ) {
                            Ok(()) | Err(Errno::EXIST) => {}
                            Err(errno) => return Err(errno.into()),
                        }
                        queue.push_front(part);
                        continue;
                    }
                    if walk.must_be_dir && is_last {
                        return Err(Errno::NOENT.into());
                    }
                    let rest = queue.drain(..).collect();
                    return Ok(Resolved {
                        dirs,
                        last: Last::Missing { name: part, rest },
                    });
                }
                Err(errno) => return Err(errno.into()),
            };
            match kind {
                FileType::Symlink if !is_last || walk.follow_last || walk.must_be_dir => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(Errno::LOOP.into());
                    }
                    let target = match rustix::fs::readlinkat(parent, part.as_os_str(), Vec::new())
                    {
                        Ok(target) => target,
                        // No longer a symlink (swapped since the stat): look at it again. The
                        // count above still bounds a race that never ends.
                        Err(Errno::INVAL | Errno::NOENT) => {
                            queue.push_front(part);
                            continue;
                        }
                        Err(errno) => return Err(errno.into()),
                    };
                    let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                    if target.is_absolute() {
                        let inside = self.relative(&target)?;
                        dirs.clear();
                        push_components(&mut queue, inside, true);
                    } else {
                        push_components(&mut queue, &target, true);
                    }
                    // A link that ends in `/` (or is followed by more components) must name
                    // a directory; the walk checks that when it gets there.
                    if target.as_os_str().is_empty() {
                        return Err(Errno::NOENT.into());
                    }
                }
                FileType::Directory if !is_last => {
                    match rustix::fs::openat(
                        parent,
                        part.as_os_str(),
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        Ok(fd) => dirs.push((fd, part)),
                        // Swapped since the stat: look at it again, counted like a symlink so
                        // a swap that never stops cannot keep the walk going.
                        Err(Errno::LOOP | Errno::NOTDIR | Errno::NOENT) => {
                            links += 1;
                            if links > MAX_SYMLINKS {
                                return Err(Errno::LOOP.into());
                            }
                            queue.push_front(part);
                        }
                        Err(errno) => return Err(errno.into()),
                    }
                }
                FileType::Directory => {
                    last = Last::Existing { name: part };
                }
                _ if !is_last || walk.must_be_dir => return Err(Errno::NOTDIR.into()),
                _ => {
                    last = Last::Existing { name: part };
                }
            }
        }
        Ok(Resolved { dirs, last })
    }

    /// Names a refusal for the caller's path as given.
    fn refusal(&self, path: &str, refusal: Refusal) -> PathError {
        match refusal {
            Refusal::Outside => PathError::OutsideBase {
                path: path.to_string(),
            },
            Refusal::Io(source) => PathError::Io {
                path: path.to_string(),
                source,
            },
        }
    }

    /// Names a refusal for a resolved path, shown relative to the base.
    fn refusal_at(&self, path: &Path, refusal: Refusal) -> PathError {
        self.refusal(&self.display_path(path), refusal)
    }

    /// An I/O error naming `path` relative to the base.
    pub(crate) fn io_error(&self, path: &Path, source: io::Error) -> PathError {
        PathError::Io {
            path: self.display_path(path),
            source,
        }
    }
}

impl Resolved {
    /// The handle of the directory the final component is looked up in.
    fn top<'a>(&'a self, c: &'a Confinement) -> BorrowedFd<'a> {
        match self.dirs.last() {
            Some((fd, _)) => fd.as_fd(),
            None => c.inner.base_fd.as_fd(),
        }
    }
}

/// Whether a handle opened with `O_PATH | O_NOFOLLOW` names a symlink.
fn is_symlink(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

/// Adds `path`'s components to the queue (at the front when `front`, as a symlink's target
/// replaces the link), keeping `..` and dropping `.`.
fn push_components(queue: &mut VecDeque<OsString>, path: &Path, front: bool) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    if front {
        for part in parts.into_iter().rev() {
            queue.push_front(part);
        }
    } else {
        queue.extend(parts);
    }
}

/// Whether a path ends in `/` or `/.`, so must name a directory (`Path::components` drops
/// both).
fn ends_in_slash(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    bytes.len() > 1 && (bytes.ends_with(b"/") || bytes.ends_with(b"/."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// `root/base` with `sub/ok.txt`, and `root/outside/secret.txt`.
    fn layout() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("base");
        std::fs::create_dir_all(base.join("sub")).unwrap();
        std::fs::create_dir_all(root.path().join("outside")).unwrap();
        std::fs::write(root.path().join("outside/secret.txt"), "secret").unwrap();
        std::fs::write(base.join("sub/ok.txt"), "fine").unwrap();
        std::fs::write(base.join("file.txt"), "file").unwrap();
        symlink("../outside", base.join("lnk")).unwrap();
        symlink("sub", base.join("alias")).unwrap();
        symlink(base.join("sub"), base.join("abs_inside")).unwrap();
        symlink(root.path().join("outside"), base.join("abs_outside")).unwrap();
        (root, base)
    }

    /// Both resolvers: the kernel's (with the user-space walk behind it) and the walk alone.
    fn both(base: &Path) -> [Confinement; 2] {
        [
            Confinement::with_kernel(base, true).unwrap(),
            Confinement::with_kernel(base, false).unwrap(),
        ]
    }

    fn read(c: &Confinement, path: &str) -> Result<String, PathError> {
        let fd = c.open(Path::new(path), OFlags::RDONLY)?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).unwrap();
        Ok(text)
    }

    #[test]
    fn escapes_through_dot_dot_and_symlinks_are_refused_by_both_resolvers() {
        let (_root, base) = layout();
        for c in both(&base) {
            for path in [
                "lnk/secret.txt",
                "sub/../lnk/secret.txt",
                "../outside/secret.txt",
                "abs_outside/secret.txt",
                "sub/../../outside/secret.txt",
            ] {
                assert!(
                    matches!(read(&c, path), Err(PathError::OutsideBase { .. })),
                    "{path}: {:?}",
                    read(&c, path)
                );
                assert!(
                    matches!(c.resolve(path), Err(PathError::OutsideBase { .. })),
                    "{path}"
                );
            }
            // `..` after a missing directory is ENOENT, never a shortcut to `lnk`.
            for path in ["nonexist/../lnk/secret.txt", "nonexist/../lnk"] {
                assert!(read(&c, path).unwrap_err().is_not_found(), "{path}");
                assert!(c.resolve(path).unwrap_err().is_not_found(), "{path}");
            }
        }
    }

    #[test]
    fn symlinks_inside_relative_or_absolute_are_followed_by_both_resolvers() {
        let (_root, base) = layout();
        for c in both(&base) {
            assert_eq!(read(&c, "alias/ok.txt").unwrap(), "fine");
            assert_eq!(read(&c, "abs_inside/ok.txt").unwrap(), "fine");
            assert_eq!(read(&c, "sub/../alias/ok.txt").unwrap(), "fine");
            assert_eq!(
                c.resolve("abs_inside/ok.txt").unwrap(),
                c.base().join("sub/ok.txt")
            );
        }
    }

    #[test]
    fn a_trailing_slash_on_a_file_is_not_a_directory() {
        let (_root, base) = layout();
        for c in both(&base) {
            let err = read(&c, "file.txt/").unwrap_err();
            assert!(err.to_string().contains("Not a directory"), "{err}");
            let err = c.resolve("file.txt/").unwrap_err();
            assert!(err.to_string().contains("Not a directory"), "{err}");
            assert!(c.resolve("sub/").is_ok());
        }
    }

    #[test]
    fn missing_paths_resolve_literally_below_their_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confinement::new(dir.path()).unwrap();
        assert_eq!(c.resolve("a/b/c.txt").unwrap(), c.base().join("a/b/c.txt"));
        assert!(c.resolve("a/b/../c.txt").unwrap_err().is_not_found());
        assert!(matches!(
            c.resolve("../x"),
            Err(PathError::OutsideBase { .. })
        ));
    }

    #[test]
    fn empty_paths_are_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confinement::new(dir.path()).unwrap();
        assert!(matches!(c.resolve(""), Err(PathError::Invalid { .. })));
    }

    #[test]
    fn an_o_path_open_never_hands_back_a_symlink_it_was_to_follow() {
        // `flip` is swapped between a regular file and a symlink to another file inside while
        // the user-space resolver opens it with O_PATH (which, with O_NOFOLLOW, would open a
        // symlink itself rather than fail).
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("flip"), "file").unwrap();
        std::fs::write(dir.path().join("target.txt"), "target").unwrap();
        symlink("target.txt", dir.path().join("flip.alt")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let (stop, dir) = (stop.clone(), dir.path().to_path_buf());
            std::thread::spawn(move || {
                let mut flips = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        dir.join("flip"),
                        rustix::fs::CWD,
                        dir.join("flip.alt"),
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                    flips += 1;
                }
                flips
            })
        };
        let c = Confinement::with_kernel(dir.path(), false).unwrap();
        assert_eq!(c.resolver(), Resolver::UserSpace);
        let mut opened = 0;
        for _ in 0..20_000 {
            if let Ok(fd) = c.open(Path::new("flip"), OFlags::PATH) {
                assert!(!is_symlink(&fd), "an O_PATH open returned the symlink");
                opened += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(flipper.join().unwrap() > 0);
        assert!(opened > 0);
    }

    #[test]
    fn symlink_loops_end_in_an_error() {
        let dir = tempfile::tempdir().unwrap();
        symlink("b", dir.path().join("a")).unwrap();
        symlink("a", dir.path().join("b")).unwrap();
        for c in both(dir.path()) {
            let err = read(&c, "a").unwrap_err();
            assert!(err.to_string().contains("symbolic links"), "{err}");
        }
    }
}
