//! The executor as a [`ToolCaller`]: how a tool's own tool calls enter the pipeline.

use std::sync::Weak;

use async_trait::async_trait;
use toolbelt_core::{ToolCaller, ToolContext, ToolError, ToolOutput};

use crate::executor::{Executor, Inner};

#[async_trait]
impl ToolCaller for Executor {
    async fn call_tool(
        &self,
        ctx: ToolContext,
        name: &str,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError> {
        self.invoke_tool(ctx, name, arguments).await
    }
}

/// An executor handle that does not keep the executor alive: what a tool registered in the
/// executor's own registry holds (a strong handle there would be a reference cycle).
#[derive(Clone, Debug)]
pub struct WeakExecutor(Weak<Inner>);

impl Executor {
    /// A handle that calls tools through this executor while it exists.
    pub fn downgrade(&self) -> WeakExecutor {
        WeakExecutor(std::sync::Arc::downgrade(&self.inner))
    }
}

#[async_trait]
impl ToolCaller for WeakExecutor {
    async fn call_tool(
        &self,
        ctx: ToolContext,
        name: &str,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError> {
        let Some(inner) = self.0.upgrade() else {
            return Err(ToolError::failed("the executor that ran this tool is gone"));
        };
        Executor { inner }.invoke_tool(ctx, name, arguments).await
    }
}
