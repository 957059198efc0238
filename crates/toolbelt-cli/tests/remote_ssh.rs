//! `--remote ssh://…` through the built binary against Debian's openssh-server on
//! 127.0.0.1:2222 (`bash .ci/start-services`, which writes the client's ssh_config with a
//! throwaway key and known_hosts): every built-in tool gives over SSH what it gives locally
//! on the same tree, the confinement attacks are refused by the remote helper, a Bash timeout
//! leaves nothing running there, a connection killed mid-call is an unknown outcome that is
//! not run again (and the next call reconnects), and host keys are checked. The remote is
//! this machine, so its processes and files are checked directly. Without the service these
//! tests fail with the hint.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};
use toolbelt_testkit::{eventually, is_running, pids_in};

use crate::serve_support::{RawStdio, toolbelt};

/// The test sshd of `.ci/start-services`: its URL (`ssh://user@127.0.0.1:2222`) and the
/// client's files.
struct Sshd {
    url: String,
    dir: PathBuf,
}

fn sshd() -> Sshd {
    let services = std::env::var_os("TOOLBELT_SERVICES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(format!("/var/tmp/toolbelt-services-{}", unsafe {
                libc::getuid()
            }))
        });
    let dir = services.join("sshd");
    let url = std::fs::read_to_string(dir.join("url")).unwrap_or_default();
    let url = url.trim().to_string();
    let port = url.rsplit(':').next().unwrap_or("2222").to_string();
    let answers = std::net::TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_secs(2),
    )
    .is_ok();
    assert!(
        !url.is_empty() && dir.join("ssh_config").is_file() && answers,
        "the test sshd is not running (no {} or nothing on 127.0.0.1:{port}): start it with \
         `bash .ci/start-services`",
        dir.join("url").display()
    );
    Sshd { url, dir }
}

impl Sshd {
    /// `--remote` flags for `base` with the test's ssh_config and the binary under test as
    /// the remote's toolbelt.
    fn remote(&self, base: &Path) -> Vec<String> {
        self.remote_with(base, &self.dir.join("ssh_config"))
    }

    fn remote_with(&self, base: &Path, config: &Path) -> Vec<String> {
        vec![
            "--remote".into(),
            format!("{}{}", self.url, base.display()),
            "--remote-toolbelt".into(),
            toolbelt().into(),
            "--remote-ssh-config".into(),
            config.display().to_string(),
        ]
    }

    /// An ssh_config with the test key and `known_hosts` as the known hosts file.
    fn config_with_known_hosts(&self, dir: &Path, known_hosts: &Path) -> PathBuf {
        let config = dir.join("ssh_config");
        std::fs::write(
            &config,
            format!(
                "IdentityFile {}\nIdentitiesOnly yes\nUserKnownHostsFile {}\n\
                 GlobalKnownHostsFile /dev/null\n",
                self.dir.join("id_ed25519").display(),
                known_hosts.display()
            ),
        )
        .unwrap();
        config
    }

    /// The fingerprint of the test host's key (`SHA256:…`).
    fn host_fingerprint(&self) -> String {
        let out = Command::new("ssh-keygen")
            .arg("-lf")
            .arg(self.dir.join("host_ed25519.pub"))
            .output()
            .expect("ssh-keygen runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `toolbelt ARGS…`.
fn toolbelt_run(args: &[String]) -> Output {
    Command::new(toolbelt())
        .args(args)
        .output()
        .expect("run toolbelt")
}

/// `toolbelt tools call NAME ARGS` with `flags` (`--remote …`).
fn call(name: &str, arguments: Value, flags: &[String]) -> Output {
    let mut args: Vec<String> = vec!["tools".into(), "call".into(), name.into()];
    args.push(arguments.to_string());
    args.extend(flags.iter().cloned());
    toolbelt_run(&args)
}

/// `toolbelt serve --stdio` in `base`, with `extra` flags (`--remote …` or none).
fn serve(base: &Path, extra: &[String]) -> RawStdio {
    let mut args: Vec<String> = vec!["serve".into(), "--dir".into(), base.display().to_string()];
    args.extend(extra.iter().cloned());
    RawStdio::start(toolbelt(), &args)
}

/// One `tools/call`: (is_error, the text of its content).
fn serve_call(peer: &mut RawStdio, name: &str, arguments: Value) -> (bool, String) {
    let answer = peer.request("tools/call", json!({"name": name, "arguments": arguments}));
    let result = &answer["result"];
    assert!(result.is_object(), "no result for {name}: {answer}");
    let content = result["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .map(|p| p["text"].as_str().unwrap_or("<non-text>").to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    (result["isError"].as_bool().unwrap_or(false), content)
}

/// The tree every comparison runs on: sources, docs, an ignored file, a notebook.
fn make_tree(base: &Path) {
    if base.exists() {
        std::fs::remove_dir_all(base).unwrap();
    }
    for dir in ["src", "docs/deep"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
    }
    let files: [(&str, &str); 7] = [
        (
            "src/main.rs",
            "fn main() {\n    println!(\"needle one\");\n}\n",
        ),
        ("src/lib.rs", "pub fn needle() {}\n// TODO needle two\n"),
        (
            "docs/readme.md",
            "# Title\nNeedle in the docs\nsecond line\n",
        ),
        ("docs/deep/notes.txt", "nothing here\nneedle deep\n"),
        (".gitignore", "ignored.txt\n"),
        ("ignored.txt", "needle ignored\n"),
        (
            "nb.ipynb",
            r#"{"cells":[{"cell_type":"code","id":"c1","metadata":{},"source":["print(1)\n"],"outputs":[],"execution_count":null}],"metadata":{},"nbformat":4,"nbformat_minor":5}"#,
        ),
    ];
    for (path, content) in files {
        std::fs::write(base.join(path), content).unwrap();
    }
}

/// Every file under `base` with its bytes.
fn tree_bytes(base: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(base).unwrap().display().to_string();
                files.insert(rel, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    files
}

/// The same calls of every built-in tool (but the web ones: no network here), in one
/// session; each answer with volatile ids replaced.
fn every_tool(base: &Path, extra: &[String]) -> Vec<(String, bool, String)> {
    make_tree(base);
    let b = base.display().to_string();
    let mut peer = serve(base, extra);
    let mut answers = Vec::new();
    let mut run = |peer: &mut RawStdio, label: &str, name: &str, args: Value| {
        let (is_error, text) = serve_call(peer, name, args);
        answers.push((label.to_string(), is_error, text.clone()));
        text
    };
    let calls: Vec<(&str, &str, Value)> = vec![
        (
            "read",
            "Read",
            json!({"file_path": format!("{b}/src/main.rs")}),
        ),
        (
            "read range",
            "Read",
            json!({"file_path": format!("{b}/src/main.rs"), "offset": 2, "limit": 1}),
        ),
        (
            "read missing",
            "Read",
            json!({"file_path": format!("{b}/nope.txt")}),
        ),
        ("glob rs", "Glob", json!({"pattern": "**/*.rs"})),
        (
            "glob in docs",
            "Glob",
            json!({"pattern": "**/*", "path": format!("{b}/docs")}),
        ),
        ("grep files", "Grep", json!({"pattern": "needle"})),
        (
            "grep content",
            "Grep",
            json!({"pattern": "needle", "output_mode": "content", "-n": true}),
        ),
        (
            "grep count",
            "Grep",
            json!({"pattern": "TODO|needle", "output_mode": "count"}),
        ),
        (
            "grep -i -C",
            "Grep",
            json!({"pattern": "NEEDLE", "-i": true, "glob": "*.md", "output_mode": "content", "-C": 1}),
        ),
        (
            "write",
            "Write",
            json!({"file_path": format!("{b}/new.txt"), "content": "one\ntwo\n"}),
        ),
        (
            "read new",
            "Read",
            json!({"file_path": format!("{b}/new.txt")}),
        ),
        (
            "edit",
            "Edit",
            json!({"file_path": format!("{b}/new.txt"), "old_string": "two", "new_string": "three"}),
        ),
        (
            "edit unread",
            "Edit",
            json!({"file_path": format!("{b}/src/lib.rs"), "old_string": "TODO", "new_string": "DONE"}),
        ),
        (
            "read notebook",
            "Read",
            json!({"file_path": format!("{b}/nb.ipynb")}),
        ),
        (
            "notebook edit",
            "NotebookEdit",
            json!({"notebook_path": format!("{b}/nb.ipynb"), "cell_id": "c1", "new_source": "print(2)\n"}),
        ),
        (
            "apply_patch",
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Add File: added.txt\n+hello\n+patched\n*** End Patch\n"}),
        ),
        (
            "bash",
            "Bash",
            json!({"command": "ls -R | sort; cat new.txt added.txt; echo $((6*7))"}),
        ),
        (
            "bash exit 3",
            "Bash",
            json!({"command": "echo out; echo err >&2; exit 3"}),
        ),
        (
            "execute_code",
            "execute_code",
            json!({"language": "python", "code": "print(sum(range(10)))"}),
        ),
        (
            "todo",
            "TodoWrite",
            json!({"todos": [{"content": "Run the tests", "activeForm": "Running the tests", "status": "in_progress"}]}),
        ),
        ("glob all", "Glob", json!({"pattern": "**/*.txt"})),
        (
            "grep after",
            "Grep",
            json!({"pattern": "three|patched|print", "output_mode": "content"}),
        ),
    ];
    for (label, name, args) in calls {
        run(&mut peer, label, name, args);
    }
    if !extra.is_empty() {
        // Those answers came over ssh: the session's channel is up.
        let sessions = processes_with(&b, Some("ControlMaster=auto"));
        assert_eq!(sessions.len(), 1, "no ssh session: {sessions:?}");
    }
    // Background tasks: the task id is the session's own; compare what surrounds it.
    let started = run(
        &mut peer,
        "task start",
        "Bash",
        json!({"command": "echo bg-done", "run_in_background": true}),
    );
    let id = task_id(&started);
    run(
        &mut peer,
        "task output",
        "TaskOutput",
        json!({"task_id": id, "block": true}),
    );
    let sleeper = run(
        &mut peer,
        "task sleeper",
        "Bash",
        json!({"command": "sleep 300", "run_in_background": true}),
    );
    let sleeper = task_id(&sleeper);
    run(
        &mut peer,
        "task stop",
        "TaskStop",
        json!({"task_id": sleeper}),
    );
    // A terminal session: what it echoes arrives in its own time, so only its content is
    // compared (below), not the bytes.
    let (opened_err, opened) = serve_call(
        &mut peer,
        "exec_command",
        json!({"cmd": "cat", "yield_time_ms": 200}),
    );
    assert!(!opened_err, "{opened}");
    let session = opened
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no session id in {opened}"));
    let (typed_err, typed) = serve_call(
        &mut peer,
        "write_stdin",
        json!({"session_id": session, "chars": "typed-line\n", "yield_time_ms": 2000}),
    );
    assert!(!typed_err && typed.contains("typed-line"), "{typed}");
    let (closed_err, closed) = serve_call(
        &mut peer,
        "write_stdin",
        json!({"session_id": session, "close": true}),
    );
    assert!(!closed_err, "{closed}");
    assert!(peer.finish().success(), "serve failed");
    for answer in &mut answers {
        answer.2 = without_shell_dir(&answer.2);
    }
    answers
}

/// `text` with the shell's private temp folder (a random name per tool set, where task logs
/// go) replaced by `<shell-dir>`.
fn without_shell_dir(text: &str) -> String {
    let prefix = std::env::temp_dir()
        .join("toolbelt-shell-")
        .display()
        .to_string();
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        out.push_str(&rest[..at]);
        out.push_str("<shell-dir>");
        let after = &rest[at + prefix.len()..];
        rest = &after[after.find('/').unwrap_or(after.len())..];
    }
    out.push_str(rest);
    out
}

/// The task id in Bash's answer to a background start.
fn task_id(answer: &str) -> String {
    answer
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | ',' | '.' | ':' | '(' | ')'))
        .find(|w| w.len() >= 4 && w.chars().any(|c| c.is_ascii_digit()) && w.contains(['_', '-']))
        .unwrap_or_else(|| panic!("no task id in {answer:?}"))
        .to_string()
}

#[test]
fn every_builtin_tool_answers_over_ssh_as_it_does_locally_on_the_same_tree() {
    let sshd = sshd();
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("tree");
    let here = every_tool(&base, &[]);
    let here_files = tree_bytes(&base);
    let there = every_tool(&base, &sshd.remote(&base));
    let there_files = tree_bytes(&base);
    assert_eq!(here.len(), there.len());
    for (local, remote) in here.iter().zip(&there) {
        assert_eq!(local, remote, "{} differs over ssh", local.0);
    }
    // The answers say what they should (so equal is not equally broken).
    let answer = |label: &str| &there.iter().find(|a| a.0 == label).unwrap().2;
    assert!(
        answer("grep content").contains("src/main.rs:2:"),
        "{}",
        answer("grep content")
    );
    assert!(
        !answer("grep files").contains("ignored.txt"),
        "{}",
        answer("grep files")
    );
    assert!(answer("bash").contains("42"), "{}", answer("bash"));
    assert!(
        answer("execute_code").contains("45"),
        "{}",
        answer("execute_code")
    );
    assert!(
        answer("task output").contains("bg-done"),
        "{}",
        answer("task output")
    );
    assert_eq!(there_files, here_files, "the tree after the calls differs");
    assert_eq!(
        there_files.get("new.txt").map(Vec::as_slice),
        Some(&b"one\nthree\n"[..])
    );
}

#[test]
fn confinement_attacks_over_ssh_are_refused_by_the_remote_helper() {
    let sshd = sshd();
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = "outside-secret-7f3a";
    std::fs::write(outside.path().join("secret.txt"), format!("{secret}\n")).unwrap();
    let b = base.path();
    std::os::unix::fs::symlink(outside.path(), b.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), b.join("filelink")).unwrap();
    std::fs::create_dir(b.join("x")).unwrap();
    let remote = sshd.remote(b);
    let bp = b.display();
    for path in [
        format!("{bp}/link/secret.txt"),
        format!("{bp}/x/../link/secret.txt"),
        format!("{bp}/filelink"),
        outside.path().join("secret.txt").display().to_string(),
    ] {
        let out = call("Read", json!({"file_path": path}), &remote);
        let said = text(&out.stdout) + &text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "Read {path} was not refused: {said}"
        );
        assert!(!said.contains(secret), "Read {path} leaked: {said}");
    }
    let out = call(
        "Write",
        json!({"file_path": format!("{bp}/link/planted.txt"), "content": "x"}),
        &remote,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(!outside.path().join("planted.txt").exists());
    for (tool, args) in [
        ("Grep", json!({"pattern": secret, "output_mode": "content"})),
        ("Glob", json!({"pattern": "**/*"})),
    ] {
        let out = call(tool, args, &remote);
        let said = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{tool}: {}", text(&out.stderr));
        assert!(
            !said.contains(secret) && !said.contains("secret.txt"),
            "{tool}: {said}"
        );
    }
    // Bash in the remote's workspace-write sandbox cannot write outside the base.
    let target = outside.path().join("bash-wrote.txt");
    let out = call(
        "Bash",
        json!({"command": format!("echo x > {}; echo done", target.display())}),
        &remote,
    );
    assert!(text(&out.stdout).contains("done"), "{}", text(&out.stderr));
    assert!(!target.exists(), "Bash wrote outside the base over ssh");
}

/// The pids of processes whose command line has an argument containing `marker` (and, when
/// given, one equal to `arg`), but not this test's own.
fn processes_with(marker: &str, arg: Option<&str>) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || !is_running(pid) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a.contains(marker))
            && arg.is_none_or(|x| args.iter().any(|a| a == x))
        {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_bash_timeout_over_ssh_leaves_no_process_on_the_remote() {
    let sshd = sshd();
    let base = tempfile::tempdir().unwrap();
    let pids = base.path().join("pids");
    let out = call(
        "Bash",
        json!({"command": "echo $$ > pids; sleep 300 & echo $! >> pids; wait", "timeout": 1000}),
        &sshd.remote(base.path()),
    );
    // A failed call's text goes to stderr.
    let said = text(&out.stderr);
    assert!(said.contains("timed out after 1000 ms"), "{said}");
    assert_eq!(out.status.code(), Some(1), "{said}");
    let pids = pids_in(&pids, 2).expect("the command wrote its pids");
    for pid in pids {
        eventually(
            format!("remote process {pid} ends"),
            Duration::from_secs(10),
            || (!is_running(pid)).then_some(()),
        );
    }
    // And the remote serve and its ssh went with the command.
    let marker = base.path().display().to_string();
    eventually(
        "the remote serve and ssh end",
        Duration::from_secs(10),
        || processes_with(&marker, None).is_empty().then_some(()),
    );
}

#[test]
fn a_connection_killed_mid_call_is_an_unknown_outcome_never_rerun_and_the_next_call_reconnects() {
    killed_mid_call("ControlMaster=auto");
}

#[test]
fn the_master_connection_killed_mid_call_is_an_unknown_outcome_and_the_next_call_reconnects() {
    killed_mid_call("ControlMaster=yes");
}

/// A Bash call over SSH while the ssh process whose command line has `which` is killed
/// (`ControlMaster=auto`: the session's channel carrying MCP; `ControlMaster=yes`: the
/// master connection it is multiplexed over): the call is an unknown outcome, the command
/// ran once and ends on the remote, and the next call reconnects.
fn killed_mid_call(which: &'static str) {
    let sshd = sshd();
    let base = tempfile::tempdir().unwrap();
    let once = base.path().join("once.txt");
    let pids = base.path().join("pids");
    let mut peer = serve(base.path(), &sshd.remote(base.path()));
    let marker = base.path().display().to_string();
    // Kills the ssh named by `which` once the command runs.
    let killer = {
        let once = once.clone();
        let marker = marker.clone();
        std::thread::spawn(move || {
            eventually("the command runs", Duration::from_secs(30), || {
                std::fs::metadata(&once).ok().filter(|m| m.len() > 0)
            });
            let targets = processes_with(&marker, Some(which));
            assert_eq!(targets.len(), 1, "one {which} ssh: {targets:?}");
            // SAFETY: signalling an ssh process this test's serve started.
            unsafe { libc::kill(targets[0] as i32, libc::SIGKILL) };
            targets[0]
        })
    };
    let (is_error, said) = serve_call(
        &mut peer,
        "Bash",
        json!({"command": "echo ran >> once.txt; echo $$ > pids; sleep 30"}),
    );
    let killed = killer.join().unwrap();
    assert!(is_error, "{said}");
    assert!(said.contains("may or may not have run"), "{said}");
    // The remote command ends with its session (its serve saw the channel close).
    let pid = pids_in(&pids, 1).unwrap()[0];
    eventually("the remote command ends", Duration::from_secs(15), || {
        (!is_running(pid)).then_some(())
    });
    // The next call reconnects, over a new session ssh.
    let (is_error, said) = serve_call(
        &mut peer,
        "Read",
        json!({"file_path": once.display().to_string()}),
    );
    assert!(!is_error, "{said}");
    assert!(said.contains("ran"), "{said}");
    let now = processes_with(&marker, Some(which));
    assert!(now.iter().all(|pid| *pid != killed), "{which}: {now:?}");
    // Never re-run: one line.
    assert_eq!(std::fs::read_to_string(&once).unwrap(), "ran\n");
    assert!(peer.finish().success(), "serve failed");
    eventually("every ssh of the set ends", Duration::from_secs(15), || {
        processes_with(&marker, None).is_empty().then_some(())
    });
}

#[test]
fn a_changed_host_key_is_refused_with_the_fingerprint_even_with_accept_new() {
    let sshd = sshd();
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&wrong)
        .status()
        .unwrap();
    assert!(made.success());
    let key = std::fs::read_to_string(wrong.with_extension("pub")).unwrap();
    let key: Vec<&str> = key.split_whitespace().take(2).collect();
    let port = sshd.url.rsplit(':').next().unwrap().to_string();
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!("[127.0.0.1]:{port} {}\n", key.join(" ")),
    )
    .unwrap();
    let config = sshd.config_with_known_hosts(dir.path(), &known_hosts);
    for accept_new in [false, true] {
        let mut args: Vec<String> = vec!["tools".into(), "list".into()];
        args.extend(sshd.remote_with(dir.path(), &config));
        if accept_new {
            args.push("--remote-accept-new".into());
        }
        let out = toolbelt_run(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("is not the one in known_hosts"), "{stderr}");
        assert!(stderr.contains(&sshd.host_fingerprint()), "{stderr}");
        assert!(!text(&out.stdout).contains("Bash"), "tools were listed");
    }
}

#[test]
fn an_unknown_host_is_refused_with_its_fingerprint_and_accepted_with_accept_new() {
    let sshd = sshd();
    let dir = tempfile::tempdir().unwrap();
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(&known_hosts, "").unwrap();
    let config = sshd.config_with_known_hosts(dir.path(), &known_hosts);
    let mut args: Vec<String> = vec!["tools".into(), "list".into()];
    args.extend(sshd.remote_with(dir.path(), &config));
    let out = toolbelt_run(&args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is not in known_hosts"), "{stderr}");
    assert!(stderr.contains(&sshd.host_fingerprint()), "{stderr}");
    assert!(stderr.contains("--remote-accept-new"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), "");

    args.push("--remote-accept-new".into());
    let out = toolbelt_run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Bash"), "{}", text(&out.stdout));
    let recorded = std::fs::read_to_string(&known_hosts).unwrap();
    let host_key = std::fs::read_to_string(sshd.dir.join("host_ed25519.pub")).unwrap();
    let host_key: Vec<&str> = host_key.split_whitespace().take(2).collect();
    assert!(recorded.contains(&host_key.join(" ")), "{recorded}");
}

#[test]
fn a_remote_without_the_binary_or_the_directory_is_named() {
    let sshd = sshd();
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec!["tools".into(), "list".into()];
    args.extend(sshd.remote(dir.path()));
    let at = args.iter().position(|a| a == "--remote-toolbelt").unwrap();
    args[at + 1] = "/nonexistent/toolbelt".into();
    let out = toolbelt_run(&args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no Toolbelt on 127.0.0.1"), "{stderr}");
    assert!(stderr.contains("--remote-toolbelt"), "{stderr}");

    let mut args: Vec<String> = vec!["tools".into(), "list".into()];
    args.extend(sshd.remote(&dir.path().join("missing")));
    let out = toolbelt_run(&args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("missing on 127.0.0.1 is not a directory"),
        "{stderr}"
    );
}

#[test]
fn a_bad_remote_url_is_a_usage_error_saying_why() {
    for (url, why) in [
        ("127.0.0.1:/tmp", "must start with ssh://"),
        ("ssh://127.0.0.1", "base directory"),
        ("ssh://-oProxyCommand=touch/tmp", "the host may hold"),
        ("ssh://h:70000/tmp", "port"),
    ] {
        let out = toolbelt_run(&["tools".into(), "list".into(), "--remote".into(), url.into()]);
        assert_eq!(out.status.code(), Some(2), "{url}");
        assert!(
            text(&out.stderr).contains(why),
            "{url}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_swap_race_over_ssh_never_shows_outside_bytes_or_names() {
    let sshd = sshd();
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (marker, outside_name) = ("OUTSIDE-race-c41d", "only-outside-e5.txt");
    std::fs::write(outside.path().join("secret.txt"), format!("{marker}\n")).unwrap();
    std::fs::write(outside.path().join(outside_name), format!("{marker}\n")).unwrap();
    let b = base.path();
    // `flip` is a real directory or a symlink to outside, `fflip.txt` a real file or a
    // symlink to the outside secret, swapped atomically with their `.alt` counterparts.
    std::fs::create_dir(b.join("flip")).unwrap();
    std::fs::write(b.join("flip/inner.txt"), "inside inner\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), b.join("flip.alt")).unwrap();
    std::fs::write(b.join("fflip.txt"), "inside fflip\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), b.join("fflip.alt")).unwrap();
    let race =
        toolbelt_testkit::SwapRace::start(b, &[("flip", "flip.alt"), ("fflip.txt", "fflip.alt")]);
    let mut peer = serve(b, &sshd.remote(b));
    let (mut calls, mut answered) = (0, 0);
    for _ in 0..25 {
        for (tool, args) in [
            (
                "Grep",
                json!({"pattern": "inside|OUTSIDE", "output_mode": "content", "head_limit": 0}),
            ),
            (
                "Grep",
                json!({"pattern": "inside|OUTSIDE", "path": "flip", "output_mode": "content"}),
            ),
            ("Read", json!({"file_path": "flip/inner.txt"})),
            ("Read", json!({"file_path": "fflip.txt"})),
            ("Glob", json!({"pattern": "**/*"})),
            ("Glob", json!({"pattern": "*", "path": "flip"})),
        ] {
            let (is_error, said) = serve_call(&mut peer, tool, args.clone());
            assert!(!said.contains(marker), "{tool} {args} leaked: {said}");
            assert!(
                !said.contains(outside_name),
                "{tool} {args} leaked a name: {said}"
            );
            calls += 1;
            answered += usize::from(!is_error);
        }
    }
    let flips = race.stop();
    assert!(peer.finish().success(), "serve failed");
    assert_eq!(calls, 150);
    assert!(flips > 10, "the race ran ({flips} flips)");
    assert!(answered > 0, "no call answered");
}
