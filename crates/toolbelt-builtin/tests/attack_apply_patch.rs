//! Confinement attacks on apply_patch (issue 32, item 1): every path a patch takes (Add,
//! Delete, Update and the Move target) tried with `..`, an absolute path outside, a
//! directory symlink pointing outside and a file symlink pointing outside, on both
//! resolvers. The outside directory holds a marker; an attack succeeds if any outside file
//! is created, changed or removed.

use crate::files_support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

use files_support::call;
use serde_json::json;
use toolbelt_builtin::confine::{Confinement, Resolver};
use toolbelt_builtin::fs::LocalFileOps;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};

const MARKER: &str = "outside-marker-7f3a\n";

struct Lab {
    _root: tempfile::TempDir,
    base: std::path::PathBuf,
    outside: std::path::PathBuf,
    set: BuiltinToolSet,
}

/// A base with `in.txt` (Read by the set), `out_dir` (a symlink to the outside folder) and
/// `out_file` (a symlink to the outside file `secret.txt`).
async fn lab(resolver: Resolver) -> Lab {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("base");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), MARKER).unwrap();
    std::fs::write(base.join("in.txt"), "inside\n").unwrap();
    symlink(&outside, base.join("out_dir")).unwrap();
    symlink(outside.join("secret.txt"), base.join("out_file")).unwrap();
    let confinement = Confinement::with_resolver(&base, resolver).unwrap();
    assert_eq!(
        confinement.resolver(),
        resolver,
        "the resolver under test is not in effect (openat2 needs Linux 5.6+)"
    );
    let options = BuiltinOptions::new(&base)
        .with_file_ops(Arc::new(LocalFileOps::with_confinement(confinement)));
    let set = BuiltinToolSet::new(options).unwrap();
    let read = call(&set, "Read", json!({"file_path": "in.txt"})).await;
    assert!(!read.is_error, "{}", read.llm_text());
    Lab {
        _root: root,
        base,
        outside,
        set,
    }
}

/// The outside folder holds exactly its marker file, unchanged.
fn outside_untouched(outside: &Path, attack: &str) {
    let names: Vec<_> = std::fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["secret.txt"], "{attack} created a file outside");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        MARKER,
        "{attack} changed the outside file"
    );
}

async fn every_path_of_a_patch_is_confined(resolver: Resolver) {
    let lab = lab(resolver).await;
    let absolute = lab.outside.join("secret.txt");
    let absolute_new = lab.outside.join("new.txt");
    let escapes = [
        "../outside/secret.txt".to_string(),
        "../outside/new.txt".to_string(),
        "in.txt/../../outside/secret.txt".to_string(),
        "missing/../../outside/new.txt".to_string(),
        absolute.display().to_string(),
        absolute_new.display().to_string(),
        "out_dir/secret.txt".to_string(),
        "out_dir/new.txt".to_string(),
        "out_dir/deeper/new.txt".to_string(),
        "out_file".to_string(),
    ];
    for bad in &escapes {
        let patches = [
            format!("*** Add File: {bad}\n+pwned\n"),
            format!("*** Delete File: {bad}\n"),
            format!("*** Update File: {bad}\n-outside-marker-7f3a\n+pwned\n"),
            format!("*** Update File: in.txt\n*** Move to: {bad}\n-inside\n+pwned\n"),
        ];
        for body in patches {
            let input = format!("*** Begin Patch\n{body}*** End Patch\n");
            let out = call(&lab.set, "apply_patch", json!({ "input": input })).await;
            let attack = format!("{body:?}");
            assert!(out.is_error, "{attack} was applied: {}", out.llm_text());
            let text = out.llm_text();
            // Refused by confinement, by the kernel's own answer (a file used as a folder),
            // or, for a link the rule follows inside, by the read rule; never applied. (`x/..` after
            // a missing `x` is the kernel's "not found", see attack_confinement.)
            assert!(
                [
                    "outside the base directory",
                    "has not been read",
                    "Not a directory",
                    "No such file or directory",
                ]
                .iter()
                .any(|why| text.contains(why)),
                "{attack}: {text}"
            );
            outside_untouched(&lab.outside, &attack);
            assert_eq!(
                std::fs::read_to_string(lab.base.join("in.txt")).unwrap(),
                "inside\n",
                "{attack} changed the source of the refused move"
            );
        }
    }
    // The links themselves are still there: a refused delete removed nothing.
    assert!(lab.base.join("out_dir").symlink_metadata().is_ok());
    assert!(lab.base.join("out_file").symlink_metadata().is_ok());
}

async fn a_directory_swapped_for_an_outside_symlink_after_the_check_is_refused_at_write(
    resolver: Resolver,
) {
    // The write itself is confined, not only the check: a patch whose target's folder is
    // replaced by a symlink to outside between two patches cannot follow it.
    let lab = lab(resolver).await;
    std::fs::create_dir(lab.base.join("sub")).unwrap();
    let add = "*** Begin Patch\n*** Add File: sub/a.txt\n+a\n*** End Patch\n";
    let out = call(&lab.set, "apply_patch", json!({ "input": add })).await;
    assert!(!out.is_error, "{}", out.llm_text());
    std::fs::remove_file(lab.base.join("sub/a.txt")).unwrap();
    std::fs::remove_dir(lab.base.join("sub")).unwrap();
    symlink(&lab.outside, lab.base.join("sub")).unwrap();
    let out = call(&lab.set, "apply_patch", json!({ "input": add })).await;
    assert!(out.is_error, "{}", out.llm_text());
    outside_untouched(&lab.outside, "a swapped folder");
}

macro_rules! on_both_resolvers {
    ($($name:ident),* $(,)?) => {
        mod kernel {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Resolver::Kernel).await
                }
            )*
        }
        mod user_space {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Resolver::UserSpace).await
                }
            )*
        }
    };
}

on_both_resolvers!(
    every_path_of_a_patch_is_confined,
    a_directory_swapped_for_an_outside_symlink_after_the_check_is_refused_at_write,
);
