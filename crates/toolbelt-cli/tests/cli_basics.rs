//! The binary exists, reports its version and explains itself.

use std::process::Command;

fn toolbelt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolbelt"))
}

#[test]
fn version_prints_the_crate_version() {
    let out = toolbelt().arg("--version").output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.trim(),
        format!("toolbelt {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_describes_the_tool() {
    let out = toolbelt().arg("--help").output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("the tool layer for LLM agents"), "{stdout}");
    assert!(stdout.contains("Usage: toolbelt"), "{stdout}");
}

#[test]
fn an_unknown_subcommand_is_a_usage_error_with_exit_code_2() {
    let out = toolbelt().arg("no-such-command").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!out.stderr.is_empty());
}
