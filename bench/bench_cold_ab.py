"""Cold ``vaultsearch index`` of several code trees, alternating back to back (issue 29's cold-build target).

The machine is shared and its load moves, so one tree's runs are never grouped: run ``r`` builds
every tree once in turn, then run ``r + 1`` does the same. Each build is a new process,
``python -m core.cli index VAULT --index-dir DIR --json`` under ``/usr/bin/time -v``, into an
empty index directory, with ``PYTHONPATH`` set to the tree (its own code is imported). Recorded
per build: wall, user and system CPU (the builder and its waited-for prepare workers), peak RSS
(the largest single process: workers are not summed), the 1-minute load before and after, and the
build report's step timings.

    python -m bench.bench_cold_ab --tree before=/work/wt/cold_before --tree now=. \\
        --vault synth10k=/tmp/synth-10000 --runs 3 --out bench/results/cold_ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_TIME_FIELDS = {
    "wall": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)",
    "user": r"User time \(seconds\): (\S+)",
    "sys": r"System time \(seconds\): (\S+)",
    "rss_kb": r"Maximum resident set size \(kbytes\): (\d+)",
}


def _clock(text: str) -> float:
    """``h:mm:ss`` or ``m:ss.ss`` as seconds."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def parse_time(stderr: str) -> dict[str, float]:
    """Wall, user, sys (seconds) and peak RSS (MB) from ``/usr/bin/time -v`` output."""
    found: dict[str, float] = {}
    for key, pattern in _TIME_FIELDS.items():
        match = re.search(pattern, stderr)
        if match is None:
            raise ValueError(f"/usr/bin/time output lacks {key!r}")
        found[key] = _clock(match.group(1)) if key == "wall" else float(match.group(1))
    return {
        "wall_s": round(found["wall"], 2),
        "cpu_s": round(found["user"] + found["sys"], 2),
        "user_s": found["user"],
        "sys_s": found["sys"],
        "peak_rss_mb": round(found["rss_kb"] / 1024, 1),
    }


def one_build(tree: Path, vault: Path, scratch: Path) -> dict[str, Any]:
    """One cold build by ``tree``'s code in a new process, into a fresh index directory."""
    index_dir = scratch / "index"
    shutil.rmtree(index_dir, ignore_errors=True)
    python = str(tree / ".venv" / "bin" / "python")
    cmd = [
        "/usr/bin/time",
        "-v",
        python,
        "-m",
        "core.cli",
        "index",
        str(vault),
        "--index-dir",
        str(index_dir),
        "--json",
    ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    load_before = os.getloadavg()[0]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr[-2000:]}")
    out = parse_time(proc.stderr)
    out["load_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    report = json.loads(proc.stdout)
    out["timings"] = report.get("timings") or report.get("report", {}).get("timings")
    out["embedded"] = report.get("embedded", report.get("chunks_embedded"))
    shutil.rmtree(index_dir, ignore_errors=True)
    return out


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Median and min of wall, CPU and peak RSS over a tree's runs."""
    out: dict[str, float] = {}
    for key in ("wall_s", "cpu_s", "peak_rss_mb"):
        values = [r[key] for r in runs]
        out[f"{key}_median"] = round(statistics.median(values), 2)
        out[f"{key}_min"] = round(min(values), 2)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a code tree (repeat)")
    parser.add_argument("--vault", action="append", required=True, help="NAME=PATH of a vault (repeat)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    trees = dict(item.split("=", 1) for item in args.tree)
    vaults = dict(item.split("=", 1) for item in args.vault)
    result: dict[str, Any] = {"runs": args.runs, "trees": trees, "corpora": {}}
    with tempfile.TemporaryDirectory(prefix="cold_ab_") as tmp:
        for vname, vpath in vaults.items():
            per_tree: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
            for run in range(args.runs):
                for tname, tpath in trees.items():
                    row = one_build(Path(tpath).resolve(), Path(vpath), Path(tmp))
                    per_tree[tname].append(row)
                    print(
                        f"{vname} run {run + 1} {tname}: wall {row['wall_s']} s, cpu {row['cpu_s']} s, "
                        f"rss {row['peak_rss_mb']} MB, load {row['load_1m']}",
                        file=sys.stderr,
                        flush=True,
                    )
            result["corpora"][vname] = {t: {"runs": r, **summary(r)} for t, r in per_tree.items()}
            if args.out is not None:
                args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps({v: {t: summary(r["runs"]) for t, r in c.items()} for v, c in result["corpora"].items()}, indent=1)
    )


if __name__ == "__main__":
    main()
