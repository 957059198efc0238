//! The quick start: a typed `calculator` tool, declared from a function and called.
//!
//! Run: `cargo run -p toolbelt --example calculator`

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolbelt::{FunctionTool, Tool, ToolContext, ToolError};

/// The operation to perform.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Operation {
    Add,
    Multiply,
}

/// Arguments of the calculator.
#[derive(Deserialize, JsonSchema)]
struct CalcArgs {
    /// The operation, for example add or multiply.
    operation: Operation,
    /// The first operand.
    a: f64,
    /// The second operand.
    b: f64,
}

/// The result.
#[derive(Serialize, JsonSchema)]
struct CalcResult {
    result: f64,
}

async fn calculator(_ctx: ToolContext, args: CalcArgs) -> Result<CalcResult, ToolError> {
    let result = match args.operation {
        Operation::Add => args.a + args.b,
        Operation::Multiply => args.a * args.b,
    };
    Ok(CalcResult { result })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ToolError> {
    let tool = FunctionTool::new("calculator", "Performs arithmetic", calculator)?;
    println!(
        "declaration: {}",
        serde_json::to_string_pretty(tool.declaration()).expect("declarations serialize")
    );
    let args = r#"{"operation": "multiply", "a": 6, "b": 7}"#;
    let out = tool.call(ToolContext::for_call("call_1"), args).await?;
    println!("result: {}", out.llm_text());
    Ok(())
}
