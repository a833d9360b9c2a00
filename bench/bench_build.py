"""Build benchmark: cold build, up-to-date check, 5% rebuild and staleness scan vs bare FTS5.

For each corpus (a fresh copy in a temporary folder) it measures, each phase in its own
subprocess so that its peak RSS is its own:

1. the bare-FTS5 baseline build (:class:`bench.baselines.BareFts5`, median of 3), and the
   floor under the ratio (:mod:`bench.build_floor`: read, parse, count words and fill
   ``notes_fts`` only, median of 3);
2. a cold ``build_index`` into an empty index directory;
3. an up-to-date check: a second ``build_index`` that must publish nothing;
4. a rebuild after appending one sentence to 5% of the notes (chosen with a fixed seed);
5. the ``staleness`` scan, median of 20 calls on the fresh index, scaled to 2,000 notes;

and the size of the index on disk. Targets are judged PASS/MISS from the numbers.
Results go to ``bench/results/build.json``; :func:`render_markdown` turns that JSON into
the table the docs show.

    python -m bench.bench_build [--corpus scifact|dendron|powershell|all] [--out PATH]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import (
    DATA_DIR,
    RESULTS_DIR,
    copy_vault,
    count_md_files,
    dir_size_bytes,
    emit_phase_result,
    machine_info,
    median_ms,
    run_phase,
    timed,
    write_json,
)

CORPORA: dict[str, Path] = {
    "scifact": DATA_DIR / "scifact" / "vault",
    "dendron": DATA_DIR / "dendron" / "vault",
    "powershell": DATA_DIR / "powershell-docs" / "reference",
}
CHANGE_FRACTION = 0.05
STALENESS_CALLS = 20
BARE_REPEATS = 3
MODULE = "bench.bench_build"

# name -> (description, metric key in the corpus result, limit); a metric <= limit passes.
TARGETS: dict[str, tuple[str, str, float]] = {
    "cold_vs_bare": ("cold build <= 2.5x bare FTS5", "cold_vs_bare_ratio", 2.5),
    "change_vs_cold": ("5% change rebuild <= 25% of cold build", "change_vs_cold_ratio", 0.25),
    "uptodate_vs_cold": ("up-to-date check <= 10% of cold build", "uptodate_vs_cold_ratio", 0.10),
    "staleness": ("staleness scan <= 20 ms per 2,000 notes", "staleness_ms_per_2000", 20.0),
}


# ---------------------------------------------------------------- child phases (subprocess side)


def _phase_build(vault: Path, index_dir: Path) -> dict[str, Any]:
    """One ``build_index`` call, timed around the call only (interpreter start-up excluded)."""
    from core.build.builder import build_index

    report, seconds = timed(build_index, vault, index_dir=index_dir)
    data = report.to_dict()
    data["problems"] = len(data["problems"])
    return {"wall_seconds": seconds, "report": data}


def _phase_staleness(vault: Path, index_dir: Path, calls: int) -> dict[str, Any]:
    """``calls`` staleness scans; the median is the number reported."""
    from core.index.status import staleness

    samples, last = [], None
    for _ in range(calls):
        last, seconds = timed(staleness, vault, index_dir=index_dir)
        samples.append(seconds)
    assert last is not None
    return {
        "median_ms": median_ms(samples),
        "samples_ms": [s * 1000 for s in samples],
        "stale": bool(last["stale"]),
        "added": len(last["added"]),
        "modified": len(last["modified"]),
        "removed": len(last["removed"]),
    }


def _phase_bare(vault: Path, db_path: Path, repeats: int) -> dict[str, Any]:
    """The bare-FTS5 baseline build, ``repeats`` times; the median is the reference."""
    from bench.baselines import BareFts5

    engine = BareFts5()
    samples = [engine.build(vault, db_path) for _ in range(repeats)]
    engine.close()
    return {
        "median_seconds": sorted(samples)[len(samples) // 2],
        "samples": samples,
        "db_bytes": db_path.stat().st_size,
    }


def _phase_floor(vault: Path, db_path: Path, repeats: int) -> dict[str, Any]:
    """The skeleton build of :mod:`bench.build_floor`, ``repeats`` times; the median counts."""
    from bench.build_floor import build_floor

    samples = [build_floor(vault, db_path) for _ in range(repeats)]
    return {"median_seconds": sorted(samples)[len(samples) // 2], "samples": samples}


def phase_main(argv: Sequence[str]) -> None:
    """Entry point of a subprocess phase: ``_phase {build|staleness|bare|floor} VAULT TARGET [N]``."""
    kind, vault, target = argv[0], Path(argv[1]), Path(argv[2])
    if kind == "build":
        emit_phase_result(_phase_build(vault, target))
    elif kind == "staleness":
        emit_phase_result(_phase_staleness(vault, target, int(argv[3])))
    elif kind == "bare":
        emit_phase_result(_phase_bare(vault, target, int(argv[3])))
    elif kind == "floor":
        emit_phase_result(_phase_floor(vault, target, int(argv[3])))
    else:
        raise SystemExit(f"unknown phase {kind!r}")


# ---------------------------------------------------------------- orchestration (parent side)


def backdate(vault: Path, seconds: float) -> None:
    """Set every file's mtime ``seconds`` into the past.

    A fresh copy has mtimes of "just now", which a builder rightly treats as racy (it may
    re-hash files modified within its timestamp tick); real vaults are mostly old files,
    so the copy is aged before anything is measured.
    """
    when = time.time() - seconds
    for path in vault.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def modify_fraction(vault: Path, fraction: float, seed: int = 0) -> list[str]:
    """Append one sentence to ``ceil(fraction * notes)`` notes chosen with ``seed``; return their paths."""
    paths = sorted(p for p in vault.rglob("*.md") if p.is_file())
    chosen = random.Random(seed).sample(paths, math.ceil(fraction * len(paths)))
    for i, path in enumerate(chosen):
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"\nThis sentence was appended by the build benchmark, change number {i}.\n")
    return sorted(p.relative_to(vault).as_posix() for p in chosen)


def _active_generation_bytes(vault: Path, index_dir: Path, generation_id: str) -> int:
    """Size of the active generation's segments (the index a reader opens), as its manifest lists them."""
    from core.generations import layout_for, resolve

    resolved = resolve(layout_for(vault, index_dir))
    if resolved.generation_id != generation_id:
        raise FileNotFoundError(f"active generation is {resolved.generation_id}, not {generation_id}")
    return sum(part.size for part in resolved.parts)


def _build_phases(vault: Path, index_dir: Path) -> dict[str, Any]:
    """Cold build, up-to-date check, 5% change rebuild, then staleness on the fresh index."""
    cold = run_phase(MODULE, ["_phase", "build", str(vault), str(index_dir)])
    uptodate = run_phase(MODULE, ["_phase", "build", str(vault), str(index_dir)])
    changed_paths = modify_fraction(vault, CHANGE_FRACTION)
    change = run_phase(MODULE, ["_phase", "build", str(vault), str(index_dir)])
    stale = run_phase(MODULE, ["_phase", "staleness", str(vault), str(index_dir), str(STALENESS_CALLS)])
    return {
        "cold": cold,
        "uptodate": uptodate,
        "change": change,
        "staleness": stale,
        "changed_notes": len(changed_paths),
    }


def _checks(phases: dict[str, Any]) -> dict[str, bool]:
    """Correctness of what was timed: a fast phase that did the wrong thing is not a result."""
    cold, up, change = (phases[k]["report"] for k in ("cold", "uptodate", "change"))
    return {
        "uptodate_published_nothing": bool(up["up_to_date"]) and up["generation_id"] == cold["generation_id"],
        "change_rebuilt_exactly_the_changed_notes": change["changed"] == phases["changed_notes"]
        and change["added"] == 0
        and change["removed"] == 0,
        "staleness_fresh_after_rebuild": not phases["staleness"]["stale"],
    }


def bench_corpus(name: str, src: Path, work: Path) -> dict[str, Any]:
    """Every measurement for one corpus, on a fresh copy under ``work``."""
    vault = copy_vault(src, work / name / "vault")
    backdate(vault, 86_400)
    index_dir = work / name / "index"
    notes = count_md_files(vault)
    bare = run_phase(MODULE, ["_phase", "bare", str(vault), str(work / name / "bare.db"), str(BARE_REPEATS)])
    floor = run_phase(MODULE, ["_phase", "floor", str(vault), str(work / name / "floor.db"), str(BARE_REPEATS)])
    phases = _build_phases(vault, index_dir)
    cold_s = phases["cold"]["wall_seconds"]
    gid = phases["change"]["report"]["generation_id"]
    result = {
        "notes": notes,
        "vault_bytes": dir_size_bytes(vault),
        "bare_fts5": bare,
        **phases,
        "index_dir_bytes": dir_size_bytes(index_dir),
        "active_generation_bytes": _active_generation_bytes(vault, index_dir, gid),
        "floor": floor,
        "floor_vs_bare_ratio": floor["median_seconds"] / bare["median_seconds"],
        "cold_vs_bare_ratio": cold_s / bare["median_seconds"],
        "change_vs_cold_ratio": phases["change"]["wall_seconds"] / cold_s,
        "uptodate_vs_cold_ratio": phases["uptodate"]["wall_seconds"] / cold_s,
        "staleness_ms_per_2000": phases["staleness"]["median_ms"] * 2000 / notes,
        "checks": _checks(phases),
    }
    result["targets"] = {key: result[metric] <= limit for key, (_d, metric, limit) in TARGETS.items()}
    shutil.rmtree(work / name)
    return result


def run(corpora: Sequence[str]) -> dict[str, Any]:
    """Benchmark the named corpora in a temporary folder; return the JSON-ready results."""
    results: dict[str, Any] = {
        "machine": machine_info(),
        "change_fraction": CHANGE_FRACTION,
        "staleness_calls": STALENESS_CALLS,
        "bare_repeats": BARE_REPEATS,
        "targets": {k: {"description": d, "metric": m, "limit": lim} for k, (d, m, lim) in TARGETS.items()},
        "corpora": {},
    }
    with tempfile.TemporaryDirectory(prefix="vs-bench-build-") as tmp:
        for name in corpora:
            results["corpora"][name] = bench_corpus(name, CORPORA[name], Path(tmp))
    return results


# ---------------------------------------------------------------- rendering


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def _rss(phase: dict[str, Any]) -> str:
    """A phase's peak RSS, with its largest worker process's peak in parentheses when it had workers."""
    worker = phase.get("largest_child_peak_rss_mb")
    return f"{phase['peak_rss_mb']:.0f}" + (f" ({worker:.0f})" if worker else "")


def _rows(c: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of one corpus result, in table order."""
    ph = {k: c[k] for k in ("cold", "uptodate", "change", "staleness")}
    return [
        ("notes", f"{c['notes']:,}"),
        ("vault size MiB", _mib(c["vault_bytes"])),
        ("bare FTS5 build s (median of 3)", f"{c['bare_fts5']['median_seconds']:.2f}"),
        ("floor build s: read, parse, count, notes_fts only (median of 3)", f"{c['floor']['median_seconds']:.2f}"),
        ("floor / bare FTS5", f"{c['floor_vs_bare_ratio']:.2f}x"),
        ("cold build s", f"{ph['cold']['wall_seconds']:.2f}"),
        ("up-to-date check s", f"{ph['uptodate']['wall_seconds']:.3f}"),
        ("notes changed (5%)", f"{c['changed_notes']:,}"),
        ("rebuild after the 5% change s", f"{ph['change']['wall_seconds']:.2f}"),
        ("staleness scan ms (median of 20)", f"{ph['staleness']['median_ms']:.1f}"),
        ("staleness ms per 2,000 notes", f"{c['staleness_ms_per_2000']:.1f}"),
        ("chunks", f"{ph['cold']['report']['chunks']:,}"),
        ("active generation MiB", _mib(c["active_generation_bytes"])),
        ("index dir MiB (all retained generations)", _mib(c["index_dir_bytes"])),
        ("bare FTS5 db MiB", _mib(c["bare_fts5"]["db_bytes"])),
        (
            "peak RSS MiB cold / up-to-date / change / staleness (largest worker)",
            " / ".join(_rss(ph[k]) for k in ("cold", "uptodate", "change", "staleness")),
        ),
    ]


def render_markdown(results: dict[str, Any]) -> str:
    """The Markdown tables (measurements, then targets) of a :func:`run` result."""
    names = list(results["corpora"])
    corpora = [results["corpora"][n] for n in names]
    head = "| | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names)
    lines = [head]
    for i, (label, _v) in enumerate(_rows(corpora[0])):
        lines.append(f"| {label} | " + " | ".join(_rows(c)[i][1] for c in corpora) + " |")
    lines += ["", "| target | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, spec in results["targets"].items():
        cells = [f"{c[spec['metric']]:.3g} {'PASS' if c['targets'][key] else 'MISS'}" for c in corpora]
        lines.append(f"| {spec['description']} | " + " | ".join(cells) + " |")
    for check in corpora[0]["checks"]:
        cells = ["ok" if c["checks"][check] else "FAILED" for c in corpora]
        lines.append(f"| check: {check.replace('_', ' ')} | " + " | ".join(cells) + " |")
    m = results["machine"]
    lines += [
        "",
        f"{m['cpu_model']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, Python {m['python']}, "
        f"SQLite {m['sqlite_version']}, load {m['load_avg_1m']}, {m['date']}. Each phase ran in its own process; "
        "peak RSS includes the interpreter and imports.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: run the benchmark, write the JSON, print the Markdown."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_phase":
        phase_main(argv[1:])
        return
    parser = argparse.ArgumentParser(description="Benchmark index builds against bare FTS5.")
    parser.add_argument("--corpus", choices=[*CORPORA, "all"], default="all")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "build.json")
    args = parser.parse_args(argv)
    results = run(list(CORPORA) if args.corpus == "all" else [args.corpus])
    write_json(args.out, results)
    print(render_markdown(results))


if __name__ == "__main__":
    main()
