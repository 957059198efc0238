//! The Model trait and an OpenAI-compatible chat client.
//!
//! (Work in progress.)
