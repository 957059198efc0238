//! Asking the MCP client about a call the permission rules ask about: an elicitation form
//! sent to the client whose call it is (on that call's response stream), as the specification
//! lets a server ask its user. A client that did not declare elicitation cannot be asked, so
//! the call is refused and the model reads why.

use async_trait::async_trait;
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ServerRequest,
};
use serde_json::{Value, json};
use toolbelt_core::{ToolContext, visible};
use toolbelt_exec::{ApprovalDecision, ApprovalRequest, Approver};

use super::requests::{CallingClient, Feature, Target, forward};

/// The most characters of the arguments and of the preview put in the question; a client
/// shows the message as it is, so a huge argument must not make it unreadable.
const SHOWN_CHARS: usize = 4_000;

/// The approver of `toolbelt serve`: asks the calling client with an elicitation form
/// (`approve`: yes or no, and an optional `message` for the model), and refuses, saying why,
/// when the client did not declare elicitation.
#[derive(Debug, Default, Clone, Copy)]
pub struct ElicitingApprover;

#[async_trait]
impl Approver for ElicitingApprover {
    async fn decide(&self, ctx: &ToolContext, request: &ApprovalRequest<'_>) -> ApprovalDecision {
        let refuse = |why: &str| {
            ApprovalDecision::Deny(format!(
                "this call needs the user's approval ({}), and {why}",
                request.reason
            ))
        };
        let Some(client) = ctx.get::<CallingClient>() else {
            return refuse("no MCP client made it to ask");
        };
        if !Feature::FormElicitation.declared_by(&client.peer) {
            return refuse("the MCP client that made it does not offer elicitation to ask with");
        }
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question(request),
            requested_schema: serde_json::from_value(form())
                .expect("the approval form is a valid elicitation schema"),
        };
        let target = Target {
            peer: client.peer.clone(),
            call: Some(client.call.clone()),
            request: Some(client.request.clone()),
        };
        let sent = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let answer = match forward(target, sent, Feature::FormElicitation).await {
            Ok(ClientResult::ElicitResult(answer)) => answer,
            Ok(_) => return refuse("the client answered the question with something else"),
            Err(err) => return refuse(&format!("asking the client failed: {}", err.message)),
        };
        let content = answer.content.unwrap_or(Value::Null);
        let message = content["message"]
            .as_str()
            .map(str::trim)
            .filter(|m| !m.is_empty());
        match answer.action {
            ElicitationAction::Accept if content["approve"] == true => ApprovalDecision::Approve,
            ElicitationAction::Accept => ApprovalDecision::Deny(match message {
                Some(message) => format!("the user did not allow this call: {message}"),
                None => "the user did not allow this call".into(),
            }),
            _ => ApprovalDecision::Deny("the user declined to approve this call".into()),
        }
    }
}

/// What the client's user reads: the tool, its arguments and the change, each escaped and
/// cut, and why it asks.
fn question(request: &ApprovalRequest<'_>) -> String {
    let mut text = format!(
        "Allow {}?\nArguments: {}\n",
        visible(request.tool_name()),
        visible(&cut(request.arguments))
    );
    if let Some(preview) = request.preview {
        text.push_str(&format!("Change:\n{}\n", visible_lines(&cut(preview))));
    }
    text.push_str(&format!("Asked because {}", visible(request.reason)));
    text
}

/// The form: a yes/no and a reason.
fn form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "title": "Run this call", "default": false},
            "message": {"type": "string", "title": "If not, why (the model reads this)"}
        },
        "required": ["approve"]
    })
}

/// `text` with its escapes written out, line by line (a diff keeps its lines).
fn visible_lines(text: &str) -> String {
    text.lines().map(visible).collect::<Vec<_>>().join("\n")
}

/// At most [`SHOWN_CHARS`] characters of `text`, the cut said.
fn cut(text: &str) -> String {
    toolbelt_core::text::cut_noted(text, SHOWN_CHARS)
        .0
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_escapes_and_cuts_what_the_model_wrote() {
        let long = "x".repeat(SHOWN_CHARS + 10);
        let arguments = format!(r#"{{"command":"echo '\u001b[2K'","pad":"{long}"}}"#);
        let declaration = toolbelt_core::Declaration::new("Bash", "runs").unwrap();
        let request = ApprovalRequest {
            declaration: &declaration,
            call_id: "c1",
            arguments: &arguments,
            reason: "Bash may run commands",
            preview: Some("$ echo '\x1b[2K'"),
        };
        let text = question(&request);
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(text.starts_with("Allow Bash?\n"), "{text}");
        assert!(text.contains("more characters not shown"), "{text}");
        assert!(text.ends_with("Asked because Bash may run commands"));
        assert!(serde_json::from_value::<rmcp::model::ElicitationSchema>(form()).is_ok());
    }
}
