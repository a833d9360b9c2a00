"""A running reader switching to the generation a one-note edit publishes (issue 29): what the first
search after the switch costs, split into the combination of the segments' arrays and the rest.

In ONE process (what ``vaultsearch serve --watch`` is): a vault (a copy of a corpus, or a synthetic
one) is built cold, edited once and built again (so the generation is already several segments, as a
watched vault's is after its first edit), then warmed by a search in every mode. Then, per edit: one
line appended to a mid-sized note, ``build_index`` (a delta: a small segment + a tombstone), and the
FIRST search after the switch in one mode (the modes take turns, so each pays the switch on its own
``--edits`` / 3 edits), split into:

- ``combine_ms``: ``core.modes.segment_arrays``'s view of the segments (``_view``: loading the segments it
  has not loaded and building the view; before the view, the combination of every segment's arrays);
- ``combine_chunks_ms``: the view of their chunk vectors (vector, hybrid; ``view_chunks``);
- ``rest_ms``: everything else of that search (query analysis, vocabulary, masks, ranking, passages);

then the warm p50 of every mode on the new generation (``--queries`` queries each). Timings are
medians over the edits of a mode; ``build_s`` is the in-process ``build_index`` of each edit.

    PYTHONPATH=. .venv/bin/python -m bench.bench_gather --corpus powershell --work /tmp/gather-ps \
        [--edits 6] [--queries 20] [--out bench/results/gather.json] [--label before] [--reuse VAULT]

``--reuse VAULT``: a vault already built (a copy: it is edited in place), no cold build. The split also
says ``freshness_ms`` (the searcher's freshness check: a stat walk here, no watcher runs) and ``mask_ms``
(the default filter mask: derived from the previous generation's, or SQL over every note).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, RESULTS_DIR, copy_vault, machine_info, write_json

MODES = ("fts", "vector", "hybrid")
CORPORA = {"powershell": DATA_DIR / "powershell-docs" / "reference"}


class Stopwatch:
    """Milliseconds spent in the wrapped functions since the last ``take``."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + (time.perf_counter() - start) * 1000

        return timed

    def take(self) -> dict[str, float]:
        out, self.spent = self.spent, {}
        return out


def instrument(watch: Stopwatch) -> None:
    """Time the combination steps where the modes' context calls them (module attributes), the freshness
    check where the searcher calls it, and the default filter mask (derived, or SQL over every note)."""
    from core import searcher
    from core.modes import context, segment_arrays
    from core.ranking import segment_view

    for module, name in ((segment_arrays, "_view"), (segment_view, "view_chunks")):
        setattr(module, name, watch.wrap(name, getattr(module, name)))
    searcher.check_freshness = watch.wrap("freshness", searcher.check_freshness)
    context.SearchContext.mask = watch.wrap("mask", context.SearchContext.mask)


def vault_for(corpus: str, work: Path) -> Path:
    """A fresh vault under ``work``: a copy of the corpus, or ``synth<N>`` synthetic notes."""
    vault = work / "vault"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if corpus.startswith("synth"):
        from bench.bench_edit import synthetic_vault

        made = synthetic_vault(int(corpus[len("synth") :]), work)
        made.rename(vault)
        return vault
    return copy_vault(CORPORA[corpus], vault)


def mid_notes(vault: Path, n: int) -> list[str]:
    from bench.bench_edit import mid_sized

    files = sorted((p.relative_to(vault).as_posix(), p.stat().st_size) for p in vault.rglob("*.md"))
    return mid_sized(files, n)


def edit_and_build(vault: Path, rel: str, number: int) -> float:
    from bench.bench_edit import append_line
    from core.build.builder import build_index

    append_line(vault, rel, number)
    start = time.perf_counter()
    build_index(vault)
    return time.perf_counter() - start


def search_ms(vault: Path, query: str, mode: str) -> float:
    from core.searcher import search_vault

    start = time.perf_counter()
    search_vault(vault, query, 10, mode)
    return (time.perf_counter() - start) * 1000


def segment_count(vault: Path) -> int:
    from core.index import verify
    from core.index.layout import layout_for

    resolved = verify.resolve(layout_for(vault))
    return sum(1 for p in resolved.parts if p.kind == "segment")


def one_edit(vault: Path, rel: str, number: int, mode: str, queries: list[str], watch: Stopwatch) -> dict[str, Any]:
    """Edit + build, the first search in ``mode`` (split), then the warm p50 of every mode."""
    build_s = edit_and_build(vault, rel, number)
    watch.take()
    first = search_ms(vault, queries[number % len(queries)], mode)
    spent = watch.take()
    combine = spent.get("_view", 0.0)
    chunks = spent.get("view_chunks", 0.0)
    fresh, mask = spent.get("freshness", 0.0), spent.get("mask", 0.0)
    warm = {}
    for m in MODES:
        times = [search_ms(vault, q, m) for q in queries]
        warm[m] = round(statistics.median(times), 2)
    return {
        "note": rel,
        "mode": mode,
        "build_s": round(build_s, 3),
        "segments": segment_count(vault),
        "first_ms": round(first, 2),
        "combine_ms": round(combine, 2),
        "combine_chunks_ms": round(chunks, 2),
        "freshness_ms": round(fresh, 2),
        "mask_ms": round(mask, 2),
        "rest_ms": round(first - combine - chunks - fresh - mask, 2),
        "warm_p50_ms": warm,
        "warm_combine_ms": round(sum(watch.take().values()), 2),  # combination paid by warm searches
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        keys = ("first_ms", "combine_ms", "combine_chunks_ms", "freshness_ms", "mask_ms", "rest_ms")
        out[mode] = {k: round(statistics.median(r.get(k, 0.0) for r in mine), 2) for k in keys}
        out[mode]["first_max_ms"] = max(r["first_ms"] for r in mine)
        out[mode]["warm_p50_ms"] = round(statistics.median(r["warm_p50_ms"][mode] for r in runs), 2)
    out["build_s_median"] = round(statistics.median(r["build_s"] for r in runs), 3)
    return out


def run(corpus: str, work: Path, edits: int, n_queries: int, reuse: Path | None = None) -> dict[str, Any]:
    """``reuse``: a vault already built (its index in the vault's default folder), edited in place: no copy,
    no cold build (at 100k notes one costs 450-750 s here). Copy a built one first (``cp -a``)."""
    from bench.synth import make_queries
    from core.build.builder import build_index

    if reuse is not None:
        vault, cold_s = reuse, None
    else:
        vault = vault_for(corpus, work)
        start = time.perf_counter()
        build_index(vault)
        cold_s = round(time.perf_counter() - start, 2)
    queries = [q["text"] for q in make_queries(vault, n_queries, seed=1)]
    targets = mid_notes(vault, edits + 1)
    edit_and_build(vault, targets[0], 0)  # the generation is several segments from here on
    watch = Stopwatch()
    instrument(watch)
    for m in MODES:
        search_ms(vault, queries[0], m)
    runs = [one_edit(vault, rel, i + 1, MODES[i % len(MODES)], queries, watch) for i, rel in enumerate(targets[1:])]
    notes = sum(1 for _ in vault.rglob("*.md"))
    return {"corpus": corpus, "notes": notes, "cold_build_s": cold_s, "summary": summary(runs), "edits": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="powershell", help="powershell or synth<N> (e.g. synth10000)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--edits", type=int, default=6)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--label", default="now")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "gather.json")
    ap.add_argument("--reuse", type=Path, default=None, help="a built vault (a copy) edited in place: no cold build")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    result = {
        "machine": machine_info(),
        **run(args.corpus, args.work, args.edits, args.queries, args.reuse),
        "load_avg_1m": {"before": round(load, 2), "after": round(os.getloadavg()[0], 2)},
    }
    print(json.dumps({k: result[k] for k in ("corpus", "notes", "cold_build_s", "summary")}, indent=1))
    old = json.loads(args.out.read_text()) if args.out.is_file() else {}
    old.setdefault(args.label, {})[args.corpus] = result
    write_json(args.out, old)


if __name__ == "__main__":
    main()
