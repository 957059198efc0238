//! Tells this crate's tests whether root builds them: a few need root's privileges (making a
//! device node needs CAP_MKNOD, giving a file away CAP_CHOWN) and are marked ignored, with
//! that reason, in a build by another user instead of failing there. The build script of
//! every crate with such tests (`build = "../toolbelt-testkit/tests_as_root.rs"`): one
//! script, not a copy per crate.

use std::os::unix::fs::MetadataExt;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tests_as_root)");
    println!("cargo::rerun-if-changed=build.rs");
    // `/proc/self` belongs to the user the process runs as.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if root {
        println!("cargo::rustc-cfg=tests_as_root");
    }
}
