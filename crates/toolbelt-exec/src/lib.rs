//! The executor: registry, validation, hooks, middleware and scheduling for tool calls.
//!
//! (Work in progress.)
