//! Processes as `/proc` shows them: who is alive, who descends from whom, and a signal that
//! reaches exactly the process that was looked at.
//!
//! A pid alone is a weak handle: once a process is reaped its pid can be given to an unrelated
//! process. Every process this crate kills is therefore named by its pid *and* its start
//! time ([`ProcRef`]), and [`ProcRef::signal`] opens a pidfd, checks the start time again
//! through it and signals through the pidfd, so a recycled pid is never hit.

use std::collections::{HashMap, HashSet};
use std::os::fd::{FromRawFd, OwnedFd};

/// The fields of `/proc/<pid>/stat` the containments need.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcStat {
    /// The state letter (R, S, D, Z, ...).
    pub state: char,
    /// The parent's pid.
    pub ppid: u32,
    /// The process group's id.
    pub pgrp: u32,
    /// When the process started, in clock ticks since boot: with the pid, a unique name.
    pub start_time: u64,
}

impl ProcStat {
    /// Whether the process is still running (not a zombie waiting to be reaped).
    pub fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub(crate) fn read_proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain spaces or parentheses.
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    // After the state, ppid and pgrp, the start time is the 20th field (field 22 of the file).
    let start_time = fields.nth(16)?.parse().ok()?;
    Some(ProcStat {
        state,
        ppid,
        pgrp,
        start_time,
    })
}

/// One process, named so that a recycled pid is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ProcRef {
    pub pid: u32,
    pub start_time: u64,
}

impl ProcRef {
    /// The process `pid` as it is now, if it is alive (not a zombie).
    pub fn live(pid: u32) -> Option<Self> {
        let stat = read_proc_stat(pid)?;
        stat.is_live().then_some(Self {
            pid,
            start_time: stat.start_time,
        })
    }

    /// The process `pid` as it is now, alive or a zombie not yet reaped.
    pub fn of(pid: u32) -> Option<Self> {
        let stat = read_proc_stat(pid)?;
        Some(Self {
            pid,
            start_time: stat.start_time,
        })
    }

    /// Sends `signal` to this process if it is still the same process. Returns whether the
    /// signal was sent.
    pub fn signal(&self, signal: libc::c_int) -> bool {
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return false;
        };
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return false;
        }
        // SAFETY: the descriptor was just returned by pidfd_open and is owned here alone.
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        // The pidfd pins the process it was opened for; if that is still the one looked at,
        // the signal below can only reach it.
        match read_proc_stat(self.pid) {
            Some(stat) if stat.start_time == self.start_time && stat.is_live() => {}
            _ => return false,
        }
        use std::os::fd::AsRawFd;
        // SAFETY: pidfd_send_signal with a valid pidfd, no siginfo and no flags.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        sent == 0
    }
}

/// Every process `/proc` lists now, with its stat.
fn all_processes() -> Vec<(u32, ProcStat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, read_proc_stat(pid)?)))
        .collect()
}

/// Every live process of process group `pgrp` (the last-resort containment).
pub(crate) fn live_group_members(pgrp: u32) -> Vec<ProcRef> {
    all_processes()
        .into_iter()
        .filter(|(_, stat)| stat.pgrp == pgrp && stat.is_live())
        .map(|(pid, stat)| ProcRef {
            pid,
            start_time: stat.start_time,
        })
        .collect()
}

/// Every live process whose chain of parents leads to `root` (not `root` itself).
pub(crate) fn live_descendants(root: u32) -> Vec<ProcRef> {
    let mut children: HashMap<u32, Vec<(u32, ProcStat)>> = HashMap::new();
    for (pid, stat) in all_processes() {
        children.entry(stat.ppid).or_default().push((pid, stat));
    }
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for &(pid, stat) in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
            if !seen.insert(pid) {
                continue;
            }
            // A zombie cannot be killed, but its children (if any) still descend from root.
            queue.push(pid);
            if stat.is_live() {
                found.push(ProcRef {
                    pid,
                    start_time: stat.start_time,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_live_with_its_parent() {
        let me = std::process::id();
        let stat = read_proc_stat(me).unwrap();
        assert!(stat.is_live());
        assert_eq!(stat.ppid, std::os::unix::process::parent_id());
        // SAFETY: getpgrp has no preconditions.
        assert_eq!(stat.pgrp, unsafe { libc::getpgrp() } as u32);
        assert!(ProcRef::live(me).is_some());
    }

    #[test]
    fn a_child_is_a_descendant_and_a_recycled_name_is_not_signalled() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let found = live_descendants(std::process::id());
        let me = found.iter().find(|p| p.pid == pid).copied().unwrap();
        let stale = ProcRef {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!stale.signal(libc::SIGKILL), "a different start time");
        assert!(me.signal(libc::SIGKILL));
        child.wait().unwrap();
        assert!(!me.signal(libc::SIGKILL), "a reaped process");
    }
}
