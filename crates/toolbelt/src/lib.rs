//! # Toolbelt
//!
//! The tool layer for LLM agents. This facade re-exports the crates of the workspace; see
//! [`core`] for what a tool is.
#![warn(missing_docs)]

pub use toolbelt_core as core;
pub use toolbelt_core::*;
/// The executor: registry, validation, hooks, middleware, scheduling and artifact offload.
pub use toolbelt_exec as exec;

/// The README's example, compiled and run as a doc test.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
