//! LlmAgent, Runner, sessions and events: the agent loop.
//!
//! (Work in progress.)
