//! `toolbelt serve --http`: the bearer token, the Origin allow list, and a clean shutdown on
//! SIGTERM that closes the aggregated servers. Tests about other things than the token serve
//! loopback with `--no-auth`; `attack_serve.rs` attacks the defaults.

use crate::serve_support;

use serve_support::*;

#[test]
fn a_missing_or_wrong_token_gets_401() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.path().display().to_string(),
        "--token".into(),
        "right-token".into(),
    ]);
    let at = server.authority();
    assert_eq!(post_initialize(&at, &[]), 401);
    assert_eq!(
        post_initialize(&at, &[("Authorization", "Bearer wrong-token")]),
        401
    );
    assert_eq!(
        post_initialize(&at, &[("Authorization", "right-token")]),
        401,
        "the scheme is required"
    );
    assert_eq!(
        post_initialize(&at, &[("Authorization", "Bearer right-token")]),
        200
    );
}

#[test]
fn a_cross_origin_request_is_refused() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.path().display().to_string(),
        "--allow-origin".into(),
        "https://app.example.invalid".into(),
        "--no-auth".into(),
    ]);
    let at = server.authority();
    assert_eq!(
        post_initialize(&at, &[("Origin", "http://attacker.example.invalid")]),
        403
    );
    assert_eq!(
        post_initialize(&at, &[("Origin", "https://app.example.invalid")]),
        200
    );
    // Clients that are not browsers send no Origin.
    assert_eq!(post_initialize(&at, &[]), 200);
}

#[test]
fn loopback_origins_are_the_default_allow_list() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.path().display().to_string(),
        "--no-auth".into(),
    ]);
    let at = server.authority();
    assert_eq!(
        post_initialize(&at, &[("Origin", "http://localhost:5173")]),
        200
    );
    assert_eq!(
        post_initialize(&at, &[("Origin", "http://rebind.example.invalid")]),
        403
    );
    // DNS rebinding: a foreign name resolving to 127.0.0.1 arrives with its own Host.
    let mut stream = std::net::TcpStream::connect(&at).unwrap();
    use std::io::{Read, Write};
    stream
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: rebind.example.invalid\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head[9..12], b"403");
}

#[test]
fn each_http_client_gets_its_own_session_id() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.path().display().to_string(),
        "--no-auth".into(),
    ]);
    let session = |head: &str| {
        head.lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_string())
            })
            .unwrap_or_else(|| panic!("no Mcp-Session-Id in {head}"))
    };
    let (status, first) = post_initialize_head(&server.authority(), &[]);
    assert_eq!(status, 200);
    let (_, second) = post_initialize_head(&server.authority(), &[]);
    assert_ne!(session(&first), session(&second));
    assert!(!session(&first).is_empty());
}

#[test]
fn the_http_server_binds_loopback_by_default() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.path().display().to_string(),
    ]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
}

#[test]
fn sigterm_ends_the_server_and_closes_the_aggregated_servers() {
    let served = Served::new();
    let mut args = served.serve_args();
    args.push("--no-auth".into());
    let mut server = HttpServe::start(&args);
    // The Python fixture server reports its own process id through toolbelt.
    let mut command = std::process::Command::new(toolbelt_testkit::python());
    command.arg("-c").arg(PID_CLIENT).arg(&server.url);
    let report = run_client(command);
    let py_pid = report["pid"]
        .as_str()
        .unwrap()
        .trim()
        .parse::<u32>()
        .unwrap();
    assert!(
        is_running(py_pid),
        "the aggregated server {py_pid} should be running"
    );

    let status = server.terminate();
    assert!(status.success(), "toolbelt serve exited with {status}");
    assert!(
        wait_gone(py_pid),
        "the aggregated server {py_pid} outlived toolbelt serve"
    );
    let _ = server.stderr_lines();
}

/// Calls the aggregated Python server's `pid` tool through toolbelt over HTTP.
const PID_CLIENT: &str = r#"
import json, sys, anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def main():
    async with streamablehttp_client(sys.argv[1]) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("pid", {})
            print(json.dumps({"pid": result.content[0].text}))

anyio.run(main)
"#;
