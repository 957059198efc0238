//! Helpers shared by the extension tests: skills on disk, the Python MCP server, the
//! scripted model.

#![allow(dead_code)]

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use toolbelt_model::{OpenAiConfig, OpenAiModel};

/// Writes `dir/name/SKILL.md` with `front_matter` (YAML lines) and `body`; returns the folder.
pub fn write_skill(dir: &Path, name: &str, front_matter: &str, body: &str) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        format!("---\n{front_matter}\n---\n{body}"),
    )
    .unwrap();
    folder
}

/// A model client for the scripted server.
pub fn model(base_url: String) -> OpenAiModel {
    OpenAiModel::new(OpenAiConfig::new(base_url, "scripted")).unwrap()
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// The Python SDK's FastMCP serving `tests/fixtures/skill_server.py` over streamable HTTP,
/// killed and reaped when dropped.
pub struct PyServer {
    child: Child,
    pub port: u16,
}

impl PyServer {
    pub fn start() -> Self {
        toolbelt_testkit::require_python_mcp_sdk();
        let port = free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skill_server.py");
        let mut child = Command::new(toolbelt_testkit::python())
            .arg(script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start python3");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err()
            || !toolbelt_testkit::pid_listens_on(child.id(), port)
        {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the MCP server exited early with {status}");
            }
            assert!(Instant::now() < deadline, "the MCP server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
