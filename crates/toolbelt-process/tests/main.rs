//! Every integration test of `toolbelt-process`, one module per file, linked into one test
//! binary. Run one file's tests with `cargo test -p toolbelt-process --test process <module>::`.

mod attack_escape;
mod pty;
