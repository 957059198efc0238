//! The process group a stdio server runs in, so that closing the server ends everything it
//! started.
//!
//! A stdio server is often a wrapper (`npx`, `uvx`, a shell script) whose child is the real
//! server, and servers start helpers of their own. Signalling the direct child alone leaves
//! those running after Toolbelt exits. So each server starts as the leader of a new process
//! group (`setpgid(0, 0)` in the child, through [`std::os::unix::process::CommandExt::process_group`]),
//! which its descendants inherit, and closing signals the whole group.
//!
//! Limits: a descendant that moves itself to another group or session (`setsid`, a
//! daemonizing helper) leaves the group and is out of reach; so is one that outlives the
//! group's last member while its id is reused, which takes the kernel's process ids
//! wrapping around within the close.

use std::time::{Duration, Instant};

/// How often a closing group is checked for members still running.
const POLL: Duration = Duration::from_millis(20);

/// Sends `signal` to every process of group `group`; false when the group has no member.
pub(crate) fn signal(group: u32, signal: libc::c_int) -> bool {
    let Ok(group) = libc::pid_t::try_from(group) else {
        return false;
    };
    if group <= 1 {
        // Never signal "every process" (0, -1) or init's group by accident.
        return false;
    }
    // SAFETY: kill(2) with a negative pid signals the process group; no memory is shared.
    unsafe { libc::kill(-group, signal) == 0 }
}

/// Whether group `group` has a member that is still running (zombies, which have exited
/// and only wait for their parent to collect them, do not count).
pub(crate) fn has_running_members(group: u32) -> bool {
    match running_members_in_proc(group) {
        Some(found) => found,
        // Without /proc, a member that exited but was not collected yet still counts.
        None => signal(group, 0),
    }
}

/// Scans /proc for a running process of group `group`; `None` when /proc is unreadable.
fn running_members_in_proc(group: u32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // exited while we looked
        };
        // "pid (comm) state ppid pgrp ...": the command may hold spaces and parentheses,
        // so the fields are read after the last ')'.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or_default()
            .split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|f| f.parse::<u32>().ok());
        if pgrp == Some(group) && !matches!(state, "Z" | "X" | "x") {
            return Some(true);
        }
    }
    Some(false)
}

/// Waits until `done` holds and group `group` has no running member, for at most `limit`;
/// returns whether that happened.
pub(crate) async fn wait_until_gone(
    group: u32,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() && !has_running_members(group) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dangerous_groups_are_never_signalled() {
        assert!(!signal(0, 0));
        assert!(!signal(1, 0));
        assert!(
            !signal(u32::MAX, 0),
            "does not fit a pid: refused, not wrapped to -1"
        );
    }

    #[test]
    fn this_process_group_has_a_running_member() {
        // SAFETY: getpgrp(2) has no preconditions.
        let own = unsafe { libc::getpgrp() };
        assert!(has_running_members(own as u32));
    }
}
