"""Shared helpers of the benchmark scripts: timing, peak memory, subprocess phases, JSON, machine info.

Why subprocess phases: peak RSS is a high-water mark per process, so the only honest
way to give each measured phase (cold build, rebuild, staleness scan) its own peak memory
is to run it in a fresh interpreter. The child prints one JSON line last; the parent
parses it (:func:`run_phase`, :func:`emit_phase_result`).

Quality numbers use the project's own ``core.eval.metrics`` and ``core.eval.evaluation`` loaders, so
the bench and ``vaultsearch eval`` agree by construction.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from core.eval.inputs import load_qrels, load_queries  # noqa: F401  (re-exported for the benches)
from core.eval.metrics import ndcg_at_k, percentile

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
_BESIDE = REPO_ROOT.parent / "shared" / "data"
DATA_DIR = _BESIDE if _BESIDE.is_dir() else Path("/work/shared/data")

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
    """Peak resident set size of this process so far, in MiB.

    On Linux this is ``VmHWM`` from /proc/self/status, the high-water mark of the current
    address space. ``ru_maxrss`` is not used there because the kernel carries it across
    fork and exec: a child started by a big parent reports at least the parent's size.
    Elsewhere ``ru_maxrss`` is the best available (KiB on Linux/BSD, bytes on macOS).
    """
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024.0


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
    """Print a phase's result as the last stdout line, adding this process's peak RSS.

    When the phase ran worker processes, the peak of the largest one is added too
    (``largest_child_peak_rss_mb``): the kernel keeps only the maximum over children, not
    their sum, and a forked worker's figure includes pages it shares with the parent.
    """
    out = dict(data)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    if children > 0:  # worker processes (e.g. the builder's pool): the largest one's peak, shared pages included
        out["largest_child_peak_rss_mb"] = round(children, 1)
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    sys.stdout.flush()


def latency_stats(seconds: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / mean of a latency sample given in seconds, in milliseconds (core.eval.metrics.percentile)."""
    if not seconds:
        raise ValueError("latency_stats needs at least one sample")
    ms = [s * 1000.0 for s in seconds]
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "n": len(ms),
    }


def time_interleaved(
    fns: Mapping[str, Callable[[T], Any]], items: Sequence[T], *, warmup: int = 10, rounds: int = 1
) -> dict[str, list[float]]:
    """Per-call wall seconds of every ``fns[name](item)``, the engines interleaved per item.

    A warm-up pass over the first ``warmup`` items (untimed) loads lazily built caches, so
    the timed passes measure the steady state a long-lived process sees. Interleaving the
    engines item by item spreads background load over all of them alike, so their ratios
    stay fair on a busy machine. The order is shuffled from item to item (fixed seed): the
    first engine to see a query pays for what later ones find cached (e.g. the query
    analyzer's word -> token cache), and an engine pays for the CPU caches its predecessor
    evicted (a plain rotation always put the same engine after the memory-heavy bm25s), so
    each engine goes first, and follows each other engine, about equally often.
    """
    for item in items[:warmup]:
        for fn in fns.values():
            fn(item)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    rng = random.Random(0)
    for _ in range(rounds):
        for item in items:
            rng.shuffle(order)
            for name, fn in order:
                start = time.perf_counter()
                fn(item)
                samples[name].append(time.perf_counter() - start)
    return samples


def cprofile_top(fn: Callable[[], Any], *, top: int = 15) -> dict[str, Any]:
    """Run ``fn()`` under cProfile; the ``top`` functions by own time and by cumulative time.

    Each row is ``{function, ncalls, tottime_s, cumtime_s}`` with ``function`` as
    ``file:line(name)`` relative to the repo where possible, so a report can show where a
    missed target's time goes.
    """
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(fn)
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler)
    rows = []
    for (path, line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = path.replace(str(REPO_ROOT) + os.sep, "")
        rows.append(
            {
                "function": f"{where}:{line}({name})",
                "ncalls": ncalls,
                "tottime_s": round(tottime, 4),
                "cumtime_s": round(cumtime, 4),
            }
        )
    by_own = sorted(rows, key=lambda r: r["tottime_s"], reverse=True)[:top]
    by_cum = sorted(rows, key=lambda r: r["cumtime_s"], reverse=True)[:top]
    return {"tool": "cProfile", "wall_seconds_profiled": round(wall, 3), "by_tottime": by_own, "by_cumtime": by_cum}


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


def _copy_keeping_mtime(src: str, dst: str) -> str:
    shutil.copyfile(src, dst)
    st = os.stat(src)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    return dst


def copy_vault(src: Path, dst: Path) -> Path:
    """Copy a read-only corpus folder to ``dst`` (which must not exist) with writable files that keep their
    modification times: a build measured right after the copy is that of a vault whose notes are as old as
    the corpus's, not one that must first settle rows written a moment ago (core/build/racy.py)."""
    shutil.copytree(src, dst, copy_function=_copy_keeping_mtime)
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
    import psutil  # the bench extra's; imported here so the tests' imports of bench/ need only the test extra

    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "sqlite_version": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------- evaluation inputs


def mean_ndcg(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], k: int = 10) -> float:
    """Mean nDCG@k (``core.eval.metrics``) over queries with a relevant judgement, as trec_eval averages.

    A judged query missing from ``run`` scores 0.
    """
    judged = [(qid, rels) for qid, rels in qrels.items() if any(g > 0 for g in rels.values())]
    scores = [ndcg_at_k(run.get(qid, []), rels, k) for qid, rels in judged]
    if not scores:
        raise ValueError("no judged queries")
    return sum(scores) / len(scores)
