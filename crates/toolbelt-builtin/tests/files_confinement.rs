//! Every confinement attack on real temp directories: `..`, absolute paths elsewhere,
//! symlinks to outside (at the top and inside a subdirectory), and a symlink swapped in
//! after the path was checked.

use crate::files_support;

use std::os::unix::fs::symlink;

use files_support::{call_err, call_ok, set_on};
use serde_json::json;
use toolbelt_builtin::fs::{FileOps, LocalFileOps};

const OUTSIDE: &str = "path is outside the base directory";

struct Layout {
    _root: tempfile::TempDir,
    base: std::path::PathBuf,
    outside: std::path::PathBuf,
}

/// `root/base` is confined to; `root/outside/secret.txt` must stay unreachable.
fn layout() -> Layout {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("base");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(base.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    std::fs::write(base.join("sub/ok.txt"), "fine\n").unwrap();
    Layout {
        _root: root,
        base,
        outside,
    }
}

/// Calls each (tool, arguments) and checks that every one is refused as outside the base.
async fn refused_all<const N: usize>(
    set: &toolbelt_builtin::BuiltinToolSet,
    calls: [(&str, serde_json::Value); N],
) {
    for (name, args) in calls {
        call_err(set, name, args, OUTSIDE).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dot_dot_paths_are_refused() {
    let l = layout();
    let set = set_on(&l.base);
    refused_all(
        &set,
        [
            ("Read", json!({"file_path": "../outside/secret.txt"})),
            ("Read", json!({"file_path": "sub/../../outside/secret.txt"})),
            ("Write", json!({"file_path": "../x", "content": "no"})),
        ],
    )
    .await;
    assert!(!l.base.parent().unwrap().join("x").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn absolute_paths_elsewhere_are_refused_and_inside_are_accepted() {
    let l = layout();
    let set = set_on(&l.base);
    call_err(&set, "Read", json!({"file_path": "/etc/passwd"}), OUTSIDE).await;
    let secret = l.outside.join("secret.txt");
    call_err(&set, "Read", json!({"file_path": secret}), OUTSIDE).await;
    let inside = l.base.join("sub/ok.txt");
    let out = call_ok(&set, "Read", json!({"file_path": inside})).await;
    assert!(out.llm_text().contains("fine"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_to_outside_is_refused_for_reading_and_writing() {
    let l = layout();
    symlink(l.outside.join("secret.txt"), l.base.join("link.txt")).unwrap();
    symlink(&l.outside, l.base.join("outdir")).unwrap();
    let set = set_on(&l.base);
    refused_all(
        &set,
        [
            ("Read", json!({"file_path": "link.txt"})),
            ("Read", json!({"file_path": "outdir/secret.txt"})),
            (
                "Write",
                json!({"file_path": "outdir/new.txt", "content": "x"}),
            ),
            (
                "Edit",
                json!({"file_path": "outdir/new2.txt", "old_string": "", "new_string": "x"}),
            ),
            ("Grep", json!({"pattern": "secret", "path": "outdir"})),
            ("Glob", json!({"pattern": "*", "path": "outdir"})),
        ],
    )
    .await;
    assert!(!l.outside.join("new.txt").exists());
    assert!(!l.outside.join("new2.txt").exists());
    assert_eq!(
        std::fs::read_to_string(l.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_inside_a_subdirectory_pointing_out_is_refused() {
    let l = layout();
    symlink(&l.outside, l.base.join("sub/escape")).unwrap();
    // A dangling link to a missing file outside must not let Write create it.
    symlink(l.outside.join("planted.txt"), l.base.join("sub/dangling")).unwrap();
    let set = set_on(&l.base);
    refused_all(
        &set,
        [
            ("Read", json!({"file_path": "sub/escape/secret.txt"})),
            (
                "Write",
                json!({"file_path": "sub/dangling", "content": "x"}),
            ),
        ],
    )
    .await;
    assert!(!l.outside.join("planted.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn symlinks_that_stay_inside_are_followed() {
    let l = layout();
    symlink(l.base.join("sub"), l.base.join("alias")).unwrap();
    let set = set_on(&l.base);
    let out = call_ok(&set, "Read", json!({"file_path": "alias/ok.txt"})).await;
    assert!(out.llm_text().contains("fine"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_swapped_for_a_symlink_after_the_check_cannot_be_read_through() {
    let l = layout();
    std::fs::write(l.base.join("sub/secret.txt"), "harmless\n").unwrap();
    let ops = LocalFileOps::new(&l.base).unwrap();
    let checked = ops.resolve("sub/secret.txt").unwrap();
    // The attack: between the check and the use, `sub` becomes a link to outside.
    std::fs::rename(l.base.join("sub"), l.base.join("sub-old")).unwrap();
    symlink(&l.outside, l.base.join("sub")).unwrap();
    let err = ops.read(&checked, None).await.unwrap_err();
    assert!(err.to_string().contains(OUTSIDE), "{err}");
    let err = ops.write_atomic(&checked, b"pwned").await.unwrap_err();
    assert!(err.to_string().contains(OUTSIDE), "{err}");
    assert_eq!(
        std::fs::read_to_string(l.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&l.outside).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "nothing may be created outside");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_swapped_for_a_symlink_after_the_check_is_refused() {
    let l = layout();
    let ops = LocalFileOps::new(&l.base).unwrap();
    let checked = ops.resolve("sub/ok.txt").unwrap();
    std::fs::remove_file(l.base.join("sub/ok.txt")).unwrap();
    symlink(l.outside.join("secret.txt"), l.base.join("sub/ok.txt")).unwrap();
    let err = ops.read(&checked, None).await.unwrap_err();
    assert!(err.to_string().contains(OUTSIDE), "{err}");
    let err = ops.write_atomic(&checked, b"pwned").await.unwrap_err();
    assert!(err.to_string().contains(OUTSIDE), "{err}");
    assert_eq!(
        std::fs::read_to_string(l.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
}
