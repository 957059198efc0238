//! MCP servers as tool sets, the MCP broker, and serving tools over MCP.
//!
//! (Work in progress.)
