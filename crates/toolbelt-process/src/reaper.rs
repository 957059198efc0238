//! The fallback containment, which needs no privilege: a supervisor process that is the child
//! subreaper of everything a command starts.
//!
//! `PR_SET_CHILD_SUBREAPER` makes a process adopt the orphans of its subtree instead of init.
//! It is kept across `execve` but not inherited by `fork` children, so setting it on the shell
//! itself would not be enough: once the shell exits, its orphans (`setsid sleep 300 &`, a
//! daemon that double forks) go up to the next subreaper or to init, out of reach. So the
//! child the backend spawns splits in two before `exec` ([`split_off_supervisor`]):
//!
//! - the **supervisor** sets the subreaper flag, forks, writes the command's pid to a pipe
//!   (so the parent can name the command, not only its supervisor), ignores the signals a command might
//!   send its group or its parent (`kill 0`, `kill $PPID` with SIGTERM), closes every
//!   descriptor (so the output pipe sees end-of-file without it) and then only reaps: every
//!   process of the tree that loses its parent becomes its child, so the whole tree is always
//!   "the supervisor's descendants", found by walking parent links in `/proc`. When the
//!   command ends it writes the command's wait status and whether other processes remain to a
//!   pipe, and it exits once it has no children left.
//! - the **command** (the fork's child) gets a session of its own and goes on to `exec` the
//!   shell.
//!
//! The parent ends the tree by signalling the supervisor's live descendants until none are
//! left ([`crate::procs::live_descendants`]); the supervisor then exits on its own.
//!
//! Limit: a command that is not sandboxed may `kill -9` its supervisor (its parent); its
//! orphans then go to init. The parent notices (the status pipe closes without a status) and
//! says so instead of claiming everything was killed. The Landlock sandbox scopes signals
//! (ABI 6), so a sandboxed command cannot signal the supervisor, which is outside its domain.

use std::io;
use std::os::fd::RawFd;

/// The supervisor's first message, written before the parent's `spawn` returns: the
/// command's pid (native-endian `i32`).
pub(crate) const PID_LEN: usize = 4;

/// The supervisor's last message: the command's wait status (native-endian `i32`) and one byte,
/// 1 when other processes of the tree were still running as the command ended.
pub(crate) const STATUS_LEN: usize = 5;

/// Splits the forked child into supervisor and command. Returns `Ok` in the command, which
/// goes on to `exec`; the supervisor never returns.
///
/// # Safety
///
/// Only for the child of `fork` before `exec` (a `pre_exec` hook): it makes only
/// async-signal-safe system calls and never returns in the supervisor.
pub(crate) unsafe fn split_off_supervisor(status_fd: RawFd) -> io::Result<()> {
    // SAFETY: plain system calls on this (forked, single-threaded) process.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // The command: only the supervisor writes the status, and `kill 0` from the
                // command must not reach the supervisor's group.
                libc::close(status_fd);
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            }
            command => supervise(command, status_fd),
        }
    }
}

/// The supervisor's whole life.
unsafe fn supervise(command: libc::pid_t, status_fd: RawFd) -> ! {
    // SAFETY: async-signal-safe system calls only, on buffers on this stack.
    unsafe {
        // Before the descriptors are closed: the parent's `spawn` returns only once every
        // copy of its exec-error pipe is closed, so the pid is there when it looks.
        libc::write(status_fd, command.to_ne_bytes().as_ptr().cast(), PID_LEN);
        reset_signals();
        close_all_except(status_fd);
        let mut reported = false;
        loop {
            let mut status: libc::c_int = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == command && !reported {
                reported = true;
                let others = others_remain();
                let mut message = [0u8; STATUS_LEN];
                message[..4].copy_from_slice(&status.to_ne_bytes());
                message[4] = u8::from(others);
                libc::write(status_fd, message.as_ptr().cast(), STATUS_LEN);
                if !others {
                    libc::_exit(0);
                }
            } else if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                // ECHILD: the tree is empty.
                libc::_exit(0);
            }
        }
    }
}

/// Reaps children that have already ended; `true` when some are still running.
unsafe fn others_remain() -> bool {
    loop {
        // SAFETY: waitpid without a status pointer.
        let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
        if pid <= 0 {
            // 0: children exist and none has ended; -1 (ECHILD): no children at all.
            return pid == 0;
        }
    }
}

/// Leaves the supervisor with default signal handling (the parent's handlers belong to a
/// runtime that does not exist in this copy), ignoring what a command can send it without
/// SIGKILL, and with no signal blocked.
unsafe fn reset_signals() {
    const IGNORED: &[libc::c_int] = &[
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGPIPE,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
    ];
    // SAFETY: signal and sigprocmask are async-signal-safe; the set lives on this stack.
    unsafe {
        for signal in 1..32 {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let action = if IGNORED.contains(&signal) {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            libc::signal(signal, action);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// Closes every descriptor but `keep`.
unsafe fn close_all_except(keep: RawFd) {
    let keep = keep as libc::c_uint;
    // SAFETY: close_range and close only close descriptors of this process.
    unsafe {
        let below = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
        let above = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0;
        if !(below && above) {
            // Kernels before 5.9 have no close_range.
            for fd in 0..4096 {
                if fd != keep as libc::c_int {
                    libc::close(fd);
                }
            }
        }
    }
}

/// Decodes the supervisor's message: the command's wait status and whether others remained.
pub(crate) fn decode_status(message: &[u8; STATUS_LEN]) -> (libc::c_int, bool) {
    let mut status = [0u8; 4];
    status.copy_from_slice(&message[..4]);
    (libc::c_int::from_ne_bytes(status), message[4] != 0)
}
