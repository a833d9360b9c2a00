"""Shared helpers of the benchmark scripts: timing, peak memory, subprocess phases, JSON, machine info.

Why subprocess phases: ``ru_maxrss`` is a high-water mark per process, so the only honest
way to give each measured phase (cold build, rebuild, staleness scan) its own peak memory
is to run it in a fresh interpreter. The child prints one JSON line last; the parent
parses it (:func:`run_phase`, :func:`emit_phase_result`).

Quality numbers use the project's own ``core.metrics`` and ``core.evaluation`` loaders, so
the bench and ``vaultsearch eval`` agree by construction.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import psutil

from core.evaluation import load_qrels, load_queries  # noqa: F401  (re-exported for the benches)
from core.metrics import ndcg_at_k

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
DATA_DIR = Path("/work/shared/data")

T = TypeVar("T")


class PhaseError(RuntimeError):
    """A benchmark phase run in a subprocess failed; carries its exit code and stderr."""

    def __init__(self, cmd: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"phase {' '.join(cmd)} exited {returncode}:\n{stderr[-4000:]}")
        self.returncode = returncode
        self.stderr = stderr


# ---------------------------------------------------------------- timing and memory


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """Call ``fn`` once and return ``(result, wall seconds)`` measured with perf_counter."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def median_ms(seconds: Iterable[float]) -> float:
    """Median of a sample of durations given in seconds, in milliseconds."""
    values = list(seconds)
    if not values:
        raise ValueError("median_ms needs at least one sample")
    return statistics.median(values) * 1000.0


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_phase(module: str, args: Sequence[str], *, timeout: float = 3600.0) -> dict[str, Any]:
    """Run ``python -m module *args`` from the repo root and return its last stdout line as JSON.

    The child is expected to end with :func:`emit_phase_result`. Raises :class:`PhaseError`
    when it exits non-zero, so a failed phase can never be reported as a number.
    """
    cmd = [sys.executable, "-m", module, *args]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise PhaseError(cmd, proc.returncode, proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise PhaseError(cmd, proc.returncode, "no output; stderr:\n" + proc.stderr)
    return json.loads(lines[-1])


def emit_phase_result(data: Mapping[str, Any]) -> None:
    """Print a phase's result as the last stdout line, adding this process's peak RSS."""
    out = dict(data)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- files and output


def dir_size_bytes(path: Path) -> int:
    """Total size of the regular files under ``path`` (symlinks not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                total += os.path.getsize(full)
    return total


def count_md_files(vault: Path) -> int:
    """Number of ``*.md`` files under ``vault`` (what both the builder and the baselines index)."""
    return sum(1 for _root, _dirs, files in os.walk(vault) for f in files if f.endswith(".md"))


def copy_vault(src: Path, dst: Path) -> Path:
    """Copy a read-only corpus folder to ``dst`` (which must not exist) with writable files."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    return dst


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as indented, key-sorted JSON (creating parent folders) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, or platform.processor() where that file is absent."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    """Facts a benchmark number is meaningless without: CPU, cores, RAM, Python, SQLite, load, date."""
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "sqlite_version": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------- evaluation inputs


def mean_ndcg(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], k: int = 10) -> float:
    """Mean nDCG@k (``core.metrics``) over queries with a relevant judgement, as trec_eval averages.

    A judged query missing from ``run`` scores 0.
    """
    judged = [(qid, rels) for qid, rels in qrels.items() if any(g > 0 for g in rels.values())]
    scores = [ndcg_at_k(run.get(qid, []), rels, k) for qid, rels in judged]
    if not scores:
        raise ValueError("no judged queries")
    return sum(scores) / len(scores)
