//! Every integration test of `toolbelt-core`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-core --test core <module>::`.

mod filters;
mod function_tools;
mod portable_schemas;
mod streaming;
