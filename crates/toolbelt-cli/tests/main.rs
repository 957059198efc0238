//! Every integration test of `toolbelt-cli`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-cli --test cli <module>::`.

mod run_support;
mod serve_support;
mod ui_support;

mod agents_file;
mod approval;
mod attack_approval;
mod attack_lost_update;
mod attack_secrets;
mod attack_serve;
mod attack_ui;
mod cli_basics;
mod conformance;
mod dialect_declarations;
mod hooks;
mod knowledge;
mod knowledge_flag;
mod mcp;
mod mcp_client_features;
#[cfg(feature = "otel")]
mod otel;
mod permissions;
mod progress;
mod remote_ssh;
mod run;
mod run_artifacts;
mod run_code_tools;
mod run_json;
mod run_providers;
mod run_todo;
mod run_tool_search;
mod sandbox;
mod sandbox_container;
mod schemas_ajv;
mod serve_aggregation;
mod serve_approval;
mod serve_client_requests;
mod serve_clients;
mod serve_defer_tools;
mod serve_http;
mod serve_relay;
#[cfg(feature = "redis")]
mod serve_replicas;
mod serve_roundtrip;
mod sessions;
mod skills;
mod tool_search_prompt_bytes;
mod tools;
mod tools_search;
mod ui;
mod ui_http;
