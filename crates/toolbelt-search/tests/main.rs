//! Every integration test of `toolbelt-search`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-search --test search <module>::`.

mod embed_support;

mod bm25;
mod catalog;
mod embed_index;
mod embed_local;
mod embed_openai;
mod index;
