//! Every integration test of `toolbelt-exec`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-exec --test exec <module>::`.

mod common;

mod artifact;
#[cfg(feature = "s3")]
mod artifact_s3;
mod attack_artifacts;
mod batch;
mod cache;
mod caller;
mod lanes;
mod layered;
mod middleware;
mod pipeline;
mod registry;
mod streaming;
