//! A long-running tool (its output marked pending) pauses the run; the result, supplied later
//! as a role=tool message through a new runner over the same SQLite file (another process),
//! resumes it, and only then is the model asked again.

use std::sync::Arc;

use toolbelt_agent::{EventKind, RunOptions, Runner, SqliteSessionService, awaiting_results};
use toolbelt_core::{FunctionTool, ToolContext, ToolError, ToolOutput};
use toolbelt_model::Message;
use toolbelt_model::testing::{Reply, ScriptedServer};

use crate::agent_support::{agent, persistent_types, tool_messages};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Job {
    /// What to deploy.
    target: String,
}

fn deployer(server: &ScriptedServer, db: &std::path::Path) -> Runner {
    let deploy = FunctionTool::returning_output(
        "deploy",
        "Starts a deployment, which takes a while",
        |_ctx: ToolContext, job: Job| async move {
            Ok::<_, ToolError>(ToolOutput::pending(format!(
                "deployment of {} started as job 7",
                job.target
            )))
        },
    )
    .unwrap();
    let agent = agent("ops", server, false).tool(deploy).build().unwrap();
    let sessions = Arc::new(SqliteSessionService::open(db).unwrap());
    Runner::new("app", Arc::new(agent)).with_session_service(sessions)
}

#[tokio::test]
async fn a_pending_result_pauses_the_run_until_the_caller_supplies_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "deploy", r#"{"target":"web"}"#),
        Reply::text("The deployment finished."),
    ])
    .await
    .unwrap();
    let first = deployer(&server, &db)
        .run("u", "s", "Deploy web", RunOptions::new())
        .collect_all()
        .await;
    assert_eq!(
        persistent_types(&first),
        [
            "user_input",
            "model_response",
            "tool_pending",
            "run_completed"
        ]
    );
    assert_eq!(
        server.requests().len(),
        1,
        "nobody asked the model about a pending call"
    );
    let awaited = awaiting_results(&first);
    assert_eq!(awaited.len(), 1);
    assert_eq!(awaited[0].call_id, "call_1");
    assert_eq!(awaited[0].status, "deployment of web started as job 7");

    // Later, elsewhere: the job's outcome as the call's result.
    let result = Message::tool("call_1", "deploy", "job 7: deployed web, 3 hosts");
    let second = deployer(&server, &db)
        .run("u", "s", vec![result], RunOptions::new())
        .collect_all()
        .await;
    assert_eq!(
        persistent_types(&second),
        ["tool_input", "model_response", "run_completed"]
    );
    let request = &server.requests()[1];
    assert_eq!(
        tool_messages(request),
        [("call_1".into(), "job 7: deployed web, 3 hosts".into())]
    );
    assert!(
        second
            .iter()
            .all(|e| !matches!(e.kind, EventKind::Error { .. }))
    );
}
