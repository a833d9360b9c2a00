"""Dense retrieval: quality of semantic / reranked / auto against fts, and exact-search latency.

    python -m bench.bench_dense quality --corpus scifact [--index-dir DIR] [--vectors DIR]
    python -m bench.bench_dense quality --corpus dendron [--index-dir DIR]
    python -m bench.bench_dense latency [--rows 100000] [--dim 384] [--queries 200]

quality: builds the corpus index in ``--index-dir`` (the vault is read-only; the index lives
outside it), embeds every chunk with the fp32 all-MiniLM-L6-v2 fixture (tests/minilm_fixture.py)
through ``core.build.embed.embed_index``, then evaluates with ``search_vault``:

- fts, semantic, auto (as shipped: ``AUTO_WEIGHTS``, ``AUTO_CONFIDENT_RATIO``) on the dev
  queries: nDCG@10, Recall@100;
- plain RRF(fts, dense) at several dense weights, and the shipped auto rule
  (``dense_modes.auto_fusion``), fused offline from the same two rankings (depth 100), on
  the train queries too when the corpus has them (SciFact);
- reranked with the pair fixture as reranker (plumbing only: it is not a trained reranker),
  limit 30 (= its candidate count), so its "Recall@100" is the recall of its 30 candidates.

``--vectors DIR`` reuses passage vectors computed earlier by the same Embedder on the same
``passage_text`` (files ``scifact_vecs.npy``, ``scifact_texts.json``; 25 min of CPU saved):
they are served by a wrapper placed in ``core.dense``'s model cache, so ``embed_index`` still
does the selecting, writing, validating and publishing; any text not found is embedded live.

latency: a synthetic normalised float32 matrix of ``--rows`` x ``--dim`` (5 chunks per note) and
the exact ranking code of ``core.modes.dense_pipeline`` (scores, filter mask, best chunk per note, top
100): the time semantic spends beyond embedding the query, median and p95 over ``--queries``.

Prints one JSON object last and writes bench/results/dense_<what>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA_DIR, RESULTS_DIR, machine_info, write_json
from core import dense
from core.build.builder import build_index
from core.build.embed import embed_index
from core.eval.inputs import load_qrels, load_queries
from core.eval.metrics import mean, ndcg_at_k, recall_at_k
from core.modes import dense_pipeline as dense_modes
from core.ranking import scoring
from core.searcher import search_vault
from tests.minilm_fixture import FP32, PAIR, cached_model_dirs

CORPORA = {
    "scifact": {
        "vault": DATA_DIR / "scifact" / "vault",
        "dev": ("scifact/dev_queries.jsonl", "scifact/dev_qrels.tsv"),
        "train": ("scifact/train_queries.jsonl", "scifact/train_qrels.tsv"),
        "doc_id": "stem",
    },
    "dendron": {
        "vault": DATA_DIR / "dendron" / "vault",
        "doc_id": "path",
        "dev": ("known-item/dendron_dev_queries.jsonl", "known-item/dendron_dev_qrels.tsv"),
    },
}
DENSE_WEIGHTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
DEPTH = 100


class _Precomputed:
    """An Embedder stand-in serving stored passage vectors by text; queries go to the real model."""

    def __init__(self, real: Any, texts: list[str], vectors: np.ndarray) -> None:
        self.real, self.config, self.dim, self.identity = real, real.config, real.dim, real.identity
        self.rows = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors
        self.live = 0

    def identity_key(self) -> str:
        return self.real.identity_key()

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)

    def embed_passages(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.rows))
        if missing:
            self.live += len(missing)
            fresh = self.real.embed_passages(missing, batch_size=batch_size)
            self.rows.update({t: len(self.vectors) + i for i, t in enumerate(missing)})
            self.vectors = np.concatenate([self.vectors, fresh])
        return np.stack([self.vectors[self.rows[t]] for t in texts])


def _install_precomputed(model_dir: Path, vectors_dir: Path) -> _Precomputed:
    texts = json.loads((vectors_dir / "scifact_texts.json").read_text())
    vectors = np.load(vectors_dir / "scifact_vecs.npy")
    real = dense.load_embedder(model_dir)
    stand_in = _Precomputed(real, texts, vectors)
    dense._EMBEDDERS[(dense.model_reference(model_dir), None)] = stand_in  # bench-only: see module docstring
    return stand_in


def _doc_key(rel_path: str, how: str) -> str:
    return Path(rel_path).stem if how == "stem" else rel_path


def _rankings(
    vault: Path,
    index_dir: Path,
    queries: dict[str, str],
    mode: str,
    limit: int,
    how: str,
    options: dict[str, Any] | None = None,
) -> tuple[dict[str, list[tuple[str, float]]], float]:
    """Ranked (doc id, score) per query, and the mean seconds per query."""
    out, started = {}, time.perf_counter()
    for qid, text in queries.items():
        results = search_vault(
            vault, text, mode=mode, limit=limit, index_dir=index_dir, passages=False, options=options
        )
        if mode != "fts" and results.fallback_reason:
            raise RuntimeError(f"{mode} fell back ({results.fallback_reason}) on {qid}")
        out[qid] = [(_doc_key(r.rel_path, how), r.score) for r in results]
    return out, (time.perf_counter() - started) / max(len(queries), 1)


def _scores(ranked: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    run = {q: [d for d, _ in pairs] for q, pairs in ranked.items()}
    judged = [q for q, rels in qrels.items() if any(g > 0 for g in rels.values())]
    return {
        "ndcg@10": round(mean(ndcg_at_k(run.get(q, []), qrels[q], 10) for q in judged), 4),
        "recall@100": round(mean(recall_at_k(run.get(q, []), qrels[q], 100) for q in judged), 4),
        "queries": len(judged),
    }


def _fuse(
    fts: dict[str, list[tuple[str, float]]], dense: dict[str, list[tuple[str, float]]], weight: float
) -> dict[str, list[tuple[str, float]]]:
    """Plain RRF(fts, dense) with weights (1, ``weight``), k = 60, ranks from 1."""
    out = {}
    for qid in fts:
        fused = scoring.rrf_fuse(
            [[d for d, _ in fts[qid]], [d for d, _ in dense.get(qid, [])]], k=60.0, weights=(1.0, weight)
        )
        out[qid] = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:DEPTH]
    return out


def _auto_offline(
    fts: dict[str, list[tuple[str, float]]], dense: dict[str, list[tuple[str, float]]]
) -> dict[str, list[tuple[str, float]]]:
    """dense_modes.auto_fusion (the shipped rule) applied to the same two rankings."""
    return {qid: dense_modes.auto_fusion(fts[qid], dense.get(qid, []), DEPTH) for qid in fts}


def _split(corpus: dict[str, Any], name: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    queries, qrels = corpus[name]
    return load_queries(DATA_DIR / queries), load_qrels(DATA_DIR / qrels)


def _sweep(vault: Path, index_dir: Path, corpus: dict[str, Any], split: str) -> dict[str, Any]:
    """fts, semantic and RRF(fts, dense) at every weight on one split."""
    queries, qrels = _split(corpus, split)
    fts, fts_s = _rankings(vault, index_dir, queries, "fts", DEPTH, corpus["doc_id"])
    dense, dense_s = _rankings(vault, index_dir, queries, "semantic", DEPTH, corpus["doc_id"])
    out = {
        "fts": {**_scores(fts, qrels), "s_per_query": round(fts_s, 4)},
        "semantic": {**_scores(dense, qrels), "s_per_query": round(dense_s, 4)},
    }
    out["rrf"] = {str(w): _scores(_fuse(fts, dense, w), qrels) for w in DENSE_WEIGHTS}
    out["auto_rule_offline"] = _scores(_auto_offline(fts, dense), qrels)
    return out


def quality(args: argparse.Namespace) -> dict[str, Any]:
    corpus = CORPORA[args.corpus]
    vault, index_dir = corpus["vault"], Path(args.index_dir)
    models = cached_model_dirs(Path(args.models))
    stand_in = _install_precomputed(models[FP32], Path(args.vectors)) if args.vectors else None
    build = build_index(vault, index_dir=index_dir)
    started = time.perf_counter()
    report = embed_index(vault, model=models[FP32], index_dir=index_dir, progress=True)
    result: dict[str, Any] = {
        "corpus": args.corpus,
        "model": "all-MiniLM-L6-v2 fp32 (fixture), max_length 256",
        "chunks": build.chunks,
        "embedded_now": report.embedded,
        "embed_seconds": round(time.perf_counter() - started, 1),
        "live_embedded": stand_in.live if stand_in else report.embedded,
        "auto_weights": list(dense_modes.AUTO_WEIGHTS),
        "auto_confident_ratio": dense_modes.AUTO_CONFIDENT_RATIO,
    }
    if "train" in corpus:
        result["train"] = _sweep(vault, index_dir, corpus, "train")
        best = max(DENSE_WEIGHTS, key=lambda w: result["train"]["rrf"][str(w)]["ndcg@10"])
        result["plain_rrf_weight_best_on_train"] = best
    result["dev"] = _sweep(vault, index_dir, corpus, "dev")
    queries, qrels = _split(corpus, "dev")
    auto, auto_s = _rankings(vault, index_dir, queries, "auto", DEPTH, corpus["doc_id"])
    result["dev"]["auto"] = {**_scores(auto, qrels), "s_per_query": round(auto_s, 4)}
    if not args.skip_rerank:
        opts = {"reranker": str(models[PAIR])}
        rr, rr_s = _rankings(
            vault, index_dir, queries, "reranked", dense_modes.RERANK_CANDIDATES, corpus["doc_id"], opts
        )
        result["dev"]["reranked_pair_fixture"] = {
            **_scores(rr, qrels),
            "s_per_query": round(rr_s, 4),
            "note": "plumbing only; Recall@100 = recall of 30 candidates",
        }
    return result


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """Exact ranking time on a cached synthetic matrix, excluding query embedding."""
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.rows, args.dim), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    note_ids = np.arange(args.rows, dtype=np.int64) // 5
    dm = dense_modes.DenseMatrix(matrix=matrix, chunk_ids=np.arange(args.rows, dtype=np.int64), note_ids=note_ids)
    allowed_notes = np.unique(note_ids)[rng.random(args.rows // 5) < 0.9]  # a filter hiding ~10 % of notes
    queries = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    timings = {"scores": [], "mask": [], "top100": [], "total": []}
    for q in queries:
        t0 = time.perf_counter()
        scores = dm.matrix @ (q / np.float32(np.linalg.norm(q)))
        t1 = time.perf_counter()
        rows = np.flatnonzero(np.isin(dm.note_ids, allowed_notes))
        t2 = time.perf_counter()
        chosen = scoring.best_row_per_group(scores, rows, dm.note_ids, DEPTH)
        t3 = time.perf_counter()
        assert len(chosen) == DEPTH
        for name, dt in (("scores", t1 - t0), ("mask", t2 - t1), ("top100", t3 - t2), ("total", t3 - t0)):
            timings[name].append(dt)
    stats = {
        k: {"median_ms": round(float(np.median(v)) * 1000, 2), "p95_ms": round(float(np.percentile(v, 95)) * 1000, 2)}
        for k, v in timings.items()
    }
    return {
        "rows": args.rows,
        "dim": args.dim,
        "queries": args.queries,
        "matrix_mb": round(matrix.nbytes / 2**20, 1),
        "target_ms": 30,
        **stats,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--corpus", choices=list(CORPORA), default="scifact")
    q.add_argument("--index-dir", default="/tmp/dense_bench/index")
    q.add_argument("--models", default="/tmp/dense_bench/models", help="where the MiniLM fixtures are built")
    q.add_argument("--vectors", help="directory of precomputed SciFact passage vectors (see docstring)")
    q.add_argument("--skip-rerank", action="store_true")
    lat = sub.add_parser("latency")
    lat.add_argument("--rows", type=int, default=100_000)
    lat.add_argument("--dim", type=int, default=384)
    lat.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    result = quality(args) if args.what == "quality" else latency(args)
    result["machine"] = machine_info()
    name = f"dense_{args.what}" + (f"_{args.corpus}" if args.what == "quality" else "")
    write_json(RESULTS_DIR / f"{name}.json", result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
