"""A restricted caller's cost: its first query in a new process and in a warm one, and the bytes the
per-classification statistics add to a generation (issue 29: statistics summed over classes).

A copy of the corpus gets ``classification: secret`` on every ``--hidden-every``-th note
(``bench.bench_visibility.hidden_vault``) and is built once. Then, for `fts` and `vector`:

- ``new_process``: a fresh interpreter imports the library and answers one query as a caller
  restricted to ``public`` (wall time of the whole process, and of the search inside it), median
  of ``--repeat`` processes;
- ``warm``: in one process that has already answered an unrestricted query (the full index is
  loaded), the first restricted query (the visibility set's statistics are made), then the
  restricted and the unrestricted caller interleaved over the dev queries (p50 of each, and their
  ratio), and ``set_bytes``: what the visibility set holds beside the
  whole generation's cached structures (its numpy arrays).

``class_bytes``: the stored bytes of the per-class arrays (``class_*``, ``row_class``) in the
generation's ``term_major`` table, beside the whole table and the whole file (0 before they existed).

    .venv/bin/python -m bench.bench_class_stats --corpus scifact --work /tmp/cls-scifact [--out FILE]

Run the same command with ``PYTHONPATH`` at another checkout (and another ``--work``) to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_visibility import hidden_vault
from bench.common import DATA_DIR, latency_stats, load_queries, machine_info, time_interleaved, write_json

PUBLIC = ["public"]
_CHILD = """
import sys, time
t0 = time.perf_counter()
from core.searcher import search_vault
t1 = time.perf_counter()
search_vault(sys.argv[1], sys.argv[2], mode=sys.argv[3], passages=False, classifications=["public"])
t2 = time.perf_counter()
print(round((t2 - t0) * 1000, 1), round((t2 - t1) * 1000, 1))
"""


def _queries(corpus: str) -> list[str]:
    found = DATA_DIR / corpus / "dev_queries.jsonl"
    if not found.exists():
        found = next((DATA_DIR / corpus).glob("*queries*.jsonl"))
    return list(load_queries(found).values())


def new_process(vault: Path, query: str, mode: str, repeat: int) -> dict[str, float]:
    """Median wall time of a fresh interpreter answering one restricted query (and of its search alone)."""
    wall, search = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(vault), query, mode], capture_output=True, text=True, check=True
        )
        wall.append((time.perf_counter() - start) * 1000)
        search.append(float(out.stdout.split()[1]))
    return {"process_ms": round(statistics.median(wall), 1), "search_ms": round(statistics.median(search), 1)}


def _own_bytes(value: Any, shared: set[int]) -> int:
    """Bytes of the numpy arrays ``value`` (a cached SparseIndex / ChunkVectors) holds that the whole
    generation's structures do not (a view shares their arrays: ``shared`` holds their ids)."""
    total = 0
    for item in [*vars(value).values(), *getattr(value, "_derived", {}).values()]:
        seen = getattr(item, "rows", None)  # a view's Seen
        for array in (item, seen):
            if isinstance(array, np.ndarray) and id(array) not in shared:
                total += array.nbytes
        live = getattr(item, "_live", None)  # a view's VisibleTerms: a byte per term
        total += len(live) if isinstance(live, bytes) else 0
    return total


def set_bytes() -> int:
    """What the cached visibility sets hold of their own (numpy arrays and the visible-term bytes)."""
    from core.ranking.sparse import CHUNK_CACHE, SPARSE_CACHE
    from core.ranking.visibility import VISIBILITY_CACHE

    shared = {
        id(a) for cache in (SPARSE_CACHE, CHUNK_CACHE) for _, v in cache._entries.values() for a in vars(v).values()
    }
    total = 0
    for _, sets in VISIBILITY_CACHE._owners.values():
        for entry in sets.values():
            total += sum(_own_bytes(v, shared) for k, v in entry.values.items() if k in ("sparse", "chunks"))
    return total


def warm(vault: Path, queries: list[str], mode: str, rounds: int) -> dict[str, Any]:
    """In one process: an unrestricted query first, then the first restricted query, then the restricted
    and the unrestricted caller interleaved over the queries (``time_interleaved``: their ratio is fair
    on a busy machine)."""
    from core.ranking.visibility import VISIBILITY_CACHE
    from core.searcher import search_vault

    search_vault(vault, queries[0], mode=mode, passages=False)
    VISIBILITY_CACHE.clear()
    start = time.perf_counter()
    search_vault(vault, queries[1], mode=mode, passages=False, classifications=PUBLIC)
    first = (time.perf_counter() - start) * 1000
    engines = {
        "restricted": lambda q: search_vault(vault, q, mode=mode, passages=False, classifications=PUBLIC),
        "unrestricted": lambda q: search_vault(vault, q, mode=mode, passages=False),
    }
    samples = time_interleaved(engines, queries[2:], rounds=rounds)
    stats = {name: latency_stats(s) for name, s in samples.items()}
    ratio = stats["restricted"]["p50_ms"] / stats["unrestricted"]["p50_ms"]
    return {"first_restricted_ms": round(first, 1), **stats, "restricted_over_unrestricted_p50": round(ratio, 3),
            "set_bytes": set_bytes()}  # fmt: skip


def class_bytes(vault: Path) -> dict[str, int]:
    """Bytes of the per-class arrays, the term_major table and the generation file (newest generation)."""
    gens = sorted((vault / ".vaultsearch").rglob("*.db"), key=lambda p: p.stat().st_mtime)
    gens = [p for p in gens if p.name != "state.db"]
    path = gens[-1]
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, length(data) FROM term_major").fetchall()
    finally:
        conn.close()
    per_class = sum(n for name, n in rows if "/class_" in name or name.endswith("/row_class"))
    return {"class_bytes": per_class, "term_major_bytes": sum(n for _, n in rows), "file_bytes": path.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="scifact")
    ap.add_argument("--work", type=Path, required=True, help="work dir (the vault copy and its index are kept)")
    ap.add_argument("--hidden-every", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--modes", default="fts,vector")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--size-only", action="store_true", help="build and report the bytes only")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    vault = args.work / "vault"
    result: dict[str, Any] = {"machine": machine_info(), "corpus": args.corpus, "code": os.environ.get("PYTHONPATH")}
    if not vault.exists():
        from core.build.builder import build_index

        src = DATA_DIR / args.corpus / "vault"
        result["notes_hidden"] = hidden_vault(src if src.is_dir() else src.parent, vault, args.hidden_every)
        start = time.perf_counter()
        build_index(vault)
        result["build_s"] = round(time.perf_counter() - start, 1)
    result.update(class_bytes(vault))
    if not args.size_only:
        queries = _queries(args.corpus)
        for mode in args.modes.split(","):
            result[mode] = {"new_process": new_process(vault, queries[0], mode, args.repeat)}
            result[mode]["warm"] = warm(vault, queries, mode, args.rounds)
    if args.out:
        write_json(args.out, result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
