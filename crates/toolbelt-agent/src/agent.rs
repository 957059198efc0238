//! The [`Agent`] trait: something that runs an invocation and emits its events.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{AgentError, Invocation};

/// An agent. [`LlmAgent`](crate::LlmAgent) is the one this crate provides; implement the
/// trait for agents of your own (a workflow, a router).
#[async_trait]
pub trait Agent: Send + Sync {
    /// The agent's unique name (the author of its events, the target of transfers).
    fn name(&self) -> &str;

    /// What the agent is for (other agents read it when choosing whom to transfer to).
    fn description(&self) -> &str;

    /// The agents this one can transfer to.
    fn sub_agents(&self) -> Vec<Arc<dyn Agent>> {
        Vec::new()
    }

    /// Runs the invocation: reads its history, emits its events with
    /// [`Invocation::emit`]. Failures that the caller should see as an error event are
    /// returned.
    async fn run(&self, invocation: Invocation) -> Result<(), AgentError>;
}

/// A shared agent.
pub type DynAgent = Arc<dyn Agent>;

/// The agent named `name`: `root` itself or one of its sub-agents, searched depth first.
pub fn find_agent(root: &Arc<dyn Agent>, name: &str) -> Option<Arc<dyn Agent>> {
    if root.name() == name {
        return Some(root.clone());
    }
    root.sub_agents()
        .iter()
        .find_map(|sub| find_agent(sub, name))
}
