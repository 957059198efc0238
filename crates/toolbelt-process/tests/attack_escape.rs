//! Children that try to outlive their owner: a `setsid` helper and a daemon that forks twice,
//! each under every containment that promises to catch them (cgroup and subreaper, each forced
//! here, so a non-root run's path is tested by root too), ended by each way an owner ends a
//! child: `close` after EOF, `terminate`, `kill_leftovers`, `kill_blocking` and a drop.

use std::path::Path;
use std::time::Duration;

use toolbelt_process::{Contain, Contained, Containment, Grace};
use toolbelt_testkit::{is_running, wait_until_gone};

/// The containments that catch a `setsid`: the cgroup needs root (or a delegated subtree).
fn escape_proof() -> Vec<Containment> {
    let mut kinds = vec![Containment::Subreaper];
    if cfg!(tests_as_root) {
        kinds.push(Containment::Cgroup);
    }
    kinds
}

/// A shell that starts a `setsid` helper and a double-forked daemon (each writes its pid to a
/// file), writes its own pid, then waits on stdin (`cat`), so EOF ends it.
fn escaping_shell(dir: &Path, containment: Containment) -> Contained {
    let script = format!(
        "setsid sh -c 'echo $$ > {d}/setsid.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
         (sh -c 'echo $$ > {d}/daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &) 
         echo $$ > {d}/shell.pid
         cat >/dev/null",
        // (`cat` is a fourth process while the shell runs: the shell waits for it.)
        d = dir.display()
    );
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    Contain::new(containment)
        .spawn(command)
        .unwrap_or_else(|e| panic!("{containment:?}: spawn: {e}"))
}

/// Waits (bounded) for the three pids and checks that all three run.
async fn started_pids(dir: &Path) -> [u32; 3] {
    let mut found = [0; 3];
    for (slot, name) in found.iter_mut().zip(["shell", "setsid", "daemon"]) {
        let file = dir.join(format!("{name}.pid"));
        for _ in 0..500 {
            if let Some(pid) = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                *slot = pid;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_ne!(*slot, 0, "no pid in {}", file.display());
        assert!(is_running(*slot), "the {name} {} runs", *slot);
    }
    found
}

fn assert_all_gone(what: &str, pids: [u32; 3]) {
    for (name, pid) in ["shell", "setsid helper", "daemon"].iter().zip(pids) {
        assert!(
            wait_until_gone(pid, Duration::from_secs(10)),
            "{what}: the {name} {pid} survived"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn close_after_eof_leaves_no_setsid_helper_or_daemon() {
    for containment in escape_proof() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = escaping_shell(dir.path(), containment);
        assert_eq!(child.containment(), containment);
        let pids = started_pids(dir.path()).await;
        assert_eq!(
            child.pid(),
            pids[0],
            "{containment:?}: pid() names the shell"
        );
        let (outcome, cleanup) = child
            .close(Grace {
                eof: Duration::from_secs(5),
                term: Duration::from_millis(500),
            })
            .await;
        // The shell ended on EOF by itself; the two helpers were ended.
        assert_eq!(outcome.map(|o| o.code), Some(Some(0)), "{containment:?}");
        assert!(cleanup.complete, "{containment:?}: {cleanup:?}");
        assert_eq!(cleanup.killed, 2, "{containment:?}: {cleanup:?}");
        assert_all_gone(&format!("{containment:?} close"), pids);
        assert!(child.members().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn terminate_ends_the_running_child_and_every_helper() {
    for containment in escape_proof() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = escaping_shell(dir.path(), containment);
        let pids = started_pids(dir.path()).await;
        let (outcome, cleanup) = child.terminate(Duration::from_millis(500)).await.unwrap();
        assert_eq!(outcome.signal, Some(libc::SIGTERM), "{containment:?}");
        assert!(
            cleanup.complete && cleanup.killed >= 3,
            "{containment:?}: {cleanup:?}"
        );
        assert_all_gone(&format!("{containment:?} terminate"), pids);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_blocking_and_drop_leave_no_survivor() {
    for containment in escape_proof() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = escaping_shell(dir.path(), containment);
        let pids = started_pids(dir.path()).await;
        let cleanup = child.kill_blocking(Duration::from_secs(5));
        assert!(
            cleanup.complete && cleanup.killed >= 3,
            "{containment:?}: {cleanup:?}"
        );
        // Back from the blocking kill, nothing runs any more: no wait needed.
        for pid in pids {
            assert!(
                !is_running(pid),
                "{containment:?}: {pid} runs after kill_blocking"
            );
        }

        let dir = tempfile::tempdir().unwrap();
        let child = escaping_shell(dir.path(), containment);
        let pids = started_pids(dir.path()).await;
        drop(child);
        assert_all_gone(&format!("{containment:?} drop"), pids);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_that_exited_has_its_leftovers_ended() {
    for containment in escape_proof() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = escaping_shell(dir.path(), containment);
        let pids = started_pids(dir.path()).await;
        drop(child.take_stdin());
        let outcome = child.wait().await.unwrap();
        assert!(outcome.success(), "{containment:?}: {outcome}");
        assert!(
            is_running(pids[1]) && is_running(pids[2]),
            "helpers outlive the shell"
        );
        let cleanup = child.kill_leftovers(Duration::from_millis(500)).await;
        assert_eq!(cleanup.killed, 2, "{containment:?}: {cleanup:?}");
        assert_all_gone(&format!("{containment:?} kill_leftovers"), pids);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn try_wait_sees_the_child_end_under_every_containment() {
    for containment in [escape_proof(), vec![Containment::ProcessGroup]].concat() {
        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg("exit 7");
        let mut child = Contain::new(containment).spawn(command).unwrap();
        let outcome = toolbelt_testkit::eventually_async(
            format!("the child ending under {containment:?}"),
            Duration::from_secs(5),
            || child.try_wait().unwrap(),
        )
        .await;
        assert_eq!(outcome.code, Some(7), "{containment:?}");
        assert_eq!(child.kill_leftovers(Duration::ZERO).await.killed, 0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_group_ends_the_helpers_that_stay_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "sh -c 'echo $$ > {d}/bg.pid; exec sleep 300' & echo $$ > {d}/shell.pid; wait",
        d = dir.path().display()
    );
    let mut command = tokio::process::Command::new("sh");
    command.arg("-c").arg(script);
    let mut child = Contain::new(Containment::ProcessGroup)
        .spawn(command)
        .unwrap();
    let mut bg = 0;
    for _ in 0..500 {
        if let Some(pid) = std::fs::read_to_string(dir.path().join("bg.pid"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            bg = pid;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(is_running(bg));
    let (_, cleanup) = child.terminate(Duration::from_millis(500)).await.unwrap();
    assert!(cleanup.complete && cleanup.killed == 2, "{cleanup:?}");
    assert!(wait_until_gone(bg, Duration::from_secs(10)));
}

#[test]
fn auto_is_the_cgroup_as_root_and_never_the_process_group() {
    let resolved = Containment::Auto.resolve();
    assert_ne!(resolved, Containment::ProcessGroup);
    if cfg!(tests_as_root) {
        assert_eq!(resolved, Containment::Cgroup);
    }
}
