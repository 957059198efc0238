//! Best-effort repair of a model's almost-JSON arguments.
//!
//! Models sometimes write `{path: 'a.txt',}` or stop mid-object. Repair is opt-in
//! ([`ExecutorConfig::repair_json`](crate::ExecutorConfig::repair_json)) and conservative:
//! text that already parses as JSON is never touched, and a repair is recorded so a caller
//! can show it or store the repaired text in history.

use serde_json::Value;
use toolbelt_core::ToolError;

/// Arguments after the repair step.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairedArguments {
    /// The argument text to use: the original when it was valid, the repaired text otherwise.
    pub text: String,
    /// The parsed arguments.
    pub value: Value,
    /// Whether the text was changed.
    pub repaired: bool,
}

/// Parses `raw` strictly; only when that fails, repairs it with `llm_json`.
///
/// Empty (or all-whitespace) arguments mean "no arguments" and parse as `{}` without
/// counting as a repair. When the text cannot be repaired into JSON, the error is
/// [`ToolError::InvalidArguments`] with the strict parser's message.
///
/// ```
/// use toolbelt_exec::repair_arguments;
/// let fixed = repair_arguments("{path: 'a.txt',}")?;
/// assert!(fixed.repaired);
/// assert_eq!(fixed.value["path"], "a.txt");
///
/// let valid = repair_arguments(r#"{ "path" : "a.txt" }"#)?;
/// assert!(!valid.repaired);
/// assert_eq!(valid.text, r#"{ "path" : "a.txt" }"#);
/// # Ok::<(), toolbelt_core::ToolError>(())
/// ```
pub fn repair_arguments(raw: &str) -> Result<RepairedArguments, ToolError> {
    if raw.trim().is_empty() {
        return Ok(RepairedArguments {
            text: raw.to_string(),
            value: Value::Object(Default::default()),
            repaired: false,
        });
    }
    let strict_error = match serde_json::from_str::<Value>(raw) {
        Ok(value) => {
            return Ok(RepairedArguments {
                text: raw.to_string(),
                value,
                repaired: false,
            });
        }
        Err(err) => err,
    };
    let options = llm_json::RepairOptions {
        // Keep non-ASCII text as written instead of \u-escaping it.
        ensure_ascii: false,
        ..llm_json::RepairOptions::default()
    };
    let not_json = || {
        ToolError::invalid_arguments(format!(
            "arguments are not valid JSON and could not be repaired: {strict_error}"
        ))
    };
    let text = llm_json::repair_json(raw, &options).map_err(|_| not_json())?;
    let value: Value = serde_json::from_str(&text).map_err(|_| not_json())?;
    Ok(RepairedArguments {
        text,
        value,
        repaired: true,
    })
}

/// Parses `raw` strictly (no repair); empty text means `{}`.
pub(crate) fn parse_strict(raw: &str) -> Result<Value, ToolError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(raw)
        .map_err(|err| ToolError::invalid_arguments(format!("arguments are not valid JSON: {err}")))
}
