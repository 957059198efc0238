//! Integration tests of toolbelt-knowledge, one binary.

mod chunking;
mod filter;
mod hybrid;
mod index;
mod support;
mod tools;
