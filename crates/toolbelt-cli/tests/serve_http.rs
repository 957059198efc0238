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

/// The `WWW-Authenticate` header of a response head.
fn challenge(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("www-authenticate")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no WWW-Authenticate in {head}"))
}

/// A raw HTTP/1.1 GET of `path` without credentials: the status and the body.
fn get(authority: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn a_401_names_the_resource_metadata_and_a_wrong_token_is_invalid_token() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.dir_arg(),
        "--token".into(),
        "right-token".into(),
    ]);
    let at = server.authority();
    let metadata = format!("http://{at}/.well-known/oauth-protected-resource/mcp");

    let (status, head) = post_initialize_head(&at, &[]);
    assert_eq!(status, 401);
    assert_eq!(
        challenge(&head),
        format!(r#"Bearer resource_metadata="{metadata}""#),
        "no credentials: no error code (RFC 6750 3.1)"
    );

    let (status, head) = post_initialize_head(&at, &[("Authorization", "Bearer wrong-token")]);
    assert_eq!(status, 401);
    let wrong = challenge(&head);
    assert!(
        wrong.starts_with(r#"Bearer error="invalid_token", error_description=""#),
        "{wrong}"
    );
    assert!(
        wrong.ends_with(&format!(r#"", resource_metadata="{metadata}""#)),
        "{wrong}"
    );

    // The document is public and names the endpoint the client called.
    let (status, body) = get(&at, "/.well-known/oauth-protected-resource/mcp");
    assert_eq!(status, 200, "{body}");
    let document: serde_json::Value = serde_json::from_str(&body).expect("JSON metadata");
    assert_eq!(document["resource"], server.url.as_str(), "{document}");
    assert_eq!(
        document["bearer_methods_supported"],
        serde_json::json!(["header"])
    );
}

/// The MCP inspector's CLI (npm `@modelcontextprotocol/inspector`, `--cli`) with a wrong token
/// is told the token is wrong; with the right one it lists the tools. Without a terminal the
/// inspector would start its own OAuth flow on any 401 (it does not read `error=` of the
/// challenge), so the test runs it with `--stored-auth-only`, its mode for scripts.
#[test]
fn the_inspector_cli_is_told_a_wrong_token_is_wrong() {
    let entry = peers().join("node_modules/@modelcontextprotocol/inspector/package.json");
    assert!(
        entry.is_file(),
        "the MCP inspector is missing from tests/peers; run `bash .ci/install-peers`"
    );
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.dir_arg(),
        "--token".into(),
        "right-token".into(),
    ]);
    let catalog = tempfile::tempdir().unwrap();
    let inspect = |token: &str| {
        let output = std::process::Command::new("node")
            .arg(peers().join("node_modules/.bin/mcp-inspector"))
            .args(["--cli", server.url.as_str(), "--transport", "http"])
            .args(["--header", &format!("Authorization: Bearer {token}")])
            .args(["--stored-auth-only", "--method", "tools/list"])
            .env("MCP_CATALOG_PATH", catalog.path().join("mcp.json"))
            .env("HOME", catalog.path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("node runs the inspector");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };

    // The inspector reports a failure as one JSON object on stderr.
    let (code, stdout, stderr) = inspect("wrong-token");
    let reported: serde_json::Value = serde_json::from_str(stderr.trim())
        .unwrap_or_else(|e| panic!("{e}: stdout {stdout}\nstderr {stderr}"));
    assert_eq!(
        code,
        Some(3),
        "the inspector's exit code for auth: {stdout}{stderr}"
    );
    assert_eq!(reported["error"]["code"], "auth_required", "{reported}");
    let message = reported["error"]["message"].as_str().unwrap();
    assert!(message.contains("wrong bearer token"), "{reported}");

    let (code, stdout, stderr) = inspect("right-token");
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let listed: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: stdout {stdout}\nstderr {stderr}"));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"Read"), "{names:?}");
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
    let server = HttpServe::no_auth(&served);
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
    let server = HttpServe::no_auth(&served);
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

/// The session id in a response head.
fn session_id(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no Mcp-Session-Id in {head}"))
}

/// A raw HTTP/1.1 `DELETE /mcp` naming session `id`; returns the status code.
fn delete_session(authority: &str, id: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nMcp-Session-Id: {id}\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {response:?}"))
}

#[test]
fn delete_ends_a_known_session_with_200_and_an_unknown_one_gets_404() {
    let served = Served::new();
    let server = HttpServe::no_auth(&served);
    let at = server.authority();
    let (status, head) = post_initialize_head(&at, &[]);
    assert_eq!(status, 200);
    let id = session_id(&head);
    assert_eq!(delete_session(&at, &id), 200, "a known session is ended");
    assert_eq!(
        delete_session(&at, &id),
        404,
        "an ended session is unknown to DELETE"
    );
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let mut stream = send_post(
        &at,
        &[
            ("Mcp-Session-Id", id.as_str()),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        ping,
    );
    let mut response = String::new();
    use std::io::Read;
    let _ = stream.read_to_string(&mut response);
    assert!(
        response.starts_with("HTTP/1.1 404"),
        "a POST naming the ended session gets 404 too: {response}"
    );
    assert_eq!(
        delete_session(&at, "0f9a7c1e-never-issued"),
        404,
        "an id the server never issued"
    );
}

#[test]
fn the_python_sdk_client_closes_its_session_without_a_warning() {
    let served = Served::new();
    let server = HttpServe::no_auth(&served);
    let mut client = std::process::Command::new(toolbelt_testkit::python());
    client.arg("-c").arg(LIST_AND_CLOSE_CLIENT).arg(&server.url);
    let (report, stderr) = run_client_with_stderr(client);
    assert!(report["tools"].as_u64().is_some(), "{report}");
    assert!(
        !stderr.contains("Session termination failed"),
        "the SDK's DELETE of its session was refused:\n{stderr}"
    );
}

/// Lists the tools over streamable HTTP, then leaves: the SDK sends `DELETE` for its session
/// on the way out and logs a warning unless the server answers 200 or 204.
const LIST_AND_CLOSE_CLIENT: &str = r#"
import json, sys, anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def main():
    async with streamablehttp_client(sys.argv[1]) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
    print(json.dumps({"tools": len(listed.tools)}))

anyio.run(main)
"#;

#[test]
fn a_read_in_one_http_session_does_not_let_another_session_edit() {
    let served = Served::new();
    let server = HttpServe::no_auth(&served);
    let mut client = std::process::Command::new(toolbelt_testkit::python());
    client.arg("-c").arg(TWO_SESSIONS_CLIENT).arg(&server.url);
    let report = run_client(client);
    assert_eq!(report["read"]["error"], false, "{report}");
    assert_eq!(report["other"]["error"], true, "{report}");
    assert!(
        report["other"]["text"]
            .as_str()
            .unwrap()
            .contains("has not been read yet"),
        "the other session is told to Read first: {report}"
    );
    assert_eq!(
        report["own"]["error"], false,
        "the reading session may edit: {report}"
    );
    assert_eq!(
        std::fs::read_to_string(served.path().join("hello.txt")).unwrap(),
        "hello world\nneedle found\n",
        "only the reading session's Edit landed"
    );
}

/// Two sessions of one server: A reads `hello.txt`, then B and A each try an Edit of it.
const TWO_SESSIONS_CLIENT: &str = r#"
import json, sys, anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

def outcome(result):
    return {"error": bool(result.isError), "text": result.content[0].text}

async def main():
    url = sys.argv[1]
    async with streamablehttp_client(url) as (ra, wa, _), streamablehttp_client(url) as (rb, wb, _):
        async with ClientSession(ra, wa) as a, ClientSession(rb, wb) as b:
            await a.initialize()
            await b.initialize()
            read = await a.call_tool("Read", {"file_path": "hello.txt"})
            other = await b.call_tool("Edit", {"file_path": "hello.txt",
                "old_string": "needle here", "new_string": "needle lost"})
            own = await a.call_tool("Edit", {"file_path": "hello.txt",
                "old_string": "needle here", "new_string": "needle found"})
    print(json.dumps({"read": outcome(read), "other": outcome(other), "own": outcome(own)}))

anyio.run(main)
"#;
