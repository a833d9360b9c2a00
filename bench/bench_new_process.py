"""A new process's first search on one segment and on a segmented generation of the same notes (issue 29: "a
new process's search no slower than today's").

Per corpus: a copy of the vault is indexed cold (one segment), and ``RUNS`` new processes each time one
``search_vault`` (fts, the first query of ``QUERIES``) after the first, which also hashes the parts once. Then
``EDITS`` one-note edits, each an incremental ``vaultsearch index`` (a delta segment and a tombstone each, or a
merge when the policy asks), and the same ``RUNS`` new processes on the segmented generation. Each child
reports its in-process seconds for that search (interpreter start-up and imports excluded).

    python -m bench.bench_new_process [--corpus powershell,scifact] [--edits 5] [--out PATH]
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


def _child(args: list[str]) -> str:
    """``python ARGS`` run on this tree's code; its standard output."""
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    return proc.stdout


def first_search(vault: Path, query: str = QUERY) -> float:
    """One new process's first fts search of ``vault``, seconds in process."""
    return float(json.loads(_child(["-c", _CHILD, str(vault), query]).strip().splitlines()[-1])["seconds"])


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
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"machine": machine_info(), "query": QUERY, "corpora": {}}
    for name in args.corpus.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-new-process-") as tmp:
            vault = copy_vault(CORPORA[name], Path(tmp) / "vault")
            result["corpora"][name] = measure(vault, args.runs, args.edits)
        print(name, json.dumps(result["corpora"][name]), flush=True)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
