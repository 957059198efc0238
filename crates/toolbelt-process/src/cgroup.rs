//! The first containment: a cgroup v2 group per command.
//!
//! A process cannot leave its cgroup by `setsid`, double forking or being reparented: only a
//! write to a `cgroup.procs` file moves it, which needs write access to the cgroup file system
//! (a sandboxed command has none). So the group is the exact set of processes a command
//! started, and `cgroup.kill` (Linux 5.14+) ends all of them at once, including those forked
//! while the kill runs.
//!
//! The group is created beside this process's own cgroup's children
//! (`<cgroup2 mount>/<own cgroup>/toolbelt-<pid>-<n>`), and the child moves itself into it
//! after `fork` and before `exec` (writing `0` to the group's `cgroup.procs`), so the command's
//! first instruction already runs inside. Where no cgroup2 hierarchy is mounted, or this
//! process may not create groups in its own (an unprivileged user outside a delegated
//! subtree), [`CgroupParent::detect`] finds nothing and the subreaper fallback is used.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::procs::ProcRef;

/// The prefix of every group this process creates, followed by its pid.
const GROUP_PREFIX: &str = "toolbelt-";

/// The cgroup v2 directory new groups are created in: this process's own cgroup.
#[derive(Debug)]
pub(crate) struct CgroupParent {
    dir: PathBuf,
}

impl CgroupParent {
    /// This process's cgroup v2 directory, found once, when it is mounted and this process
    /// can create a group there with `cgroup.kill`; `None` otherwise.
    pub fn detect() -> Option<&'static CgroupParent> {
        static PARENT: OnceLock<Option<CgroupParent>> = OnceLock::new();
        PARENT
            .get_or_init(|| {
                let dir = own_cgroup_dir()?;
                let parent = CgroupParent { dir };
                // A trial group answers both questions: may we create one, and does the
                // kernel offer cgroup.kill?
                drop(CallGroup::create(&parent).ok()?);
                parent.remove_stale_groups();
                Some(parent)
            })
            .as_ref()
    }

    /// Removes empty groups left by Toolbelt processes that no longer exist (a crash, a
    /// SIGKILL). A group that still holds processes is left alone.
    fn remove_stale_groups(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = name
                .to_str()
                .and_then(|n| n.strip_prefix(GROUP_PREFIX))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{owner}")).exists() {
                let _ = remove_group_dir(&entry.path());
            }
        }
    }
}

/// The group of one command.
#[derive(Debug)]
pub(crate) struct CallGroup {
    dir: PathBuf,
    /// `cgroup.procs`, opened for the child to write itself into.
    procs: File,
    removed: bool,
}

impl CallGroup {
    /// Creates a new, empty group.
    pub fn create(parent: &CgroupParent) -> io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!(
            "{GROUP_PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.dir.join(name);
        std::fs::create_dir(&dir)?;
        let group = OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map(|procs| CallGroup {
                dir: dir.clone(),
                procs,
                removed: false,
            });
        match group {
            Ok(group) if group.dir.join("cgroup.kill").exists() => Ok(group),
            Ok(mut group) => {
                group.remove();
                Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "this kernel has no cgroup.kill (Linux 5.14 or newer is needed)",
                ))
            }
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The descriptor the child writes `0` to, moving itself into the group.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// The live processes in the group (and in any group a command created inside it).
    pub fn members(&self) -> Vec<ProcRef> {
        let mut members = Vec::new();
        collect_members(&self.dir, &mut members);
        members
    }

    /// The group's `cgroup.kill` file: writing `1` to it kills every process in the group.
    pub fn kill_file(&self) -> PathBuf {
        self.dir.join("cgroup.kill")
    }

    /// Whether any process is still in the group.
    pub fn is_populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .map(|events| events.lines().any(|line| line == "populated 1"))
            .unwrap_or(false)
    }

    /// Kills every process in the group and in the groups below it.
    pub fn kill(&self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))?
            .write_all(b"1")
    }

    /// Deletes the group (it must be empty). Failures are logged: an empty directory left in
    /// the cgroup file system costs nothing and is removed by the next Toolbelt process.
    pub fn remove(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        if let Err(e) = remove_group_dir(&self.dir) {
            tracing::debug!(group = %self.dir.display(), "could not remove a cgroup: {e}");
        }
    }
}

impl Drop for CallGroup {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // Nothing can be awaited here: kill everything now and let a thread remove the group
        // once the kernel has torn the processes down.
        let _ = self.kill();
        let mut group = CallGroup {
            dir: std::mem::take(&mut self.dir),
            procs: match self.procs.try_clone() {
                Ok(file) => file,
                Err(_) => return,
            },
            removed: false,
        };
        self.removed = true;
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while group.is_populated() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            group.remove();
        });
    }
}

/// Adds the live processes of `dir` and of the groups below it to `out`.
fn collect_members(dir: &Path, out: &mut Vec<ProcRef>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(
            text.lines()
                .filter_map(|line| line.trim().parse::<u32>().ok())
                .filter_map(ProcRef::live),
        );
    }
    for sub in subgroups(dir) {
        collect_members(&sub, out);
    }
}

fn subgroups(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes a group and the groups a command created inside it, deepest first.
fn remove_group_dir(dir: &Path) -> io::Result<()> {
    for sub in subgroups(dir) {
        let _ = remove_group_dir(&sub);
    }
    std::fs::remove_dir(dir)
}

/// Moves the calling process into the group whose `cgroup.procs` is open as `procs_fd`.
///
/// Runs in the forked child before `exec`: one `write` system call, no allocation.
pub(crate) fn join_from_child(procs_fd: RawFd) -> io::Result<()> {
    // "0" names the writing process itself.
    // SAFETY: writes one byte from a static buffer to a descriptor the parent opened.
    let written = unsafe { libc::write(procs_fd, b"0".as_ptr().cast(), 1) };
    if written == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// This process's cgroup v2 directory: the unified hierarchy's mount point joined with the
/// path `/proc/self/cgroup` gives (relative to the mount's root).
fn own_cgroup_dir() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in mountinfo.lines() {
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        if fs.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let mut fields = mount.split_whitespace();
        let root = unescape_mount_path(fields.nth(3)?);
        let point = unescape_mount_path(fields.next()?);
        let relative = if root == "/" {
            own
        } else {
            match own.strip_prefix(root.as_str()) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
                _ => continue,
            }
        };
        let dir = Path::new(&point).join(relative.trim_start_matches('/'));
        if dir.join("cgroup.procs").exists() {
            return Some(dir);
        }
    }
    None
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape_mount_path(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|digits| bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        if let Some(digits) = octal {
            out.push(
                digits
                    .iter()
                    .fold(0u8, |n, d| n.wrapping_mul(8).wrapping_add(d - b'0')),
            );
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path(r"/a\040b"), "/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path(r"/end\"), r"/end\");
    }
}
