"""Chunk overlap: does repeating ``chunk_overlap`` characters of each chunk in the next one pay? (issue #14)

For each overlap (default 60, the shipped setting, and 0) the SciFact vault is indexed with that
``IndexConfig(chunk_overlap=...)`` in its own index directory, every chunk is embedded with the fp32
all-MiniLM-L6-v2 fixture (tests/minilm_fixture.py) through ``core.build.embed.embed_index``, and the
dev queries are evaluated with ``search_vault`` in fts, vector, hybrid, semantic and auto: nDCG@10 and
Recall@100. Cost: chunks, the tokens the embedder is fed (the model's work; independent of load),
embedding wall and CPU seconds, chunks/s and tokens/s.

The rule (issue #14): adopt no overlap only if semantic and auto nDCG@10 stay within 0.005.

    python -m bench.bench_overlap [--overlaps 60,0] [--work DIR] [--models DIR]

Writes bench/results/chunk_overlap.json.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench.bench_dense import CORPORA, _rankings, _scores, _split
from bench.common import RESULTS_DIR, machine_info, write_json
from core import dense
from core.build.builder import build_index
from core.build.embed import embed_index, pending_chunks
from core.index.settings import IndexConfig
from tests.minilm_fixture import FP32, cached_model_dirs

MODES = ("fts", "vector", "hybrid", "semantic", "auto")
DEPTH = 100


def _fed_tokens(index_dir: Path, model_dir: Path) -> tuple[int, int]:
    """(chunks, tokens) the embedder will be fed for every chunk of the active generation (its own
    tokenizer, truncation included, no padding)."""
    active = max((index_dir / "segments").glob("*.seg"), key=lambda p: p.stat().st_mtime_ns)
    conn = sqlite3.connect(f"file:{active}?mode=ro", uri=True)
    try:
        texts = [text for _, text in pending_chunks(conn, None, everything=True)]
    finally:
        conn.close()
    embedder = dense.load_embedder(model_dir)
    feeds = embedder.tokenize([embedder.config.passage_prefix + t for t in texts])
    return len(texts), int(feeds["attention_mask"].sum())


def measure(overlap: int, work: Path, model_dir: Path) -> dict[str, Any]:
    corpus = CORPORA["scifact"]
    vault, index_dir = corpus["vault"], work / f"overlap-{overlap}"
    build = build_index(vault, index_dir=index_dir, config=IndexConfig(chunk_overlap=overlap))
    chunks, tokens = _fed_tokens(index_dir, model_dir)
    wall, cpu = time.perf_counter(), os.times()
    report = embed_index(vault, model=model_dir, index_dir=index_dir)
    wall, cpu_now = time.perf_counter() - wall, os.times()
    cpu_s = (cpu_now.user - cpu.user) + (cpu_now.system - cpu.system)
    queries, qrels = _split(corpus, "dev")
    quality = {}
    for mode in MODES:
        ranked, per_query = _rankings(vault, index_dir, queries, mode, DEPTH, corpus["doc_id"])
        quality[mode] = {**_scores(ranked, qrels), "s_per_query": round(per_query, 4)}
    return {
        "overlap": overlap,
        "chunks": build.chunks,
        "embedded": report.embedded,
        "tokens_fed": tokens,
        "tokens_per_chunk": round(tokens / max(chunks, 1), 1),
        "embed_wall_s": round(wall, 1),
        "embed_cpu_s": round(cpu_s, 1),
        "chunks_per_s": round(report.embedded / wall, 2),
        "tokens_per_s": round(tokens / wall, 1),
        "load_avg_after_embed": round(os.getloadavg()[0], 2),
        "dev": quality,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overlaps", default="60,0")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vaultsearch-overlap"))
    parser.add_argument("--models", type=Path, default=Path("/tmp/dense_bench/models"))
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "chunk_overlap.json")
    args = parser.parse_args(argv)
    model_dir = cached_model_dirs(args.models)[FP32]
    runs = [measure(int(o), args.work, model_dir) for o in args.overlaps.split(",")]
    base = runs[0]
    for run in runs[1:]:
        run["delta_vs_first"] = {m: round(run["dev"][m]["ndcg@10"] - base["dev"][m]["ndcg@10"], 4) for m in MODES} | {
            "tokens_fed": round(run["tokens_fed"] / base["tokens_fed"] - 1, 4)
        }
    data = {"machine": machine_info(), "model": "all-MiniLM-L6-v2 fp32 (fixture), max_length 256", "runs": runs}
    write_json(args.out, data)
    for run in runs:
        cells = "  ".join(f"{m} {run['dev'][m]['ndcg@10']:.4f}" for m in MODES)
        print(
            f"overlap {run['overlap']:3d}: {run['chunks']} chunks, {run['tokens_fed']} tokens, "
            f"{run['chunks_per_s']} chunks/s | {cells}"
        )


if __name__ == "__main__":
    main()
