//! Reading tool catalogs: OpenAI function declarations or an MCP `tools/list` result.

use crate::SearchError;
use crate::doc::ToolDoc;

/// Parses an OpenAI-function JSON array or an MCP `tools/list` result (names kept as given).
pub fn parse_catalog(json: &str) -> Result<Vec<ToolDoc>, SearchError> {
    let _ = json;
    Err(SearchError::Catalog("not implemented yet".into()))
}
