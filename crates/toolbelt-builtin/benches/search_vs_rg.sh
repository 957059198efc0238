#!/usr/bin/env bash
# Grep and Glob, run as `toolbelt tools call`, against rg and fd on a large real source tree
# (by default the cargo registry's source folder after a build: hundreds of crates).
#
#   CARGO_TARGET_DIR=/work/target/bench cargo build --release --workspace --bin toolbelt
#   bash crates/toolbelt-builtin/benches/search_vs_rg.sh [TREE]
#
# Needs hyperfine, rg, fd (or fdfind) and GNU time (/usr/bin/time) on PATH. rg gets the
# flags that make it follow the rules the Grep tool documents (hidden files searched,
# .gitignore honoured outside git repositories too, VCS folders skipped), so both do the
# same work; the tests check that their outputs are byte-identical.
set -euo pipefail

if [ -n "${1:-}" ]; then tree=$1; else for tree in "$HOME"/.cargo/registry/src/*/; do break; done; fi
tree=$(cd "$tree" && pwd)
bin=${TOOLBELT:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release/toolbelt}
if [ -n "${CARGO_TARGET_DIR:-}" ] && [ -z "${TOOLBELT:-}" ]; then
  bin=$CARGO_TARGET_DIR/release/toolbelt
fi
fd=$(command -v fd || command -v fdfind)
for tool in hyperfine rg "$fd" /usr/bin/time "$bin"; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 2; }
done

rules="--no-config --hidden --no-require-git --color never --no-heading --with-filename \
-g !.git -g !.hg -g !.svn -g !.bzr -g !.jj -g !.sl -g !_darcs"
files=$(cd "$tree" && find . -type f | wc -l)
echo "tree: $tree ($files files, $(du -sh "$tree" | cut -f1))"
cd "$tree"

grep_call() { # pattern, output_mode, head_limit
  printf '%s tools call Grep %q --dir %q' "$bin" \
    "{\"pattern\":\"$1\",\"output_mode\":\"$2\",\"head_limit\":$3}" "$tree"
}

echo "== Grep content (every match, line numbers)"
hyperfine --warmup 2 --runs 10 --style basic \
  -n "Grep tool (sorted)" "$(grep_call 'unsafe fn' content 0) > /dev/null" \
  -n "rg --sort path" "rg $rules --sort path -n -e 'unsafe fn' > /dev/null" \
  -n "rg (unsorted, parallel)" "rg $rules -n -e 'unsafe fn' > /dev/null"

echo "== Grep files_with_matches"
hyperfine --warmup 2 --runs 10 --style basic \
  -n "Grep tool (sorted)" "$(grep_call 'impl.*Iterator for' files_with_matches 0) > /dev/null" \
  -n "rg --sort path -l" "rg $rules --sort path -l -e 'impl.*Iterator for' > /dev/null" \
  -n "rg -l (unsorted, parallel)" "rg $rules -l -e 'impl.*Iterator for' > /dev/null"

echo "== Glob **/*.rs (the tool sorts every match, then keeps the first 100)"
hyperfine --warmup 2 --runs 10 --style basic \
  -n "Glob tool" "$bin tools call Glob '{\"pattern\":\"**/*.rs\"}' --dir '$tree' > /dev/null" \
  -n "fd --glob | sort" "$fd --glob --full-path --type f --hidden -E .git --color never --strip-cwd-prefix '$tree/**/*.rs' | LC_ALL=C sort > /dev/null"

echo "== Peak memory (max RSS) of Grep content with head_limit 50: one crate vs the whole tree"
for one in "$tree"/*/; do break; done # the first crate (no `ls | head`: SIGPIPE under pipefail)
for dir in "$one" "$tree"; do
  kb=$(/usr/bin/time -f %M "$bin" tools call Grep \
    '{"pattern":"fn ","output_mode":"content","head_limit":50}' --dir "$dir" 2>&1 >/dev/null | tail -n 1)
  echo "  $(cd "$dir" && find . -type f | wc -l) files: ${kb} KiB"
done
