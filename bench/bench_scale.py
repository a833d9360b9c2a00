"""Scaling study: synthetic vaults of 1k / 10k / 100k notes, vaultsearch vs bare FTS5 and bm25s.

Per size (vaults from :func:`bench.synth.cached_vault`, generated once under the work dir):

1. a cold full-text ``build_index`` in its own process: wall time, peak RSS, index size.
   It runs under a time budget; a build that does not finish in time is killed and the
   result says how far it got (notes indexed, seconds, seconds per note) instead of hanging;
2. a search process: every model-free registry mode, warm, ``limit=10``, modes interleaved
   query by query over known-item queries (:func:`bench.synth.make_queries`), p50/p95 and
   the process's peak RSS;
3. bare FTS5 and bm25s, each in its own process: build seconds, p50/p95, peak RSS.

Targets (judged at 100k notes only; on a smaller run they are 'not judged'): fts p50
<= 10 ms, hybrid p50 <= 30 ms, cold full-text build <= 2 min, search-process peak memory
<= 1.5 GiB. For each MISS a profile says where the time (cProfile) or memory
(tracemalloc) goes. Results go to ``bench/results/scale.json``.

    python -m bench.bench_scale [--sizes 1000,10000,100000] [--work-dir DIR] [--build-budget S]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import (
    REPO_ROOT,
    RESULTS_DIR,
    PhaseError,
    cprofile_top,
    dir_size_bytes,
    emit_phase_result,
    latency_stats,
    machine_info,
    peak_rss_mb,
    run_phase,
    time_interleaved,
    timed,
    write_json,
)

MODULE = "bench.bench_scale"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
DEFAULT_WORK = Path(tempfile.gettempdir()) / "vaultsearch-bench"
TARGET_SIZE = 100_000
N_QUERIES = 200
LIMIT = 10
BUILD_BUDGET_S = 1200.0
SEARCH_TIMEOUT_S = 1800.0
PROFILE_TOP = 15
# name -> (description, where the value is in a size result, limit, unit, profile kind)
TARGETS: dict[str, tuple[str, tuple[str, ...], float, str, str]] = {
    "fts_p50": ("fts p50 <= 10 ms", ("search", "modes", "fts", "p50_ms"), 10.0, "ms", "search:fts"),
    "hybrid_p50": ("hybrid p50 <= 30 ms", ("search", "modes", "hybrid", "p50_ms"), 30.0, "ms", "search:hybrid"),
    "cold_build": ("cold full-text build <= 2 min", ("build", "wall_seconds"), 120.0, "s", "build"),
    "search_peak_rss": ("search process peak memory <= 1.5 GiB", ("search", "peak_rss_mb"), 1536.0, "MiB", "memory"),
}
_PROGRESS = re.compile(r"indexing:\s*\d+%\|[^|]*\|\s*(\d+)/(\d+)")


def model_free_modes() -> list[str]:
    """Registry modes that need neither dense vectors nor a reranker, in registry order."""
    from core.registry import DENSE, RERANKER, SEARCH_MODE_REGISTRY

    return [name for name, spec in SEARCH_MODE_REGISTRY.items() if not spec.needs & {DENSE, RERANKER}]


# ---------------------------------------------------------------- child phases (subprocess side)


def _load_queries(path: Path) -> list[str]:
    return [q["text"] for q in json.loads(path.read_text(encoding="utf-8"))]


def _phase_build(vault: Path, index_dir: Path) -> dict[str, Any]:
    """A cold build with a progress bar on stderr (the parent reads it if the budget runs out)."""
    from core.build.builder import build_index

    report, seconds = timed(build_index, vault, index_dir=index_dir, progress=True)
    return {
        "wall_seconds": seconds,
        "notes": report.notes,
        "chunks": report.chunks,
        "links": report.links,
        "timings": report.timings,
        "generation_id": report.generation_id,
    }


def _phase_search(vault: Path, index_dir: Path, queries_file: Path, modes: list[str]) -> dict[str, Any]:
    """Each mode's first query in this new process (in ``modes`` order, so it pays for the caches
    it is the first to need), warm limit=10 latency of ``modes`` (interleaved) and of a warm
    resolve(); peak RSS is added by the caller."""
    from core import generations as gen
    from core.searcher import search_vault

    queries = _load_queries(queries_file)
    first = {}
    for mode in modes:  # in a new process: each mode's first query also loads the caches it needs first
        res, seconds = timed(search_vault, vault, queries[0], mode=mode, limit=LIMIT, index_dir=index_dir)
        first[mode] = {
            "actual_mode": res.actual_mode,
            "fallback_reason": res.fallback_reason,
            "first_query_ms": round(seconds * 1000, 1),
        }
    fns = {m: (lambda q, m=m: search_vault(vault, q, mode=m, limit=LIMIT, index_dir=index_dir)) for m in modes}
    samples = time_interleaved(fns, queries)
    layout = gen.layout_for(vault.resolve(), index_dir)
    resolve_s = [timed(gen.resolve, layout)[1] for _ in range(1000)]
    return {
        "modes": {m: {**latency_stats(samples[m]), **first[m]} for m in modes},
        "resolve_median_ms": round(sorted(resolve_s)[500] * 1000, 4),
        "queries": len(queries),
    }


def _phase_baseline(engine_name: str, vault: Path, db_path: Path, queries_file: Path) -> dict[str, Any]:
    """Build one baseline and time its limit=10 queries (after a warm-up)."""
    from bench.baselines import BareFts5, Bm25sBaseline

    queries = _load_queries(queries_file)
    engine = BareFts5() if engine_name == "bare_fts5" else Bm25sBaseline()
    build_s = engine.build(vault, db_path) if isinstance(engine, BareFts5) else engine.build(vault)
    samples = time_interleaved({engine_name: lambda q: engine.search(q, LIMIT)}, queries)[engine_name]
    out = {"build_seconds": round(build_s, 3), **latency_stats(samples)}
    if isinstance(engine, BareFts5):
        engine.close()
        out["db_bytes"] = db_path.stat().st_size
    return out


def _memory_profile(vault: Path, index_dir: Path, queries: list[str], modes: list[str]) -> dict[str, Any]:
    """tracemalloc over a search process: the traced peak of each mode's first query (when its
    caches load), then the biggest allocations still held after 20 queries of every mode."""
    import tracemalloc

    from core.searcher import search_vault

    tracemalloc.start()
    steps = []
    for mode in modes:
        tracemalloc.reset_peak()
        search_vault(vault, queries[0], mode=mode, limit=LIMIT, index_dir=index_dir)
        held, peak = tracemalloc.get_traced_memory()
        steps.append(
            {
                "step": f"first `{mode}` query",
                "traced_peak_mib": round(peak / 2**20, 1),
                "held_after_mib": round(held / 2**20, 1),
                "process_peak_rss_mib": round(peak_rss_mb(), 1),
            }
        )
    for q in queries[1:20]:
        for mode in modes:
            search_vault(vault, q, mode=mode, limit=LIMIT, index_dir=index_dir)
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    rows = [
        {
            "where": str(st.traceback).replace(str(REPO_ROOT) + "/", ""),
            "mib": round(st.size / 2**20, 2),
            "blocks": st.count,
        }
        for st in snapshot.statistics("lineno")[:PROFILE_TOP]
    ]
    return {
        "tool": "tracemalloc",
        "steps": steps,
        "by_size": rows,
        "traced_peak_mib": max(step["traced_peak_mib"] for step in steps),
    }


def _phase_profile(kind: str, vault: Path, index_dir: Path, queries_file: Path) -> dict[str, Any]:
    """Where the time (cProfile) or the memory (tracemalloc) of a missed target goes.

    ``build`` profiles a cold build into ``index_dir`` (a fresh folder); ``search:MODE``
    profiles the first 50 queries of one mode after a warm-up; ``memory`` traces a search
    process (see :func:`_memory_profile`).
    """
    from core.build.builder import build_index
    from core.searcher import search_vault

    if kind == "build":
        from bench.common import count_md_files
        from core.build.prepare_pool import default_workers

        workers = default_workers(count_md_files(vault))
        note = (
            "parent process only: the builder parsed notes in worker processes, which cProfile does not see"
            if workers > 1
            else "single process"
        )
        return {
            "workers": workers,
            "note": note,
            **cprofile_top(lambda: build_index(vault, index_dir=index_dir), top=PROFILE_TOP),
        }
    queries = _load_queries(queries_file)
    if kind == "memory":
        return _memory_profile(vault, index_dir, queries, model_free_modes())
    mode = kind.split(":", 1)[1]
    for q in queries[:10]:
        search_vault(vault, q, mode=mode, limit=LIMIT, index_dir=index_dir)
    return {
        "mode": mode,
        "queries": len(queries[:50]),
        **cprofile_top(
            lambda: [search_vault(vault, q, mode=mode, limit=LIMIT, index_dir=index_dir) for q in queries[:50]],
            top=PROFILE_TOP,
        ),
    }


def phase_main(argv: Sequence[str]) -> None:
    """Subprocess entry: ``_phase build|search|baseline|profile ...``; prints one JSON line last."""
    kind, rest = argv[0], list(argv[1:])
    if kind == "build":
        emit_phase_result(_phase_build(Path(rest[0]), Path(rest[1])))
    elif kind == "search":
        emit_phase_result(_phase_search(Path(rest[0]), Path(rest[1]), Path(rest[2]), rest[3].split(",")))
    elif kind == "baseline":
        emit_phase_result(_phase_baseline(rest[0], Path(rest[1]), Path(rest[2]), Path(rest[3])))
    elif kind == "profile":
        emit_phase_result(_phase_profile(rest[0], Path(rest[1]), Path(rest[2]), Path(rest[3])))
    else:
        raise SystemExit(f"unknown phase {kind!r}")


# ---------------------------------------------------------------- parent side


def parse_progress(stderr: str) -> tuple[int, int] | None:
    """The last ``(done, total)`` of the builder's tqdm 'indexing' bar in ``stderr``, or None."""
    found = _PROGRESS.findall(stderr)
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def run_build(vault: Path, index_dir: Path, budget_s: float) -> dict[str, Any]:
    """The cold-build phase under a time budget; an overrun is reported with how far it got."""
    if index_dir.exists():
        shutil.rmtree(index_dir)
    start = time.perf_counter()
    try:
        return run_phase(MODULE, ["_phase", "build", str(vault), str(index_dir)], timeout=budget_s)
    except subprocess.TimeoutExpired as exc:
        elapsed = time.perf_counter() - start
        err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        progress = parse_progress(err)
        done = progress[0] if progress else 0
        return {
            "finished": False,
            "budget_seconds": budget_s,
            "elapsed_seconds": round(elapsed, 1),
            "notes_indexed": done,
            "notes_total": progress[1] if progress else None,
            "seconds_per_note": round(elapsed / done, 5) if done else None,
            "note": "killed at the time budget; the index stage may still have had links/validate/publish to do",
        }


def _queries_file(work: Path, vault: Path, n_notes: int, seed: int) -> Path:
    """Known-item queries of one synthetic vault, made once and cached beside it."""
    from bench.synth import make_queries

    path = work / f"queries-{n_notes}-seed{seed}.json"
    if not path.is_file():
        queries = make_queries(vault, min(N_QUERIES, n_notes), seed)
        path.write_text(json.dumps(queries, indent=1) + "\n", encoding="utf-8")
    return path


def _generation_bytes(vault: Path, index_dir: Path) -> int:
    """Size of the active generation: its manifest and every part it lists (what a reader opens)."""
    from core import generations as gen

    resolved = gen.resolve(gen.layout_for(vault.resolve(), index_dir))
    return resolved.size + sum(part.size for part in resolved.parts)


def bench_size(n_notes: int, work: Path, *, seed: int, budget_s: float) -> dict[str, Any]:
    """Build, search and baselines for one vault size; returns the size's result."""
    from bench.synth import cached_vault

    vault, synth = cached_vault(work, n_notes, seed)
    queries = _queries_file(work, vault, n_notes, seed)
    index_dir = work / f"index-{n_notes}"
    out: dict[str, Any] = {"notes": n_notes, "synth": synth, "index_dir": str(index_dir)}
    print(f"[scale] {n_notes}: build", flush=True)
    out["build"] = build = run_build(vault, index_dir, budget_s)
    if build.get("finished", True):
        out["build"]["finished"] = True
        out["active_generation_bytes"] = _generation_bytes(vault, index_dir)
        out["index_dir_bytes"] = dir_size_bytes(index_dir)
        print(f"[scale] {n_notes}: search", flush=True)
        modes = model_free_modes()
        out["search"] = run_phase(
            MODULE,
            ["_phase", "search", str(vault), str(index_dir), str(queries), ",".join(modes)],
            timeout=SEARCH_TIMEOUT_S,
        )
    out["baselines"] = {}
    for engine in ("bare_fts5", "bm25s"):
        print(f"[scale] {n_notes}: {engine}", flush=True)
        db = work / f"bare-{n_notes}.db"
        out["baselines"][engine] = run_phase(
            MODULE, ["_phase", "baseline", engine, str(vault), str(db), str(queries)], timeout=SEARCH_TIMEOUT_S
        )
        db.unlink(missing_ok=True)
    return out


def _dig(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def judge_targets(sizes: dict[str, Any]) -> dict[str, Any]:
    """PASS/MISS of every target at TARGET_SIZE; 'not judged' (with why) when that size has no value."""
    at = sizes.get(str(TARGET_SIZE))
    out = {}
    for key, (desc, path, limit, unit, profile) in TARGETS.items():
        value = _dig(at, path) if at else None
        if at is None:
            status, why = "not judged", f"{TARGET_SIZE:,} notes not run (use --sizes)"
        elif value is None:
            status, why = "MISS", "no value: the build did not finish within its budget"
        else:
            status, why = ("PASS" if value <= limit else "MISS"), None
        out[key] = {
            "description": desc,
            "limit": limit,
            "unit": unit,
            "size": TARGET_SIZE,
            "value": value,
            "status": status,
            "why": why,
            "profile_kind": profile,
        }
    return out


def _profile_size(target: dict[str, Any], sizes: dict[str, Any]) -> int | None:
    """The vault size to profile a missed target at: its own, or for an unfinished build the
    largest size whose build finished (profiling a build that overran its budget would too)."""
    own = sizes.get(str(target["size"]))
    if own is not None and own["build"].get("finished"):
        return target["size"]
    if target["profile_kind"] != "build":
        return None
    done = [int(n) for n, res in sizes.items() if res["build"].get("finished")]
    return max(done) if done else None


def profile_misses(targets: dict[str, Any], sizes: dict[str, Any], work: Path, seed: int) -> dict[str, Any]:
    """A profile (in a subprocess) for every MISS that can be profiled; keyed by target."""
    out = {}
    for key, target in targets.items():
        n = _profile_size(target, sizes) if target["status"] == "MISS" else None
        if n is None:
            continue
        kind = target["profile_kind"]
        vault = work / f"synth-{n}-seed{seed}" / "vault"
        queries = work / f"queries-{n}-seed{seed}.json"
        index_dir = work / "profile-build-index" if kind == "build" else Path(sizes[str(n)]["index_dir"])
        if kind == "build" and index_dir.exists():
            shutil.rmtree(index_dir)
        print(f"[scale] profiling {key} at {n:,} notes", flush=True)
        try:
            out[key] = {
                "profiled_at_notes": n,
                **run_phase(
                    MODULE, ["_phase", "profile", kind, str(vault), str(index_dir), str(queries)], timeout=3600
                ),
            }
        except (PhaseError, subprocess.TimeoutExpired) as exc:
            out[key] = {"profiled_at_notes": n, "error": str(exc)[-2000:]}
        if kind == "build" and index_dir.exists():
            shutil.rmtree(index_dir)
    slowest = _slowest_unprofiled_mode(sizes.get(str(TARGET_SIZE)), targets)
    if slowest is not None:
        print(f"[scale] profiling the slowest mode, {slowest}", flush=True)
        out[f"slowest_mode_{slowest}"] = {
            "profiled_at_notes": TARGET_SIZE,
            **run_phase(
                MODULE,
                [
                    "_phase",
                    "profile",
                    f"search:{slowest}",
                    str(work / f"synth-{TARGET_SIZE}-seed{seed}" / "vault"),
                    sizes[str(TARGET_SIZE)]["index_dir"],
                    str(work / f"queries-{TARGET_SIZE}-seed{seed}.json"),
                ],
                timeout=3600,
            ),
        }
    return out


def _slowest_unprofiled_mode(at: dict[str, Any] | None, targets: dict[str, Any]) -> str | None:
    """The mode with the highest p50 at the target size, unless a missed target already profiles it."""
    if not at or "search" not in at:
        return None
    modes = at["search"]["modes"]
    slowest = max(modes, key=lambda m: modes[m]["p50_ms"])
    profiled = {t["profile_kind"] for t in targets.values() if t["status"] == "MISS"}
    return None if f"search:{slowest}" in profiled else slowest


def run(
    sizes: Sequence[int],
    work: Path,
    *,
    seed: int = 0,
    budget_s: float = BUILD_BUDGET_S,
    profile: bool = True,
    keep_index: bool = False,
) -> dict[str, Any]:
    """The whole scaling study; the JSON-ready result."""
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "seed": seed,
        "limit": LIMIT,
        "queries": N_QUERIES,
        "build_budget_seconds": budget_s,
        "modes": model_free_modes(),
        "sizes": {},
    }
    for n in sizes:
        results["sizes"][str(n)] = bench_size(n, work, seed=seed, budget_s=budget_s)
    results["targets"] = judge_targets(results["sizes"])
    results["profiles"] = profile_misses(results["targets"], results["sizes"], work, seed) if profile else {}
    if not keep_index:
        for res in results["sizes"].values():
            if Path(res["index_dir"]).exists():
                shutil.rmtree(res["index_dir"])
    return results


def format_targets(targets: dict[str, Any]) -> str:
    """One line per target: PASS / MISS / not judged, with the value."""
    lines = []
    for t in targets.values():
        value = "-" if t["value"] is None else f"{t['value']:.1f} {t['unit']}"
        lines.append(
            f"{t['status']:>10}  {t['description']} at {t['size']:,} notes: {value}"
            + (f" ({t['why']})" if t["why"] else "")
        )
    return "\n".join(lines)


def parse_sizes(text: str) -> list[int]:
    """``'1000,10k,100000'`` -> ``[1000, 10000, 100000]`` (a trailing k multiplies by 1,000)."""
    sizes = []
    for part in text.split(","):
        part = part.strip().lower()
        sizes.append(int(part[:-1]) * 1000 if part.endswith("k") else int(part))
    if any(n < 2 for n in sizes):
        raise argparse.ArgumentTypeError("every size must be at least 2 notes")
    return sizes


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: run the scaling study, write bench/results/scale.json, print the targets."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_phase":
        phase_main(argv[1:])
        return
    parser = argparse.ArgumentParser(description="Scaling study on synthetic vaults.")
    parser.add_argument("--sizes", type=parse_sizes, default=list(DEFAULT_SIZES))
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK, help="cache of generated vaults")
    parser.add_argument("--build-budget", type=float, default=BUILD_BUDGET_S, help="seconds per cold build")
    parser.add_argument("--no-profile", action="store_true", help="do not profile missed targets")
    parser.add_argument("--keep-index", action="store_true", help="keep the built indexes in the work dir")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "scale.json")
    args = parser.parse_args(argv)
    results = run(
        args.sizes, args.work_dir, budget_s=args.build_budget, profile=not args.no_profile, keep_index=args.keep_index
    )
    write_json(args.out, results)
    print(format_targets(results["targets"]))


if __name__ == "__main__":
    main()
