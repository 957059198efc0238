//! Built-in tools for coding agents, confined to a base directory.
//!
//! (Work in progress.)
