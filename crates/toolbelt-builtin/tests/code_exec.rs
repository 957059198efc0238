//! `execute_code`: Python and JavaScript programs, a timeout that leaves no process, a
//! produced image returned as an image block, the sandbox refusing a write outside the base,
//! and the read-only rule.

use crate::files_support::{run_code, set_on};
use crate::shell_support;

use base64::Engine as _;
use serde_json::json;
use shell_support::{read_pid_file, wait_until_gone};
use toolbelt_builtin::shell::SandboxMode;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::ContentBlock;

#[tokio::test]
async fn python_runs_in_the_base_dir_with_stdout_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("input.txt"), "21").unwrap();
    let set = set_on(dir.path());
    let code = "import sys\nn = int(open('input.txt').read())\nprint('double', n * 2)\n\
                print('warned', file=sys.stderr)\nsys.exit(3)\n";
    let out = run_code(&set, json!({"language": "python", "code": code})).await;
    let text = out.llm_text();
    assert!(text.contains("double 42"), "{text}");
    assert!(text.contains("warned"), "stderr is captured: {text}");
    assert!(text.ends_with("Exit code: 3"), "{text}");
    assert_eq!(out.meta.unwrap()["exit_code"], 3);
}

#[tokio::test]
async fn javascript_runs_with_node() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let code = "const xs = [1, 2, 3];\nconsole.log('sum', xs.reduce((a, b) => a + b, 0));";
    let out = run_code(&set, json!({"language": "javascript", "code": code})).await;
    assert_eq!(out.llm_text(), "sum 6\nExit code: 0");
}

#[tokio::test]
async fn a_timeout_kills_the_program_and_everything_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let code = "import os, subprocess\n\
                child = subprocess.Popen(['sleep', '300'])\n\
                open('pids.txt', 'w').write(f'{os.getpid()} {child.pid}')\n\
                while True:\n    pass\n";
    let out = run_code(
        &set,
        json!({"language": "python", "code": code, "timeout": 1500}),
    )
    .await;
    assert!(out.is_error, "{}", out.llm_text());
    assert!(
        out.llm_text().contains("timed out after 1500 ms"),
        "{}",
        out.llm_text()
    );
    let pids = std::fs::read_to_string(dir.path().join("pids.txt")).unwrap();
    for pid in pids.split_whitespace() {
        let pid: u32 = pid.parse().unwrap();
        assert!(wait_until_gone(pid), "process {pid} survived the timeout");
    }
}

/// A 2x2 red PNG written with the standard library only.
const PNG_PROGRAM: &str = r#"
import os, struct, zlib
def chunk(kind, data):
    body = kind + data
    return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body) & 0xffffffff)
raw = b''.join(b'\x00' + b'\xff\x00\x00' * 2 for _ in range(2))
png = (b'\x89PNG\r\n\x1a\n'
       + chunk(b'IHDR', struct.pack('>IIBBBBB', 2, 2, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(raw))
       + chunk(b'IEND', b''))
out = os.environ['OUTPUT_DIR']
open(os.path.join(out, 'red.png'), 'wb').write(png)
open(os.path.join(out, 'notes.txt'), 'w').write('hello')
os.symlink('/etc/passwd', os.path.join(out, 'link'))
print('written')
"#;

#[tokio::test]
async fn a_produced_png_comes_back_as_an_image_block() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let out = run_code(&set, json!({"language": "python", "code": PNG_PROGRAM})).await;
    assert!(!out.is_error, "{}", out.llm_text());
    let images: Vec<&ContentBlock> = out
        .blocks
        .iter()
        .filter(|b| matches!(b, ContentBlock::Image { .. }))
        .collect();
    assert_eq!(images.len(), 1, "{:?}", out.blocks);
    let ContentBlock::Image { mime_type, data } = images[0] else {
        unreachable!()
    };
    assert_eq!(mime_type, "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(bytes.ends_with(b"IEND\xaeB`\x82"), "a whole PNG");

    let text = out.llm_text();
    assert!(text.contains("red.png ("), "{text}");
    assert!(text.contains("notes.txt (5 bytes)"), "{text}");
    assert!(
        !text.contains("link"),
        "a symlink is never followed: {text}"
    );
}

#[tokio::test]
async fn the_sandbox_refuses_a_write_outside_the_base_dir() {
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let set = BuiltinToolSet::new(
        BuiltinOptions::new(base.path()).with_sandbox(SandboxMode::WorkspaceWrite),
    )
    .unwrap_or_else(|e| panic!("this kernel must enforce the workspace-write sandbox: {e}"));
    let target = outside.path().join("escape.txt");
    let code = format!(
        "open('inside.txt', 'w').write('ok')\nopen({:?}, 'w').write('escaped')\n",
        target.display().to_string()
    );
    let out = run_code(&set, json!({"language": "python", "code": code})).await;
    let text = out.llm_text();
    assert!(text.contains("PermissionError"), "{text}");
    assert!(!target.exists(), "the sandbox let a write escape");
    assert!(
        base.path().join("inside.txt").exists(),
        "writes inside stay allowed"
    );
}

#[tokio::test]
async fn execute_code_is_not_offered_in_read_only_mode() {
    let dir = tempfile::tempdir().unwrap();
    let set = BuiltinToolSet::new(BuiltinOptions::new(dir.path()).with_read_only(true)).unwrap();
    assert!(set.tool_list().iter().all(|t| t.name() != "execute_code"));
}

#[tokio::test]
async fn a_background_grandchild_is_killed_when_the_program_exits() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let code = "sleep 300 &\necho $! > bg.pid\necho started\n";
    let out = run_code(&set, json!({"language": "bash", "code": code})).await;
    assert!(out.llm_text().starts_with("started"), "{}", out.llm_text());
    let pid = read_pid_file(&dir.path().join("bg.pid")).await;
    assert!(wait_until_gone(pid), "the background sleep survived");
}

#[tokio::test]
async fn the_python_session_keeps_variables_until_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let first = run_code(
        &set,
        json!({"language": "python", "session": true, "code": "x = 41\nprint('set')"}),
    )
    .await;
    assert_eq!(first.llm_text(), "set\n", "{}", first.llm_text());
    let second = run_code(
        &set,
        json!({"language": "python", "session": true, "code": "x += 1\nprint(x)"}),
    )
    .await;
    assert_eq!(second.llm_text(), "42\n");

    let restarted = run_code(&set, json!({"language": "python", "session": true, "restart": true, "code": "print('x' in globals())"})).await;
    assert!(
        restarted.llm_text().contains("restarted"),
        "{}",
        restarted.llm_text()
    );
    assert!(
        restarted.llm_text().ends_with("False\n"),
        "{}",
        restarted.llm_text()
    );

    let failing = run_code(
        &set,
        json!({"language": "python", "session": true, "code": "y = 1\nraise ValueError('boom')"}),
    )
    .await;
    assert!(failing.is_error);
    assert!(
        failing.llm_text().contains("ValueError: boom"),
        "{}",
        failing.llm_text()
    );
    let kept = run_code(
        &set,
        json!({"language": "python", "session": true, "code": "print(y)"}),
    )
    .await;
    assert_eq!(
        kept.llm_text(),
        "1\n",
        "an exception does not lose the session"
    );
}

#[tokio::test]
async fn a_session_timeout_kills_the_interpreter_and_the_next_call_starts_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    run_code(&set, json!({"language": "python", "session": true, "code": "import os\nopen('pid', 'w').write(str(os.getpid()))\nkept = 1"})).await;
    let pid = read_pid_file(&dir.path().join("pid")).await;
    let spin = run_code(&set, json!({"language": "python", "session": true, "timeout": 1500, "code": "while True:\n    pass"})).await;
    assert!(spin.is_error);
    assert!(
        spin.llm_text().contains("timed out after 1500 ms"),
        "{}",
        spin.llm_text()
    );
    assert!(wait_until_gone(pid), "the interpreter survived its timeout");

    let after = run_code(
        &set,
        json!({"language": "python", "session": true, "code": "print('kept' in globals())"}),
    )
    .await;
    assert!(
        after.llm_text().contains("new Python session"),
        "{}",
        after.llm_text()
    );
    assert!(
        after.llm_text().ends_with("False\n"),
        "{}",
        after.llm_text()
    );
}

#[tokio::test]
async fn a_crashed_session_says_so_and_closing_the_set_kills_the_interpreter() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let crash = run_code(
        &set,
        json!({"language": "python", "session": true, "code": "import os\nos._exit(7)"}),
    )
    .await;
    assert!(crash.is_error);
    assert!(
        crash.llm_text().contains("session ended (exit code 7)"),
        "{}",
        crash.llm_text()
    );

    run_code(&set, json!({"language": "python", "session": true, "code": "import os\nopen('pid', 'w').write(str(os.getpid()))"})).await;
    let pid = read_pid_file(&dir.path().join("pid")).await;
    toolbelt_core::ToolSet::close(&set).await.unwrap();
    assert!(
        wait_until_gone(pid),
        "closing the set left the interpreter running"
    );
}
