"""Render docs/benchmarks.md from bench/results/*.json (the page is generated, never typed).

Sections: a one-screen summary for users (bench/report_summary.py), how it is measured, how to
reproduce, build, quality, latency, serving, new-process latency, scaling (with profiles of missed
targets), embedding, languages, plots; then an appendix: machine, last suite run, every target
with PASS/MISS. A section
whose JSON is absent says so instead of disappearing; each section names the date and load
of its own run, since stages can be re-run separately.

    python -m bench.report [--results DIR] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, RESULTS_DIR
from bench.report_edit import edit_section, watch_section
from bench.report_lang import lang_section, lang_target_rows
from bench.report_segments import (
    STOP33_HEADING,
    STOP33_INTRO,
    STOP34_100K_HEADING,
    STOP34_100K_INTRO,
    STOP34_HEADING,
    STOP34_INTRO,
    gather_section,
    merge_section,
    quality_segments_section,
    staged_section,
    tombstone_section,
)
from bench.report_stop35 import (
    WATCH_KNOWN_NOTE,
    WATCH_READER_NOTE,
    WATCH_VIEW_NOTE,
    cold_ab_section,
    edit_100k_section,
    fts_warm_section,
    link_edit_section,
    new_process_section,
    size_section,
    watch_split_section,
)
from bench.report_summary import summary_section, test_suite_section
from bench.report_vector import vector_norm_section

DOC = REPO_ROOT / "docs" / "benchmarks.md"
SIZE_MODES_NOTE = "model-free modes only: the dense modes need embeddings, which the scaling study does not build"

TITLE = "# Benchmarks\n"

SCALE_FRESHNESS_NOTE = (
    "Each search here is `search_vault`'s default call, so it includes the freshness check (since 2026-12-01;"
    " the 2026-11-30 run had none). Without a watcher, that is a stat walk of the vault, about 4 µs a note."
    " A walk under 0.1 s is never reused, so every search at 1k and 10k notes pays for one: on the 10k vault,"
    " fts p50 was 5.1 ms with `freshness=False` and 43-46 ms with it (measured 2026-12-07, same machine). From"
    " about 20k notes a walk is reused for 2 s, so at 100k it lands on a few queries only. A running watcher"
    " answers freshness without a walk (see Serving agents)."
)

INTRO = """\
## How it is measured

vaultsearch is measured against the two things a user could use instead: a bare SQLite
FTS5 table (the simplest index one could build; `porter unicode61`, title + body, OR of the
query words by `bm25()`) and [bm25s](https://github.com/xhluska/bm25s) (in-memory BM25,
k1=1.2, b=0.75, English stop words, Snowball stemmer). Every figure is given beside the
baselines' so it reads as a ratio, on real text: BEIR SciFact (natural-language claims),
and known-item heading queries over Dendron's and PowerShell's documentation. The scaling
study uses synthetic vaults made of the same real sentences (`bench/synth.py`).

vaultsearch does more work per query than the baselines on purpose: it verifies the index
generation it serves, applies filters in SQL, and returns a snippet and a body passage for
each hit, with provenance. The latency tables are the full `search_vault` call.

**This page is generated** by `bench/report.py` from `bench/results/*.json`; edit the
generator, not the page.
"""


# ---------------------------------------------------------------- small formatting helpers

STEP_HEADING = "One-note edit after the first storage steps of issue 29"
STEP_INTRO = (
    "The same bench on the code of this stop: note text stored once (contentless FTS5, zlib), compressed "
    "forward rows and array pieces, per-class statistics, links resolved incrementally, and a generation "
    "as a hashed manifest of one content-addressed segment. Every edit still writes a whole segment: the "
    "multi-segment writer is the next step. `python -m bench.bench_edit --out bench/results/edit_step.json`"
)


def _f(value: Any, digits: int = 2) -> str:
    """A number with ``digits`` decimals, '-' for None."""
    return "-" if value is None else f"{value:.{digits}f}"


def _mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


def _run_line(data: dict[str, Any]) -> str:
    m = data["machine"]
    return f"_Run {m['date']}, load average {m.get('load_avg_1m', '-')} (1 min)._"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """A Markdown table; ``align`` has one char per column: 'l' or 'r' (default 'r' after the first)."""
    align = align or "l" + "r" * (len(headers) - 1)
    sep = "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"
    return ["| " + " | ".join(headers) + " |", sep, *("| " + " | ".join(r) + " |" for r in rows)]


def load_results(results_dir: Path) -> dict[str, dict[str, Any]]:
    """``{stem: json}`` of every ``*.json`` in ``results_dir``."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(results_dir.glob("*.json"))}


# ---------------------------------------------------------------- sections


def machine_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """The machine of the newest result (all stages run on one machine in one suite run)."""
    runs = [r["machine"] for r in results.values() if isinstance(r.get("machine"), dict)]  # some say it in words
    if not runs:
        return ["## Machine", "", "No results yet: run `./run bench`.", ""]
    m = max(runs, key=lambda x: x["date"])
    rows = [
        ("CPU", m["cpu_model"]),
        ("cores", str(m["cores"])),
        ("RAM", f"{m['ram_gib']} GiB"),
        ("Python", m["python"]),
        ("SQLite", m["sqlite_version"]),
        ("platform", m["platform"]),
        ("newest result", m["date"]),
        ("load average at its start (1 min)", str(m.get("load_avg_1m", "-"))),
    ]
    return ["## Machine", "", *_table(("", ""), rows, "ll"), ""]


def reproduce_section() -> list[str]:
    """The commands that regenerate this page."""
    return [
        "## Reproduce",
        "",
        "```",
        "./run bench                        # = python -m bench.run_all: every stage, sizes 1k, 10k, 100k",
        "./run bench --sizes 1000,10000     # quick: skip the 100k-note vault",
        "./run bench --only search,report   # re-run some stages; the page is rebuilt from all JSON",
        "```",
        "",
        "Synthetic vaults are cached under the work dir (default `$TMPDIR/vaultsearch-bench`), "
        "so a re-run does not regenerate them.",
        "",
    ]


def suite_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """How the last ``run_all`` went: each stage, its time, and the error of a failed one."""
    run = results.get("run_all")
    if not run:
        return []
    rows = [
        (r["stage"], "ok" if r["ok"] else f"**FAILED**: `{r['error'][:300]}`", f"{r['seconds']:.0f}")
        for r in run["stages"]
    ]
    args = " ".join(run["argv"]) or "(defaults)"
    return [
        "## Last suite run",
        "",
        f"`python -m bench.run_all {args}` at {run['machine']['date']}; stages not "
        "listed kept their earlier results (each section gives its own date).",
        "",
        *_table(("stage", "status", "seconds"), rows, "llr"),
        "",
    ]


def target_rows(results: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(area, target, measured, status) for every target of every stage present."""
    rows: list[tuple[str, str, str, str]] = []
    build = results.get("build")
    if build:
        for key, spec in build["targets"].items():
            for name, c in build["corpora"].items():
                rows.append(
                    (
                        "build",
                        f"{spec['description']} ({name})",
                        f"{c[spec['metric']]:.3g}",
                        "PASS" if c["targets"][key] else "MISS",
                    )
                )
    search = results.get("search")
    if search:
        for name, c in corpus_order(search["corpora"]):
            r = c["resolve"]
            rows.append(
                (
                    "search",
                    f"warm resolve() < {r['target_ms']:g} ms ({name}, median of {r['calls']:,})",
                    f"{r['median_ms'] * 1000:.1f} µs",
                    "PASS" if r["pass"] else "MISS",
                )
            )
        rows += search_target_rows(search)
    scale = results.get("scale")
    if scale:
        for t in scale["targets"].values():
            value = "-" if t["value"] is None else f"{t['value']:.1f} {t['unit']}"
            status = t["status"] + (f" ({t['why']})" if t["why"] else "")
            rows.append(("scale", f"{t['description']} at {t['size']:,} notes", value, status))
    serve = results.get("serve")
    if serve:
        for name, t in serve["targets"].items():
            value = (
                "-" if t["value"] is None else (f"{t['value']:.2f} s" if "watch" in name else f"{t['value']:.1f} ms")
            )
            rows.append(("serve", f"{name} {t['target']}", value, t["status"]))
    embed = results.get("embed")
    if embed:
        for m in embed["models"]:
            rows.append(
                (
                    "embed",
                    f"Embedder overhead vs raw onnxruntime <= {embed['target_overhead_pct']:g}% ({m['model']})",
                    f"{m['overhead_pct']:.1f}%",
                    "PASS" if m["overhead_pct"] <= embed["target_overhead_pct"] else "MISS",
                )
            )
    return rows + lang_target_rows(results)


def search_target_rows(search: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Quality floors of fts, hybrid >= fts, and the latency ceilings, where search.json has the numbers."""
    from bench.bench_search import FTS_NDCG_TARGETS, LATENCY_TARGET_CORPUS, LATENCY_TARGETS_MS

    rows: list[tuple[str, str, str, str]] = []
    for name, c in corpus_order(search["corpora"]):
        ndcg = {m["mode"]: m["ndcg"] for m in c["quality"]["modes"]}
        fts, hybrid = ndcg.get("fts"), ndcg.get("hybrid")
        if name in FTS_NDCG_TARGETS and fts is not None:
            floor = FTS_NDCG_TARGETS[name]
            rows.append(
                ("search", f"fts nDCG@10 >= {floor:g} ({name})", f"{fts:.4f}", "PASS" if fts >= floor else "MISS")
            )
        if fts is not None and hybrid is not None:
            rows.append(
                (
                    "search",
                    f"hybrid nDCG@10 >= fts ({name})",
                    f"{hybrid:.4f} vs {fts:.4f}",
                    "PASS" if hybrid >= fts else "MISS",
                )
            )
        if name == LATENCY_TARGET_CORPUS:
            engines = c["latency"]["engines"]
            for mode, ceiling in LATENCY_TARGETS_MS.items():
                if mode in engines:
                    p50 = engines[mode]["p50_ms"]
                    rows.append(
                        (
                            "search",
                            f"{mode} p50 <= {ceiling:g} ms ({name}, warm, limit=10)",
                            f"{p50:.2f} ms",
                            "PASS" if p50 <= ceiling else "MISS",
                        )
                    )
    return rows


def targets_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Every target of every stage in one table, so a MISS cannot hide in a later section."""
    rows = target_rows(results)
    if not rows:
        return []
    return ["## Targets", "", *_table(("stage", "target", "measured", "status"), rows, "llrl"), ""]


def build_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """The real-corpus build table, rendered by bench_build itself."""
    build = results.get("build")
    if not build:
        return ["## Build", "", "_not run: no bench/results/build.json_", ""]
    from bench.bench_build import render_markdown

    return [
        "## Build (real corpora)",
        "",
        _run_line(build),
        "",
        "Cold build, the no-change check, a rebuild after appending a sentence to 5% of the notes, and "
        "the staleness scan, each in its own process, against the bare FTS5 build of the same files. "
        "The floor row (`bench/build_floor.py`) runs only what no build of this index can skip, the way the "
        "build runs it: two forked workers read, parse and count each note's words, one writer fills "
        "`notes_fts`. Whatever the floor costs, the full build costs more.",
        "",
        render_markdown(build),
        "",
    ]


def git_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """``--source git`` against the working tree, and the git access choice (bench_git)."""
    data = results.get("git")
    if not data:
        return ["## Git source", "", "_not run: no bench/results/git.json_", ""]
    from bench.bench_git import render_markdown

    return ["## Git source (`--source git`)", "", _run_line(data), "", *render_markdown(data)]


def _mode_note(corpus: dict[str, Any], mode: str) -> str:
    """How a row ran: a baseline, the mode itself, a labelled fallback, or its fail-closed reason."""
    probe = corpus["modes"].get(mode)
    if probe is None:
        return "baseline"
    if not probe["ran"]:
        return f"fails closed: `{probe['error_reason']}`"
    if probe["fallback_reason"]:
        return f"ran `{probe['actual_mode']}` (`{probe['retrieval_contract']}`: `{probe['fallback_reason']}`)"
    return "ran as asked"


def quality_table(corpus: dict[str, Any]) -> list[str]:
    """One row per mode and baseline; a failed mode reads 'not run' with its reason, never 0."""
    q = corpus["quality"]
    rows = []
    for m in q["modes"]:
        note = _mode_note(corpus, m["mode"])
        if m["error_reason"] is not None:
            rows.append((f"`{m['mode']}`", "not run", "not run", "not run", "not run", note))
            continue
        name = f"`{m['mode']}`" if m["mode"] in corpus["modes"] else f"**{m['mode']}**"
        rows.append((name, _f(m["ndcg"], 4), _f(m["recall"], 4), _f(m["mrr"], 4), _f(m["precision"], 4), note))
    return _table(
        ("engine", f"nDCG@{q['k']}", f"Recall@{q['depth']}", f"MRR@{q['mrr_k']}", f"P@{q['k']}", "how it ran"),
        rows,
        "lrrrrl",
    )


def quality_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Quality per corpus, then the dense section (scores, or 'not run' with why)."""
    search = results.get("search")
    if not search:
        return ["## Quality", "", "_not run: no bench/results/search.json_", ""]
    out = [
        "## Quality",
        "",
        _run_line(search),
        "",
        "Every registry mode and both baselines (**bold**) in one `core.eval.evaluation.evaluate` run per corpus "
        "(the code behind `vaultsearch eval`), on the dev queries. A mode that fails closed is listed with its "
        "reason, not dropped and not scored as zero.",
        "",
    ]
    for name, c in corpus_order(search["corpora"]):
        q = c["quality"]
        out += [
            f"### {name}: {c['kind']}",
            "",
            f"{c['notes']:,} notes, {c['chunks']:,} chunks; {q['n_evaluated']} of {q['n_queries']} queries evaluated.",
            "",
            *quality_table(c),
            "",
        ]
    return out + dense_section(results, search.get("dense", {}))


DENSE_ROWS = (
    ("fts", "`fts` (same index, for reference)"),
    ("semantic", "`semantic`"),
    ("auto", "`auto` (dense ready)"),
    (
        "reranked_pair_fixture",
        "`reranked`, pair fixture as reranker (plumbing only, not a trained reranker; Recall = of its 30 candidates)",
    ),
)


def dense_section(results: dict[str, dict[str, Any]], dense: dict[str, Any]) -> list[str]:
    """The dense modes with vectors, from bench_dense's dense_quality_<corpus>.json; else 'not run' and why."""
    out = ["### Dense modes with vectors (semantic, reranked, auto)", ""]
    found = [
        (name.removeprefix("dense_quality_"), data)
        for name, data in sorted(results.items())
        if name.startswith("dense_quality_")
    ]
    if not found:
        reason = dense.get("not_run_reason", "no dense section in search.json")
        return out + [f"**not run: {reason}**", ""]
    out += [
        "From `bench.bench_dense` (run_all's opt-in `dense` stage): the corpus index embedded with the "
        "offline MiniLM fixture, then scored with `search_vault` on the dev queries.",
        "",
    ]
    for corpus, data in sorted(
        found, key=lambda item: CORPUS_ORDER.index(item[0]) if item[0] in CORPUS_ORDER else len(CORPUS_ORDER)
    ):
        rows = [
            (
                label,
                _f(data["dev"][key]["ndcg@10"], 4),
                _f(data["dev"][key]["recall@100"], 4),
                _f(1000 * data["dev"][key]["s_per_query"], 1) if "s_per_query" in data["dev"][key] else "-",
            )
            for key, label in DENSE_ROWS
            if key in data["dev"]
        ]
        out += [
            f"**{corpus}** ({data['model']}; {data['chunks']:,} chunks) {_run_line(data)}",
            "",
            *_table(("mode", "nDCG@10", "Recall@100", "ms per query (depth 100)"), rows, "lrrr"),
            "",
        ]
    return out


CORPUS_ORDER = ("scifact", "dendron", "powershell")


def corpus_order(corpora: dict[str, Any]) -> list[tuple[str, Any]]:
    """(name, result) pairs with the known corpora first in a fixed order (JSON keys come sorted)."""
    known = [n for n in CORPUS_ORDER if n in corpora]
    return [(n, corpora[n]) for n in known + sorted(n for n in corpora if n not in CORPUS_ORDER)]


def engine_order(names: Any) -> list[str]:
    """Registry modes in registry order, then anything else (the baselines) by name."""
    from core.registry import MODE_NAMES

    names = list(names)
    return [m for m in MODE_NAMES if m in names] + sorted(n for n in names if n not in MODE_NAMES)


def latency_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Warm limit=10 latency per corpus with ratios to the baselines, and the resolve() cost."""
    search = results.get("search")
    if not search:
        return []
    out = ["## Latency (real corpora)", "", _run_line(search), ""]
    first = next(iter(search["corpora"].values()))["latency"]
    out += [
        f"Warm, in process, `limit={first['limit']}` (the realistic call), every query of the dev set "
        f"{first['rounds']} times; modes and baselines interleaved query by query with a rotating order. "
        "Modes that fail closed have no latency. `resolve()` is the verified-generation lookup every search "
        "starts with (warm cache).",
        "",
    ]
    for name, c in corpus_order(search["corpora"]):
        lat = c["latency"]["engines"]
        rows = []
        for engine in engine_order(lat):
            s = lat[engine]
            label = f"**{engine}**" if engine not in c["modes"] else f"`{engine}`"
            rows.append(
                (label, _f(s["p50_ms"]), _f(s["p95_ms"]), _f(s.get("p50_vs_bare_fts5")), _f(s.get("p50_vs_bm25s")))
            )
        r = c["resolve"]
        out += [
            f"### {name}",
            "",
            *_table(("engine", "p50 ms", "p95 ms", "p50 / bare FTS5", "p50 / bm25s"), rows),
            "",
            f"warm `resolve()`: median {r['median_ms'] * 1000:.1f} µs, p95 {r['p95_ms'] * 1000:.1f} µs "
            f"over {r['calls']:,} calls.",
            "",
        ]
    return out


def _mode_cell(size: dict[str, Any], mode: str) -> str:
    """'p50 / p95 (ratio x)' of one mode at one size, the ratio to bare FTS5's p50."""
    if "search" not in size:
        return "-"
    s = size["search"]["modes"][mode]
    ratio = s["p50_ms"] / size["baselines"]["bare_fts5"]["p50_ms"]
    return f"{s['p50_ms']:.2f} / {s['p95_ms']:.2f} ({ratio:.2g}x)"


def _size_rows(scale: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the scaling table: one column per size."""
    sizes = sorted(scale["sizes"], key=int)
    cols = [scale["sizes"][n] for n in sizes]
    rows: list[list[str]] = []

    def row(label: str, fn: Any) -> None:
        rows.append([label, *(fn(c) for c in cols)])

    row("vault MiB", lambda c: _mib(c["synth"]["bytes"]))
    row(
        "cold build s",
        lambda c: (
            _f(c["build"]["wall_seconds"])
            if c["build"]["finished"]
            else f"unfinished: {c['build']['notes_indexed']:,} notes in {c['build']['elapsed_seconds']} s"
        ),
    )
    row(
        "build ms per note",
        lambda c: (
            _f(1000 * c["build"]["wall_seconds"] / c["notes"])
            if c["build"]["finished"]
            else _f(1000 * (c["build"]["seconds_per_note"] or 0))
        ),
    )
    row(
        "build peak RSS MiB (largest worker)",
        lambda c: (
            _f(c["build"].get("peak_rss_mb"), 0)
            + (f" ({c['build']['largest_child_peak_rss_mb']:.0f})" if "largest_child_peak_rss_mb" in c["build"] else "")
        ),
    )
    row("chunks", lambda c: f"{c['build']['chunks']:,}" if c["build"]["finished"] else "-")
    row("active generation MiB", lambda c: _mib(c.get("active_generation_bytes")))
    row("search process peak RSS MiB", lambda c: _f(c.get("search", {}).get("peak_rss_mb"), 0))
    row("warm resolve() µs", lambda c: _f(1000 * c["search"]["resolve_median_ms"], 1) if "search" in c else "-")
    row(
        "first query in a new process ms, " + " / ".join(f"`{m}`" for m in scale["modes"]),
        lambda c: (
            " / ".join(_f(c["search"]["modes"][m].get("first_query_ms"), 0) for m in scale["modes"])
            if "search" in c
            else "-"
        ),
    )
    for mode in scale["modes"]:
        row(f"`{mode}` p50 / p95 ms (p50 vs bare FTS5)", lambda c, m=mode: _mode_cell(c, m))
    for base in ("bare_fts5", "bm25s"):
        row(
            f"**{base}** p50 / p95 ms",
            lambda c, b=base: f"{c['baselines'][b]['p50_ms']:.2f} / {c['baselines'][b]['p95_ms']:.2f}",
        )
        row(
            f"**{base}** build s / peak RSS MiB",
            lambda c, b=base: f"{c['baselines'][b]['build_seconds']:.2f} / {c['baselines'][b]['peak_rss_mb']:.0f}",
        )
    row("bare FTS5 db MiB", lambda c: _mib(c["baselines"]["bare_fts5"].get("db_bytes")))
    return ["", *(f"{int(n):,} notes" for n in sizes)], rows


def profile_lines(key: str, prof: dict[str, Any], top: int = 10) -> list[str]:
    """A profile as short tables: cProfile by own time, or tracemalloc per step and by size."""
    what = (
        f"the slowest mode, `{key.removeprefix('slowest_mode_')}` (no target; for orientation)"
        if key.startswith("slowest_mode_")
        else f"the miss `{key}`"
    )
    head = f"#### Profile of {what}, at {prof.get('profiled_at_notes', 0):,} notes"
    if "error" in prof:
        return [head, "", f"profiling failed: `{prof['error'][-300:]}`", ""]
    if prof["tool"] == "tracemalloc":
        steps = [
            (s["step"], f"{s['traced_peak_mib']:.0f}", f"{s['held_after_mib']:.0f}", f"{s['process_peak_rss_mib']:.0f}")
            for s in prof.get("steps", [])
        ]
        rows = [(f"`{r['where']}`", f"{r['mib']:.1f}", f"{r['blocks']:,}") for r in prof["by_size"][:top]]
        step_lines = (
            [
                "Peak during each mode's first query, when its caches load:",
                "",
                *_table(("step", "traced peak MiB", "held after MiB", "process peak RSS MiB"), steps, "lrrr"),
                "",
            ]
            if steps
            else []
        )
        return [
            head,
            "",
            f"tracemalloc (Python allocations, numpy included; SQLite's own cache is not traced); "
            f"traced peak {prof['traced_peak_mib']:.0f} MiB.",
            "",
            *step_lines,
            "Biggest allocations still held after 20 queries of every mode:",
            "",
            *_table(("where", "MiB", "blocks"), rows, "lrr"),
            "",
        ]
    note = f" ({prof['note']}, {prof['workers']} workers)" if "note" in prof else ""
    scope = f" over {prof['queries']} queries" if "queries" in prof else ""
    rows = [
        (f"`{r['function']}`", f"{r['ncalls']:,}", f"{r['tottime_s']:.3f}", f"{r['cumtime_s']:.3f}")
        for r in prof["by_tottime"][:top]
    ]
    cum = [(f"`{r['function']}`", f"{r['ncalls']:,}", f"{r['cumtime_s']:.3f}") for r in prof["by_cumtime"][:top]]
    return [
        head,
        "",
        f"cProfile{note}, {prof['wall_seconds_profiled']} s profiled{scope}. Top functions by own time:",
        "",
        *_table(("function", "calls", "own s", "cumulative s"), rows, "lrrr"),
        "",
        "and by cumulative time:",
        "",
        *_table(("function", "calls", "cumulative s"), cum, "lrr"),
        "",
    ]


def scale_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """The scaling table (one column per size) and the profile of each missed target."""
    scale = results.get("scale")
    if not scale:
        return ["## Scaling", "", "_not run: no bench/results/scale.json_", ""]
    header, rows = _size_rows(scale)
    out = [
        "## Scaling (synthetic vaults)",
        "",
        _run_line(scale),
        "",
        f"Synthetic vaults of real sentences (seed {scale['seed']}), {scale['queries']} known-item queries each "
        f"(headings and titles), warm `limit={scale['limit']}`; {SIZE_MODES_NOTE}. The build, the search process "
        f"and each baseline run in their own process, so each peak RSS is its own (interpreter and imports "
        f"included). A cold build gets {scale['build_budget_seconds']:.0f} s before it is stopped and reported "
        "as unfinished.",
        "",
        SCALE_FRESHNESS_NOTE,
        "",
        *_table(header, rows),
        "",
    ]
    for key, prof in scale.get("profiles", {}).items():
        out += profile_lines(key, prof)
    return out


def serve_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """The search tool end to end over MCP stdio and HTTP, freshness cost, --watch edit-to-searchable."""
    serve = results.get("serve")
    if not serve:
        return ["## Serving agents", "", "No `bench/results/serve.json` yet: run `python -m bench.bench_serve`.", ""]
    lat = lambda d: (_f(d["p50_ms"]), _f(d["p95_ms"]), str(d["n"]))  # noqa: E731
    rows = [
        ("in process, `search_vault` (freshness on)", *lat(serve["in_process"])),
        ("in process, `freshness=False`", *lat(serve["in_process_no_freshness"])),
        ("MCP stdio (`vaultsearch mcp`, SDK client)", *lat(serve["stdio"])),
        ("HTTP (`vaultsearch serve`, httpx keep-alive)", *lat(serve["http"])),
    ]
    out = [
        "## Serving agents",
        "",
        _run_line(serve),
        "",
        f"The `search` tool, fts, max_results 10, on SciFact ({serve['queries']} dev queries x {serve['rounds']}), "
        "timed on the client from request to parsed result (bench/bench_serve.py).",
        "",
        *_table(("path", "p50 ms", "p95 ms", "calls"), rows, "lrrr"),
        "",
    ]
    out += _freshness_lines(serve)
    runs = serve.get("runs", {})
    for key, corpus, run in (
        ("watch", "the PowerShell docs", "watch"),
        ("watch_scale", "the synthetic vault", "scale_watch"),
        ("watch_scale_restricted", "the synthetic vault, default classifications (its lan notes hidden)", ""),
    ):
        watch = serve.get(key)
        if watch:
            out += _watch_lines(watch, corpus, runs.get(run or "scale_watch_restricted"))
    for key, who in (("serve_before_s39", ""), ("serve_before_restricted_s39", " with its lan notes hidden")):
        before = results.get(key)
        if before:
            e, st = before["edit_to_searchable"], before["status_call"]
            out += [
                f"The same 100k run{who} on main before stop 39 (`c8e499f`, the same vault, just before): "
                f"edit-to-searchable p50 {e['p50_ms'] / 1000:.2f} s, p95 {e['p95_ms'] / 1000:.2f} s; a `status` call "
                f"p50 {st['p50_ms'] / 1000:.2f} s, p95 {st['p95_ms'] / 1000:.2f} s (bench/results/{key}.json).",
                "",
            ]
    inc = serve.get("incremental_scale")
    if inc:
        rows = [(name, _f(sec), f"{100 * sec / inc['seconds']:.0f}%") for name, sec in inc["phases"].items()]
        out += [
            f"Where one incremental build of one edited note goes at {inc['notes']:,} notes "
            f"(in process, {inc['seconds']:.1f} s in all; the active pointer moved at "
            f"{inc['active_pointer_moved_at_s']:.1f} s; load average {inc.get('load_avg_1m_after', '-')} after; "
            f"the next reader's first `resolve()` took {_f(inc.get('first_resolve_after_publish_s'))} s): "
            "every phase below is O(vault).",
            "",
            *_table(("phase", "s", "share"), rows, "lrr"),
            "",
        ]
    return out


_FRESH_ROWS = (
    ("stat walk every call", "walk_every_call"),
    ("within the 2 s window", "window_2s"),
    ("defaults, 10 searches/s", "paced_10_per_s"),
    ("watcher in this process", "watch_in_process"),
    ("watcher in another process (watch.json)", "watch_other_process"),
)


def _freshness_lines(serve: dict[str, Any]) -> list[str]:
    rows, walks = [], []
    for corpus, f in serve["freshness"].items():
        name = f"{corpus} ({f['notes']:,} notes)"
        for label, key in _FRESH_ROWS:
            if key in f:
                extra = f" ({f[key]['walks']} walks)" if "walks" in f[key] else ""
                rows.append(
                    (name, label + extra, _f(f[key]["p50_ms"], 3), _f(f[key]["p95_ms"], 3), _f(f[key]["mean_ms"], 3))
                )
        if "walk" in f:
            w = f["walk"]
            walks.append(
                f"{name}: {_f(w['fast']['p50_ms'], 1)} ms per walk (before this change, `scan_vault` + a set "
                f"difference: {_f(w['scan_vault']['p50_ms'], 1)} ms); the generation's rows load once per process "
                f"in {_f(f.get('rows_load_ms'), 1)} ms."
            )
    out = [
        "Cost of the freshness check per search (`check_freshness`). Without a watcher it is a stat walk, reused "
        "for 2 s and abandoned past 1 s (`walk_over_budget`); with one, the watcher's state answers:",
        "",
        *_table(("vault", "check", "p50 ms", "p95 ms", "mean ms"), rows, "llrrr"),
        "",
    ]
    return out + ([*(f"- {w}" for w in walks), ""] if walks else [])


def _watch_lines(watch: dict[str, Any], corpus: str, run: dict[str, Any] | None) -> list[str]:
    e, b = watch["edit_to_searchable"], watch["build_seconds"]
    ops = watch.get("ops")
    what = ", ".join(f"{n} {k}s" for k, n in ops.items() if n) if ops else f"{watch['edits']} edits"
    by_op = "".join(
        f"; {k} p50 {v['p50_ms'] / 1000:.2f} s" for k, v in watch.get("by_op", {}).items() if ops and len(ops) > 1
    )
    load = f", load average {run['load_avg_1m']} at the start" if run else ""
    status, related = watch.get("status_call"), watch.get("related_call")
    asked = (
        f" A `status` call right after each operation (the first on its generation) took p50 "
        f"{status['p50_ms']:.0f} ms, p95 {status['p95_ms']:.0f} ms"
        + (
            f"; a `related` call on a new generation ({related['n']} more edits, after the timed ones) p50 "
            f"{related['p50_ms']:.0f} ms, p95 {related['p95_ms']:.0f} ms"
            if related
            else ""
        )
        + "."
        if status
        else ""
    )
    return [
        f"`vaultsearch serve --watch` on {corpus} ({watch['notes']:,} notes), {what}, polled every "
        f"{watch['poll_ms']:g} ms{load}: edit-to-searchable p50 {e['p50_ms'] / 1000:.2f} s, "
        f"p95 {e['p95_ms'] / 1000:.2f} s (incremental build + publish p50 {b['p50_ms'] / 1000:.2f} s{by_op}).{asked}",
        "",
    ]


def embed_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Embedding throughput from bench_embed's JSON, when it has run."""
    embed = results.get("embed")
    if not embed:
        return []
    rows = [
        (
            m["model"],
            str(m["passages"]),
            _f(m["mean_tokens"], 0),
            _f(m["raw_passages_per_s"]),
            _f(m["embedder_passages_per_s"]),
            f"{m['overhead_pct']:.1f}%",
            _f(m["query_ms_median"]),
        )
        for m in embed["models"]
    ]
    return [
        "## Embedding throughput",
        "",
        _run_line(embed),
        "",
        f"`core.dense.Embedder` against raw onnxruntime on the same batches (bench/bench_embed.py; "
        f"{embed['threads']} threads, batch {embed['batch_size']}).",
        "",
        *_table(
            ("model", "passages", "mean tokens", "raw passages/s", "Embedder passages/s", "overhead", "query ms"), rows
        ),
        "",
    ]


COLDSTART_TARGETS = {"fts": 0.15, "hybrid": 0.20}  # seconds, PowerShell docs, whole command (issue #14)
IMPORT_TARGET_MS = 90.0
IDLE_NUMPY_S = 0.065  # `python -c "import numpy"` on this machine when quiet (issue #14)


def _ratio_cells(name: str, figures: dict[str, Any], targets: dict[str, float], floor: float | None) -> tuple[str, ...]:
    """(x numpy, target s, target as x numpy, verdict on the ratio) of one engine row."""
    mode = next((m for m in targets if name.startswith(f"vaultsearch {m} ")), None)
    ratio = figures.get("x_numpy") or (figures["median_s"] / floor if floor else None)
    if mode is None:
        return (_f(ratio, 2) if ratio is not None else "-", "-", "-", "")
    limit = targets[mode] / IDLE_NUMPY_S
    verdict = "" if ratio is None or "(before)" in name else "PASS" if ratio <= limit else "MISS"
    return (_f(ratio, 2) if ratio is not None else "-", f"<= {targets[mode]:.2f} s", f"<= {limit:.2f}", verdict)


def _load_words(cold: dict[str, Any]) -> str:
    load = (cold.get("machine") or {}).get("load_avg_1m")
    if load is not None and load < 1.5:
        return f"The machine was quiet (load average {load:.2f} at the start)."
    return "The machine was shared and loaded (other work on the 2 cores): absolute figures are inflated."


def coldstart_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """New-process latency beside bm25s and tantivy-py (bench/bench_coldstart.py), when it has run."""
    cold = results.get("coldstart")
    if not cold:
        return ["## New-process latency", "", "_not run: no bench/results/coldstart.json_", ""]
    engines = cold["engines"]
    floor = engines.get("python -c 'import numpy'", {}).get("median_s")
    rows = []
    group = lambda name: (0 if name.startswith("python") else 1 if name.startswith("vaultsearch") else 2, name)  # noqa: E731
    for name, figures in sorted(engines.items(), key=lambda item: group(item[0])):
        cpu = _f(figures["cpu_median_s"], 3) if "cpu_median_s" in figures else "-"
        rows.append((name, _f(figures["median_s"], 3), cpu, *_ratio_cells(name, figures, COLDSTART_TARGETS, floor)))
    imports = []
    for label, v in sorted(cold["import_core_searcher"].items()):
        ratio = v["median_ms"] / 1000 / floor if floor else None
        limit = IMPORT_TARGET_MS / 1000 / IDLE_NUMPY_S
        verdict = "" if ratio is None or label == "before" else "PASS" if ratio <= limit else "MISS"
        imports.append(
            (label, _f(v["median_ms"], 1), _f(ratio, 2), f"<= {IMPORT_TARGET_MS:.0f} ms", f"<= {limit:.2f}", verdict)
        )
    return [
        "## New-process latency",
        "",
        _run_line(cold),
        "",
        f"Wall time of a whole command in a new process, median of {len(cold['queries'])} queries (one process "
        f"each, after one warm-up), on {cold['notes']} notes of the PowerShell docs (bench/bench_coldstart.py). "
        "All engines ran interleaved, query by query, in the same run; bm25s and tantivy-py open their saved "
        "indexes. `before` is main when issue #14 was filed, `after` today's main.",
        "",
        f"{_load_words(cold)} This machine is slower than the one the targets were set on: there a bare "
        f'`python -c "import numpy"` took {IDLE_NUMPY_S} s. Each figure is therefore also given as a multiple of '
        "the `import numpy` process of the same run ('x numpy'), and each target as the same multiple of "
        f"{IDLE_NUMPY_S} s; the verdict is on the multiple.",
        "",
        *_table(("command", "median s", "CPU s (median)", "x numpy", "target", "target (x numpy)", ""), rows),
        "",
        "`import core.searcher` (python -X importtime, cumulative, median of the runs) against the same floor:",
        "",
        *_table(("tree", "median ms", "x numpy", "target", "target (x numpy)", ""), imports),
        "",
    ]


COLDSTART_100K_TARGETS = {"fts": 1.0, "vector": 1.5, "hybrid": 1.5}  # seconds, 100k synthetic notes (issue #14)


def coldstart_100k_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """New-process latency on the 100k-note synthetic vault (bench_coldstart --index ..., coldstart_100k.json)."""
    cold = results.get("coldstart_100k")
    if not cold:
        return []
    engines = cold["engines"]
    floor = engines.get("python -c 'import numpy'", {}).get("median_s")
    rows = [
        (
            name,
            _f(figures["median_s"], 3),
            _f(figures.get("cpu_median_s"), 3),
            *_ratio_cells(name, figures, COLDSTART_100K_TARGETS, floor),
        )
        for name, figures in sorted(engines.items(), key=lambda item: (not item[0].startswith("python"), item[0]))
    ]
    return [
        "### New-process latency at 100k notes",
        "",
        _run_line(cold),
        "",
        f"The same measurement on the {cold['notes']}-note synthetic vault (bench/synth.py), {len(cold['queries'])} "
        "of its known-item queries, each tree with its own index (`--index`); the baselines were not built at "
        f"this size. {_load_words(cold)} Most of a fts command here is the freshness stat walk of the "
        "100,000 files (its cost: Serving agents); `--no-freshness` skips it and says so.",
        "",
        *_table(("command", "median s", "CPU s (median)", "x numpy", "target", "target (x numpy)", ""), rows),
        "",
    ]


def chunk_overlap_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Chunk overlap 60 vs 0 on SciFact dev: quality per mode and embedding cost (bench_overlap)."""
    data = results.get("chunk_overlap")
    if not data:
        return []
    runs = data["runs"]
    modes = list(runs[0]["dev"])
    rows = [
        (
            str(r["overlap"]),
            str(r["chunks"]),
            str(r["tokens_fed"]),
            _f(r["chunks_per_s"], 1),
            *(_f(r["dev"][m]["ndcg@10"], 4) for m in modes),
        )
        for r in runs
    ]
    return [
        "## Chunk overlap",
        "",
        _run_line(data),
        "",
        "SciFact dev, every chunk embedded with the MiniLM fixture (bench/bench_overlap.py); tokens fed are the "
        "model's work (independent of load), chunks/s the wall rate on the shared machine. The rule of issue #14: "
        "no overlap only if semantic and auto nDCG@10 stay within 0.005.",
        "",
        *_table(("overlap (chars)", "chunks", "tokens fed", "chunks/s", *(f"{m} nDCG@10" for m in modes)), rows),
        "",
    ]


def embed_cost_section(results: dict[str, dict[str, Any]]) -> list[str]:
    """Model-input tokens of a full --embed before and after dedupe + length ordering (bench_embed_cost)."""
    data = results.get("embed_cost")
    if not data:
        return []
    rows = [
        (
            name,
            str(c["chunks"]),
            str(c["distinct_texts"]),
            str(c["tokens"]),
            str(c["fed_before"]),
            f"{c['padding_before_pct']:.1f}%",
            str(c["fed_sorted"]),
            str(c["fed_after"]),
            _f(c["after_over_before"]),
        )
        for name, c in data["corpora"].items()
    ]
    return [
        "## Embedding cost of a full `--embed`",
        "",
        _run_line(data),
        "",
        f"Model-input tokens ({data['model']} tokenizer, capped at 256) that a full `--embed` feeds the model, "
        "padding included (bench/bench_embed_cost.py): a count, so the load of the machine does not move it. "
        "`before`: batches of 2,048 chunks sorted by length in steps of 128; `sorted`: each batch sorted as a "
        "whole; `after`: identical passage texts embedded once per call, each batch sorted as a whole. The "
        "model's time follows these tokens (for these lengths, about linearly).",
        "",
        *_table(
            (
                "corpus",
                "chunks",
                "distinct texts",
                "tokens",
                "fed before",
                "padding",
                "fed sorted",
                "fed after",
                "after/before",
            ),
            rows,
        ),
        "",
        *_identity_lines(data.get("identity_sample")),
        *_threads_lines(data.get("threads_sample")),
        *_full_lines(data.get("full_embed")),
    ]


def _full_lines(full: dict[str, Any] | None) -> list[str]:
    if not full:
        return []
    rows = [
        (
            name,
            str(f["chunks"]),
            str(f["embedded"]),
            str(f["reused"]),
            ("~" if f.get("projected") else "") + _f(f["wall_s"] / 60, 1),
            _f(f["chunks_per_s"], 1),
            "projected" if f.get("projected") else "yes" if f["complete"] else "no",
        )
        for name, f in full.items()
    ]
    notes = sorted({f["measured"] for f in full.values() if f.get("measured")})
    return [
        "A whole `--embed` with the MiniLM fixture (fp32, 2 threads). `before` is main when issue #14 was filed "
        "(340614e: no dedupe, batches sorted in steps of 128), `after` today's code. The PowerShell `before` "
        "figure is projected from the model's work (tokens fed), not run: it takes over an hour.",
        "",
        *_table(("corpus", "chunks", "given a vector", "of those reused", "wall min", "chunks/s", "complete"), rows),
        "",
        *(f"- {n}" for n in notes),
        "",
    ]


def _threads_lines(sample: dict[str, Any] | None) -> list[str]:
    if not sample:
        return []
    return [
        f"onnxruntime intra-op threads on 2 cores ({sample['chunks']} {sample['corpus']} chunks, {sample['rounds']} "
        f"alternating rounds, median): 1 thread {sample['threads_1_passages_per_s']} passages/s, 2 threads "
        f"{sample['threads_2_passages_per_s']} passages/s (loaded machine).",
        "",
    ]


def _identity_lines(sample: dict[str, Any] | None) -> list[str]:
    if not sample:
        return []
    return [
        f"Quality: {sample['chunks']} {sample['corpus']} chunks embedded both ways (index order in steps of 128, "
        f"and longest first across all) give vectors that differ by at most {sample['max_abs_diff']:g} "
        "(element-wise), so the rankings and SciFact nDCG@10 of every dense mode are unchanged; PowerShell's "
        "copies get their text's vector by construction.",
        "",
    ]


def plots_section(results_dir: Path, out_path: Path) -> list[str]:
    """The PNGs present, linked relative to the page."""
    out = ["## Plots", ""]
    for name, caption in (
        ("latency_vs_size.png", "p50 latency vs vault size (log-log)"),
        ("build_vs_size.png", "cold build time vs vault size (log-log)"),
        ("quality_ndcg.png", "nDCG@10 per mode and baseline"),
    ):
        png = results_dir / name
        if png.is_file():
            rel = Path(_relpath(png, out_path.parent))
            out += [f"![{caption}]({rel.as_posix()})", ""]
    return out if len(out) > 2 else []


def _relpath(target: Path, start: Path) -> str:
    import os

    return os.path.relpath(target.resolve(), start.resolve())


def render(results: dict[str, dict[str, Any]], results_dir: Path = RESULTS_DIR, out_path: Path = DOC) -> str:
    """The whole page as Markdown."""
    parts = [
        TITLE,
        *summary_section(results, target_rows(results)),
        INTRO,
        *reproduce_section(),
        *build_section(results),
        *git_section(results),
        *quality_section(results),
        *latency_section(results),
        *serve_section(results),
        *coldstart_section(results),
        *coldstart_100k_section(results),
        *scale_section(results),
        *embed_section(results),
        *embed_cost_section(results),
        *chunk_overlap_section(results),
        *lang_section(results),
        *vector_norm_section(results),
        *edit_section(results),
        *edit_section(results, "edit_step", STEP_HEADING, STEP_INTRO),
        *watch_section(results),
        *edit_section(results, "edit_stop33", STOP33_HEADING, STOP33_INTRO),
        *edit_section(results, "edit_stop34", STOP34_HEADING, STOP34_INTRO),
        *staged_section(results),
        *edit_section(results, "edit_stop34_100k", STOP34_100K_HEADING, STOP34_100K_INTRO),
        *gather_section(results),
        *tombstone_section(results),
        *merge_section(results),
        *quality_segments_section(results),
        *edit_100k_section(results),
        *link_edit_section(results),
        *watch_split_section(results),
        *watch_split_section(results, "watch_s37", WATCH_VIEW_NOTE),
        *watch_split_section(results, "watch_s38", WATCH_KNOWN_NOTE, " on what the watcher knew"),
        *watch_split_section(results, "watch_s39", WATCH_READER_NOTE, " and a reader's switch"),
        *size_section(results),
        *new_process_section(results),
        *fts_warm_section(results),
        *cold_ab_section(results),
        *plots_section(results_dir, out_path),
        "## Appendix: every target, the machine, the last suite run",
        "",
        "The bookkeeping: each target the issues set, with its measured value and PASS/MISS.",
        "",
        *machine_section(results),
        *suite_section(results),
        *targets_section(results),
        *test_suite_section(results),
    ]
    return "\n".join(parts).rstrip() + "\n"


def write_report(results_dir: Path = RESULTS_DIR, out_path: Path = DOC) -> Path:
    """Render from ``results_dir`` and write ``out_path``."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(render(load_results(results_dir), results_dir, out_path), encoding="utf-8")
    return out_path


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: regenerate the page."""
    parser = argparse.ArgumentParser(description="Render docs/benchmarks.md from bench/results/*.json.")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--out", type=Path, default=DOC)
    args = parser.parse_args(argv)
    print(f"wrote {write_report(args.results, args.out)}")


if __name__ == "__main__":
    main()
