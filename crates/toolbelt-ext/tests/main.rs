//! Every integration test of `toolbelt-ext`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-ext --test ext <module>::`.

mod ext_support;

mod attack_skills;
mod builtin_extensions;
mod extensions;
mod hooks;
mod rules;
mod skills;
mod skills_mcp;
