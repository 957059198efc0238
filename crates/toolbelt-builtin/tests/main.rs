//! Every integration test of `toolbelt-builtin`, one module per file, linked into one test
//! binary: one link instead of one per file keeps CI builds fast and small on disk.
//! Run one file's tests with `cargo test -p toolbelt-builtin --test builtin <module>::`.

mod files_support;
mod shell_support;
mod web_support;

mod attack_apply_patch;
mod attack_code_cache;
mod attack_confinement;
mod attack_container;
mod attack_hostile_input;
mod attack_lost_update;
mod attack_lost_update_processes;
mod attack_shell;
mod code_exec;
mod code_tools;
mod files_apply_patch;
mod files_confinement;
mod files_notebook;
#[cfg(feature = "pdf")]
mod files_pdf;
mod files_read;
mod files_write_edit;
mod permission_rules;
mod plan_todo;
mod result_cache;
mod search_tools;
mod shell_bash;
mod shell_policy;
mod shell_sandbox;
mod shell_tasks;
mod shell_terminal;
mod web_fetch;
mod web_search;
mod workspace_backends;
