//! Attacks on guarantee 6 (SECURITY.md, "no secrets"): whatever Toolbelt starts (a Bash
//! command, an `execute_code` program, an MCP stdio server), as root or as another user, with
//! the sandbox on or off, reads every `/proc/<pid>/environ` and `/proc/<pid>/cmdline` it can,
//! its parent's first, and finds none of the secrets Toolbelt itself was started with.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

/// A secret value no other process on the machine holds.
fn unique_secret(what: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("sealtest-{what}-{}{nanos:x}-value", std::process::id())
}

/// Prints every secret-shaped value (`sealtest-…-value`) found in the environment or command
/// line of any process, or `none`. The pattern's `valu[e]` keeps the command's own text from
/// matching itself.
const HARVEST_SH: &str = "{ tr '\\0' '\\n' < /proc/$PPID/environ; \
    for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < \"$f\"; done; \
    } 2>/dev/null | grep -o 'sealtest-[a-z]*-[0-9a-f]*-valu[e]' | sort -u | tr '\\n' ' '; echo none";

const HARVEST_PY: &str = r#"
import glob, os, re
found = set()
paths = ["/proc/%d/environ" % os.getppid()] + glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")
for path in paths:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        continue
    found.update(m.decode() for m in re.findall(rb"sealtest-[a-z]*-[0-9a-f]*-valu[e]", data))
print(" ".join(sorted(found)), "none")
"#;

fn toolbelt(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command.current_dir(dir);
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A base directory anyone may use (the other-user runs need to enter and write it).
fn open_base() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    base
}

/// Asserts that a harvest's output is the harvest's (it ran: it ends in `none`) and holds
/// none of `secrets`.
fn assert_nothing_found(out: &Output, secrets: &[&str], case: &str) {
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{case}: {}\n{stdout}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("none"),
        "{case}: the harvest did not run:\n{stdout}"
    );
    for secret in secrets {
        assert!(
            !stdout.contains(secret),
            "{case}: {secret} was read:\n{stdout}"
        );
    }
}

/// `toolbelt` run in `dir`, as root or (`as_nobody`) as user 65534 through `setpriv`.
fn toolbelt_as(dir: &Path, as_nobody: bool) -> Command {
    if !as_nobody {
        return toolbelt(dir);
    }
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir)
        .env("HOME", dir);
    command
}

/// `tools call TOOL ARGS` with two secrets in Toolbelt's environment, optionally as user 65534.
fn call_with_secrets(tool: &str, args: &serde_json::Value, flags: &[&str], as_nobody: bool) {
    let base = open_base();
    let key = unique_secret("openai");
    let token = unique_secret("serve");
    let mut command = toolbelt_as(base.path(), as_nobody);
    let out = command
        .args(["tools", "call", tool, &args.to_string(), "--dir", "."])
        .args(flags)
        .env("OPENAI_API_KEY", &key)
        .env("TOOLBELT_SERVE_TOKEN", &token)
        .output()
        .expect("run toolbelt (and setpriv, from util-linux, for the other-user cases)");
    let case = format!(
        "{tool} {flags:?} as {}",
        if as_nobody { "65534" } else { "root" }
    );
    assert_nothing_found(&out, &[&key, &token], &case);
}

#[test]
fn bash_reads_no_secret_of_toolbelt_from_proc_with_the_default_sandbox() {
    call_with_secrets(
        "Bash",
        &serde_json::json!({ "command": HARVEST_SH }),
        &[],
        false,
    );
}

#[test]
fn bash_reads_no_secret_of_toolbelt_from_proc_without_a_sandbox() {
    let args = serde_json::json!({ "command": HARVEST_SH });
    call_with_secrets("Bash", &args, &["--sandbox", "off"], false);
}

#[test]
fn bash_as_another_user_reads_no_secret_of_toolbelt_from_proc() {
    let args = serde_json::json!({ "command": HARVEST_SH });
    call_with_secrets("Bash", &args, &["--sandbox", "off"], true);
}

#[test]
fn a_terminal_session_reads_no_secret_of_toolbelt_from_proc() {
    // The harvest ends at once, so the first answer holds all it printed.
    let args = serde_json::json!({ "cmd": HARVEST_SH, "yield_time_ms": 5000 });
    call_with_secrets("exec_command", &args, &[], false);
    call_with_secrets("exec_command", &args, &["--sandbox", "off"], true);
}

#[test]
fn execute_code_reads_no_secret_of_toolbelt_from_proc() {
    let args = serde_json::json!({ "language": "python", "code": HARVEST_PY });
    call_with_secrets("execute_code", &args, &[], false);
    call_with_secrets("execute_code", &args, &["--sandbox", "off"], true);
}

/// A bare MCP stdio server (JSON-RPC lines, no SDK) with one tool, `harvest`, that reads what
/// [`HARVEST_PY`] reads.
const HARVEST_SERVER: &str = r#"
import json, sys
HARVEST = open(sys.argv[1]).read()
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "harvest", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "harvest", "description": "reads /proc",
                             "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        import contextlib, io
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(HARVEST, {})
        result = {"content": [{"type": "text", "text": out.getvalue()}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
"#;

#[test]
fn an_mcp_stdio_server_reads_no_secret_of_toolbelt_from_proc() {
    let base = open_base();
    std::fs::write(base.path().join("server.py"), HARVEST_SERVER).unwrap();
    std::fs::write(base.path().join("harvest.py"), HARVEST_PY).unwrap();
    let config = base.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {"harvest": {
            "command": "/usr/bin/python3",
            "args": [base.path().join("server.py"), base.path().join("harvest.py")]}}})
        .to_string(),
    )
    .unwrap();
    let key = unique_secret("openai");
    let token = unique_secret("serve");
    for as_nobody in [false, true] {
        let mut command = toolbelt_as(base.path(), as_nobody);
        let out = command
            .args(["tools", "call", "harvest", "{}", "--mcp-config"])
            .arg(&config)
            .env("OPENAI_API_KEY", &key)
            .env("TOOLBELT_SERVE_TOKEN", &token)
            .output()
            .expect("run toolbelt");
        assert_nothing_found(
            &out,
            &[&key, &token],
            &format!("MCP server, other user {as_nobody}"),
        );
    }
}

#[test]
fn serves_token_on_its_command_line_is_not_readable_from_proc() {
    let base = open_base();
    let token = unique_secret("flag");
    let mut serve = toolbelt(base.path())
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--dir",
            ".",
            "--token",
            &token,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run toolbelt serve");
    // Listening means main has long passed the sealing: wait for the address on stderr.
    let mut stderr = std::io::BufReader::new(serve.stderr.take().unwrap());
    let mut seen = String::new();
    let started = std::time::Instant::now();
    while !seen.contains("127.0.0.1") && started.elapsed() < Duration::from_secs(60) {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() == 0 {
            break;
        }
        seen += &line;
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", serve.id())).unwrap();
    let environ = std::fs::read(format!("/proc/{}/environ", serve.id())).unwrap_or_default();
    serve.kill().unwrap();
    serve.wait().unwrap();
    assert!(seen.contains("127.0.0.1"), "serve did not start:\n{seen}");
    let cmdline = text(&cmdline);
    assert!(cmdline.contains("--token"), "{cmdline:?}");
    assert!(
        !cmdline.contains(&token),
        "the token is on /proc's command line: {cmdline:?}"
    );
    assert!(!text(&environ).contains(&token));
}
