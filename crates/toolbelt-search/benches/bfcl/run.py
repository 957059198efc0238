#!/usr/bin/env python3
"""Runs the BFCL tool-retrieval benchmark: toolbelt (Rust) and the Python peers, side by side.

    python3 crates/toolbelt-search/benches/bfcl/run.py [--features local-embedder]

Prepares data/ on first use (prepare.py), makes a virtualenv in data/venv from
requirements.txt for bm25s and rank_bm25, builds the Rust bench into /work/target/bench,
then prints one table of recall@k and per-query latency for every system.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
CRATE = os.path.dirname(os.path.dirname(HERE))


def main():
    features = sys.argv[1:]
    if not os.path.exists(os.path.join(DATA, "catalog.json")):
        subprocess.run([sys.executable, os.path.join(HERE, "prepare.py")], check=True)
    venv_python = os.path.join(DATA, "venv", "bin", "python")
    if not os.path.exists(venv_python):
        subprocess.run([sys.executable, "-m", "venv", os.path.join(DATA, "venv")], check=True)
        subprocess.run(
            [venv_python, "-m", "pip", "install", "-q", "-r", os.path.join(HERE, "requirements.txt")],
            check=True,
        )
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", "/work/target/bench")
    ours = subprocess.run(
        ["cargo", "bench", "-q", "-p", "toolbelt-search", "--bench", "bfcl", *features, "--",
         "--json", "--write-texts", os.path.join(DATA, "texts.jsonl")],
        cwd=CRATE, env=env, check=True, capture_output=True, text=True,
    ).stdout
    peers = subprocess.run(
        [venv_python, os.path.join(HERE, "peers.py")], check=True, capture_output=True, text=True
    ).stdout
    rows = [json.loads(line) for line in (ours + peers).splitlines() if line.startswith("{")]
    print(f"{rows[0]['tools']} tools; latency per query, one at a time, tokenisation included\n")
    for set_name in ("dev", "live"):
        sel = [r for r in rows if r["set"] == set_name]
        print(f"{set_name} ({sel[0]['queries']} queries)")
        print(f"  {'system':<16} {'r@1':>6} {'r@3':>6} {'r@5':>6} {'r@10':>6} {'median µs':>10} {'p99 µs':>10} {'build ms':>9}")
        for r in sel:
            print(
                f"  {r['system']:<16} {r['r1']:6.3f} {r['r3']:6.3f} {r['r5']:6.3f} {r['r10']:6.3f}"
                f" {r['median_us']:10.1f} {r['p99_us']:10.1f} {r['build_ms']:9.1f}"
            )
        print()


if __name__ == "__main__":
    main()
