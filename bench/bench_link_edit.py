"""Edits that move other notes' resolved links (issue 29: "an add, delete or rename re-resolves only the links
whose target could change"): what each costs ``vaultsearch index`` as a new process, on a copy of Dendron's
docs (heavily linked: 1,013 notes).

One cold build, then ``CYCLES`` times the cycle, each step timed as its own ``vaultsearch index`` process
(``bench_edit.run_index``'s child, its wall around the subprocess) with the bytes written under the index dir
(``bench_edit.bytes_written``: every new or rewritten file counted whole):

1. ``delete_linked``: delete the note with the most backlinks below ``MAX_BACKLINKS`` (its linkers' edges go);
2. ``add_resolving``: write it back (the dangling links now resolve to it again);
3. ``rename_linked``: rename another such note (its linkers' links dangle);
4. ``rename_back``: rename it back.

``--code PATH`` runs the children on another checkout's ``core`` (the code before the change: ``git archive
BASE core | tar -x -C PATH``), so before and after are measured by the same script.

    python -m bench.bench_link_edit [--code PATH] [--label NAME] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_edit import _CHILD, CORPORA, bytes_written, walk_files
from bench.common import REPO_ROOT, RESULTS_DIR, copy_vault, machine_info, write_json

CYCLES = 2
MAX_BACKLINKS = 12  # a note linked from a few notes (a hub's rename is a labelled whole-base fallback)


def run_index(code: Path, vault: Path, index_dir: Path, io_file: Path) -> dict[str, Any]:
    """``vaultsearch index VAULT --index-dir DIR --json`` in a new process on ``code``: wall seconds, report."""
    cmd = [sys.executable, "-c", _CHILD, str(io_file), "index", str(vault), "--index-dir", str(index_dir), "--json"]
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"vaultsearch index exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return {"wall_seconds": wall, "report": json.loads(proc.stdout)}


def linked_notes(index_dir: Path, count: int) -> list[tuple[str, int]]:
    """(path, backlinks) of the ``count`` notes with the most backlinks from other notes, at most
    ``MAX_BACKLINKS``, read from the cold build's one segment."""
    segment = next((index_dir / "segments").glob("*"))
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT d.rel_path, count(DISTINCT e.src_id) AS n FROM edges e JOIN notes d ON d.id = e.dst_id "
            "WHERE e.src_id != e.dst_id GROUP BY d.rel_path HAVING n <= ? ORDER BY n DESC, d.rel_path LIMIT ?",
            (MAX_BACKLINKS, count),
        ).fetchall()
    finally:
        conn.close()
    return [(str(rel), int(n)) for rel, n in rows]


def _steps(vault: Path, deleted: str, renamed: str) -> list[tuple[str, Any]]:
    text = (vault / deleted).read_bytes()
    moved = renamed[: -len(".md")] + "-moved.md"
    return [
        ("delete_linked", lambda: (vault / deleted).unlink()),
        ("add_resolving", lambda: (vault / deleted).write_bytes(text)),
        ("rename_linked", lambda: (vault / renamed).rename(vault / moved)),
        ("rename_back", lambda: (vault / moved).rename(vault / renamed)),
    ]


def measure(code: Path, tmp: Path) -> dict[str, Any]:
    vault = copy_vault(CORPORA["dendron"], tmp / "vault")
    index_dir = tmp / "index"
    cold = run_index(code, vault, index_dir, tmp / "io-cold.txt")
    (deleted, n_deleted), (renamed, n_renamed) = linked_notes(index_dir, 2)
    runs = []
    for cycle in range(CYCLES):
        for name, change in _steps(vault, deleted, renamed):
            before = walk_files(index_dir)
            change()
            run = run_index(code, vault, index_dir, tmp / f"io-{cycle}-{name}.txt")
            report = run["report"]
            runs.append(
                {
                    "step": name,
                    "cycle": cycle,
                    "wall_seconds": round(run["wall_seconds"], 3),
                    "bytes_written": bytes_written(before, walk_files(index_dir))["bytes"],
                    "whole_base_reason": report.get("whole_base_reason"),
                    "one_segment_reason": report.get("one_segment_reason"),
                    "relinked_notes": report.get("relinked_notes"),
                    "in_process_seconds": report.get("seconds"),
                }
            )
            print(json.dumps(runs[-1]), flush=True)
    steps = {}
    for name in ("delete_linked", "add_resolving", "rename_linked", "rename_back"):
        mine = [r for r in runs if r["step"] == name]
        steps[name] = {
            "wall_seconds_median": statistics.median(r["wall_seconds"] for r in mine),
            "bytes_written_median": statistics.median(r["bytes_written"] for r in mine),
        }
    return {
        "cold_wall_seconds": round(cold["wall_seconds"], 3),
        "notes": cold["report"].get("notes"),
        "deleted": {"path": deleted, "backlinks": n_deleted},
        "renamed": {"path": renamed, "backlinks": n_renamed},
        "index_bytes_after": sum(s for s, _, _ in walk_files(index_dir).values()),
        "steps": steps,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=REPO_ROOT, help="the checkout whose core the children run")
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "link_edit.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-link-edit-") as tmp:
        result = measure(args.code.resolve(), Path(tmp))
    doc = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    doc[args.label] = {**result, "code": str(args.code), "machine": machine_info(), "load": os.getloadavg()}
    write_json(args.out, doc)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
