"""bm25s on the knowledge benchmark's chunks and questions (written by benches/knowledge.rs).

Usage: python bm25s_compare.py DIR   (DIR holds chunks.jsonl and questions.jsonl)
Prints index build time, per-query latency (one query at a time, as an agent asks) and
recall@5, with bm25s's own tokenizer (English stop words, no stemming).
"""

import json
import statistics
import sys
import time
from pathlib import Path

import bm25s


def main() -> None:
    folder = Path(sys.argv[1])
    chunks = [json.loads(line)["text"] for line in (folder / "chunks.jsonl").open()]
    questions = [json.loads(line) for line in (folder / "questions.jsonl").open()]

    start = time.perf_counter()
    tokens = bm25s.tokenize(chunks, stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    build = time.perf_counter() - start

    latencies = []
    found = 0
    for q in questions:
        start = time.perf_counter()
        query = bm25s.tokenize([q["query"]], stopwords="en", show_progress=False)
        results, _ = retriever.retrieve(query, k=5, show_progress=False)
        latencies.append(time.perf_counter() - start)
        if set(results[0].tolist()) & set(q["answers"]):
            found += 1
    latencies.sort()
    p95 = latencies[round((len(latencies) - 1) * 0.95)]
    print(
        f"bm25s {bm25s.__version__}: {len(chunks)} chunks: build {build:.2f} s; "
        f"queries: {len(questions)}; latency mean {statistics.mean(latencies) * 1e3:.2f} ms, "
        f"p50 {statistics.median(latencies) * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms; "
        f"recall@5 {found / len(questions):.3f}"
    )


if __name__ == "__main__":
    main()
