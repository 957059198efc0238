//! Attacks on guarantee 13 (SECURITY.md) by a hostile page, against a real Chromium: names and
//! encodings of loopback, WebSockets, beacons, event streams, a service worker, popups,
//! `file:` and WebRTC/WebTransport aimed around the egress proxy. Each target is a raw TCP (or
//! UDP) listener that counts what arrives, so any way in is seen, whatever the protocol.

use crate::browser_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use browser_support::*;
use toolbelt_browser::{BrowserOptions, BrowserToolSet};
use toolbelt_builtin::web::AddressPolicy;
use toolbelt_core::ToolSet;

/// A TCP listener on `addr` that counts connections and answers each with a small HTTP page.
async fn tcp_counter(listener: tokio::net::TcpListener) -> Arc<AtomicUsize> {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: *\r\n\
                          Content-Length: 15\r\nConnection: close\r\n\r\ninternal secret",
                    )
                    .await;
            });
        }
    });
    hits
}

/// Counters on 127.0.0.1 and [::1] on one port; returns the port and the shared count.
async fn loopback_counter() -> (u16, Arc<AtomicUsize>) {
    for _ in 0..20 {
        let v4 = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let port = v4.local_addr().unwrap().port();
        let Ok(v6) = tokio::net::TcpListener::bind(("::1", port)).await else {
            continue;
        };
        let a = tcp_counter(v4).await;
        let b = tcp_counter(v6).await;
        let total = Arc::new(AtomicUsize::new(0));
        let sum = total.clone();
        tokio::spawn(async move {
            loop {
                sum.store(
                    a.load(Ordering::SeqCst) + b.load(Ordering::SeqCst),
                    Ordering::SeqCst,
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        return (port, total);
    }
    panic!("no port free on both 127.0.0.1 and ::1");
}

/// A page that tries every way to reach port `port` on loopback that is not the page's own
/// host, then sets its title to "done" once each attempt has settled.
fn loopback_attack_page(port: u16) -> String {
    format!(
        r#"<!doctype html><html><head><title>loading</title></head><body><p>hostile page</p>
<script>
const P = {port};
const hosts = ["localhost", "localhost.", "foo.localhost", "127.1", "0x7f000001", "2130706433",
  "017700000001", "0.0.0.0", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::]"];
const waits = [];
for (const h of hosts) {{
  waits.push(fetch(`http://${{h}}:${{P}}/fetch`, {{mode: "no-cors"}}).catch(() => {{}}));
  waits.push(new Promise(r => {{ const i = new Image(); i.onload = i.onerror = r; i.src = `http://${{h}}:${{P}}/img`; }}));
}}
waits.push(new Promise(r => {{
  try {{ const ws = new WebSocket(`ws://localhost:${{P}}/ws`); ws.onclose = ws.onerror = r; }} catch (e) {{ r(); }}
}}));
waits.push(new Promise(r => {{
  try {{ const es = new EventSource(`http://localhost:${{P}}/es`); es.onerror = () => {{ es.close(); r(); }}; }} catch (e) {{ r(); }}
}}));
try {{ navigator.sendBeacon(`http://localhost:${{P}}/beacon`, "x"); }} catch (e) {{}}
try {{ window.open(`http://localhost:${{P}}/popup`); }} catch (e) {{}}
try {{ window.open("file:///etc/passwd"); }} catch (e) {{}}
if (navigator.serviceWorker) {{
  waits.push(navigator.serviceWorker.register("/sw.js").then(reg => new Promise(r => {{
    const w = reg.installing || reg.waiting || reg.active;
    if (!w || w.state !== "installing") return r();
    w.onstatechange = () => {{ if (w.state !== "installing") r(); }};
  }})).catch(() => {{}}));
}}
Promise.all(waits).then(() => {{ document.title = "done"; }});
</script></body></html>"#
    )
}

fn loopback_attack_site(port: u16) -> Router {
    let page = loopback_attack_page(port);
    let worker = format!(
        r#"self.addEventListener("install", e => e.waitUntil(
  fetch("http://localhost:{port}/worker", {{mode: "no-cors"}}).catch(() => {{}})));"#
    );
    Router::new()
        .route("/attack", get(move || async move { Html(page) }))
        .route(
            "/sw.js",
            get(move || async move {
                ([("content-type", "application/javascript")], worker).into_response()
            }),
        )
        .route(
            "/to-file",
            get(|| async {
                Html(
                    r#"<html><head><title>to file</title></head><body>
<script>location.href = "file:///etc/passwd";</script></body></html>"#,
                )
            }),
        )
}

/// The page is on 127.0.0.3, the only loopback address allowed; every other spelling of
/// loopback (names, numeric forms, IPv6, IPv4-mapped, the unspecified address) is refused for
/// every kind of request, and `file:` is never shown.
#[tokio::test(flavor = "multi_thread")]
async fn loopback_by_any_name_or_protocol_is_refused() {
    let (port, hits) = loopback_counter().await;
    let base = serve(loopback_attack_site(port), "127.0.0.3").await;
    let set = BrowserToolSet::new(
        BrowserOptions::default()
            .with_chromium(chromium())
            .with_addresses(AddressPolicy::default().allow("127.0.0.3/32".parse().unwrap())),
    );
    let opened = navigate(&set, &format!("{base}/attack")).await;
    let page = opened + &snapshot_until(&set, "Page: done").await;
    assert!(page.contains("hostile page"), "{page}");
    assert!(page.contains("loopback address"), "{page}");
    assert!(!page.contains("root:x:0:0"), "{page}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "loopback was reached:\n{page}"
    );

    // The page sends itself to file: — Chromium does not load it, and nothing of it is shown.
    let page = navigate(&set, &format!("{base}/to-file")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let page = page
        + &call(&set, "browser_snapshot", "{}")
            .await
            .unwrap()
            .llm_text();
    assert!(!page.contains("root:x:0:0"), "{page}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    set.close().await.unwrap();
}

/// The control for the test above: with loopback allowed, the same page does reach it, so the
/// page really makes those requests.
#[tokio::test(flavor = "multi_thread")]
async fn the_same_page_reaches_loopback_when_the_policy_allows_it() {
    let (port, hits) = loopback_counter().await;
    let base = serve(loopback_attack_site(port), "127.0.0.3").await;
    let set = BrowserToolSet::new(
        BrowserOptions::default()
            .with_chromium(chromium())
            .with_addresses(
                AddressPolicy::default()
                    .allow("127.0.0.0/8".parse().unwrap())
                    .allow("::1/128".parse().unwrap()),
            ),
    );
    navigate(&set, &format!("{base}/attack")).await;
    snapshot_until(&set, "Page: done").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        hits.load(Ordering::SeqCst) >= 5,
        "{}",
        hits.load(Ordering::SeqCst)
    );
    set.close().await.unwrap();
}

/// WebRTC (STUN, TURN over UDP and TCP) and WebTransport (QUIC) aimed at a refused address:
/// no datagram and no TCP connection arrives around the proxy.
#[tokio::test(flavor = "multi_thread")]
async fn webrtc_and_webtransport_send_nothing_around_the_proxy() {
    let udp = tokio::net::UdpSocket::bind(("127.0.0.2", 0)).await.unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let datagrams = Arc::new(AtomicUsize::new(0));
    let counter = datagrams.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while udp.recv_from(&mut buf).await.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let tcp = tokio::net::TcpListener::bind(("127.0.0.2", 0))
        .await
        .unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let connections = tcp_counter(tcp).await;

    let page = format!(
        r#"<!doctype html><html><head><title>loading</title></head><body><p>rtc page</p><script>
const waits = [];
try {{
  const pc = new RTCPeerConnection({{iceServers: [
    {{urls: "stun:127.0.0.2:{udp_port}"}},
    {{urls: "turn:127.0.0.2:{udp_port}?transport=udp", username: "u", credential: "c"}},
    {{urls: "turn:127.0.0.2:{tcp_port}?transport=tcp", username: "u", credential: "c"}}]}});
  pc.createDataChannel("x");
  waits.push(new Promise(r => {{
    pc.onicegatheringstatechange = () => {{ if (pc.iceGatheringState === "complete") r(); }};
    setTimeout(r, 8000);
  }}));
  pc.createOffer().then(o => pc.setLocalDescription(o));
}} catch (e) {{}}
try {{
  const wt = new WebTransport("https://127.0.0.2:{udp_port}/wt");
  waits.push(wt.ready.then(() => {{}}, () => {{}}));
}} catch (e) {{}}
Promise.all(waits).then(() => {{ document.title = "done"; }});
</script></body></html>"#
    );
    let router = Router::new().route("/rtc", get(move || async move { Html(page) }));
    let base = serve(router, "127.0.0.1").await;
    let set = BrowserToolSet::new(loopback_options());
    navigate(&set, &format!("{base}/rtc")).await;
    let seen = snapshot_until(&set, "Page: done").await;
    assert!(seen.contains("rtc page"), "{seen}");
    assert_eq!(
        datagrams.load(Ordering::SeqCst),
        0,
        "UDP went around the proxy"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "TCP went around the proxy"
    );
    set.close().await.unwrap();
}

/// A hostile allowed server that ignores `Connection: close` and keeps its connection open:
/// the proxy must not let the browser send a request for another host down that connection
/// (where the hostile server would answer it as that host).
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_alive_upstream_never_gets_a_request_for_another_host() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (other_port, other_hits) = {
        let listener = tokio::net::TcpListener::bind(("127.0.0.4", 0))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        (port, tcp_counter(listener).await)
    };
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        let line = head.lines().next().unwrap_or_default().to_string();
                        log.lock().unwrap().push(line.clone());
                        let body = if line.contains("/page") {
                            format!(
                                "<html><head><title>page</title></head><body><script>\
                                 setTimeout(() => fetch('http://127.0.0.4:{other_port}/b', \
                                 {{mode: 'no-cors'}}).finally(() => {{ document.title = 'done'; }}), 300);\
                                 </script></body></html>"
                            )
                        } else {
                            "from A".to_string()
                        };
                        let response = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\
                             Access-Control-Allow-Origin: *\r\nConnection: keep-alive\r\n\
                             Content-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let set = BrowserToolSet::new(
        BrowserOptions::default()
            .with_chromium(chromium())
            .with_addresses(AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap())),
    );
    navigate(&set, &format!("http://127.0.0.1:{port}/page")).await;
    snapshot_until(&set, "Page: done").await;
    let lines = seen.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .all(|l| !l.contains("127.0.0.4") && !l.contains("/b ")),
        "the hostile server got another host's request: {lines:?}"
    );
    assert!(
        other_hits.load(Ordering::SeqCst) >= 1,
        "the fetch went nowhere"
    );
    set.close().await.unwrap();
}
