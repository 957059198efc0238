//! Attacks on "no lost update" across processes sharing their reads (the replicas of
//! `toolbelt serve --shared-state`): processes that all Read one file and then all Edit it
//! at the same moment, round after round; exactly one may win each round, the others must
//! be told the file changed since their read. And a session's read made through one process
//! lets that session (and only it) Edit through another.
//!
//! The racers are this test binary run again as child processes (`racer_child`), each with
//! a tool set of its own over one directory, one read store (a folder of records) and one
//! lock folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolbelt_builtin::fs::{ReadScope, ReadState, SharedReads};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{ToolContext, ToolSet};

/// Reads kept in a folder, one file per session and path, written by rename: a store several
/// processes share without a server.
struct FolderReads(PathBuf);

impl FolderReads {
    fn file(&self, session: &str, path: &Path) -> PathBuf {
        let key = format!("{session}\0{}", path.display());
        let mut name = String::new();
        for byte in key.bytes() {
            name.push_str(&format!("{byte:02x}"));
        }
        self.0.join(name)
    }
}

#[async_trait::async_trait]
impl SharedReads for FolderReads {
    async fn load(&self, session: &str, path: &Path) -> Result<Option<String>, String> {
        match std::fs::read_to_string(self.file(session, path)) {
            Ok(record) => Ok(Some(record)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err.to_string()),
        }
    }

    async fn save(&self, session: &str, path: &Path, record: &str) -> Result<(), String> {
        let file = self.file(session, path);
        let temp = file.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&temp, record).map_err(|e| e.to_string())?;
        std::fs::rename(&temp, &file).map_err(|e| e.to_string())
    }
}

/// A tool set on `dir` whose reads are in the folder `store`, locking in `locks`.
fn shared_set(dir: &Path, store: &Path, locks: &Path) -> BuiltinToolSet {
    let reads = Arc::new(FolderReads(store.to_path_buf()));
    let state = ReadState::shared(reads, locks).expect("a shared read state");
    BuiltinToolSet::new(BuiltinOptions::new(dir).with_read_state(Arc::new(state)))
        .expect("tool set builds")
}

/// Calls `name` in session `session`; `Ok(text)` on success, `Err(text)` for an error result.
async fn call_in(
    set: &BuiltinToolSet,
    session: &str,
    name: &str,
    args: serde_json::Value,
) -> Result<String, String> {
    let tool = set
        .tool_list()
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
        .clone();
    let ctx = ToolContext::for_call("test").with_extension(ReadScope(session.into()));
    let output = tool
        .call(ctx, &args.to_string())
        .await
        .unwrap_or_else(|e| panic!("{name} failed to run: {e}"));
    if output.is_error {
        Err(output.llm_text())
    } else {
        Ok(output.llm_text())
    }
}

#[tokio::test]
async fn a_read_through_one_process_lets_only_its_own_session_edit_through_another() {
    let dir = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let (store, locks) = (shared.path().join("reads"), shared.path().join("locks"));
    std::fs::create_dir(&store).unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let first = shared_set(dir.path(), &store, &locks);
    let second = shared_set(dir.path(), &store, &locks);

    call_in(&first, "s1", "Read", json!({"file_path": "a.txt"}))
        .await
        .expect("Read");
    let edit = json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "beta"});
    let refused = call_in(&second, "s2", "Edit", edit.clone())
        .await
        .expect_err("another session never read it");
    assert!(refused.contains("has not been read"), "{refused}");
    call_in(&second, "s1", "Edit", edit)
        .await
        .expect("the session that read it may edit through another process");
    // The write was recorded for s1 in the store: its next edit needs no new Read, from
    // either process.
    let again = json!({"file_path": "a.txt", "old_string": "beta", "new_string": "gamma"});
    call_in(&first, "s1", "Edit", again).await.expect("Edit");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "gamma\n"
    );
}

#[test]
fn a_lock_folder_others_may_write_to_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let shared = tempfile::tempdir().unwrap();
    let locks = shared.path().join("locks");
    std::fs::create_dir(&locks).unwrap();
    std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o777)).unwrap();
    let reads = Arc::new(FolderReads(shared.path().to_path_buf()));
    let err = ReadState::shared(reads.clone(), &locks).expect_err("refused");
    assert!(err.to_string().contains("written by other users"), "{err}");

    let link = shared.path().join("link");
    std::os::unix::fs::symlink(shared.path(), &link).unwrap();
    let err = ReadState::shared(reads, &link).expect_err("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
}

const RACERS: usize = 4;
const ROUNDS: usize = 30;

#[test]
fn processes_racing_edits_of_one_file_have_exactly_one_winner_per_read() {
    let dir = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let (store, locks, sync) = (
        shared.path().join("reads"),
        shared.path().join("locks"),
        shared.path().join("sync"),
    );
    for folder in [&store, &sync] {
        std::fs::create_dir(folder).unwrap();
    }
    std::fs::write(dir.path().join("race.txt"), "count: 0\n").unwrap();

    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..RACERS)
        .map(|id| {
            Command::new(&exe)
                .args([
                    "attack_lost_update_processes::racer_child",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("RACER_ID", id.to_string())
                .env("RACER_DIR", dir.path())
                .env("RACER_STORE", &store)
                .env("RACER_LOCKS", &locks)
                .env("RACER_SYNC", &sync)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a racer")
        })
        .collect();
    let mut winners = vec![Vec::new(); ROUNDS];
    for child in children {
        let out = child.wait_with_output().expect("a racer ends");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a racer failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut rounds_seen = 0;
        for line in stdout.lines() {
            // libtest's own "test racer_child ... " may begin the first line.
            let Some((_, rest)) = line.split_once("RACE ") else {
                continue;
            };
            let (round, verdict) = rest.split_once(' ').expect("RACE round verdict");
            let round: usize = round.parse().unwrap();
            rounds_seen += 1;
            match verdict.strip_prefix("won ") {
                Some(id) => winners[round].push(id.to_string()),
                None => assert!(
                    verdict.contains("modified since it was read"),
                    "a losing racer must be told the file changed, got: {verdict}"
                ),
            }
        }
        assert_eq!(rounds_seen, ROUNDS, "{stdout}");
    }
    for (round, won) in winners.iter().enumerate() {
        assert_eq!(won.len(), 1, "round {round}: winners {won:?}");
    }
    let text = std::fs::read_to_string(dir.path().join("race.txt")).unwrap();
    assert!(
        text.starts_with(&format!("count: {ROUNDS} by ")),
        "every round's one change landed: {text}"
    );
}

/// Waits until `count` files named `{prefix}-*` exist in `sync`.
fn wait_for(sync: &Path, prefix: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let here = std::fs::read_dir(sync)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(prefix))
            })
            .count();
        if here >= count {
            return;
        }
        assert!(Instant::now() < deadline, "the other racers never came");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One racer process: each round, Read the file in its own session, wait for the others to
/// have read it too, then Edit it (`count: N` to `count: N+1`), and say whether it won.
#[test]
#[ignore = "a child process of processes_racing_edits_of_one_file_have_exactly_one_winner_per_read"]
fn racer_child() {
    let Ok(id) = std::env::var("RACER_ID") else {
        eprintln!("racer_child runs only as a child of the race test (RACER_ID is not set)");
        return;
    };
    let var = |name: &str| PathBuf::from(std::env::var(name).unwrap());
    let (dir, store, locks, sync) = (
        var("RACER_DIR"),
        var("RACER_STORE"),
        var("RACER_LOCKS"),
        var("RACER_SYNC"),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let set = shared_set(&dir, &store, &locks);
        let session = format!("racer{id}");
        for round in 0..ROUNDS {
            let text = call_in(&set, &session, "Read", json!({"file_path": "race.txt"}))
                .await
                .expect("Read");
            // Read shows `     1\tcount: N by R`: the line after the tab is what to replace.
            let line = text
                .lines()
                .next()
                .and_then(|l| l.split_once('\t'))
                .map(|(_, line)| line.to_string())
                .expect("a numbered line");
            let count: usize = line
                .strip_prefix("count: ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .expect("a count");
            std::fs::write(sync.join(format!("read{round}-{id}")), "").unwrap();
            wait_for(&sync, &format!("read{round}-"), RACERS);
            let edit = json!({
                "file_path": "race.txt",
                "old_string": line,
                "new_string": format!("count: {} by {id}", count + 1),
            });
            let verdict = match call_in(&set, &session, "Edit", edit).await {
                Ok(_) => format!("won {id}"),
                Err(message) => message.replace('\n', " "),
            };
            println!("RACE {round} {verdict}");
            std::fs::write(sync.join(format!("done{round}-{id}")), "").unwrap();
            wait_for(&sync, &format!("done{round}-"), RACERS);
        }
        set.close().await.unwrap();
    });
}
