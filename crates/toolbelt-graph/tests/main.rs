//! Every integration test of `toolbelt-graph`, one module per file, linked into one test
//! binary. Run one file's tests with `cargo test -p toolbelt-graph --test graph <module>::`.

mod graph_support;

mod agent_tool;
mod build_errors;
mod cancellation;
mod checkpoints;
mod reducers;
mod routing;
mod tools_node;
