//! Every integration test of `toolbelt-agent`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-agent --test agent <module>::`.

mod agent_support;

mod agent_loop;
mod agent_tool;
mod approvals;
mod attack_framework_names;
mod callbacks;
mod long_running;
mod loud_failures;
mod session_stores;
mod session_watch;
mod tool_output;
mod tool_search;
