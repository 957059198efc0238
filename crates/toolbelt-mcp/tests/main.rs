//! Every integration test of `toolbelt-mcp`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-mcp --test mcp <module>::`.

mod broker_support;
mod common;
mod oauth_support;

mod attack_mcp;
mod attack_oauth;
mod attack_relay;
mod attack_stdio_escape;
mod attack_stdio_lines;
mod broker_declaration_size;
mod broker_everything;
mod broker_http;
mod client_features;
mod faults;
mod headers;
mod npm_everything;
mod oauth;
mod python_sdk;
mod server_sdk_client;
