"""``python -m bench.bench_edit --reuse VAULT``: the one-note edit of ``bench_edit`` on a vault built before.

A cold build of a 100k-note synthetic vault costs 450-750 s on the shared machine, so the edit path is measured
on a built copy (``cp -a`` keeps the notes' mtimes; its index is in ``VAULT/.vaultsearch`` unless
``--reuse-index`` says where). Per edit: one line appended to a different mid-sized note, then
``vaultsearch index VAULT --json`` as a new process: wall seconds (interpreter start-up included), the child's
CPU seconds (user + system, from ``getrusage``: what the machine's load does not inflate), its
``/proc/self/io`` ``write_bytes``, the bytes written to the index directory (``walk_bytes``), the build
report's per-step timings, and the 1-minute load average before and after.

The first edit after a copy is reported apart (``first``): new inodes make the first open hash the parts once,
and the first edit after a cold build hashes a part written inside the racy window once (by design). The
medians are over the edits after it. tantivy and bm25s are not run here (each would need its own cold index of
the same notes): ``bench_edit`` without ``--reuse`` measures them beside a cold build.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.bench_edit import _md_files, append_line, bytes_written, mid_sized, run_header, run_index, walk_files


def _edit_row(vault: Path, index_dir: Path, rel: str, number: int, tmp: Path) -> dict[str, Any]:
    before = walk_files(index_dir)
    load = os.getloadavg()[0]
    append_line(vault, rel, number)
    run = run_index(vault, index_dir, tmp / f"io-{number}.txt")
    report = run["report"]
    return {
        "note": rel,
        "wall_seconds": round(run["wall_seconds"], 3),
        "cpu_seconds": round(run["cpu_seconds"], 3),
        "in_process_seconds": report.get("seconds"),
        "timings": report.get("timings", {}),
        "walk": bytes_written(before, walk_files(index_dir)),
        "proc_write_bytes": (run["proc_io"] or {}).get("write_bytes"),
        "changed": report.get("changed"),
        "whole_base_reason": report.get("whole_base_reason"),
        "load_avg_1m": {"before": round(load, 2), "after": round(os.getloadavg()[0], 2)},
    }


def step_medians(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The median of each build step's seconds over ``runs`` (a step a run lacks counts 0)."""
    steps = sorted({k for r in runs for k in r["timings"]})
    return {k: round(statistics.median(float(r["timings"].get(k, 0.0)) for r in runs), 3) for k in steps}


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The first edit apart, medians over the others (all of them when there is one)."""
    rest = list(runs[1:]) or list(runs)
    return {
        "first": runs[0],
        "edits": list(runs),
        "median_wall_seconds": round(statistics.median(r["wall_seconds"] for r in rest), 3),
        "median_cpu_seconds": round(statistics.median(r["cpu_seconds"] for r in rest), 3),
        "median_in_process_seconds": round(statistics.median(float(r["in_process_seconds"] or 0) for r in rest), 3),
        "median_walk_bytes": statistics.median(r["walk"]["bytes"] for r in rest),
        "median_proc_write_bytes": statistics.median(r["proc_write_bytes"] or 0 for r in rest),
        "median_steps": step_medians(rest),
    }


def reuse_main(vault: Path, index_dir: Path | None, edits: int) -> dict[str, Any]:
    """``edits`` one-note edits of the built ``vault``, each indexed by a new process."""
    if edits < 1:
        raise SystemExit("--edits must be at least 1")
    vault = vault.resolve()
    index_dir = (index_dir or vault / ".vaultsearch").resolve()
    load_before = os.getloadavg()
    files = _md_files(vault)
    picks = mid_sized(files, edits)
    with tempfile.TemporaryDirectory(prefix="bench-edit-reuse-") as tmp:
        runs = [_edit_row(vault, index_dir, rel, 1000 + i, Path(tmp)) for i, rel in enumerate(picks)]
    return {
        **run_header(load_before),
        "vault": str(vault),
        "notes": len(files),
        "markdown_bytes": sum(size for _rel, size in files),
        **summarize(runs),
    }
