//! TodoWrite in a scripted run (issue 32, item 3): the plan is printed on stderr under its
//! tool line each time the model changes it, and stdout keeps the answer alone.

use crate::run_support;

use run_support::{output, project, text, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

#[tokio::test(flavor = "multi_thread")]
async fn run_shows_each_version_of_the_plan_on_stderr() {
    let dir = project();
    let plan = |first: &str, second: &str| {
        format!(
            r#"{{"todos":[{{"content":"Run the tests","status":"{first}","activeForm":"Running the tests"}},{{"content":"Fix the failures","status":"{second}","activeForm":"Fixing the failures"}}]}}"#
        )
    };
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "TodoWrite", &plan("in_progress", "pending")),
        Reply::tool_call("call_2", "TodoWrite", &plan("completed", "in_progress")),
        Reply::text("Both steps are planned."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "Fix the build", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(stdout, "Both steps are planned.\n");
    let first = stderr
        .find("    ▶ Running the tests\n    ☐ Fix the failures\n")
        .unwrap_or_else(|| panic!("the first plan is not on stderr:\n{stderr}"));
    let second = stderr
        .find("    ☑ Run the tests\n    ▶ Fixing the failures\n")
        .unwrap_or_else(|| panic!("the second plan is not on stderr:\n{stderr}"));
    assert!(first < second, "{stderr}");
    // The model got Claude Code's answer, not the checklist.
    let requests = server.requests();
    let results = run_support::tool_contents(&requests[1]);
    assert!(
        results[0].starts_with("Todos have been modified successfully"),
        "{results:?}"
    );
}
