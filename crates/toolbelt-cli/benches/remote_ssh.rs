//! `--remote` per call, side by side in one run: Read, Grep and Bash through an
//! [`SshToolSet`] (the remote's `toolbelt serve --stdio` over ssh to the loopback sshd of
//! `.ci/start-services`), the same calls on the local built-in tool set, and a bare
//! `ssh -S CONTROL host cat FILE` on the tool set's own multiplexed master connection (a new
//! channel, the remote shell, `cat`: what running one command over ssh costs at least).
//! Rounds alternate which side goes first, so machine load hits all alike; medians printed.
//!
//! Rerun: `bash .ci/start-services` once, then
//! `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-cli --bench remote_ssh`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use toolbelt::builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt::mcp::ssh::{SshOptions, SshTarget, SshToolSet};
use toolbelt::{DynTool, ToolContext, ToolSet};

const ROUNDS: usize = 60;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn services() -> PathBuf {
    std::env::var_os("TOOLBELT_SERVICES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(format!("/var/tmp/toolbelt-services-{}", unsafe {
                libc::getuid()
            }))
        })
        .join("sshd")
}

fn tool(tools: &[DynTool], name: &str) -> DynTool {
    tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("{name} is offered"))
        .clone()
}

async fn call_ms(tool: &DynTool, args: &str) -> f64 {
    let start = Instant::now();
    let out = tool
        .call(ToolContext::new(), args)
        .await
        .unwrap_or_else(|e| panic!("{} failed: {e}", tool.name()));
    assert!(!out.is_error, "{}", out.llm_text());
    start.elapsed().as_secs_f64() * 1e3
}

fn bare_ssh_ms(config: &Path, control: &Path, url: &str, file: &Path) -> f64 {
    let authority = url.trim_start_matches("ssh://");
    let (user, host_port) = authority.split_once('@').expect("user@host:port");
    let (host, port) = host_port.rsplit_once(':').expect("host:port");
    let start = Instant::now();
    let out = Command::new("ssh")
        .arg("-F")
        .arg(config)
        .args(["-o", "BatchMode=yes", "-S"])
        .arg(control)
        .args(["-p", port, "-l", user, host, "cat"])
        .arg(file)
        .output()
        .expect("ssh runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    start.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let dir = services();
    let url = std::fs::read_to_string(dir.join("url"))
        .expect("the test sshd: run `bash .ci/start-services`")
        .trim()
        .to_string();
    let config = dir.join("ssh_config");
    let base = tempfile::tempdir().expect("a temp dir");
    let base_path = std::fs::canonicalize(base.path()).unwrap();
    let file = base_path.join("file.txt");
    let text: String = (0..200)
        .map(|i| format!("line {i} of the file\n"))
        .collect();
    std::fs::write(&file, &text).unwrap();
    for i in 0..50 {
        std::fs::write(
            base_path.join(format!("f{i}.txt")),
            format!("x\nneedle {i}\n"),
        )
        .unwrap();
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let local = BuiltinToolSet::new(BuiltinOptions::new(&base_path)).expect("local set");
        let target: SshTarget = format!("{url}{}", base_path.display()).parse().unwrap();
        let options = SshOptions {
            toolbelt: env!("CARGO_BIN_EXE_toolbelt").into(),
            ssh_config: Some(config.clone()),
            ..SshOptions::default()
        };
        let remote = SshToolSet::new("remote", target, options).expect("remote set");
        let start = Instant::now();
        remote
            .connect(&ToolContext::new())
            .await
            .expect("connects: run `bash .ci/start-services`");
        let connect_ms = start.elapsed().as_secs_f64() * 1e3;
        let local_tools = local.tools(&ToolContext::new()).await.unwrap();
        let remote_tools = remote.tools(&ToolContext::new()).await.unwrap();
        let read = serde_json::json!({"file_path": file.display().to_string()}).to_string();
        let grep = r#"{"pattern":"needle 4","output_mode":"content"}"#.to_string();
        let bash = serde_json::json!({"command": format!("cat {}", file.display())}).to_string();
        let cases = [("Read", read), ("Grep", grep), ("Bash", bash)];
        let control = remote.control_path();
        // [case][local, remote], and the bare ssh.
        let mut times = vec![[Vec::new(), Vec::new()]; cases.len()];
        let mut bare = Vec::new();
        for round in 0..ROUNDS {
            for (i, (name, args)) in cases.iter().enumerate() {
                let (l, r) = (tool(&local_tools, name), tool(&remote_tools, name));
                if round % 2 == 0 {
                    times[i][0].push(call_ms(&l, args).await);
                    times[i][1].push(call_ms(&r, args).await);
                } else {
                    times[i][1].push(call_ms(&r, args).await);
                    times[i][0].push(call_ms(&l, args).await);
                }
            }
            bare.push(bare_ssh_ms(&config, &control, &url, &file));
        }
        let bare = median(&mut bare);
        println!("connect (master login, remote check, MCP initialize and listing): {connect_ms:.1} ms");
        println!("bare `ssh -S CONTROL host cat FILE` on the multiplexed connection: {bare:.2} ms (median of {ROUNDS})");
        for (i, (name, _)) in cases.iter().enumerate() {
            let l = median(&mut times[i][0]);
            let r = median(&mut times[i][1]);
            println!(
                "{name:5} local {l:7.2} ms | over ssh {r:7.2} ms | ssh/bare {:.2}x | ssh/local {:.1}x",
                r / bare,
                r / l
            );
        }
        remote.close().await.unwrap();
        local.close().await.unwrap();
    });
}
