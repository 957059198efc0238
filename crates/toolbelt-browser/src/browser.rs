//! One browser per tool set: started on first use, restarted after a crash, killed on close.
//!
//! [`Browser`] holds at most one running Chromium with one page. Every operation takes the
//! lock, so the tools of one set run one at a time against that page.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Mutex, broadcast};
use url::Url;

use crate::cdp::{Cdp, CdpError, CdpEvent};
use crate::egress::Egress;
use crate::options::BrowserOptions;
use crate::policy::NetPolicy;
use crate::process::{ChromiumProcess, find_chromium};

const SNAPSHOT_SCRIPT: &str = include_str!("snapshot.js");
/// How long an action waits to see whether it started a navigation.
const NAVIGATION_GRACE: Duration = Duration::from_millis(150);

/// Why a browser operation failed; rendered for the model by the tools.
#[derive(Debug)]
pub(crate) enum BrowserError {
    /// The request was refused by the policy (URL scheme, domain, address).
    Refused(String),
    /// The arguments do not name something that exists (a stale or unknown ref).
    Invalid(String),
    /// The browser exited or stopped answering: it must be replaced.
    Broken(String),
    /// Anything else.
    Failed(String),
}

impl From<CdpError> for BrowserError {
    fn from(e: CdpError) -> Self {
        match e {
            CdpError::Closed | CdpError::Timeout(_) => Self::Broken(e.to_string()),
            CdpError::Protocol(_) => Self::Failed(e.to_string()),
        }
    }
}

/// A page outline, with the page's title and URL.
pub(crate) struct Snapshot {
    pub(crate) title: String,
    pub(crate) url: String,
    pub(crate) outline: String,
    pub(crate) truncated: bool,
}

/// A running browser and the page the tools drive.
struct Running {
    // Field order is drop order: the connection first, then the process group (killed and
    // reaped, profile removed), then the proxy.
    cdp: Cdp,
    process: ChromiumProcess,
    egress: Egress,
    session: String,
    /// The isolated world of the last snapshot, where its element references live.
    world: Option<i64>,
    popup_guard: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.popup_guard.abort();
    }
}

/// The browser behind one tool set.
pub(crate) struct Browser {
    options: BrowserOptions,
    policy: NetPolicy,
    state: Mutex<Option<Running>>,
}

impl Browser {
    pub(crate) fn new(options: BrowserOptions) -> Self {
        let policy = NetPolicy {
            domains: options.domains.clone(),
            addresses: options.addresses.clone(),
        };
        Self {
            options,
            policy,
            state: Mutex::new(None),
        }
    }

    /// The main process id of the running browser, if one runs.
    pub(crate) async fn pid(&self) -> Option<u32> {
        self.state.lock().await.as_ref().map(|r| r.process.pid())
    }

    /// Kills the browser (and its process group) if one runs; true if one ran.
    pub(crate) async fn close(&self) -> bool {
        self.state.lock().await.take().is_some()
    }

    /// Opens `url` and returns the page's snapshot, with notes for the model.
    pub(crate) async fn navigate(
        &self,
        url: &str,
    ) -> Result<(Snapshot, Vec<String>), BrowserError> {
        let url = Url::parse(url)
            .map_err(|e| BrowserError::Invalid(format!("{url:?} is not a valid URL: {e}")))?;
        self.policy
            .check_url(&url)
            .await
            .map_err(BrowserError::Refused)?;
        let mut state = self.state.lock().await;
        let (running, mut notes) = self.ensure(&mut state).await?;
        let mut events = running.cdp.subscribe();
        let answer = running
            .cdp
            .call(
                "Page.navigate",
                json!({"url": url.as_str()}),
                Some(&running.session),
            )
            .await;
        let answer = self.fail_if_dead(&mut state, answer)?;
        let running = state.as_mut().expect("checked above");
        if let Some(error) = answer.get("errorText").and_then(Value::as_str) {
            let mut message = format!("opening {url} failed: {error}");
            for refusal in running.egress.take_refusals() {
                message.push_str(&format!("\nrefused: {refusal}"));
            }
            return Err(BrowserError::Failed(message));
        }
        // A same-document navigation (only the fragment changed) fires no load event.
        if answer.get("loaderId").is_some() {
            let loaded = wait_for(
                &mut events,
                &running.session,
                "Page.loadEventFired",
                self.options.timeout,
            )
            .await;
            if !loaded {
                notes.push(format!(
                    "the page had not finished loading after {} s; the snapshot shows it as it was",
                    self.options.timeout.as_secs()
                ));
            }
        }
        let snapshot = snapshot(running).await?;
        notes.extend(refusal_notes(&running.egress));
        Ok((snapshot, notes))
    }

    /// The current page's snapshot.
    pub(crate) async fn snapshot(&self) -> Result<(Snapshot, Vec<String>), BrowserError> {
        let mut state = self.state.lock().await;
        let (running, mut notes) = self.ensure(&mut state).await?;
        let result = snapshot(running).await;
        let snapshot = self.fail_if_dead(&mut state, result)?;
        if let Some(running) = state.as_ref() {
            notes.extend(refusal_notes(&running.egress));
        }
        Ok((snapshot, notes))
    }

    /// Clicks the element `reference` names, then returns the new snapshot.
    pub(crate) async fn click(
        &self,
        reference: &str,
    ) -> Result<(Snapshot, Vec<String>), BrowserError> {
        check_ref(reference)?;
        let mut state = self.state.lock().await;
        let (running, mut notes) = self.ensure(&mut state).await?;
        let result = click(running, reference, self.options.timeout).await;
        self.fail_if_dead(&mut state, result)?;
        let running = state.as_mut().expect("checked above");
        let result = snapshot(running).await;
        let snapshot = self.fail_if_dead(&mut state, result)?;
        if let Some(running) = state.as_ref() {
            notes.extend(refusal_notes(&running.egress));
        }
        Ok((snapshot, notes))
    }

    /// Types `text` into the element `reference` names (replacing its content), presses
    /// Enter when `submit`, then returns the new snapshot.
    pub(crate) async fn type_text(
        &self,
        reference: &str,
        text: &str,
        submit: bool,
    ) -> Result<(Snapshot, Vec<String>), BrowserError> {
        check_ref(reference)?;
        let mut state = self.state.lock().await;
        let (running, mut notes) = self.ensure(&mut state).await?;
        let result = type_text(running, reference, text, submit, self.options.timeout).await;
        self.fail_if_dead(&mut state, result)?;
        let running = state.as_mut().expect("checked above");
        let result = snapshot(running).await;
        let snapshot = self.fail_if_dead(&mut state, result)?;
        if let Some(running) = state.as_ref() {
            notes.extend(refusal_notes(&running.egress));
        }
        Ok((snapshot, notes))
    }

    /// A PNG of the viewport, base64, with the page's URL.
    pub(crate) async fn screenshot(&self) -> Result<(String, String, Vec<String>), BrowserError> {
        let mut state = self.state.lock().await;
        let (running, notes) = self.ensure(&mut state).await?;
        let session = running.session.clone();
        let shot = running
            .cdp
            .call(
                "Page.captureScreenshot",
                json!({"format": "png"}),
                Some(&session),
            )
            .await
            .map_err(BrowserError::from);
        let shot = self.fail_if_dead(&mut state, shot)?;
        let data = shot
            .get("data")
            .and_then(Value::as_str)
            .ok_or_else(|| BrowserError::Failed("the browser sent no screenshot".into()))?
            .to_string();
        let running = state.as_mut().expect("checked above");
        let url = evaluate_main(running, "location.href")
            .await
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        Ok((data, url, notes))
    }

    /// A failure after which the browser is gone is reported as such, and the dead browser
    /// is dropped (its group killed) so the next call starts a new one.
    fn fail_if_dead<T>(
        &self,
        state: &mut Option<Running>,
        result: Result<T, impl Into<BrowserError>>,
    ) -> Result<T, BrowserError> {
        let error = match result {
            Ok(value) => return Ok(value),
            Err(e) => e.into(),
        };
        let dead = state
            .as_mut()
            .is_some_and(|r| r.cdp.is_closed() || r.process.has_exited());
        if dead || matches!(error, BrowserError::Broken(_)) {
            *state = None;
            return Err(BrowserError::Failed(format!(
                "{}; the browser was stopped and the next browser call starts a new one",
                render(&error)
            )));
        }
        Err(error)
    }

    /// The running browser, starting one if none runs or the last one died.
    async fn ensure<'a>(
        &self,
        state: &'a mut Option<Running>,
    ) -> Result<(&'a mut Running, Vec<String>), BrowserError> {
        let mut notes = Vec::new();
        if let Some(running) = state.as_mut()
            && (running.cdp.is_closed() || running.process.has_exited())
        {
            *state = None;
            notes.push(
                "the browser had stopped (it crashed or was killed); a new one was started, \
                 and the previous page and its element references are gone"
                    .to_string(),
            );
        }
        if state.is_none() {
            *state = Some(self.launch().await?);
        }
        Ok((state.as_mut().expect("just set"), notes))
    }

    async fn launch(&self) -> Result<Running, BrowserError> {
        let executable =
            find_chromium(self.options.chromium.as_deref()).map_err(BrowserError::Failed)?;
        let egress = Egress::start(self.policy.clone()).await.map_err(|e| {
            BrowserError::Failed(format!("could not start the browser's proxy: {e}"))
        })?;
        let (process, pipe) =
            ChromiumProcess::spawn(&executable, egress.addr(), self.options.viewport).map_err(
                |e| BrowserError::Failed(format!("could not start {}: {e}", executable.display())),
            )?;
        let cdp = Cdp::new(pipe.to_browser, pipe.from_browser, self.options.timeout)
            .map_err(|e| BrowserError::Failed(format!("could not talk to the browser: {e}")))?;
        let started = setup_page(&cdp, self.options.viewport).await;
        let (session, popup_guard) = started.map_err(|e| {
            BrowserError::Failed(format!(
                "{} did not start as a browser ({e}); is it Chromium or Chrome?",
                executable.display()
            ))
        })?;
        Ok(Running {
            cdp,
            process,
            egress,
            session,
            world: None,
            popup_guard,
        })
    }
}

/// Opens the page the tools drive, denies downloads, and closes every other page (popups,
/// `window.open`, `target=_blank`) as soon as it appears.
async fn setup_page(
    cdp: &Cdp,
    (width, height): (u32, u32),
) -> Result<(String, tokio::task::JoinHandle<()>), CdpError> {
    let created = cdp
        .call("Target.createTarget", json!({"url": "about:blank"}), None)
        .await?;
    let target = created
        .get("targetId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let attached = cdp
        .call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
            None,
        )
        .await?;
    let session = attached
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    cdp.call(
        "Browser.setDownloadBehavior",
        json!({"behavior": "deny"}),
        None,
    )
    .await?;
    cdp.call("Page.enable", json!({}), Some(&session)).await?;
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        Some(&session),
    )
    .await?;
    let mut events = cdp.subscribe();
    // Reports existing targets too, so the window Chromium opened at start is closed as well.
    cdp.call("Target.setDiscoverTargets", json!({"discover": true}), None)
        .await?;
    let closer = cdp.closer();
    let ours = target.clone();
    let guard = tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) if event.method == "Target.targetCreated" => {
                    let info = &event.params["targetInfo"];
                    let id = info["targetId"].as_str().unwrap_or_default();
                    if info["type"] == "page" && id != ours {
                        tracing::info!(target: "toolbelt_browser", "closing a popup page");
                        closer.close_target(id).await;
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    Ok((session, guard))
}

fn check_ref(reference: &str) -> Result<(), BrowserError> {
    let valid = reference
        .strip_prefix('e')
        .is_some_and(|n| !n.is_empty() && n.len() < 10 && n.bytes().all(|b| b.is_ascii_digit()));
    if valid {
        Ok(())
    } else {
        Err(BrowserError::Invalid(format!(
            "{reference:?} is not an element reference; use a ref such as e12 from browser_snapshot"
        )))
    }
}

async fn wait_for(
    events: &mut broadcast::Receiver<CdpEvent>,
    session: &str,
    method: &str,
    limit: Duration,
) -> bool {
    tokio::time::timeout(limit, async {
        loop {
            match events.recv().await {
                Ok(event)
                    if event.method == method && event.session_id.as_deref() == Some(session) =>
                {
                    return true;
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    })
    .await
    .unwrap_or(false)
}

/// Evaluates an expression in the page's own world and returns its value.
async fn evaluate_main(running: &Running, expression: &str) -> Result<Value, BrowserError> {
    let answer = running
        .cdp
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
            Some(&running.session),
        )
        .await?;
    result_value(answer)
}

/// Evaluates an expression in our isolated world, creating it when `create` is set and the
/// last one is gone.
async fn evaluate_isolated(
    running: &mut Running,
    expression: &str,
    create: bool,
) -> Result<Value, BrowserError> {
    if let Some(world) = running.world {
        let answer = running
            .cdp
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "contextId": world, "returnByValue": true}),
                Some(&running.session),
            )
            .await;
        match answer {
            Ok(answer) => return result_value(answer),
            Err(CdpError::Protocol(message)) if message.contains("context") => {
                running.world = None;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if !create {
        return Err(BrowserError::Invalid(
            "the page has changed since the last snapshot (it navigated or reloaded); call \
             browser_snapshot for new element references"
                .into(),
        ));
    }
    let tree = running
        .cdp
        .call("Page.getFrameTree", json!({}), Some(&running.session))
        .await?;
    let frame = tree["frameTree"]["frame"]["id"]
        .as_str()
        .unwrap_or_default();
    let world = running
        .cdp
        .call(
            "Page.createIsolatedWorld",
            json!({"frameId": frame, "worldName": "toolbelt"}),
            Some(&running.session),
        )
        .await?;
    let id = world["executionContextId"]
        .as_i64()
        .ok_or_else(|| BrowserError::Failed("the browser created no isolated world".into()))?;
    running.world = Some(id);
    let answer = running
        .cdp
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "contextId": id, "returnByValue": true}),
            Some(&running.session),
        )
        .await?;
    result_value(answer)
}

fn result_value(mut answer: Value) -> Result<Value, BrowserError> {
    if let Some(details) = answer.get("exceptionDetails") {
        let text = details["exception"]["description"]
            .as_str()
            .or_else(|| details["text"].as_str())
            .unwrap_or("an exception");
        return Err(BrowserError::Failed(format!(
            "the page script failed: {text}"
        )));
    }
    Ok(answer["result"]["value"].take())
}

async fn snapshot(running: &mut Running) -> Result<Snapshot, BrowserError> {
    // A new world per snapshot: references from older snapshots stop working at once.
    running.world = None;
    let value = evaluate_isolated(running, SNAPSHOT_SCRIPT, true).await?;
    let text = |key: &str| value[key].as_str().unwrap_or_default().to_string();
    Ok(Snapshot {
        title: text("title"),
        url: text("url"),
        outline: text("outline"),
        truncated: value["truncated"].as_bool().unwrap_or(false),
    })
}

/// Scrolls the element into view and returns its centre in viewport coordinates.
async fn locate(
    running: &mut Running,
    reference: &str,
    focus: bool,
) -> Result<(f64, f64), BrowserError> {
    let expression = format!(
        "(() => {{ const el = globalThis.__toolbeltRefs && globalThis.__toolbeltRefs.get({r});
            if (!el || !el.isConnected) return null;
            el.scrollIntoView({{block: 'center', inline: 'center'}});
            if ({focus}) {{ el.focus(); if (typeof el.select === 'function') el.select();
              else if (el.isContentEditable) document.execCommand('selectAll'); }}
            const r = el.getBoundingClientRect();
            return {{x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height}}; }})()",
        r = serde_json::to_string(reference).unwrap_or_default(),
    );
    let value = evaluate_isolated(running, &expression, false).await?;
    if value.is_null() {
        return Err(BrowserError::Invalid(format!(
            "no element {reference} in the last snapshot (or it was removed from the page); \
             call browser_snapshot for current references"
        )));
    }
    if value["w"].as_f64() == Some(0.0) && value["h"].as_f64() == Some(0.0) {
        return Err(BrowserError::Invalid(format!(
            "element {reference} has no size on the page (it is hidden)"
        )));
    }
    Ok((
        value["x"].as_f64().unwrap_or(0.0),
        value["y"].as_f64().unwrap_or(0.0),
    ))
}

async fn click(
    running: &mut Running,
    reference: &str,
    limit: Duration,
) -> Result<(), BrowserError> {
    let (x, y) = locate(running, reference, false).await?;
    let mut events = running.cdp.subscribe();
    for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
        running
            .cdp
            .call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
                Some(&running.session),
            )
            .await?;
    }
    settle(running, &mut events, limit).await;
    Ok(())
}

async fn type_text(
    running: &mut Running,
    reference: &str,
    text: &str,
    submit: bool,
    limit: Duration,
) -> Result<(), BrowserError> {
    locate(running, reference, true).await?;
    let mut events = running.cdp.subscribe();
    running
        .cdp
        .call(
            "Input.insertText",
            json!({"text": text}),
            Some(&running.session),
        )
        .await?;
    if submit {
        for kind in ["keyDown", "keyUp"] {
            let mut key = json!({"type": kind, "key": "Enter", "code": "Enter",
                "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13});
            if kind == "keyDown" {
                key["text"] = json!("\r");
            }
            running
                .cdp
                .call("Input.dispatchKeyEvent", key, Some(&running.session))
                .await?;
        }
    }
    settle(running, &mut events, limit).await;
    Ok(())
}

/// After an input event: if it started a navigation (a link, a form submit), waits for the
/// new page to load.
async fn settle(running: &Running, events: &mut broadcast::Receiver<CdpEvent>, limit: Duration) {
    let session = running.session.clone();
    let started = tokio::time::timeout(NAVIGATION_GRACE, async {
        loop {
            match events.recv().await {
                Ok(event)
                    if event.session_id.as_deref() == Some(session.as_str())
                        && matches!(
                            event.method.as_str(),
                            "Page.frameRequestedNavigation" | "Page.frameStartedLoading"
                        )
                        && event.params["frameId"].as_str().is_some() =>
                {
                    return true;
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    })
    .await
    .unwrap_or(false);
    if started {
        wait_for(events, &session, "Page.loadEventFired", limit).await;
    }
}

fn refusal_notes(egress: &Egress) -> Vec<String> {
    egress
        .take_refusals()
        .into_iter()
        .map(|r| format!("refused a request: {r}"))
        .collect()
}

/// The text of an error, for the model.
pub(crate) fn render(error: &BrowserError) -> String {
    match error {
        BrowserError::Refused(m)
        | BrowserError::Invalid(m)
        | BrowserError::Broken(m)
        | BrowserError::Failed(m) => m.clone(),
    }
}
