"""The one-command benchmark suite: ``python -m bench.run_all`` (what ``./run bench`` calls).

Stages, in order (each writes its own JSON in bench/results/, so any can be re-run alone):

    build   bench.bench_build on SciFact, Dendron and PowerShell        -> build.json
    search  bench.bench_search: quality + warm latency + resolve()      -> search.json
    scale   bench.bench_scale on synthetic 1k / 10k / 100k vaults       -> scale.json
    embed   bench.bench_embed (if present): Embedder vs raw onnxruntime -> embed.json
    dense   bench.bench_dense (if present; opt-in, --with-dense): the dense modes with
            MiniLM vectors on SciFact and Dendron (~25 min of CPU)  -> dense_quality_*.json
    plots   bench.plots                                                 -> *.png
    report  bench.report                                                -> docs/benchmarks.md

A stage that fails does not stop the others (the report is still rebuilt from whatever
JSON exists), but its traceback is printed, it is recorded as failed in
``bench/results/run_all.json`` and the suite exits non-zero.

    python -m bench.run_all [--sizes 1000,10000] [--only search,report] [--skip embed]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, RESULTS_DIR, machine_info, write_json

STAGES = ("build", "search", "scale", "embed", "dense", "plots", "report")
OPT_IN = ("dense",)  # run only when asked for: --with-dense or --only dense
DENSE_MODULE = REPO_ROOT / "bench" / "bench_dense.py"
DENSE_CORPORA = ("scifact", "dendron")
EMBED_MODULE = REPO_ROOT / "bench" / "bench_embed.py"


def _stage_build(args: argparse.Namespace) -> str:
    from bench import bench_build

    results = bench_build.run(list(bench_build.CORPORA))
    write_json(RESULTS_DIR / "build.json", results)
    return bench_build.render_markdown(results)


def _stage_search(args: argparse.Namespace) -> str:
    import tempfile

    from bench import bench_search

    with tempfile.TemporaryDirectory(prefix="vs-bench-search-") as tmp:
        results = bench_search.run(list(bench_search.CORPORA), Path(tmp))
    write_json(RESULTS_DIR / "search.json", results)
    from bench.report import latency_section, quality_section

    return "\n".join(quality_section({"search": results}) + latency_section({"search": results}))


def _stage_scale(args: argparse.Namespace) -> str:
    from bench import bench_scale

    results = bench_scale.run(args.sizes, args.work_dir, budget_s=args.build_budget, profile=not args.no_profile)
    write_json(RESULTS_DIR / "scale.json", results)
    return bench_scale.format_targets(results["targets"])


def _stage_embed(args: argparse.Namespace) -> str:
    """bench_embed in its own process; exit 1 means it ran and missed its target (still a result)."""
    if not EMBED_MODULE.is_file():
        return "not run: bench/bench_embed.py does not exist"
    proc = subprocess.run([sys.executable, "-m", "bench.bench_embed"], cwd=REPO_ROOT, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"bench.bench_embed exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    table = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("{"))
    return table + ("\n(overhead target missed)" if proc.returncode == 1 else "")


def _stage_dense(args: argparse.Namespace) -> str:
    """bench_dense quality per corpus, each in its own process (its JSON is what the report reads)."""
    if not DENSE_MODULE.is_file():
        return "not run: bench/bench_dense.py does not exist"
    lines = []
    for corpus in DENSE_CORPORA:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.bench_dense", "quality", "--corpus", corpus],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"bench.bench_dense quality --corpus {corpus} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
            )
        lines.append(f"{corpus}: wrote bench/results/dense_quality_{corpus}.json")
    return "\n".join(lines)


def _stage_plots(args: argparse.Namespace) -> str:
    from bench.plots import draw_all

    return "\n".join(f"wrote {p}" for p in draw_all())


def _stage_report(args: argparse.Namespace) -> str:
    from bench.report import write_report

    return f"wrote {write_report()}"


RUNNERS: dict[str, Callable[[argparse.Namespace], str]] = {
    "build": _stage_build,
    "search": _stage_search,
    "scale": _stage_scale,
    "embed": _stage_embed,
    "dense": _stage_dense,
    "plots": _stage_plots,
    "report": _stage_report,
}


def run_stage(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one stage, print its summary, and return its status record (errors are recorded, not hidden)."""
    print(f"\n=== {name} ===", flush=True)
    start = time.perf_counter()
    try:
        summary = RUNNERS[name](args)
    except Exception as exc:  # noqa: BLE001 - recorded, printed in full, and turned into a non-zero exit
        traceback.print_exc()
        return {
            "stage": name,
            "ok": False,
            "seconds": round(time.perf_counter() - start, 1),
            "error": f"{type(exc).__name__}: {exc}"[-2000:],
        }
    print(summary, flush=True)
    return {"stage": name, "ok": True, "seconds": round(time.perf_counter() - start, 1)}


def _stage_list(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in STAGES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown stage(s) {unknown}; stages: {', '.join(STAGES)}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The suite's options; sizes and budgets default to the scaling study's."""
    from bench.bench_scale import BUILD_BUDGET_S, DEFAULT_SIZES, DEFAULT_WORK, parse_sizes

    parser = argparse.ArgumentParser(description="Run the whole benchmark suite and regenerate docs/benchmarks.md.")
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=list(DEFAULT_SIZES),
        help="synthetic vault sizes, e.g. 1000,10000 (default 1000,10000,100000)",
    )
    parser.add_argument("--only", type=_stage_list, default=None, help=f"stages to run ({','.join(STAGES)})")
    parser.add_argument("--skip", type=_stage_list, default=[], help="stages to skip")
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK, help="cache of synthetic vaults")
    parser.add_argument(
        "--build-budget",
        type=float,
        default=BUILD_BUDGET_S,
        help="seconds a synthetic cold build may take before it is stopped",
    )
    parser.add_argument(
        "--with-dense",
        action="store_true",
        help="also run the opt-in dense stage (embeds SciFact and Dendron: ~25 min of CPU)",
    )
    parser.add_argument("--no-profile", action="store_true", help="do not profile missed scaling targets")
    return parser.parse_args(argv)


def _record_run(args_list: list[str], records: list[dict[str, Any]], started: float) -> None:
    write_json(
        RESULTS_DIR / "run_all.json",
        {
            "machine": machine_info(),
            "argv": args_list,
            "stages": records,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen stages; the report goes last, after run_all.json records how the others went."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(args_list)
    chosen = args.only or [s for s in STAGES if s not in OPT_IN or args.with_dense]
    stages = [s for s in STAGES if s in chosen and s not in args.skip]
    started = time.perf_counter()
    records = [run_stage(name, args) for name in stages if name != "report"]
    _record_run(args_list, records, started)
    if "report" in stages:
        records.append(run_stage("report", args))
        _record_run(args_list, records, started)
    failed = [r for r in records if not r["ok"]]
    for r in failed:
        print(f"FAILED stage {r['stage']}: {r['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
