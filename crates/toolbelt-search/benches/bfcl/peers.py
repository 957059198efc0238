#!/usr/bin/env python3
"""BM25 peers on the BFCL tool catalog: bm25s and rank_bm25, same texts, same metrics.

Reads data/texts.jsonl (each tool's indexed text, written by the Rust bench with
`--write-texts`, so every system sees the same words) and the query files from prepare.py.
Prints one JSON line per (system, query set), like `cargo bench --bench bfcl -- --json`.

Each query is timed on its own, tokenisation included, as an agent would issue it.
"""

import json
import os
import statistics
import sys
import time

import bm25s
import numpy as np
import Stemmer
from rank_bm25 import BM25Okapi

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("BFCL_DATA", os.path.join(HERE, "data"))
KS = (1, 3, 5, 10)


def read_jsonl(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def evaluate(queries, search):
    for q in queries[:20]:  # untimed warm-up, as on the Rust side
        search(q["query"])
    recall = [0.0] * len(KS)
    times = []
    for q in queries:
        started = time.perf_counter()
        names = search(q["query"])
        times.append(time.perf_counter() - started)
        for i, k in enumerate(KS):
            top = names[:k]
            recall[i] += sum(e in top for e in q["expected"]) / max(1, len(q["expected"]))
    times.sort()
    pick = lambda p: times[round((len(times) - 1) * p)]
    return [r / len(queries) for r in recall], pick(0.5), pick(0.99)


def report(system, set_name, queries, tools, build, outcome):
    recall, median, p99 = outcome
    print(json.dumps({
        "system": system, "set": set_name, "queries": len(queries), "tools": tools,
        "r1": recall[0], "r3": recall[1], "r5": recall[2], "r10": recall[3],
        "median_us": median * 1e6, "p99_us": p99 * 1e6, "build_ms": build * 1e3,
    }), flush=True)


def main():
    texts = read_jsonl("texts.jsonl")
    names = [t["name"] for t in texts]
    corpus = [t["text"] for t in texts]
    sets = [("dev", read_jsonl("queries-dev.jsonl")), ("live", read_jsonl("queries-live.jsonl"))]

    for label, stemmer in [("bm25s", None), ("bm25s+stem", Stemmer.Stemmer("english"))]:
        started = time.perf_counter()
        tokens = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        build = time.perf_counter() - started

        def search(query, retriever=retriever, stemmer=stemmer):
            q = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
            if not q.vocab:  # nothing left after stop words: no result, like the others
                return []
            docs, _ = retriever.retrieve(q, k=10, show_progress=False, n_threads=1)
            return [names[i] for i in docs[0]]

        for set_name, queries in sets:
            report(label, set_name, queries, len(names), build, evaluate(queries, search))

    # rank_bm25 on the very tokens bm25s makes (its own tokenizer is the caller's job).
    started = time.perf_counter()
    split = bm25s.tokenize(corpus, stopwords="en", return_ids=False, show_progress=False)
    okapi = BM25Okapi(split)
    build = time.perf_counter() - started

    def search_okapi(query):
        q = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        scores = okapi.get_scores(q)
        top = np.argsort(-scores, kind="stable")[:10]
        return [names[i] for i in top if scores[i] > 0]

    for set_name, queries in sets:
        report("rank_bm25", set_name, queries, len(names), build, evaluate(queries, search_okapi))


if __name__ == "__main__":
    main()
