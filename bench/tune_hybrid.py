"""Sweep the vector weight of hybrid's RRF on SciFact train and the known-item dev sets.

python -m bench.tune_hybrid [--workdir /tmp/vs-tune] [--weights 0,0.05,0.2,0.4,0.6,1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.tune_fts import CORPORA, prepare
from core.eval.metrics import mean, ndcg_at_k
from core.ranking import scoring
from core.ranking.chunk_vectors import load_chunk_vectors, vector_scores
from core.ranking.sparse import bm25_scores, load_sparse


def _ranking(scores, matched, k: int = 100) -> list[int]:
    import numpy as np

    return scoring.top_k(scores, k, np.flatnonzero(matched > 0)).tolist()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/vs-tune"))
    ap.add_argument("--weights", default="0,0.05,0.2,0.4,0.6,1")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    data = {n: prepare(n, args.workdir, "train") for n in CORPORA}
    for w in (float(x) for x in args.weights.split(",")):
        row = {}
        for name, (conn, key, qs) in data.items():
            sp = load_sparse(conn)
            chunks = load_chunk_vectors(conn, sp)
            vals = []
            for terms, rel in qs:
                fused = scoring.rrf_fuse(
                    [_ranking(*bm25_scores(sp, terms)), _ranking(*vector_scores(sp, chunks, terms)[:2])], 60.0, [1.0, w]
                )
                top = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
                vals.append(ndcg_at_k([key(int(sp.note_ids[r])) for r, _ in top], rel, 10))
            row[name] = round(mean(vals), 4)
        print(json.dumps({"vector_weight": w, **row}), flush=True)


if __name__ == "__main__":
    main()
