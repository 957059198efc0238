//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/peers/package.json` with the Node 22 it needs) against Toolbelt both ways:
//!
//! - the server suite against `toolbelt serve --http` aggregating a fixture server that offers
//!   every tool, resource and prompt the scenarios call (`tests/fixtures/conformance_server.py`,
//!   over stdio), so each scenario passes only if `serve` relays it faithfully;
//! - the client suite with `toolbelt mcp` as the client (`tests/fixtures/conformance_client.sh`
//!   maps each scenario to the plain `toolbelt mcp` command that exercises it).
//!
//! `tests/conformance-expected-failures.txt` names every check known to fail, and why. A test
//! fails when a check not listed fails (a regression) and when a listed one no longer fails (so
//! the list stays true). Each run prints the figures BENCHMARKS.md ("MCP conformance") records.

use crate::serve_support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_support::{HttpServe, peers, toolbelt, workspace};

/// The list of known failures, relative to the workspace root.
const EXPECTED_FAILURES: &str = "tests/conformance-expected-failures.txt";

/// An upper bound for one suite run (each takes seconds; this only stops a hang).
const SUITE_LIMIT: Duration = Duration::from_secs(600);

/// One suite at a time: the client suite's SSE retry check measures the client's reconnect
/// delay, which a concurrent server suite run would only disturb.
static ONE_SUITE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn server_suite_passes_through_serve_aggregating_the_fixture_server() {
    let _one = ONE_SUITE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let suite = Suite::installed();
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture("conformance_server.py");
    let config = serde_json::json!({"mcpServers": {
        "conformance": {"command": toolbelt_testkit::python(), "args": [fixture, "stdio"]},
    }});
    let config_path = dir.path().join("mcp.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    // No token: the suite sends none, and its DNS-rebinding scenario is about an
    // unauthenticated loopback server.
    let served = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        dir.path().display().to_string(),
        "--mcp-config".into(),
        config_path.display().to_string(),
        "--no-auth".into(),
    ]);
    // `serve` answers at once and connects to aggregated servers in the background: start the
    // suite once the fixture's tools are listed.
    wait_until_listed(&served, "test_simple_text");
    let out = dir.path().join("results");
    let log = suite.run(
        &["server", "--url", &served.url, "--suite", "all"],
        &[],
        &out,
    );
    check_against_expected(&suite, Mode::Server, &out, &log);
}

#[test]
fn client_suite_passes_with_toolbelt_mcp_as_the_client() {
    let _one = ONE_SUITE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let suite = Suite::installed();
    let dir = tempfile::tempdir().unwrap();
    let command = format!("bash {}", fixture("conformance_client.sh"));
    let out = dir.path().join("results");
    let log = suite.run(
        &["client", "--command", &command, "--suite", "all"],
        &[("TOOLBELT_BIN", toolbelt())],
        &out,
    );
    check_against_expected(&suite, Mode::Client, &out, &log);
}

/// Waits (bounded) until `toolbelt mcp tools` lists `tool` on the served URL.
fn wait_until_listed(served: &HttpServe, tool: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listing = Command::new(toolbelt())
            .args(["mcp", "tools", "--http", &served.url])
            .stdin(Stdio::null())
            .output()
            .expect("toolbelt mcp tools runs");
        let stdout = String::from_utf8_lossy(&listing.stdout);
        if stdout
            .lines()
            .any(|line| line.split_whitespace().next() == Some(tool))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "serve never listed the fixture server's {tool}; last listing:\n{stdout}{}\nserve's stderr:\n{}",
            String::from_utf8_lossy(&listing.stderr),
            served.stderr_lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A file of `tests/fixtures`, as a string argument.
fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// Which side of Toolbelt a suite run tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Server,
    Client,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Server => "server",
            Mode::Client => "client",
        }
    }
}

/// The installed suite: Node 22 and the suite's entry point, both under `tests/peers`.
struct Suite {
    node: PathBuf,
    entry: PathBuf,
}

impl Suite {
    /// Finds the suite, failing loudly with the install hint when it or Node 22 is missing.
    fn installed() -> Self {
        const HINT: &str = "run `bash .ci/install-peers` (it installs Node 22 and \
                            @modelcontextprotocol/conformance under tests/peers)";
        let modules = peers().join("node_modules");
        let node = modules.join("node/bin/node");
        let entry = modules.join("@modelcontextprotocol/conformance/dist/index.js");
        assert!(
            node.exists(),
            "Node 22 is missing at {}; {HINT}",
            node.display()
        );
        assert!(
            entry.exists(),
            "the MCP conformance suite is missing at {}; {HINT}",
            entry.display()
        );
        let version = Command::new(&node)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("{} does not run ({e}); {HINT}", node.display()));
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let major: u32 = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        assert!(
            major >= 22,
            "the conformance suite needs Node 22 or later, {} is {version:?}; {HINT}",
            node.display()
        );
        Self { node, entry }
    }

    /// `conformance ARGS -o OUT`, with Node first on PATH; returns its output. The suite runs
    /// in a process group of its own, killed as a whole when it ends or outlives
    /// [`SUITE_LIMIT`], so no client it started outlives the test.
    fn run(&self, args: &[&str], envs: &[(&str, &str)], out: &Path) -> String {
        use std::os::unix::process::CommandExt;
        let log = out.with_extension("log");
        let log_file = std::fs::File::create(&log).unwrap();
        let mut child = Command::new(&self.node)
            .arg(&self.entry)
            .args(args)
            .arg("-o")
            .arg(out)
            .env("PATH", self.path_with_node())
            .envs(envs.iter().copied())
            .current_dir(out.parent().unwrap())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .process_group(0)
            .spawn()
            .expect("the conformance suite starts");
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > SUITE_LIMIT {
                // SAFETY: kill(2) on the process group this test created for the suite.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                panic!(
                    "the conformance suite ran longer than {SUITE_LIMIT:?}; output:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // A client command the suite gave up on (its per-scenario timeout kills only the
        // shell it started) may have left a `toolbelt` behind in the group: end it.
        // SAFETY: kill(2) on the process group this test created for the suite.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        std::fs::read_to_string(&log).unwrap_or_default()
    }

    /// The scenarios the suite lists for a mode, with their tag (`2025-11-25`, `draft`, …).
    fn scenarios(&self, mode: Mode) -> BTreeMap<String, String> {
        let output = Command::new(&self.node)
            .arg(&self.entry)
            .args(["list", &format!("--{}", mode.name())])
            .output()
            .expect("conformance list runs");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.trim().strip_prefix("- "))
            .map(|line| {
                let (name, tags) = line.split_once(' ').unwrap_or((line, ""));
                let tags = tags.trim().trim_start_matches('[').trim_end_matches(']');
                (name.to_string(), tags.to_string())
            })
            .collect()
    }

    fn path_with_node(&self) -> String {
        let bin = self.node.parent().unwrap().display().to_string();
        match std::env::var("PATH") {
            Ok(path) if !path.is_empty() => format!("{bin}:{path}"),
            _ => bin,
        }
    }
}

/// One check of a scenario, as the suite wrote it in `checks.json`.
#[derive(Debug)]
struct Check {
    id: String,
    status: String,
    message: String,
}

/// Every scenario's checks from the suite's result directory: `OUT/[server-]SCENARIO-STAMP/
/// checks.json`, where a client scenario's name may hold a `/` (`auth/metadata-default`).
fn results(mode: Mode, out: &Path) -> BTreeMap<String, Vec<Check>> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.map_while(Result::ok) {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let checks = path.join("checks.json");
            if !checks.exists() {
                dirs.push(path);
                continue;
            }
            let relative = path.strip_prefix(out).unwrap().display().to_string();
            let scenario = scenario_name(mode, &relative)
                .unwrap_or_else(|| panic!("unexpected result directory {relative:?}"));
            let text = std::fs::read_to_string(&checks).unwrap();
            let list: Vec<Value> = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON ({e})", checks.display()));
            let checks = list
                .iter()
                .map(|c| Check {
                    id: c["id"].as_str().unwrap_or("?").to_string(),
                    status: c["status"].as_str().unwrap_or("?").to_string(),
                    message: c["errorMessage"]
                        .as_str()
                        .or(c["description"].as_str())
                        .unwrap_or("")
                        .to_string(),
                })
                .collect();
            found.insert(scenario, checks);
        }
    }
    found
}

/// `server-tools-list-2026-12-03T10-34-50-857Z` → `tools-list`: the suite names a result
/// directory after the scenario and an ISO timestamp with `:` and `.` made `-`.
fn scenario_name(mode: Mode, relative: &str) -> Option<String> {
    const STAMP: usize = "-2026-12-03T10-34-50-857Z".len();
    let cut = relative.len().checked_sub(STAMP)?;
    let (name, stamp) = relative.split_at(cut);
    if !(stamp.ends_with('Z') && stamp.as_bytes().get(11) == Some(&b'T')) {
        return None;
    }
    Some(match mode {
        Mode::Server => name.strip_prefix("server-")?.to_string(),
        Mode::Client => name.to_string(),
    })
}

/// One line of the expected-failures file.
#[derive(Debug)]
struct Expected {
    line: usize,
    /// The check's outcome is printed but not asserted (it measures wall-clock time).
    unasserted: bool,
    scenario: String,
    /// A check id, or `*` for every check of the scenario.
    check: String,
}

impl Expected {
    fn covers(&self, scenario: &str, check: &str) -> bool {
        self.scenario == scenario && (self.check == "*" || self.check == check)
    }
}

/// The expected-failures lines for one mode: `[unasserted] MODE SCENARIO CHECK -- why`.
fn expected_failures(mode: Mode) -> Vec<Expected> {
    let path = workspace().join(EXPECTED_FAILURES);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut entries = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let (what, why) = raw
            .split_once(" -- ")
            .unwrap_or_else(|| panic!("{EXPECTED_FAILURES}:{line}: no ` -- why` in {raw:?}"));
        assert!(
            !why.trim().is_empty(),
            "{EXPECTED_FAILURES}:{line}: say why the check fails"
        );
        let mut words: Vec<&str> = what.split_whitespace().collect();
        let unasserted = words.first() == Some(&"unasserted");
        if unasserted {
            words.remove(0);
        }
        let [line_mode, scenario, check] = words[..] else {
            panic!(
                "{EXPECTED_FAILURES}:{line}: expected `[unasserted] MODE SCENARIO CHECK -- why`, got {raw:?}"
            );
        };
        assert!(
            matches!(line_mode, "server" | "client"),
            "{EXPECTED_FAILURES}:{line}: mode must be server or client, got {line_mode:?}"
        );
        if line_mode == mode.name() {
            entries.push(Expected {
                line,
                unasserted,
                scenario: scenario.to_string(),
                check: check.to_string(),
            });
        }
    }
    entries
}

/// Compares one run's results with the expected failures and the suite's scenario list,
/// prints the figures, and fails on a regression, a stale entry or a scenario that never ran.
fn check_against_expected(suite: &Suite, mode: Mode, out: &Path, log: &str) {
    let listed = suite.scenarios(mode);
    assert!(
        !listed.is_empty(),
        "`conformance list --{}` listed nothing",
        mode.name()
    );
    let found = results(mode, out);
    let expected = expected_failures(mode);
    let mut problems = Vec::new();

    for scenario in listed.keys() {
        if !found.contains_key(scenario) {
            problems.push(format!("scenario {scenario} left no results"));
        }
    }
    for (scenario, checks) in &found {
        for check in checks.iter().filter(|c| c.status == "FAILURE") {
            if !expected.iter().any(|e| e.covers(scenario, &check.id)) {
                problems.push(format!(
                    "regression: {} {scenario} {} failed: {}",
                    mode.name(),
                    check.id,
                    check.message
                ));
            }
        }
    }
    for entry in expected.iter().filter(|e| !e.unasserted) {
        let failing = found.get(&entry.scenario).is_some_and(|checks| {
            checks
                .iter()
                .any(|c| c.status == "FAILURE" && entry.covers(&entry.scenario, &c.id))
        });
        if !failing {
            problems.push(format!(
                "{EXPECTED_FAILURES}:{}: {} {} {} no longer fails: remove the line",
                entry.line,
                mode.name(),
                entry.scenario,
                entry.check
            ));
        }
    }

    println!("{}", figures(mode, &listed, &found, &expected));
    assert!(
        problems.is_empty(),
        "the {} suite does not match {EXPECTED_FAILURES}:\n  {}\n\nsuite output:\n{log}",
        mode.name(),
        problems.join("\n  ")
    );
}

/// A table of the run: per scenario its tag and checks passed / failed / warned, then totals
/// per area (core, auth) and kind (spec versions, draft, extension): the conformance figures
/// of BENCHMARKS.md.
fn figures(
    mode: Mode,
    listed: &BTreeMap<String, String>,
    found: &BTreeMap<String, Vec<Check>>,
    expected: &[Expected],
) -> String {
    let count =
        |checks: &[Check], status: &str| checks.iter().filter(|c| c.status == status).count();
    // A line of its own: the test harness prints "test NAME ... " before it under --nocapture.
    let mut text = format!("\nMCP conformance, {} suite\n", mode.name());
    // tag -> (scenarios, scenarios passed, checks passed, checks failed)
    let mut totals: BTreeMap<String, (usize, usize, usize, usize)> = BTreeMap::new();
    for (scenario, checks) in found {
        let tag = listed.get(scenario).cloned().unwrap_or_default();
        // Dated scenarios (a spec version) apart from draft and extension ones.
        let area = if scenario.starts_with("auth/") {
            "auth"
        } else {
            "core"
        };
        let group = match tag.as_str() {
            "draft" | "extension" => format!("{area} ({tag})"),
            _ => area.to_string(),
        };
        let (passed, failed, warned) = (
            count(checks, "SUCCESS"),
            count(checks, "FAILURE"),
            count(checks, "WARNING"),
        );
        let note = if expected
            .iter()
            .any(|e| e.unasserted && e.scenario == *scenario)
        {
            " (has an unasserted timing check)"
        } else {
            ""
        };
        let _ = writeln!(
            text,
            "  {} {scenario} [{tag}]: {passed} passed, {failed} failed, {warned} warnings{note}",
            if failed == 0 { "ok  " } else { "FAIL" }
        );
        let total = totals.entry(group).or_default();
        total.0 += 1;
        total.1 += usize::from(failed == 0);
        total.2 += passed;
        total.3 += failed;
    }
    for (group, (scenarios, clean, passed, failed)) in &totals {
        let _ = writeln!(
            text,
            "  total {group}: {clean}/{scenarios} scenarios pass, {passed}/{} checks pass",
            passed + failed
        );
    }
    text
}
