//! # toolbelt-process: one owner of a child process's life
//!
//! Every program Toolbelt starts (a `Bash` command or background task, `rg` and `fd`, an
//! MCP stdio server, Chromium) is started by [`Contain::spawn`] and ended through the
//! [`Contained`] it returns, so that ending it ends **every** process it started: also those
//! that leave its process group or session (`setsid`, a daemon that forks twice, Chromium's
//! crash handler, which does both). A process group alone cannot promise that; so each child
//! gets a [`Containment`], chosen at run time:
//!
//! 1. a **cgroup v2 group** of its own where this process may create one (root, or a
//!    delegated subtree), ended with `cgroup.kill`: only a write to the cgroup file system
//!    gets a process out;
//! 2. else a **subreaper supervisor** forked before `exec`, which adopts every orphan of the
//!    child's tree, so the tree is always the supervisor's descendants;
//! 3. the child's own **process group**, only when asked for: the last resort, which a
//!    `setsid` escapes.
//!
//! The child always runs in a session of its own and inherits no descriptor but 0, 1 and 2;
//! an owner's [`PreExec`] hook (a Landlock sandbox, descriptors for a pipe protocol) runs
//! after the child joined its containment, last before `exec`. Leftovers are signalled
//! through pidfds after a start-time check, so a recycled pid is never hit.
//!
//! Ending follows one sequence, [`Contained::close`]: stdin closed (EOF), a grace period to
//! exit, `SIGTERM` to every process left, a grace period, `SIGKILL` until none is left, the
//! child reaped, every descendant checked gone; [`Cleanup`] says how many were ended and
//! whether all were. Dropping a [`Contained`] that was not ended kills its whole tree.
//!
//! An interactive child gets a terminal of its own: a [`Pty`] as its stdin, stdout and
//! stderr, made its controlling terminal by [`take_controlling_terminal`] in its hook.
//!
//! Linux only: it reads `/proc`, and uses `pidfd_open`, `close_range` and
//! `PR_SET_CHILD_SUBREAPER`.
//!
//! ```no_run
//! use std::time::Duration;
//! use toolbelt_process::{Contain, Containment, Grace};
//!
//! # async fn run() -> std::io::Result<()> {
//! let mut command = tokio::process::Command::new("sh");
//! command.arg("-c").arg("setsid sleep 300 & sleep 1");
//! let mut child = Contain::new(Containment::Auto).spawn(command)?;
//! child.wait().await?;
//! // The `setsid sleep` left behind is ended too.
//! let cleanup = child.kill_leftovers(Duration::from_millis(200)).await;
//! assert!(cleanup.complete);
//! # let _ = Grace { eof: Duration::ZERO, term: Duration::ZERO };
//! # Ok(()) }
//! ```

mod cgroup;
mod contained;
mod procs;
mod pty;
mod reaper;

pub use contained::{
    Cleanup, Contain, Contained, Containment, ExitOutcome, Grace, Killer, PreExec,
};
pub use pty::{Pty, PtyMaster, take_controlling_terminal};
