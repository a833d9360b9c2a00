"""The cost of visibility-aware statistics: fts p50 on SciFact for an unrestricted and a restricted caller.

A copy of the SciFact vault gets ``classification: secret`` on every ``--hidden-every``-th note
(default 10: 519 of 5,183 hidden). The 150 dev queries then run in `fts`, interleaved, as
(a) an unrestricted caller and (b) a caller restricted to ``public``, whose BM25F statistics
come from the visible notes only (core.ranking.visibility, cached per generation and visible
set). The one-time load of those statistics is timed on its own (``restricted_first_load_ms``).

    .venv/bin/python -m bench.bench_visibility [--hidden-every 10] [--rounds 3] [--out bench/results/visibility.json]

``--unrestricted-only --index WORKDIR`` times only (a) against an index built earlier by this
script: run it with ``PYTHONPATH`` pointing at another checkout's code to compare the
unrestricted latency of two versions on the same index.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, RESULTS_DIR, latency_stats, load_queries, machine_info, time_interleaved, write_json

TARGET_RATIO = 1.5


def hidden_vault(src: Path, dst: Path, every: int) -> int:
    """Copy ``src`` to ``dst`` with every ``every``-th note (sorted) marked secret; returns how many."""
    hidden = 0
    for i, path in enumerate(sorted(src.rglob("*.md"))):
        text = path.read_text(encoding="utf-8")
        if i % every == 0 and text.startswith("---\n"):
            text = "---\nclassification: secret\n" + text[4:]
            hidden += 1
        out = dst / path.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return hidden


def measure(vault: Path, queries: list[str], rounds: int, *, restricted: bool) -> dict[str, Any]:
    from core.searcher import search_vault

    engines = {"unrestricted": lambda q: search_vault(vault, q, mode="fts", passages=False)}
    out: dict[str, Any] = {}
    if restricted:
        from core.ranking.visibility import VISIBILITY_CACHE

        VISIBILITY_CACHE.clear()
        start = time.perf_counter()
        search_vault(vault, queries[0], mode="fts", passages=False, classifications=["public"])
        out["restricted_first_load_ms"] = round((time.perf_counter() - start) * 1000, 1)
        engines["restricted"] = lambda q: search_vault(vault, q, mode="fts", passages=False, classifications=["public"])
    samples = time_interleaved(engines, queries, warmup=10, rounds=rounds)
    out["engines"] = {name: latency_stats(s) for name, s in samples.items()}
    if restricted:
        ratio = out["engines"]["restricted"]["p50_ms"] / out["engines"]["unrestricted"]["p50_ms"]
        out["restricted_over_unrestricted_p50"] = round(ratio, 3)
        out["target"] = f"<= {TARGET_RATIO}"
        out["within_target"] = ratio <= TARGET_RATIO
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden-every", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "visibility.json")
    ap.add_argument("--index", type=Path, help="work dir of an earlier run (keeps it; with --unrestricted-only)")
    ap.add_argument("--unrestricted-only", action="store_true")
    args = ap.parse_args(argv)
    queries = list(load_queries(DATA_DIR / "scifact" / "dev_queries.jsonl").values())
    if args.unrestricted_only:
        if args.index is None:
            ap.error("--unrestricted-only needs --index WORKDIR")
        result = measure(args.index / "vault", queries, args.rounds, restricted=False)
        print(result)
        return 0
    from core.build.builder import build_index

    work = args.index or Path(tempfile.mkdtemp(prefix="vis-bench-"))
    vault = work / "vault"
    try:
        hidden = hidden_vault(DATA_DIR / "scifact" / "vault", vault, args.hidden_every)
        build_index(vault)
        result = {
            "machine": machine_info(),
            "corpus": "scifact",
            "notes_hidden": hidden,
            "queries": len(queries),
            "rounds": args.rounds,
            "note": "2 shared cores, other engineers' jobs running: a loaded machine",
            **measure(vault, queries, args.rounds, restricted=True),
        }
        write_json(args.out, result)
        print(result)
    finally:
        if args.index is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
