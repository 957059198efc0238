#!/usr/bin/env python3
"""Writes the BFCL v4 tool-retrieval benchmark into data/ (gitignored).

The wheel of `bfcl-eval` (PyPI) carries the data; it is downloaded with
`pip download --no-deps` (never installed: its dependencies are heavy) unless --data
points at an unpacked `bfcl_eval/data` folder.

Outputs:
- catalog.json: every unique function (by name; the first definition met wins) of the
  categories below, as a JSON array of OpenAI-style {name, description, parameters}.
- queries-dev.jsonl: simple_python + multiple, {"id", "query", "expected": [names]}.
  The only queries any tuning may look at.
- queries-live.jsonl: live_simple + live_multiple, same form: the held-out check.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile

CATALOG_CATEGORIES = [
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "simple_java",
    "simple_javascript",
    "live_simple",
    "live_multiple",
]
DEV = ["simple_python", "multiple"]
LIVE = ["live_simple", "live_multiple"]

HERE = os.path.dirname(os.path.abspath(__file__))


def fetch_data(workdir):
    """Downloads the bfcl-eval wheel (no dependencies) and unpacks bfcl_eval/data/."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", workdir, "bfcl-eval"],
        check=True,
    )
    wheels = glob.glob(os.path.join(workdir, "bfcl_eval-*.whl"))
    if not wheels:
        sys.exit("pip download gave no bfcl_eval wheel")
    with zipfile.ZipFile(wheels[0]) as z:
        members = [m for m in z.namelist() if m.startswith("bfcl_eval/data/")]
        z.extractall(workdir, members)
    print(f"using {os.path.basename(wheels[0])}", file=sys.stderr)
    return os.path.join(workdir, "bfcl_eval", "data")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def query_text(entry):
    """The user's words of the first turn (system messages left out)."""
    turn = entry["question"][0]
    return "\n".join(m["content"] for m in turn if m.get("role") == "user")


def queries(data, categories):
    out = []
    for cat in categories:
        answers = {
            a["id"]: a["ground_truth"]
            for a in read_jsonl(os.path.join(data, "possible_answer", f"BFCL_v4_{cat}.json"))
        }
        for entry in read_jsonl(os.path.join(data, f"BFCL_v4_{cat}.json")):
            truth = answers.get(entry["id"])
            if not truth:
                continue
            expected = sorted({name for call in truth for name in call})
            out.append({"id": entry["id"], "query": query_text(entry), "expected": expected})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="an unpacked bfcl_eval/data folder (default: download the wheel)")
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or fetch_data(tmp)
        catalog = {}
        for cat in CATALOG_CATEGORIES:
            for entry in read_jsonl(os.path.join(data, f"BFCL_v4_{cat}.json")):
                for f in entry["function"]:
                    catalog.setdefault(
                        f["name"],
                        {
                            "name": f["name"],
                            "description": f.get("description", ""),
                            "parameters": f.get("parameters", {}),
                        },
                    )
        dev = queries(data, DEV)
        live = queries(data, LIVE)

    missing = [q["id"] for q in dev + live if any(n not in catalog for n in q["expected"])]
    if missing:
        sys.exit(f"expected names missing from the catalog: {missing[:5]}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "catalog.json"), "w", encoding="utf-8") as f:
        json.dump(list(catalog.values()), f, ensure_ascii=False)
    for name, qs in [("queries-dev.jsonl", dev), ("queries-live.jsonl", live)]:
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            for q in qs:
                f.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"{len(catalog)} tools, {len(dev)} dev queries, {len(live)} live queries -> {args.out}")


if __name__ == "__main__":
    main()
