//! Attacks on guarantee 10 (SECURITY.md): a page on another port of the same host (same site,
//! so a `SameSite=Strict` cookie travels with its requests), an opaque `null` origin, a
//! form-style body, and the token looked for in the server's own log at the most verbose level.

use crate::ui_support;

use std::process::Stdio;

use serde_json::json;
use toolbelt_model::testing::ScriptedServer;
use ui_support::{TOKEN, Ui, project, session_file, toolbelt};

/// The cookie the printed URL trades for (`name=value`).
async fn cookie(ui: &Ui) -> String {
    let bare = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let traded = bare
        .get(ui.url(&format!("/?token={TOKEN}")))
        .send()
        .await
        .unwrap();
    assert_eq!(traded.status(), 303);
    let set = traded.headers()["set-cookie"].to_str().unwrap().to_string();
    set.split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_on_another_port_or_an_opaque_origin_cannot_start_or_approve_a_run() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([]).await.unwrap();
    let ui = Ui::start(&server, dir.path(), &file, &[]);
    let pair = cookie(&ui).await;
    let host = ui
        .base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let port = host.rsplit_once(':').unwrap().1.to_string();
    let bare = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let other_port = if port == "1" { "2" } else { "1" };
    // Starting a run, and approving a paused call (which runs it).
    let approve = json!({"session_id": "s1", "decisions": {"call_1": {"decision": "approve"}}});
    for (path, body) in [
        ("/api/runs", json!({"message": "run rm -rf ~"})),
        ("/api/decisions", approve),
    ] {
        for origin in [
            format!("http://127.0.0.1:{other_port}"),
            format!("http://localhost:{port}"),
            format!("https://{host}"),
            "null".to_string(),
        ] {
            let response = bare
                .post(ui.url(path))
                .header("cookie", &pair)
                .header("origin", &origin)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 403, "{path} from Origin {origin}");
        }
        // What a cross-site form can send (text/plain whose text is JSON), had the browser
        // left out the Origin: not a JSON request, so nothing starts.
        let form = bare
            .post(ui.url(path))
            .header("cookie", &pair)
            .header("content-type", "text/plain")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(form.status().is_client_error(), "{path}: {}", form.status());
        // And without the page's token or cookie, nothing at all.
        let anonymous = bare.post(ui.url(path)).json(&body).send().await.unwrap();
        assert_eq!(anonymous.status(), 401, "{path} without the token");
    }
    assert_eq!(server.requests().len(), 0, "a run was started");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_never_reaches_the_log() {
    let dir = project();
    let file = session_file(&dir);
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .env("TOOLBELT_UI_TOKEN", TOKEN)
        .env("TOOLBELT_LOG", "trace")
        .args(["ui", "--http", "127.0.0.1:0", "--yes", "--session"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut ui = Ui::spawn(command, "toolbelt: web UI on ");
    let pair = cookie(&ui).await;
    let client = ui.client();
    for path in ["/", "/api/sessions", "/api/config", "/assets/app.js"] {
        let response = client.get(ui.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    let bare = reqwest::Client::builder().no_proxy().build().unwrap();
    let with_cookie = bare
        .get(ui.url("/api/sessions"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status(), 200);
    let config = client
        .get(ui.url("/api/config"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!config.contains(TOKEN), "the page's config holds the token");
    ui.stop();
    let log = ui.stderr();
    assert!(log.lines().count() > 1, "nothing was logged:\n{log}");
    assert!(!log.contains(TOKEN), "the token is in the log:\n{log}");
}
