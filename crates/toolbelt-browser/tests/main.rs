//! Every integration test of `toolbelt-browser`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-browser --test browser <module>::`.

mod browser_support;

mod attack_browser;
mod attack_browser_escape;
mod browser;
