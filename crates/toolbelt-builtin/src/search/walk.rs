//! The confined, parallel directory walk under Glob and Grep (and `FileOps::walk`).
//!
//! Every directory and file is opened relative to the handle of the directory it was listed
//! in (`openat` with `O_NOFOLLOW`), never by a path, so a directory or file swapped for a
//! symlink while the walk runs cannot redirect it: the open fails with `ELOOP` and the entry
//! is then handled as the symlink it has become. Symlinks are resolved by the confinement
//! rule ([`crate::confine`]) through the base handle: a target inside the base is followed (a
//! directory it names is walked unless it is one of the directories being walked above it, a
//! loop), one outside is skipped and counted in [`Outcome::skipped_outside`]. The walk root
//! itself is opened beneath the base in the same way.
//!
//! Threads take directories from one shared stack; each calls its own visitor for the regular
//! files it finds, in no particular order (the search backends sort what they keep). A queued
//! directory is opened only when a thread takes it, relative to its parent's handle (kept
//! while any of its subdirectories waits): the descriptors open at once are bounded by the
//! depth of the tree times the threads, not by how many directories wait. (Opening each
//! subdirectory as it was listed ran a directory of 20,000 subdirectories out of descriptors:
//! the rest were skipped without a word and every other open in the process failed.) Memory
//! grows with the entries of the directories waiting to be read, a few dozen bytes each.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::rules::{CUSTOM_IGNORE, DirRules, Filters, IgnoreFiles, parents_of};
use crate::confine::{Confinement, PathError};

/// The largest ignore file read (a bigger one is not honoured).
const MAX_IGNORE_FILE: u64 = 4 * 1024 * 1024;

/// What a walk reports besides the files it visited.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Symlinks skipped because their target is outside the base directory.
    pub skipped_outside: usize,
}

/// A regular file found by the walk, not yet opened.
pub(crate) struct FileRef<'a> {
    /// The file's path as walked (under the walk root; through symlinks as they were named).
    pub path: &'a Path,
    how: How<'a>,
    walk: &'a Shared<'a>,
}

enum How<'a> {
    /// An entry of the directory `dir`.
    At {
        dir: BorrowedFd<'a>,
        name: &'a OsStr,
    },
    /// Reached through a symlink, or the walk root: open it beneath the base by its path.
    Beneath,
}

impl FileRef<'_> {
    /// Opens the file for reading, relative to its directory's handle; `None` when it is gone,
    /// unreadable, no longer a regular file, or became a symlink pointing outside the base.
    pub fn open(&self) -> Option<File> {
        let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match self.how {
            How::At { dir, name } => {
                match rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, Mode::empty()) {
                    Ok(fd) => fd,
                    // Swapped for a symlink since it was listed: the rule decides.
                    Err(Errno::LOOP) => self.walk.open_beneath(self.path, flags)?,
                    Err(_) => return None,
                }
            }
            How::Beneath => self.walk.open_beneath(self.path, flags)?,
        };
        let st = rustix::fs::fstat(&fd).ok()?;
        (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then(|| File::from(fd))
    }
}

/// What every walker thread shares.
struct Shared<'a> {
    confinement: &'a Confinement,
    filters: &'a Filters,
    skipped_outside: AtomicUsize,
    queue: Mutex<Queue>,
    wake: Condvar,
}

struct Queue {
    work: Vec<Work>,
    /// Directories queued or being read.
    pending: usize,
}

/// A directory to read.
struct Work {
    source: Source,
    path: PathBuf,
    /// The rules of the directories above it.
    rules: Arc<DirRules>,
    /// Identities of the directories above it in the walk (for loop detection); `None` for
    /// the root.
    ancestors: Option<Arc<Ancestor>>,
}

/// How a queued directory is opened when its turn comes.
enum Source {
    /// The walk root, already open.
    Open(OwnedFd),
    /// An entry of a directory the walk read, opened relative to that directory's handle.
    Entry { parent: Arc<Dir>, name: OsString },
    /// The target of a symlink: opened beneath the base by its path, by the symlink rule.
    Beneath,
}

struct Ancestor {
    dev: u64,
    ino: u64,
    parent: Option<Arc<Ancestor>>,
}

impl Ancestor {
    fn contains(&self, dev: u64, ino: u64) -> bool {
        let mut next = Some(self);
        while let Some(a) = next {
            if a.dev == dev && a.ino == ino {
                return true;
            }
            next = a.parent.as_deref();
        }
        false
    }
}

impl Shared<'_> {
    /// Opens `path` beneath the base by the symlink rule, counting a refusal as a skipped
    /// symlink pointing outside.
    fn open_beneath(&self, path: &Path, flags: OFlags) -> Option<OwnedFd> {
        match self.confinement.open(path, flags) {
            Ok(fd) => Some(fd),
            Err(PathError::OutsideBase { .. }) => {
                self.skipped_outside.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(_) => None,
        }
    }

    fn push(&self, work: Work) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.work.push(work);
        queue.pending += 1;
        drop(queue);
        self.wake.notify_one();
    }

    /// The next directory, or `None` when the walk is over.
    fn next(&self) -> Option<Work> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(work) = queue.work.pop() {
                return Some(work);
            }
            if queue.pending == 0 {
                return None;
            }
            queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn done(&self) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.pending -= 1;
        if queue.pending == 0 {
            self.wake.notify_all();
        }
    }
}

/// Marks one queued directory as done when dropped.
struct Done<'s, 'a>(&'s Shared<'a>);

impl Drop for Done<'_, '_> {
    fn drop(&mut self) {
        self.0.done();
    }
}

/// Walks `root` (an absolute path inside the base) on `threads` threads (0: one per core),
/// calling a visitor made by `make` on each thread for every regular file that the filters
/// keep. A root that is a file is visited whatever the filters say, as `rg FILE` searches it.
/// Fails when the root cannot be opened beneath the base.
pub(crate) fn walk<M, V>(
    confinement: &Confinement,
    root: &Path,
    filters: &Filters,
    threads: usize,
    make: M,
) -> Result<Outcome, PathError>
where
    M: Fn() -> V + Sync,
    V: FnMut(FileRef<'_>),
{
    let shared = Shared {
        confinement,
        filters,
        skipped_outside: AtomicUsize::new(0),
        queue: Mutex::new(Queue {
            work: Vec::new(),
            pending: 0,
        }),
        wake: Condvar::new(),
    };
    let root_path = confinement.open(root, OFlags::PATH)?;
    let st = rustix::fs::fstat(&root_path).map_err(|e| confinement.io_error(root, e.into()))?;
    let root_fd = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => {
            reopen_dir(&root_path).map_err(|e| confinement.io_error(root, e.into()))?
        }
        FileType::RegularFile => {
            let mut visit = make();
            visit(FileRef {
                path: root,
                how: How::Beneath,
                walk: &shared,
            });
            return Ok(Outcome::default());
        }
        _ => return Ok(Outcome::default()),
    };
    let rules = parent_rules(confinement, root, filters);
    shared.push(Work {
        source: Source::Open(root_fd),
        path: root.to_path_buf(),
        rules,
        ancestors: None,
    });
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().min(12)),
        n => n,
    };
    let run = || {
        let mut visit = make();
        while let Some(work) = shared.next() {
            // Counted as done even if the visitor panics, so the other threads still end.
            let _done = Done(&shared);
            read_dir(&shared, work, &mut visit);
        }
    };
    if threads == 1 {
        run();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(run);
            }
        });
    }
    Ok(Outcome {
        skipped_outside: shared.skipped_outside.into_inner(),
    })
}

/// Every regular file below `root`, in path order (for `FileOps::walk`).
pub(crate) fn files(
    confinement: &Confinement,
    root: &Path,
    filters: &Filters,
) -> Result<Vec<PathBuf>, PathError> {
    let found = Mutex::new(Vec::new());
    walk(confinement, root, filters, 0, || {
        |file: FileRef<'_>| {
            found
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(file.path.to_path_buf())
        }
    })?;
    let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
    found.sort();
    Ok(found)
}

/// The rules of `root`'s parents: those inside the base read through confined handles, those
/// above it by path (as `rg` reads them; they only decide what is skipped).
fn parent_rules(confinement: &Confinement, root: &Path, filters: &Filters) -> Arc<DirRules> {
    let mut rules: Option<Arc<DirRules>> = None;
    if filters.respect_ignore {
        for parent in parents_of(root) {
            let files = if confinement.contains(&parent) {
                match confinement.open(&parent, OFlags::PATH | OFlags::DIRECTORY) {
                    Ok(fd) => ignore_files_at(confinement, fd.as_fd(), &parent, None),
                    Err(_) => IgnoreFiles::default(),
                }
            } else {
                ignore_files_by_path(&parent)
            };
            if !files.is_empty() {
                rules = Some(Arc::new(DirRules::new(rules, &parent, files)));
            }
        }
    }
    rules.unwrap_or_default()
}

/// The ignore files of a directory outside the base, read by path (regular files only:
/// opened without blocking, so a FIFO named `.gitignore` cannot stall the walk).
fn ignore_files_by_path(dir: &Path) -> IgnoreFiles {
    let read = |name: &str| {
        let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::open(dir.join(name), flags, Mode::empty()).ok()?;
        let st = rustix::fs::fstat(&fd).ok()?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return None;
        }
        read_capped(File::from(fd))
    };
    IgnoreFiles {
        custom: read(CUSTOM_IGNORE),
        ignore: read(".ignore"),
        git: read(".gitignore"),
        exclude: dir
            .join(".git")
            .is_dir()
            .then(|| read(".git/info/exclude"))
            .flatten(),
    }
}

/// The ignore files of the directory `dir` (a confined handle), restricted to the names the
/// listing `present` saw when there is one.
fn ignore_files_at(
    confinement: &Confinement,
    dir: BorrowedFd<'_>,
    path: &Path,
    present: Option<&[(OsString, FileType)]>,
) -> IgnoreFiles {
    let has = |name: &str| present.is_none_or(|entries| entries.iter().any(|(n, _)| n == name));
    let read = |name: &str| -> Option<Vec<u8>> {
        if !has(name) {
            return None;
        }
        let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => confinement.open(&path.join(name), flags).ok()?,
            Err(_) => return None,
        };
        let st = rustix::fs::fstat(&fd).ok()?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return None;
        }
        read_capped(File::from(fd))
    };
    let git_dir = has(".git")
        && rustix::fs::statat(dir, ".git", AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
    IgnoreFiles {
        custom: read(CUSTOM_IGNORE),
        ignore: read(".ignore"),
        git: read(".gitignore"),
        exclude: if git_dir {
            // `.git` is a real directory (checked without following); its exclude file is
            // read below its handle.
            rustix::fs::openat(
                dir,
                ".git/info/exclude",
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok()
            .filter(|fd| {
                rustix::fs::fstat(fd)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
            })
            .and_then(|fd| read_capped(File::from(fd)))
        } else {
            None
        },
    }
}

fn read_capped(file: File) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(MAX_IGNORE_FILE).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Opens a queued directory for reading; `None` when it is gone, no longer a directory, or
/// became a symlink pointing outside the base (counted).
fn open_dir(shared: &Shared<'_>, source: Source, path: &Path) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match source {
        Source::Open(fd) => Some(fd),
        Source::Entry { parent, name } => {
            let parent = parent.fd().ok()?;
            match rustix::fs::openat(parent, &name, flags | OFlags::NOFOLLOW, Mode::empty()) {
                Ok(fd) => Some(fd),
                // Swapped for a symlink since it was listed: the rule decides.
                Err(Errno::LOOP) => shared.open_beneath(path, flags),
                Err(_) => None,
            }
        }
        Source::Beneath => shared.open_beneath(path, flags),
    }
}

/// Reads one directory: its ignore files, then each entry (files visited, directories
/// queued, symlinks resolved by the rule). A directory that is one of its own ancestors (a
/// symlink loop) is not read again.
fn read_dir<V: FnMut(FileRef<'_>)>(shared: &Shared<'_>, work: Work, visit: &mut V) {
    let Some(fd) = open_dir(shared, work.source, &work.path) else {
        return;
    };
    let Ok(st) = rustix::fs::fstat(&fd) else {
        return;
    };
    if work
        .ancestors
        .as_ref()
        .is_some_and(|a| a.contains(st.st_dev, st.st_ino))
    {
        return;
    }
    let ancestors = Arc::new(Ancestor {
        dev: st.st_dev,
        ino: st.st_ino,
        parent: work.ancestors,
    });
    let Ok(mut dir) = Dir::new(fd) else {
        return;
    };
    let mut entries: Vec<(OsString, FileType)> = Vec::new();
    while let Some(Ok(entry)) = dir.read() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        entries.push((OsStr::from_bytes(name).to_os_string(), entry.file_type()));
    }
    // Shared with the subdirectories queued below, which are opened relative to it.
    let dir = Arc::new(dir);
    let Ok(fd) = dir.fd() else {
        return;
    };
    let rules = if shared.filters.respect_ignore {
        let files = ignore_files_at(shared.confinement, fd, &work.path, Some(&entries));
        DirRules::child(&work.rules, &work.path, files)
    } else {
        work.rules.clone()
    };
    for (name, kind) in &entries {
        let mut kind = *kind;
        if kind == FileType::Unknown {
            match rustix::fs::statat(fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => kind = FileType::from_raw_mode(st.st_mode),
                Err(_) => continue,
            }
        }
        let path = work.path.join(name);
        match kind {
            FileType::RegularFile if !shared.filters.skips(&rules, &path, false) => {
                visit(FileRef {
                    path: &path,
                    how: How::At {
                        dir: fd,
                        name: name.as_os_str(),
                    },
                    walk: shared,
                });
            }
            FileType::Directory if !shared.filters.skips(&rules, &path, true) => {
                shared.push(Work {
                    source: Source::Entry {
                        parent: dir.clone(),
                        name: name.clone(),
                    },
                    path,
                    rules: rules.clone(),
                    ancestors: Some(ancestors.clone()),
                });
            }
            FileType::Symlink => follow(shared, path, &rules, &ancestors, visit),
            // Skipped by the filters, or a socket, FIFO or device (never searched).
            _ => {}
        }
    }
}

/// A symlink met by the walk: followed when its target is inside the base, counted and
/// skipped when it is outside.
fn follow<V: FnMut(FileRef<'_>)>(
    shared: &Shared<'_>,
    path: PathBuf,
    rules: &Arc<DirRules>,
    ancestors: &Arc<Ancestor>,
    visit: &mut V,
) {
    // O_PATH: only look at what the link names (no device is opened).
    let Some(target) = shared.open_beneath(&path, OFlags::PATH) else {
        return;
    };
    let Ok(st) = rustix::fs::fstat(&target) else {
        return;
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile if !shared.filters.skips(rules, &path, false) => {
            visit(FileRef {
                path: &path,
                how: How::Beneath,
                walk: shared,
            });
        }
        FileType::Directory if !shared.filters.skips(rules, &path, true) => {
            // Opened again by path when its turn comes (holding this handle until then
            // would not bound the descriptors); the rule is applied again then.
            shared.push(Work {
                source: Source::Beneath,
                path,
                rules: rules.clone(),
                ancestors: Some(ancestors.clone()),
            });
        }
        _ => {}
    }
}

/// A readable handle of the directory an `O_PATH` handle names (no path lookup).
fn reopen_dir(dir: &OwnedFd) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}
