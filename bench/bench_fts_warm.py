"""Warm fts latency of a long-lived process (issue 29: p50 <= 10 ms at 100k notes), per code tree.

Each code tree (``--code NAME=TREE``; ``now``: this checkout) runs in its own process, the trees alternated
round by round: it opens the vault, searches ``WARMUP`` queries (the caches a long-lived process holds: the
segments' arrays, the view), then times every query once, in order: ``search_vault(mode="fts", limit=10)``
with passages (snippets, match counts: the realistic call) and without the freshness check (its stat walk
is measured by ``bench_freshness``; at 100k notes a walk is reused for 2 s, so it lands on a few queries
only). A tree with fts's pruned run (``core.ranking.pruning``) also counts the queries it answered (``pruned``)
and the attempts it refused (``refused``: then a safer split is tried, or every posting scored).

    python -m bench.bench_fts_warm --vault NAME=PATH [--vault ...] [--code before=TREE] [--rounds 2]
        [--vault-of before:NAME=PATH ...]

A ``--vault`` is a built vault (a copy: a search writes its verification record beside the index); its queries
are ``bench.synth.make_queries`` known-item queries (seed 1) for a synthetic vault (``synth`` in its name), else
the corpus's dev queries (``powershell``: the PowerShell known-item dev set; ``scifact``: SciFact dev).
``--vault-of LABEL:NAME=PATH``: tree LABEL searches PATH (a copy of the same notes built by that tree) instead,
for trees whose index formats differ (a schema change: a tree reads only its own).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import DATA_DIR, REPO_ROOT, RESULTS_DIR, latency_stats, load_queries, machine_info, write_json

N_QUERIES = 200
WARMUP = 20
LIMIT = 10


def queries_for(name: str, vault: Path) -> list[str]:
    """The queries of ``vault`` (see the module docstring), at most N_QUERIES."""
    if "synth" in name:
        from bench.synth import make_queries

        return [q["text"] for q in make_queries(vault, N_QUERIES, seed=1)]
    if name.startswith("powershell"):
        path = DATA_DIR / "known-item" / "powershell_dev_queries.jsonl"
    else:
        path = DATA_DIR / "scifact" / "dev_queries.jsonl"
    return list(load_queries(path).values())[:N_QUERIES]


def child(vault: Path, queries_file: Path) -> dict[str, Any]:
    """In this process (the code on ``sys.path``): warm up, then time every query once."""
    from core.searcher import search_vault

    outcomes: list[bool] = []
    try:
        from core.ranking import pruning

        real = pruning.proven

        def counted(*args: Any, **kw: Any) -> bool:
            outcomes.append(real(*args, **kw))
            return outcomes[-1]

        pruning.proven = counted  # type: ignore[assignment]
    except ImportError:  # a tree before pruning
        pass
    queries = json.loads(queries_file.read_text(encoding="utf-8"))
    for q in queries[:WARMUP]:
        search_vault(vault, q, mode="fts", limit=LIMIT, freshness=False)
    outcomes.clear()
    seconds = []
    for q in queries:
        start = time.perf_counter()
        search_vault(vault, q, mode="fts", limit=LIMIT, freshness=False)
        seconds.append(time.perf_counter() - start)
    return {
        **latency_stats(seconds),
        "queries": len(queries),
        "pruned": sum(outcomes),
        "refused": len(outcomes) - sum(outcomes),
    }


def run_tree(tree: Path, vault: Path, queries_file: Path) -> dict[str, Any]:
    """``child`` on the code of ``tree``, in a new process."""
    proc = subprocess.run(
        [sys.executable, "-c", "import json, sys; from bench.bench_fts_warm import child; from pathlib import Path; "
         "print(json.dumps(child(Path(sys.argv[1]), Path(sys.argv[2]))))", str(vault), str(queries_file)],
        capture_output=True, text=True, check=True, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vault", action="append", required=True, metavar="NAME=PATH", help="a built vault")
    parser.add_argument("--code", action="append", default=[], metavar="NAME=TREE", help="also on this code tree")
    parser.add_argument("--vault-of", action="append", default=[], metavar="LABEL:NAME=PATH", help="tree's own copy")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "fts_warm.json")
    args = parser.parse_args(argv)
    trees = {"now": REPO_ROOT, **{k: Path(v) for k, v in (c.split("=", 1) for c in args.code)}}
    own = {tuple(k.split(":", 1)): Path(v).resolve() for k, v in (o.split("=", 1) for o in args.vault_of)}
    out: dict[str, Any] = {"machine": machine_info(), "load_before": os.getloadavg()[0], "vaults": {}}
    for spec in args.vault:
        name, path = spec.split("=", 1)
        vault = Path(path).resolve()
        queries_file = vault.parent / f".fts-warm-queries-{name}.json"
        queries_file.write_text(json.dumps(queries_for(name, vault)), encoding="utf-8")
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
        for _ in range(args.rounds):
            for label, tree in trees.items():
                runs[label].append(run_tree(tree, own.get((label, name), vault), queries_file))
                print(f"[fts_warm] {name} {label}: p50 {runs[label][-1]['p50_ms']:.1f} ms", file=sys.stderr, flush=True)
        out["vaults"][name] = {
            label: {
                "p50_ms": statistics.median(r["p50_ms"] for r in rs),
                "p95_ms": statistics.median(r["p95_ms"] for r in rs),
                "runs": rs,
            }
            for label, rs in runs.items()
        }
    out["load_after"] = os.getloadavg()[0]
    print(write_json(args.out, out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
