//! Integration tests of toolbelt-knowledge, one binary.

#[cfg(feature = "agent")]
mod agent;
mod chunking;
mod filter;
mod hybrid;
mod index;
#[cfg(feature = "pdf")]
mod pdf;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "rewrite")]
mod rewrite;
mod support;
mod tools;
