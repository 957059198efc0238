//! Finding programs on `PATH`.

use std::path::PathBuf;

/// Every file named `name` in the directories of `PATH`, in `PATH` order.
pub(crate) fn on_path(name: &str) -> impl Iterator<Item = PathBuf> + '_ {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .collect::<Vec<_>>()
        .into_iter()
        .map(move |dir| dir.join(name))
        .filter(|candidate| candidate.is_file())
}
