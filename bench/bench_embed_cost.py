"""Embedding cost of a full ``--embed``, counted in model-input tokens (what the model's time follows),
before and after identical texts are embedded once and each batch's texts are ordered by length.

A count, not a timing: it does not move with the load of a shared machine. For every chunk of the
index, the passage text ``core.build.embed`` embeds is tokenized with the model's tokenizer (capped at
``MAX_TOKENS``); then the tokens the model is fed (padding included) are summed for:

- before: batches of ``PUBLISH_EVERY`` chunks, each cut into steps of 4 x batch and sorted within a step;
- sorted: the same chunks, each batch sorted as a whole (no dedupe);
- after: only the first occurrence of each distinct text (one call), each batch sorted as a whole.

    python -m bench.bench_embed_cost [--corpora scifact,dendron,powershell] [--work DIR] [--models DIR]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import DATA_DIR, RESULTS_DIR, machine_info, write_json

MAX_TOKENS = 256
BATCH = 32
STEP = 4 * BATCH


def fed_tokens(lengths: np.ndarray, groups: list[np.ndarray], batch: int = BATCH) -> int:
    """Tokens the model is fed when each group is sorted longest first and cut into ``batch``-sized
    model batches padded to their longest text."""
    total = 0
    for group in groups:
        ordered = np.sort(lengths[group])[::-1]
        for start in range(0, ordered.shape[0], batch):
            part = ordered[start : start + batch]
            total += int(part.max()) * int(part.shape[0])
    return total


def cost(texts: Sequence[str], lengths: np.ndarray, publish_every: int) -> dict[str, Any]:
    batches = [np.arange(s, min(s + publish_every, len(texts))) for s in range(0, len(texts), publish_every)]
    before = fed_tokens(lengths, [b[s : s + STEP] for b in batches for s in range(0, b.shape[0], STEP)])
    first: dict[str, int] = {}
    for i, text in enumerate(texts):
        first.setdefault(text, i)
    keep = np.zeros(len(texts), dtype=bool)
    keep[list(first.values())] = True
    after = fed_tokens(lengths, [b[keep[b]] for b in batches])
    real = int(lengths.sum())
    return {
        "chunks": len(texts),
        "distinct_texts": len(first),
        "tokens": real,
        "fed_before": before,
        "fed_sorted": fed_tokens(lengths, batches),
        "fed_after": after,
        "padding_before_pct": round(100 * (before - real) / before, 2) if before else 0.0,
        "after_over_before": round(after / before, 4) if before else 0.0,
    }


CORPORA = {
    "scifact": DATA_DIR / "scifact" / "vault",
    "dendron": DATA_DIR / "dendron" / "vault",
    "powershell": DATA_DIR / "powershell-docs" / "reference",
}


def corpus_cost(vault: Path, index_dir: Path, embedder: Any) -> dict[str, Any]:
    from core import generations as gen
    from core.build.builder import build_index
    from core.build.embed import PUBLISH_EVERY, pending_chunks

    layout = gen.layout_for(vault, index_dir)
    if not layout.state_path.exists():
        build_index(vault, index_dir=index_dir)
    conn = gen.connect_readonly(gen.resolve(layout))
    try:
        texts = [text for _, text in pending_chunks(conn, None, everything=True)]
    finally:
        conn.close()
    prefixed = [embedder.config.passage_prefix + t for t in texts]
    encoded = embedder._plain.encode_batch(prefixed, add_special_tokens=False)
    lengths = np.minimum(np.array([len(e.ids) for e in encoded], dtype=np.int64) + 2, MAX_TOKENS)
    return cost(texts, lengths, PUBLISH_EVERY)


def identity_sample(vault: Path, index_dir: Path, embedder: Any, count: int) -> dict[str, Any]:
    """Embed the first ``count`` chunks both ways (steps of 128 in index order; longest first across all)
    and compare: the vectors, hence every ranking and nDCG, must not change; wall seconds of each way."""
    import time

    from core import generations as gen
    from core.build.embed import pending_chunks

    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault, index_dir)))
    try:
        texts = [text for _, text in pending_chunks(conn, count, everything=True)]
    finally:
        conn.close()
    embedder.embed_passages(texts[:BATCH])  # warm-up: the session's first runs are slower
    t0 = time.perf_counter()
    old = np.concatenate([embedder.embed_passages(texts[s : s + STEP]) for s in range(0, len(texts), STEP)])
    t1 = time.perf_counter()
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    new = np.empty_like(old)
    for start in range(0, len(order), STEP):
        idx = order[start : start + STEP]
        new[idx] = embedder.embed_passages([texts[i] for i in idx])
    t2 = time.perf_counter()
    return {
        "chunks": len(texts),
        "max_abs_diff": float(np.abs(old - new).max()),
        "before_s": round(t1 - t0, 2),
        "after_s": round(t2 - t1, 2),
    }


def threads_sample(vault: Path, index_dir: Path, model_dir: Path, count: int, rounds: int = 3) -> dict[str, Any]:
    """Passages per second of ``count`` chunks with 1 and 2 onnxruntime intra-op threads, alternating
    ``rounds`` times so the load of a shared machine falls on both alike (median of the rounds)."""
    import statistics
    import time

    from core import generations as gen
    from core.build.embed import pending_chunks
    from core.dense import load_embedder

    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault, index_dir)))
    try:
        texts = [text for _, text in pending_chunks(conn, count, everything=True)]
    finally:
        conn.close()
    embedders = {threads: load_embedder(str(model_dir), threads=threads) for threads in (1, 2)}
    rates: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(rounds):
        for threads, embedder in embedders.items():
            start = time.perf_counter()
            embedder.embed_passages(texts)
            rates[threads].append(len(texts) / (time.perf_counter() - start))
    return {f"threads_{t}_passages_per_s": round(statistics.median(r), 2) for t, r in rates.items()} | {
        "chunks": len(texts),
        "rounds": rounds,
    }


def full_embed(vault: Path, index_dir: Path, model_dir: Path, work: Path) -> dict[str, Any]:
    """A whole ``embed_index`` of a copy of ``index_dir`` (long: the PowerShell docs take tens of minutes):
    wall seconds, chunks given a vector, of those reused from an identical text, chunks per second."""
    import shutil
    import time

    from core.build.embed import embed_index

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(index_dir, work, symlinks=True)
    start = time.perf_counter()
    report = embed_index(vault, model=model_dir, index_dir=work, threads=2)
    wall = time.perf_counter() - start
    return {
        "wall_s": round(wall, 1),
        "embedded": report.embedded,
        "reused": report.reused,
        "chunks": report.chunks,
        "complete": report.complete,
        "chunks_per_s": round(report.embedded / wall, 2),
        "generations_published": len(report.generations_published),
    }


def main(argv: Sequence[str] | None = None) -> None:
    from core.dense import load_embedder
    from tests.minilm_fixture import FP32, cached_model_dirs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default=",".join(CORPORA))
    parser.add_argument("--work", type=Path, default=Path("/tmp/vaultsearch-embed-cost"))
    parser.add_argument("--models", type=Path, default=Path("/tmp/dense_bench/models"))
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "embed_cost.json")
    parser.add_argument("--identity-sample", type=int, default=384, help="SciFact chunks embedded both ways (0: skip)")
    parser.add_argument("--threads-sample", type=int, default=0, help="SciFact chunks timed at 1 and 2 threads")
    parser.add_argument("--full-embed", default="", help="corpora to embed whole, e.g. powershell (long)")
    args = parser.parse_args(argv)
    embedder = load_embedder(str(cached_model_dirs(args.models)[FP32]))
    result = {
        "bench": "embed_cost",
        "machine": machine_info(),
        "model": embedder.config.name,
        "corpora": {name: corpus_cost(CORPORA[name], args.work / name, embedder) for name in args.corpora.split(",")},
    }
    if args.identity_sample:
        result["identity_sample"] = {
            "corpus": "scifact",
            **identity_sample(CORPORA["scifact"], args.work / "scifact", embedder, args.identity_sample),
        }
    if args.threads_sample:
        model_dir = cached_model_dirs(args.models)[FP32]
        result["threads_sample"] = {
            "corpus": "scifact",
            **threads_sample(CORPORA["scifact"], args.work / "scifact", model_dir, args.threads_sample),
        }
    if args.full_embed:
        model_dir = cached_model_dirs(args.models)[FP32]
        result["full_embed"] = {
            name: full_embed(CORPORA[name], args.work / name, model_dir, args.work / f"{name}-embedded")
            for name in args.full_embed.split(",")
        }
    write_json(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}))


if __name__ == "__main__":
    main()
