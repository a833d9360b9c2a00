"""A new process's first search on one segment and on a segmented generation of the same notes (issue 29: "a
new process's search no slower than today's").

Per corpus: a copy of the vault is indexed cold (one segment), and ``RUNS`` new processes each time one
``search_vault`` (fts, the first query of ``QUERIES``) after the first, which also hashes the parts once. Then
``EDITS`` one-note edits, each an incremental ``vaultsearch index`` (a delta segment and a tombstone each, or a
merge when the policy asks), and the same ``RUNS`` new processes on the segmented generation. Each child
reports its in-process seconds for that search (interpreter start-up and imports excluded).

    python -m bench.bench_new_process [--corpus powershell,scifact] [--edits 5] [--out PATH]
    python -m bench.bench_new_process --built ONE SEGMENTED [--code before=TREE] [--runs 3] [--out PATH]

``--built`` measures two vaults built already (a 100k-note one costs minutes to build): each code tree's
first search on each, alternated run by run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.bench_edit import CORPORA, _md_files, append_line, mid_sized
from bench.common import REPO_ROOT, RESULTS_DIR, copy_vault, machine_info, write_json

RUNS = 3
EDITS = 5
QUERY = "how to list the files of a folder"
_CHILD = (
    "import json, sys, time\n"
    "from pathlib import Path\n"
    "from core.searcher import search_vault\n"
    "t = time.perf_counter()\n"
    "search_vault(Path(sys.argv[1]), sys.argv[2], mode='fts', limit=10)\n"
    "print(json.dumps({'seconds': time.perf_counter() - t}))\n"
)


def _child(args: list[str], tree: Path = REPO_ROOT) -> str:
    """``python ARGS`` run on the code of ``tree`` (default: this one); its standard output."""
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    return proc.stdout


def first_search(vault: Path, query: str = QUERY, tree: Path = REPO_ROOT) -> float:
    """One new process's first fts search of ``vault`` (on the code of ``tree``), seconds in process."""
    return float(json.loads(_child(["-c", _CHILD, str(vault), query], tree).strip().splitlines()[-1])["seconds"])


def measure_built(one: Path, segmented: Path, runs: int, trees: dict[str, Path]) -> dict[str, Any]:
    """Built vaults (``one``: a cold build, ``segmented``: the same vault after edits): per code tree, ``runs``
    new processes' first search on each, the trees and vaults alternated run by run."""
    for tree in trees.values():  # each tree's first search hashes the parts once (a verified record after)
        first_search(one, tree=tree)
        first_search(segmented, tree=tree)
    got: dict[str, dict[str, list[float]]] = {name: {"one_segment": [], "segmented": []} for name in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            got[name]["one_segment"].append(first_search(one, tree=tree))
            got[name]["segmented"].append(first_search(segmented, tree=tree))
    return {
        name: {kind: {"seconds": values, "median": statistics.median(values)} for kind, values in per.items()}
        | {"segments": segments_of(segmented)}
        for name, per in got.items()
    } | {"load_avg_1m": os.getloadavg()[0]}


def index(vault: Path) -> dict[str, Any]:
    """``vaultsearch index VAULT --json`` as a new process: its report."""
    return json.loads(_child(["-m", "core.cli", "index", str(vault), "--json"]))


def segments_of(vault: Path) -> int:
    """How many segments the active generation of ``vault`` lists."""
    from core.generations import layout_for, resolve

    return sum(1 for part in resolve(layout_for(vault)).parts if part.path.suffix == ".seg")


def measure(vault: Path, runs: int, edits: int) -> dict[str, Any]:
    index(vault)
    first_search(vault)  # hashes the new parts once
    one = [first_search(vault) for _ in range(runs)]
    notes = mid_sized(_md_files(vault), edits)
    for number, rel in enumerate(notes):
        append_line(vault, rel, number)
        index(vault)
    first_search(vault)
    seg = [first_search(vault) for _ in range(runs)]
    return {
        "one_segment": {"seconds": one, "median": statistics.median(one)},
        "segmented": {"seconds": seg, "median": statistics.median(seg), "segments": segments_of(vault)},
        "edits": len(notes),
        "load_avg_1m": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="powershell,scifact")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--edits", type=int, default=EDITS)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "new_process.json")
    parser.add_argument(
        "--built", nargs=2, type=Path, metavar=("ONE", "SEGMENTED"),
        help="measure two built vaults (a cold build; the same after edits) instead of building corpora",
    )  # fmt: skip
    parser.add_argument("--code", action="append", default=[], metavar="NAME=TREE", help="also on this code tree")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"machine": machine_info(), "query": QUERY, "corpora": {}}
    if args.built:
        trees = {"now": REPO_ROOT, **{k: Path(v) for k, v in (c.split("=", 1) for c in args.code)}}
        result["built"] = measure_built(*args.built, args.runs, trees)
        print(json.dumps(result["built"]), flush=True)
        write_json(args.out, result)
        return 0
    for name in args.corpus.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-new-process-") as tmp:
            vault = copy_vault(CORPORA[name], Path(tmp) / "vault")
            result["corpora"][name] = measure(vault, args.runs, args.edits)
        print(name, json.dumps(result["corpora"][name]), flush=True)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
