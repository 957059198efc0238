//! The built-in tools on another machine, over SSH ([`SshToolSet`]).
//!
//! Toolbelt's own binary is the helper on the remote: `toolbelt serve --stdio --dir PATH`
//! started through the system `ssh` client, spoken to as an MCP stdio server. So every
//! built-in tool runs there with the remote kernel checking each open (`openat2` beneath
//! the base, Landlock, the process owner ending Bash's whole tree), its outputs are the ones
//! the same binary gives locally, and the tool names stay the built-in ones. What the MCP
//! client guarantees holds here too: a call whose request may have reached the remote when
//! the connection was lost is reported as an unknown outcome and never sent again, and the
//! next call reconnects.
//!
//! The connection is OpenSSH's, with its checks: host keys against `known_hosts`
//! (`StrictHostKeyChecking=yes`, or `accept-new` when asked), keys from the agent or
//! `~/.ssh`, `BatchMode=yes` so it never prompts. One master connection per tool set
//! (`ControlMaster`, its socket in a private 0700 directory) is opened first: it checks the
//! host key, logs in and looks for the remote binary and base directory, so those failures
//! are named (with the fingerprint ssh saw) before MCP starts; the MCP session then runs as
//! a multiplexed channel of it, with no second handshake. Both are children of the one
//! process owner and end with the tool set: no master outlives it.

use std::fmt;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;
use tokio::sync::Mutex;
use toolbelt_core::{DynTool, ToolContext, ToolError, ToolSet};
use toolbelt_process::{Contain, Contained, Containment, Grace};

use crate::config::{ConnectionConfig, TransportConfig};
use crate::error::{FailureKind, McpError, Step};
use crate::{McpToolSet, TERM_GRACE};

/// How long the master connection may take to log in and answer.
const CONNECT_LIMIT: Duration = Duration::from_secs(30);
/// The remote serve's calls may run as long as Bash's longest timeout (ten minutes); a
/// call's own deadline, when it has one, is shorter.
const CALL_LIMIT: Duration = Duration::from_secs(620);
/// How many of ssh's stderr lines a failure message keeps.
const STDERR_LINES: usize = 40;
/// Reconnects per call after a lost session (as the CLI's MCP servers).
const RECONNECTS: u8 = 3;

/// Where the tools run: `ssh://[user@]host[:port]/path`, the path being the base directory
/// on the remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    user: Option<String>,
    host: String,
    port: Option<u16>,
    path: String,
}

/// A `--remote` URL that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshUrlError(String);

impl fmt::Display for SshUrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SshUrlError {}

impl FromStr for SshTarget {
    type Err = SshUrlError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            SshUrlError(format!(
                "{url:?} is not ssh://[user@]host[:port]/path: {why}"
            ))
        };
        if url.len() > 4096 {
            return Err(SshUrlError("the URL is longer than 4096 bytes".into()));
        }
        if url.chars().any(char::is_control) {
            return Err(bad("it contains a control character"));
        }
        let rest = url
            .strip_prefix("ssh://")
            .ok_or_else(|| bad("it must start with ssh://"))?;
        if rest.contains(['?', '#']) {
            return Err(bad("a query or fragment has no meaning here"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => {
                return Err(bad(
                    "the base directory (an absolute path after the host) is missing",
                ));
            }
        };
        let (user, host_port) = match authority.rsplit_once('@') {
            Some((user, host)) => (Some(user), host),
            None => (None, authority),
        };
        if let Some(user) = user
            && (user.is_empty()
                || user.starts_with('-')
                || !user
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(bad(
                "the user name may hold letters, digits, '.', '_' and '-' (not first)",
            ));
        }
        let (host, port) = if let Some(inner) = host_port.strip_prefix('[') {
            let (ip, after) = inner
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address needs its closing ']'"))?;
            if ip.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(bad("the address in brackets is not IPv6"));
            }
            match after {
                "" => (ip, None),
                _ => (
                    ip,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| bad("junk after ']'"))?,
                    ),
                ),
            }
        } else {
            let (host, port) = match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            };
            if host.is_empty() {
                return Err(bad("the host is missing"));
            }
            // A leading '-' would be read by ssh as an option.
            if host.starts_with('-')
                || !host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            {
                return Err(bad(
                    "the host may hold letters, digits, '.', '-' and '_' (not first)",
                ));
            }
            (host, port)
        };
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?,
            ),
        };
        Ok(Self {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ssh://")?;
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        f.write_str(&self.path)
    }
}

impl SshTarget {
    /// The base directory on the remote.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The host, as given.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// How to reach the remote and what to start there.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// Accept and record a host key seen for the first time (OpenSSH's
    /// `StrictHostKeyChecking=accept-new`); a changed key is still refused. Off by default.
    pub accept_new: bool,
    /// The Toolbelt program on the remote (default `toolbelt`, looked up on its `PATH`).
    pub toolbelt: String,
    /// An ssh configuration file used instead of `~/.ssh/config` (`ssh -F`).
    pub ssh_config: Option<PathBuf>,
    /// The local ssh client (default `ssh` on `PATH`).
    pub ssh: String,
    /// Flags for the remote `toolbelt serve` after `--stdio --dir PATH` (`--read-only`,
    /// `--sandbox MODE`, …).
    pub serve_args: Vec<String>,
}

impl Default for SshOptions {
    fn default() -> Self {
        Self {
            accept_new: false,
            toolbelt: "toolbelt".into(),
            ssh_config: None,
            ssh: "ssh".into(),
            serve_args: Vec::new(),
        }
    }
}

/// The built-in tools of a Toolbelt on another machine, as one tool set (see the module
/// doc). Connects on first listing, or at once with [`SshToolSet::connect`]; whoever made it
/// closes it.
pub struct SshToolSet {
    name: String,
    target: SshTarget,
    options: SshOptions,
    control: ControlDir,
    master: Mutex<Option<Master>>,
    mcp: McpToolSet,
}

impl fmt::Debug for SshToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SshToolSet")
            .field("target", &self.target.to_string())
            .finish_non_exhaustive()
    }
}

impl SshToolSet {
    /// A tool set named `name` for the Toolbelt at `target`. Makes the private directory of
    /// the connection's control socket; connects nothing yet.
    pub fn new(
        name: impl Into<String>,
        target: SshTarget,
        options: SshOptions,
    ) -> Result<Self, McpError> {
        let name = name.into();
        let control = ControlDir::create().map_err(|e| {
            McpError::new(
                &name,
                Step::Connect,
                FailureKind::Configuration,
                format!("cannot make a private directory for the ssh control socket: {e}"),
            )
        })?;
        let mut args = ssh_args(&target, &options, &control.socket());
        args.extend(["-o".into(), "ControlMaster=auto".into()]);
        args.push("--".into());
        args.push(destination(&target));
        args.push(serve_command(&target, &options));
        let transport = TransportConfig::Stdio {
            command: options.ssh.clone(),
            args,
            env: Default::default(),
            // The agent's socket: keys from ssh-agent. Nothing else of ours goes to ssh.
            env_vars: vec!["SSH_AUTH_SOCK".into()],
            cwd: None,
        };
        let config = ConnectionConfig::new(transport)
            .with_timeout(CALL_LIMIT)
            .with_description(format!("the built-in tools at {target}"));
        let mcp = McpToolSet::builder(name.as_str(), config)
            .session_reconnect(RECONNECTS)
            .build()?;
        Ok(Self {
            name,
            target,
            options,
            control,
            master: Mutex::new(None),
            mcp,
        })
    }

    /// Where the tools run.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// Opens the master connection (if it is not up) and the MCP session, and lists the
    /// tools: an unknown or changed host key, a failed login, a missing remote binary or
    /// base directory fail here with what ssh said.
    pub async fn connect(&self, ctx: &ToolContext) -> Result<(), McpError> {
        self.master().await?;
        self.mcp.init(ctx).await
    }

    /// The local pid of the ssh process carrying the MCP session, while one is open.
    pub fn session_pid(&self) -> Option<u32> {
        self.mcp.process_id()
    }

    /// The path of the master connection's control socket (for `ssh -S PATH` commands
    /// sharing the connection).
    pub fn control_path(&self) -> PathBuf {
        self.control.socket()
    }

    async fn master(&self) -> Result<(), McpError> {
        let mut master = self.master.lock().await;
        if let Some(m) = master.as_mut()
            && matches!(m.child.try_wait(), Ok(None))
        {
            return Ok(());
        }
        if let Some(mut old) = master.take() {
            old.close().await;
        }
        *master = Some(Master::open(&self.name, &self.target, &self.options, &self.control).await?);
        Ok(())
    }
}

#[async_trait]
impl ToolSet for SshToolSet {
    fn name(&self) -> &str {
        &self.name
    }

    async fn tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        // A master that died is opened again before listing (the MCP session reconnects
        // on its own; with no master its ssh logs in by itself).
        self.master().await?;
        self.mcp.tools(ctx).await
    }

    async fn close(&self) -> Result<(), ToolError> {
        let closed = self.mcp.close().await;
        if let Some(mut master) = self.master.lock().await.take() {
            master.close().await;
        }
        closed
    }
}

/// The master connection: `ssh -M` running a remote check, then `cat` for as long as its
/// stdin (ours) stays open.
struct Master {
    child: Contained,
    _stdin: Option<tokio::process::ChildStdin>,
}

/// What the master's remote check prints first.
const READY: &str = "TOOLBELT-SSH-READY";
const NO_BINARY: &str = "TOOLBELT-SSH-NO-BINARY";
const NO_DIR: &str = "TOOLBELT-SSH-NO-DIR";

impl Master {
    async fn open(
        name: &str,
        target: &SshTarget,
        options: &SshOptions,
        control: &ControlDir,
    ) -> Result<Self, McpError> {
        let fail =
            |kind: FailureKind, message: String| McpError::new(name, Step::Connect, kind, message);
        let mut args = ssh_args(target, options, &control.socket());
        // DEBUG1 only for the one line that names the key the server sent (ssh says no
        // fingerprint when it refuses an unknown host); the rest is drained to tracing.
        args.extend(
            [
                "-o",
                "ControlMaster=yes",
                "-o",
                "ControlPersist=no",
                "-o",
                "LogLevel=DEBUG1",
            ]
            .map(String::from),
        );
        args.push("--".into());
        args.push(destination(target));
        let tb = quote(&options.toolbelt);
        let dir = quote(&target.path);
        args.push(format!(
            "if ! command -v {tb} >/dev/null 2>&1; then echo {NO_BINARY}; \
             elif [ ! -d {dir} ]; then echo {NO_DIR}; else echo {READY}; fi; exec cat >/dev/null"
        ));
        let mut cmd = Command::new(&options.ssh);
        cmd.args(&args)
            .env_clear()
            .envs(ssh_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = Contain::new(Containment::Auto).spawn(cmd).map_err(|e| {
            fail(
                FailureKind::Configuration,
                format!(
                    "cannot start {:?} (is OpenSSH's client installed?): {e}",
                    options.ssh
                ),
            )
        })?;
        let stdin = child.take_stdin();
        let (Some(stdout), Some(stderr)) = (child.take_stdout(), child.take_stderr()) else {
            return Err(fail(
                FailureKind::Configuration,
                "ssh's pipes were not available".into(),
            ));
        };
        let lines = drain(stderr);
        let mut stdout = BufReader::new(stdout);
        let mut first = String::new();
        let read = tokio::time::timeout(CONNECT_LIMIT, stdout.read_line(&mut first)).await;
        let mut master = Self {
            child,
            _stdin: stdin,
        };
        match read.map(|r| r.map(|_| first.trim().to_string())) {
            Ok(Ok(line)) if line == READY => {
                // The check's output is over; `cat` writes nothing. Keep the pipe drained.
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await;
                });
                Ok(master)
            }
            Ok(Ok(line)) if line == NO_BINARY => {
                master.close().await;
                Err(fail(
                    FailureKind::Configuration,
                    format!(
                        "no Toolbelt on {}: {:?} is not a program there (install toolbelt on \
                         the remote's PATH, or give its path with --remote-toolbelt PATH)",
                        target.host, options.toolbelt
                    ),
                ))
            }
            Ok(Ok(line)) if line == NO_DIR => {
                master.close().await;
                Err(fail(
                    FailureKind::Configuration,
                    format!("{} on {} is not a directory", target.path, target.host),
                ))
            }
            Ok(Ok(_)) | Ok(Err(_)) => {
                let _ = tokio::time::timeout(CONNECT_LIMIT, master.child.wait()).await;
                master.close().await;
                let said = lines.lock().unwrap_or_else(|e| e.into_inner()).clone();
                Err(login_error(name, target, options, &said))
            }
            Err(_) => {
                master.close().await;
                Err(McpError::timeout(name, Step::Connect, CONNECT_LIMIT))
            }
        }
    }

    async fn close(&mut self) {
        drop(self._stdin.take());
        let grace = Grace {
            eof: Duration::from_millis(500),
            term: TERM_GRACE,
        };
        self.child.close(grace).await;
    }
}

/// What ssh said when it refused to log in, as a named error: a host key refused (with the
/// fingerprint ssh saw), a login refused, or its own words.
fn login_error(name: &str, target: &SshTarget, options: &SshOptions, said: &[String]) -> McpError {
    let server_key = said.iter().find_map(|l| {
        l.strip_prefix("debug1: Server host key: ")
            .map(str::to_string)
    });
    let words: Vec<&str> = said
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with("debug1:") && !l.trim().is_empty())
        .collect();
    let text = words.join("\n");
    let host = &target.host;
    let key = server_key
        .map(|k| format!(" The server's host key is {k}."))
        .unwrap_or_default();
    let message = if text.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
        || text.contains("has changed and you have requested strict checking")
    {
        format!(
            "refused: the host key of {host} is not the one in known_hosts (it has changed, or \
             someone is in between).{key} ssh said:\n{text}"
        )
    } else if text.contains("Host key verification failed") {
        let hint = if options.accept_new {
            String::new()
        } else {
            " Check the fingerprint and add the key to known_hosts, or pass \
             --remote-accept-new to accept a host seen for the first time."
                .into()
        };
        format!(
            "refused: the host key of {host} is not in known_hosts.{key}{hint} ssh said:\n{text}"
        )
    } else if text.contains("Permission denied") {
        format!(
            "ssh could not log in to {host}: keys come from the agent (SSH_AUTH_SOCK) or \
             ~/.ssh, and ssh never prompts (BatchMode). ssh said:\n{text}"
        )
    } else {
        format!("ssh to {target} failed. ssh said:\n{text}")
    };
    McpError::new(name, Step::Connect, FailureKind::Configuration, message)
}

/// Reads ssh's stderr to its end, keeping the last lines for a failure message and logging
/// every one at trace level.
fn drain(stderr: tokio::process::ChildStderr) -> Arc<StdMutex<Vec<String>>> {
    let lines: Arc<StdMutex<Vec<String>>> = Arc::default();
    let kept = lines.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            tracing::trace!(target: "toolbelt_mcp::ssh", "{line}");
            let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
            // The line naming the host key comes early; keep it past the bound.
            if kept.len() >= STDERR_LINES
                && let Some(i) = kept
                    .iter()
                    .position(|l| !l.starts_with("debug1: Server host key"))
            {
                kept.remove(i);
            }
            kept.push(line.chars().take(1024).collect());
        }
    });
    lines
}

/// The options every ssh of a tool set is started with.
fn ssh_args(target: &SshTarget, options: &SshOptions, socket: &Path) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(config) = &options.ssh_config {
        args.extend(["-F".into(), config.display().to_string()]);
    }
    let strict = if options.accept_new {
        "accept-new"
    } else {
        "yes"
    };
    for option in [
        "BatchMode=yes".to_string(),
        format!("StrictHostKeyChecking={strict}"),
        format!("ControlPath={}", socket.display()),
        "ConnectTimeout=15".into(),
        // A dead peer is noticed within 45 s, even while no call is running.
        "ServerAliveInterval=15".into(),
        "ServerAliveCountMax=3".into(),
        // The MCP session is a plain byte pipe.
        "RequestTTY=no".into(),
        "EscapeChar=none".into(),
        "ForwardAgent=no".into(),
        "ForwardX11=no".into(),
        "ClearAllForwardings=yes".into(),
    ] {
        args.push("-o".into());
        args.push(option);
    }
    if let Some(port) = target.port {
        args.extend(["-p".into(), port.to_string()]);
    }
    if let Some(user) = &target.user {
        args.extend(["-l".into(), user.clone()]);
    }
    args
}

/// The remote command of the MCP session: the check for the binary (so a missing one is
/// named on stderr), then `toolbelt serve --stdio --dir PATH …` in place of the shell.
fn serve_command(target: &SshTarget, options: &SshOptions) -> String {
    let tb = quote(&options.toolbelt);
    let mut words = vec![tb.clone(), "serve".into(), "--stdio".into(), "--dir".into()];
    words.push(quote(&target.path));
    words.extend(options.serve_args.iter().map(|a| quote(a)));
    format!(
        "command -v {tb} >/dev/null 2>&1 || {{ echo {} >&2; exit 127; }}; exec {}",
        quote(&format!(
            "toolbelt: no Toolbelt at {:?} on this host",
            options.toolbelt
        )),
        words.join(" ")
    )
}

fn destination(target: &SshTarget) -> String {
    target.host.clone()
}

/// `word` as one word for the remote's POSIX shell.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The environment ssh gets: the core variables and the agent's socket, nothing else.
fn ssh_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    toolbelt_core::EnvPolicy::new()
        .allow("SSH_AUTH_SOCK")
        .resolve()
}

/// A private directory (0700, made fresh, never an existing one) for the control socket,
/// removed with the tool set.
struct ControlDir(PathBuf);

impl ControlDir {
    fn create() -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut last = None;
        for _ in 0..8 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("toolbelt-ssh-{}-{n}-{nanos:x}", std::process::id()));
            // `create` fails on an existing path: nobody else's directory is ever used.
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(Self(dir)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no name was free")))
    }

    fn socket(&self) -> PathBuf {
        self.0.join("cm")
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_url_gives_user_host_port_and_path() {
        let t: SshTarget = "ssh://ci@build.example:2222/srv/work".parse().unwrap();
        assert_eq!(t.user.as_deref(), Some("ci"));
        assert_eq!(t.host, "build.example");
        assert_eq!(t.port, Some(2222));
        assert_eq!(t.path(), "/srv/work");
        assert_eq!(t.to_string(), "ssh://ci@build.example:2222/srv/work");
        let v6: SshTarget = "ssh://[::1]:22/tmp".parse().unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", Some(22)));
        assert_eq!(v6.to_string(), "ssh://[::1]:22/tmp");
        let bare: SshTarget = "ssh://host/".parse().unwrap();
        assert_eq!(
            (bare.user, bare.port, bare.path.as_str()),
            (None, None, "/")
        );
    }

    #[test]
    fn bad_urls_are_refused_with_the_reason() {
        for (url, why) in [
            ("host:/x", "must start with ssh://"),
            ("ssh://host", "base directory"),
            ("ssh://host:0/x", "port"),
            ("ssh://host:99999/x", "port"),
            ("ssh://host:ab/x", "port"),
            ("ssh://-oProxyCommand=sh/x", "host may hold"),
            ("ssh://-l@host/x", "user name"),
            ("ssh://@host/x", "user name"),
            ("ssh:///x", "host is missing"),
            ("ssh://host/x?y", "query"),
            ("ssh://ho st/x", "host may hold"),
            ("ssh://[zz]/x", "not IPv6"),
            ("ssh://host/x\ny", "control character"),
        ] {
            let err = url.parse::<SshTarget>().unwrap_err().to_string();
            assert!(err.contains(why), "{url}: {err}");
        }
    }

    #[test]
    fn remote_words_are_quoted_for_the_shell() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        let target: SshTarget = "ssh://h/dir with 'quote'; rm -rf x".parse().unwrap();
        let command = serve_command(&target, &SshOptions::default());
        assert!(
            command.ends_with(
                r"exec 'toolbelt' serve --stdio --dir '/dir with '\''quote'\''; rm -rf x'"
            ),
            "{command}"
        );
    }

    #[test]
    fn the_control_directory_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = ControlDir::create().unwrap();
        let path = dir.0.clone();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        drop(dir);
        assert!(!path.exists());
    }
}
