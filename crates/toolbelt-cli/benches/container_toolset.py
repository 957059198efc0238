#!/usr/bin/env python3
"""The container tool set (`--sandbox container`) against plain Landlock (`workspace-write`),
through the release binary, in one run:

- start: one `toolbelt tools call Bash '{"command":"true"}'` per process (opening the tool
  set, one call, closing it), median of N runs;
- per call: `toolbelt run --model scripted:FILE` whose scripted model makes CALLS tool calls
  (half Bash `true`, half Read of a small file) in one run, minus the same run with no call
  at all, divided by CALLS.

Usage: python3 crates/toolbelt-cli/benches/container_toolset.py [--binary target/release/toolbelt]
       [--runs 15] [--calls 40]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def timed(command, cwd):
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return elapsed


def script(path, calls):
    lines = []
    for i in range(calls):
        if i % 2 == 0:
            call = '{ name = "Bash", arguments = { command = "true" } }'
        else:
            call = '{ name = "Read", arguments = { file_path = "notes.txt" } }'
        lines += ["[[reply]]", f"tool_calls = [{call}]", ""]
    lines += ["[[reply]]", 'text = "done"', ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def median_ms(samples):
    return statistics.median(samples) * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/toolbelt")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    with tempfile.TemporaryDirectory() as base:
        with open(os.path.join(base, "notes.txt"), "w") as f:
            f.write("alpha\nbeta\n")
        script(os.path.join(base, "many.toml"), args.calls)
        script(os.path.join(base, "none.toml"), 0)
        rows = {}
        for mode in ["workspace-write", "container"]:
            start, many, none = [], [], []
            # Interleaved, so a slow minute of the machine hits every measurement alike.
            for _ in range(args.runs):
                start.append(
                    timed(
                        [binary, "tools", "call", "Bash", json.dumps({"command": "true"}),
                         "--dir", ".", "--sandbox", mode],
                        base,
                    )
                )
                for name, samples in [("many", many), ("none", none)]:
                    samples.append(
                        timed(
                            [binary, "run", "go", "--model", f"scripted:{name}.toml",
                             "--dir", ".", "--sandbox", mode, "--approval", "never",
                             "--max-iterations", str(args.calls + 1)],
                            base,
                        )
                    )
            per_call = (median_ms(many) - median_ms(none)) / args.calls
            rows[mode] = (median_ms(start), per_call)
        print(f"| mode | one call per process (start, call, close) | per call in a run ({args.calls} calls) |")
        print("|---|---|---|")
        for mode, (start, per_call) in rows.items():
            print(f"| {mode} | {start:.1f} ms | {per_call:.2f} ms |")
        extra_start = rows["container"][0] - rows["workspace-write"][0]
        extra_call = rows["container"][1] - rows["workspace-write"][1]
        print(f"\ncontainer extra: {extra_start:.1f} ms per process, {extra_call:.2f} ms per call")


if __name__ == "__main__":
    main()
