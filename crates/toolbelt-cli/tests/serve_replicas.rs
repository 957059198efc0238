//! `toolbelt serve --http --shared-state redis://…` as stateless replicas: two replicas on one
//! directory behind a round-robin HTTP proxy this test starts, driven by the Python `mcp`
//! SDK client (`clients/py_replicas.py`). Needs Redis (`bash .ci/start-services`).
//!
//! - A session's Read-then-Edit sequence, every request going to the next replica, succeeds
//!   and loses no edit; a replica killed halfway leaves the session working on the other.
//! - Clients racing an Edit of one file, each after its own Read: exactly one wins per round.
//! - A session deleted through one replica is unknown (404) to the other.
//! - Notifications reach the client's `GET` stream on another replica than the one that has
//!   them: `tools/list_changed` after a `--defer-tools` search (and every replica lists the
//!   tools the search loaded), `resources/updated` for a subscription; an unsubscribe through
//!   another replica ends the subscription where it is held.

use crate::serve_support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::Value;
use serve_support::{HttpServe, client_script, run_client, signal};

/// Which upstream a request goes to, given what it is (see [`describe`]); `None` for the
/// next one in turn.
type Route = fn(&str) -> Option<usize>;

/// A round-robin HTTP proxy: each request goes to the next upstream; one that refuses the
/// connection (a dead replica) is skipped, as a load balancer's health check would. A
/// [`Route`] can pin requests to an upstream instead (as sticky load balancers do for some).
struct Proxy {
    upstreams: Vec<String>,
    next: AtomicUsize,
    route: Option<Route>,
    /// Requests each upstream answered.
    hits: Vec<AtomicUsize>,
    /// Which upstream answered what (see [`describe`]).
    log: Mutex<Vec<(usize, String)>>,
    client: reqwest::Client,
}

impl Proxy {
    /// Starts the proxy on 127.0.0.1 in front of `upstreams` (`host:port`).
    async fn start(upstreams: Vec<String>) -> (Arc<Self>, SocketAddr) {
        Self::start_routed(upstreams, None).await
    }

    /// As [`Proxy::start`], sending requests where `route` says.
    async fn start_routed(upstreams: Vec<String>, route: Option<Route>) -> (Arc<Self>, SocketAddr) {
        let proxy = Arc::new(Self {
            hits: upstreams.iter().map(|_| AtomicUsize::new(0)).collect(),
            upstreams,
            next: AtomicUsize::new(0),
            route,
            log: Mutex::default(),
            // A new connection per request: a kept-alive connection to a replica killed in
            // the meantime fails as a reset, which cannot be told from a request the replica
            // received; a new one fails to connect, which can, and is skipped.
            client: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(0)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(proxy.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (proxy, addr)
    }

    fn hits(&self) -> Vec<usize> {
        self.hits.iter().map(|h| h.load(Ordering::SeqCst)).collect()
    }

    /// The upstreams that answered `what` (see [`Proxy::log`]), in order.
    fn answered(&self, what: &str) -> Vec<usize> {
        let log = self.log.lock().unwrap();
        log.iter()
            .filter(|(_, w)| w == what)
            .map(|(i, _)| *i)
            .collect()
    }
}

/// What a request is: `GET`, `DELETE`, the JSON-RPC method of a `POST` (a tool call's with
/// the tool's name: `tools/call tool_search`), or `response` for the client's answer to a
/// request of the server.
fn describe(method: &Method, body: &[u8]) -> String {
    if method != Method::POST {
        return method.to_string();
    }
    let message: Value = serde_json::from_slice(body).unwrap_or_default();
    let Some(rpc) = message["method"].as_str() else {
        return "response".into();
    };
    match message["params"]["name"].as_str() {
        Some(tool) if rpc == "tools/call" => format!("{rpc} {tool}"),
        _ => rpc.to_string(),
    }
}

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let what = describe(&parts.method, &body);
    let pinned = proxy.route.and_then(|route| route(&what));
    // Round robin picks where to start; a replica that cannot be reached passes the request
    // to the next one after it. Taking a fresh turn for each try would let concurrent
    // requests (the client's GET stream reconnecting beside a POST) send one request to the
    // dead replica twice and never to the live one.
    let count = proxy.upstreams.len();
    let start = pinned.unwrap_or_else(|| proxy.next.fetch_add(1, Ordering::SeqCst));
    for attempt in 0..count {
        let i = pinned.unwrap_or((start + attempt) % count);
        let mut upstream = proxy.client.request(
            parts.method.clone(),
            format!("http://{}{path}", proxy.upstreams[i]),
        );
        for (name, value) in &parts.headers {
            if !matches!(name.as_str(), "host" | "content-length" | "connection") {
                upstream = upstream.header(name, value);
            }
        }
        match upstream.body(body.clone()).send().await {
            Ok(answer) => {
                proxy.hits[i].fetch_add(1, Ordering::SeqCst);
                proxy.log.lock().unwrap().push((i, what));
                let mut response = Response::builder().status(answer.status());
                for (name, value) in answer.headers() {
                    if !matches!(
                        name.as_str(),
                        "content-length" | "transfer-encoding" | "connection"
                    ) {
                        response = response.header(name, value);
                    }
                }
                return response
                    .body(Body::from_stream(answer.bytes_stream()))
                    .unwrap();
            }
            // Never reached the replica: safe to send to the next one.
            Err(err) if err.is_connect() => continue,
            Err(err) => {
                // On stderr too: the client shows only the status, and a failing test
                // needs to say which request broke how.
                eprintln!("proxy: {what} to replica {i} failed: {err:?}");
                return Response::builder()
                    .status(StatusCode::BAD_GATEWAY)
                    .body(Body::from(err.to_string()))
                    .unwrap();
            }
        }
    }
    Response::builder()
        .status(StatusCode::BAD_GATEWAY)
        .body(Body::from("no replica answered"))
        .unwrap()
}

/// Two replicas of `serve --http` on one directory, sharing state under a fresh key prefix.
struct Replicas {
    dir: tempfile::TempDir,
    _locks: tempfile::TempDir,
    servers: Vec<HttpServe>,
    token: String,
}

impl Replicas {
    fn start(count: usize) -> Self {
        Self::start_with(count, true, &[])
    }

    /// `count` replicas, each given `extra` flags too; without `shared`, plain
    /// `serve --http` processes (no Redis).
    fn start_with(count: usize, shared: bool, extra: &[String]) -> Self {
        let redis =
            toolbelt_testkit::service_url("TOOLBELT_TEST_REDIS_URL", "redis://127.0.0.1:6379");
        toolbelt_testkit::require_python_mcp_sdk();
        let dir = tempfile::tempdir().unwrap();
        let locks = tempfile::tempdir().unwrap();
        let prefix = format!(
            "toolbelt-test-{}-{}",
            std::process::id(),
            dir.path().file_name().unwrap().to_string_lossy()
        );
        let token = "replica-test-token".to_string();
        let mut args: Vec<String> = ["serve", "--dir", &dir.path().display().to_string()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["--token".into(), token.clone()]);
        if shared {
            let locks = locks.path().display().to_string();
            for arg in ["--shared-state", &redis, "--shared-state-prefix", &prefix] {
                args.push(arg.to_string());
            }
            args.extend(["--lock-dir".to_string(), locks]);
        }
        args.extend(extra.iter().cloned());
        let servers = (0..count).map(|_| HttpServe::start(&args)).collect();
        Self {
            dir,
            _locks: locks,
            servers,
            token,
        }
    }

    fn authorities(&self) -> Vec<String> {
        self.servers.iter().map(HttpServe::authority).collect()
    }
}

fn python(args: &[&str], token: &str) -> std::process::Command {
    let mut command = std::process::Command::new(toolbelt_testkit::python());
    command
        .arg(client_script("py_replicas.py"))
        .args(args)
        .env("TOOLBELT_TEST_TOKEN", token);
    command
}

/// The client `script` with `args`, stopped after 120 s: an answer lost or mixed up between
/// the replicas leaves the client waiting for its call, and the limit turns that into a
/// failure (exit 124) instead of a hang.
fn limited_client(script: &str, args: &[&str], token: &str) -> std::process::Command {
    let mut command = std::process::Command::new("timeout");
    command
        .arg("120")
        .arg(toolbelt_testkit::python())
        .arg(client_script(script))
        .args(args)
        .env("TOOLBELT_TEST_TOKEN", token);
    command
}

const EDITS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_then_edit_sequence_spread_over_replicas_loses_no_edit_and_survives_a_killed_replica()
 {
    let mut replicas = Replicas::start(2);
    std::fs::write(replicas.dir.path().join("seq.txt"), "START\nEND\n").unwrap();
    let (proxy, addr) = Proxy::start(replicas.authorities()).await;
    let url = format!("http://{addr}/mcp");
    let victim = replicas.servers[0].pid();
    let token = replicas.token.clone();

    let outcome = tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, BufReader, Write};
        let mut child = python(&["sequence", &url, &EDITS.to_string()], &token)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the Python client starts");
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut last = String::new();
        let mut killed = false;
        for line in lines.by_ref() {
            let line = line.unwrap();
            if line == "KILL" {
                // Halfway: one replica dies without a word; the session goes on.
                signal(victim, "KILL");
                assert!(serve_support::wait_gone(victim), "the replica is gone");
                killed = true;
                writeln!(stdin, "go").unwrap();
            } else if line.starts_with('{') {
                last = line;
            }
        }
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "the client failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(killed, "the client never reached the kill point");
        serde_json::from_str::<Value>(&last).expect("the client's JSON")
    })
    .await
    .unwrap();

    let results = outcome["results"].as_array().unwrap();
    assert_eq!(results.len(), EDITS);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["read"], true, "read {i}: {result}");
        assert_eq!(result["edit"], true, "edit {i}: {result}");
    }
    assert_eq!(
        outcome["same_session"], true,
        "one session throughout: {outcome}"
    );
    let text = std::fs::read_to_string(replicas.dir.path().join("seq.txt")).unwrap();
    let expected: String = (0..EDITS).map(|i| format!("edit {i}\n")).collect();
    assert_eq!(
        text,
        format!("START\n{expected}END\n"),
        "every edit landed, in order"
    );
    let hits = proxy.hits();
    assert!(
        hits.iter().all(|&h| h >= 3),
        "both replicas answered requests of the one session: {hits:?}"
    );
    replicas.servers.remove(0); // already dead: nothing to stop
}

const CLIENTS: usize = 4;
const ROUNDS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_racing_an_edit_through_two_replicas_have_exactly_one_winner_per_read() {
    let replicas = Replicas::start(2);
    std::fs::write(replicas.dir.path().join("race.txt"), "count: 0\n").unwrap();
    let (proxy, addr) = Proxy::start(replicas.authorities()).await;
    let url = format!("http://{addr}/mcp");
    let token = replicas.token.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        run_client(python(
            &["race", &url, &CLIENTS.to_string(), &ROUNDS.to_string()],
            &token,
        ))
    })
    .await
    .unwrap();

    let rounds = outcome["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), ROUNDS);
    for (round, edits) in rounds.iter().enumerate() {
        let edits = edits.as_array().unwrap();
        let winners = edits.iter().filter(|e| e["ok"] == true).count();
        assert_eq!(winners, 1, "round {round}: {edits:?}");
        for lost in edits.iter().filter(|e| e["ok"] != true) {
            let text = lost["text"].as_str().unwrap();
            assert!(
                text.contains("modified since it was read"),
                "round {round}: a losing edit must be told the file changed: {text}"
            );
        }
    }
    let text = std::fs::read_to_string(replicas.dir.path().join("race.txt")).unwrap();
    assert!(text.starts_with(&format!("count: {ROUNDS} by ")), "{text}");
    assert!(proxy.hits().iter().all(|&h| h > 0), "{:?}", proxy.hits());
}

/// The client's `GET` stream and its unsubscribes go to replica 0; `tools/list` and
/// `resources/read` to each in turn; everything else (the session's start, searches,
/// subscriptions, calls) to replica 1.
fn get_stream_apart(what: &str) -> Option<usize> {
    match what {
        "GET" | "resources/unsubscribe" => Some(0),
        "tools/list" | "resources/read" => None,
        _ => Some(1),
    }
}

/// The client's `GET` stream and its answers to the server's requests go to replica 0;
/// `resources/read` to each in turn; everything else (its calls) to replica 1.
fn answers_apart(what: &str) -> Option<usize> {
    match what {
        "GET" | "response" => Some(0),
        "resources/read" => None,
        _ => Some(1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_an_aggregated_servers_requests_reach_the_replica_that_asked() {
    let (_config, extra) = crate::serve_client_requests::client_features_config();
    let replicas = Replicas::start_with(2, true, &extra);
    let (proxy, addr) = Proxy::start_routed(replicas.authorities(), Some(answers_apart)).await;
    let url = format!("http://{addr}/mcp");
    let token = replicas.token.clone();
    let report = tokio::task::spawn_blocking(move || {
        run_client(limited_client(
            "py_client_features.py",
            &["offered", "http", &url],
            &token,
        ))
    })
    .await
    .unwrap();

    // The calls (and so the requests) were replica 1's; every answer went to replica 0.
    for tool in ["ask_profile", "ask_url", "summarize", "list_client_roots"] {
        assert_eq!(
            proxy.answered(&format!("tools/call {tool}")),
            vec![1],
            "{tool}"
        );
    }
    let answers = proxy.answered("response");
    assert_eq!(answers.len(), 4, "{:?}", proxy.log.lock().unwrap());
    assert!(answers.iter().all(|&i| i == 0), "{answers:?}");
    crate::serve_client_requests::assert_relayed_to_the_client(&report);
}

/// `ask_profile` runs on replica 0 and `summarize` on replica 1; every answer goes to 0.
fn one_request_each(what: &str) -> Option<usize> {
    match what {
        "tools/call summarize" => Some(1),
        "GET" => None,
        _ => Some(0),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_asking_one_client_at_once_each_get_their_own_answer() {
    let (_config, extra) = crate::serve_client_requests::client_features_config();
    let replicas = Replicas::start_with(2, true, &extra);
    let (proxy, addr) = Proxy::start_routed(replicas.authorities(), Some(one_request_each)).await;
    let url = format!("http://{addr}/mcp");
    let token = replicas.token.clone();
    let report = tokio::task::spawn_blocking(move || {
        run_client(limited_client(
            "py_replicas.py",
            &["asked_at_once", &url],
            &token,
        ))
    })
    .await
    .unwrap();

    assert_eq!(proxy.answered("tools/call ask_profile"), vec![0]);
    assert_eq!(proxy.answered("tools/call summarize"), vec![1]);
    // Both replicas numbered their first request to the session; the client saw two ids.
    let ids = report["ids"].as_array().unwrap();
    assert_eq!(ids.len(), 2, "{report}");
    assert_ne!(ids[0], ids[1], "{report}");
    // The sampling answer reached replica 0 while it awaited its elicitation's, and went on
    // to replica 1, which asked.
    assert_eq!(
        serde_json::from_str::<Value>(report["profile"]["text"].as_str().unwrap())
            .unwrap_or_else(|_| panic!("{report}")),
        serde_json::json!({"action": "accept", "content": {"name": "Ada", "age": 36}}),
        "{report}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(report["summary"]["text"].as_str().unwrap()).unwrap()["text"],
        "summary of two replicas",
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_the_client_stream_held_by_another_replica() {
    // Each replica aggregates its own copy of the Python fixture server, deferring its tools.
    let config = tempfile::tempdir().unwrap();
    let py = serve_support::workspace().join("crates/toolbelt-mcp/tests/fixtures/py_server.py");
    let servers = serde_json::json!({"mcpServers": {"py": {
        "command": toolbelt_testkit::python(), "args": [py.display().to_string(), "stdio"]}}});
    let config_file = config.path().join("mcp.json");
    std::fs::write(&config_file, servers.to_string()).unwrap();
    let extra = [
        "--mcp-config".to_string(),
        config_file.display().to_string(),
        "--defer-tools".to_string(),
    ];
    let replicas = Replicas::start_with(2, true, &extra);
    let (proxy, addr) = Proxy::start_routed(replicas.authorities(), Some(get_stream_apart)).await;
    let url = format!("http://{addr}/mcp");
    let token = replicas.token.clone();
    let report =
        tokio::task::spawn_blocking(move || run_client(python(&["notifications", &url], &token)))
            .await
            .unwrap();

    // Where things ran: the stream on 0, the search and the subscription on 1.
    assert_eq!(
        proxy.answered("GET"),
        vec![0],
        "{:?}",
        proxy.log.lock().unwrap()
    );
    assert_eq!(proxy.answered("tools/call tool_search"), vec![1]);
    assert_eq!(proxy.answered("resources/subscribe"), vec![1]);
    let lists = proxy.answered("tools/list");
    assert!(
        lists.contains(&0) && lists.contains(&1),
        "both replicas listed tools: {lists:?}"
    );

    // The search's list change reached the stream on the other replica, once.
    assert_eq!(report["search"]["ok"], true, "{report}");
    assert!(
        report["search"]["text"]
            .as_str()
            .unwrap()
            .contains("- add:"),
        "{report}"
    );
    assert_eq!(report["list_changed"], 1, "{report}");
    // Both replicas list the loaded tool: the search's finds are the session's, not a process's.
    let before: Vec<&str> = strings(&report["before"]);
    assert!(!before.contains(&"add"), "deferred at first: {before:?}");
    for after in report["after"].as_array().unwrap() {
        let after = strings(after);
        assert!(after.contains(&"add"), "{after:?}");
        assert_eq!(after.len(), before.len() + 1, "{after:?} after {before:?}");
    }

    // The update of a subscription held by replica 1 reached the stream on replica 0.
    assert_eq!(report["touched"]["text"], "updated", "{report}");
    assert_eq!(report["updated"], serde_json::json!(["memo://greeting"]));
    // The unsubscribe went to replica 0, which passed it on: replica 1's upstream stopped
    // watching the resource.
    assert_eq!(proxy.answered("resources/unsubscribe"), vec![0]);
    assert_eq!(
        report["after_unsubscribe"]["text"], "not subscribed",
        "{report}"
    );
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

/// Opens a session on one replica with raw HTTP; returns its `Mcp-Session-Id`.
async fn open_session(client: &reqwest::Client, authority: &str, token: &str) -> String {
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}});
    let response = client
        .post(format!("http://{authority}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string()
}

async fn list_tools(client: &reqwest::Client, authority: &str, token: &str, id: &str) -> u16 {
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    client
        .post(format!("http://{authority}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&list)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_known_to_every_replica_until_deleted_through_one() {
    let replicas = Replicas::start(2);
    let [a, b] = <[String; 2]>::try_from(replicas.authorities()).unwrap();
    let token = &replicas.token;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let id = open_session(&client, &a, token).await;
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = client
        .post(format!("http://{a}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&initialized)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);

    assert_eq!(
        list_tools(&client, &b, token, &id).await,
        200,
        "B runs A's session"
    );
    assert_eq!(
        list_tools(&client, &b, token, "no-such-session").await,
        404,
        "an unknown session is still 404"
    );
    let deleted = client
        .delete(format!("http://{a}/mcp"))
        .bearer_auth(token)
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_eq!(
        list_tools(&client, &b, token, &id).await,
        404,
        "deleted through A, so gone on B too"
    );
}

/// How long each set-up of the throughput run is measured.
const MEASURE: Duration = Duration::from_secs(8);
/// Concurrent clients (sessions) in the throughput run.
const BENCH_CLIENTS: usize = 8;

/// One client: a session through the proxy, then Read calls of a small file until `until`;
/// returns how many were answered.
async fn read_loop(client: reqwest::Client, url: String, token: String, until: Instant) -> usize {
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let id = open_session(&client, authority, &token).await;
    let post = |body: Value| {
        client
            .post(&url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &id)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
    };
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(initialized).await.unwrap().status(), 202);
    let mut calls = 0;
    while Instant::now() < until {
        let call = serde_json::json!({"jsonrpc": "2.0", "id": calls + 10, "method": "tools/call",
            "params": {"name": "Read", "arguments": {"file_path": "small.txt"}}});
        let answer = post(call).await.unwrap().text().await.unwrap();
        assert!(answer.contains("small file"), "{answer}");
        calls += 1;
    }
    calls
}

/// Tool calls per second of `replicas` through a round-robin proxy, `BENCH_CLIENTS` at once.
async fn calls_per_second(replicas: &Replicas) -> f64 {
    std::fs::write(replicas.dir.path().join("small.txt"), "a small file\n").unwrap();
    let (_proxy, addr) = Proxy::start(replicas.authorities()).await;
    let url = format!("http://{addr}/mcp");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let started = Instant::now();
    let until = started + MEASURE;
    let clients: Vec<_> = (0..BENCH_CLIENTS)
        .map(|_| {
            tokio::spawn(read_loop(
                client.clone(),
                url.clone(),
                replicas.token.clone(),
                until,
            ))
        })
        .collect();
    let mut calls = 0;
    for client in clients {
        calls += client.await.unwrap();
    }
    calls as f64 / started.elapsed().as_secs_f64()
}

/// `serve` throughput with one and two replicas, side by side in one run (BENCHMARKS.md,
/// "serve replicas"). Figures, not assertions:
/// `CARGO_TARGET_DIR=/work/target/bench cargo test --release -p toolbelt-cli --features redis
/// --test cli serve_replicas::throughput -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it by name with --ignored --nocapture (see BENCHMARKS.md)"]
async fn throughput() {
    let mut rows = Vec::new();
    for (label, count, shared) in [
        ("1 replica, no shared state", 1, false),
        ("1 replica, shared state", 1, true),
        ("2 replicas, shared state", 2, true),
    ] {
        let replicas = Replicas::start_with(count, shared, &[]);
        let rate = calls_per_second(&replicas).await;
        rows.push(format!("| {label} | {BENCH_CLIENTS} | {rate:.0} |"));
    }
    println!("| set-up | clients | Read calls/s |\n|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}
