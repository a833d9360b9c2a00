"""The benchmark suite's own logic: target judging, progress parsing, fair timing, the dense
capability check, the generated report, the plots and a small end-to-end search bench.

The benchmark numbers themselves are not asserted (no timed assertions); what is asserted
is that the suite reports what happened: PASS/MISS from the numbers, failures with their
reason, 'not run' with why, and never a silent drop.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import bench_scale, bench_search, plots, report
from bench.common import latency_stats, time_interleaved
from bench.report_lang import instruction_rows, lang_target_rows
from bench.synth import TextPool, cached_vault
from core.errors import DenseIndexUnavailableError

MACHINE = {
    "cpu_model": "Test CPU",
    "cores": 2,
    "ram_gib": 8.0,
    "python": "3.11.7",
    "sqlite_version": "3.40.1",
    "platform": "Linux",
    "load_avg_1m": 0.5,
    "date": "2026-01-01T00:00:00+00:00",
}


# ---------------------------------------------------------------- fixtures: result JSON as the stages write it


def _size_result(n: int, *, fts_p50: float, hybrid_p50: float, build_s: float, peak: float) -> dict[str, Any]:
    modes = {
        m: {"p50_ms": 1.0, "p95_ms": 2.0, "mean_ms": 1.2, "n": 5, "actual_mode": m, "fallback_reason": None}
        for m in ("fts", "vector", "hybrid", "graph_assisted", "auto")
    }
    modes["fts"]["p50_ms"], modes["hybrid"]["p50_ms"] = fts_p50, hybrid_p50
    base = {"build_seconds": 0.5, "p50_ms": 0.3, "p95_ms": 0.6, "mean_ms": 0.4, "n": 5, "peak_rss_mb": 90.0}
    return {
        "notes": n,
        "synth": {"bytes": 1000 * n},
        "index_dir": f"/nonexistent/index-{n}",
        "build": {"finished": True, "wall_seconds": build_s, "chunks": 3 * n, "peak_rss_mb": 100.0},
        "active_generation_bytes": 5000 * n,
        "index_dir_bytes": 6000 * n,
        "search": {"modes": modes, "peak_rss_mb": peak, "resolve_median_ms": 0.03, "queries": 5},
        "baselines": {"bare_fts5": {**base, "db_bytes": 2000 * n}, "bm25s": dict(base)},
    }


def _scale_json(sizes: dict[str, Any]) -> dict[str, Any]:
    return {
        "machine": MACHINE,
        "seed": 0,
        "limit": 10,
        "queries": 5,
        "build_budget_seconds": 1200.0,
        "modes": ["fts", "vector", "hybrid", "graph_assisted", "auto"],
        "sizes": sizes,
        "targets": bench_scale.judge_targets(sizes),
        "profiles": {},
    }


def _search_json() -> dict[str, Any]:
    ok = {
        "n": 3,
        "ndcg": 0.5,
        "recall": 0.9,
        "mrr": 0.45,
        "precision": 0.1,
        "latency_p50_ms": 1.0,
        "latency_p95_ms": 2.0,
        "error_reason": None,
        "error_message": None,
        "error_query_id": None,
        "failures": None,
    }
    failed = {
        **{k: None for k in ok},
        "n": 0,
        "error_reason": "dense_index_unavailable",
        "error_message": "no usable dense vectors",
        "error_query_id": "q1",
    }
    modes = [
        {**ok, "mode": "fts"},
        {**failed, "mode": "semantic"},
        {**ok, "mode": "auto"},
        {**ok, "mode": "bare_fts5", "ndcg": 0.4},
        {**ok, "mode": "bm25s", "ndcg": 0.42},
    ]
    probe = {
        "fts": {"ran": True, "actual_mode": "fts", "retrieval_contract": "fts", "fallback_reason": None},
        "semantic": {
            "ran": False,
            "error_reason": "dense_index_unavailable",
            "error_message": "x",
            "fails_closed": True,
        },
        "auto": {
            "ran": True,
            "actual_mode": "fts",
            "retrieval_contract": "fts_fallback",
            "fallback_reason": "dense_index_unavailable",
        },
    }
    lat = {
        name: {"p50_ms": 2.0, "p95_ms": 4.0, "mean_ms": 2.5, "n": 6, "p50_vs_bare_fts5": 4.0, "p50_vs_bm25s": 8.0}
        for name in ("fts", "auto")
    }
    lat.update(
        {
            "bare_fts5": {"p50_ms": 0.5, "p95_ms": 1.0, "mean_ms": 0.6, "n": 6},
            "bm25s": {"p50_ms": 0.25, "p95_ms": 0.5, "mean_ms": 0.3, "n": 6},
        }
    )
    corpus = {
        "kind": "test corpus",
        "notes": 10,
        "chunks": 20,
        "modes": probe,
        "build_seconds": {"vaultsearch": 1.0, "bare_fts5": 0.1, "bm25s": 0.2},
        "quality": {"k": 10, "depth": 100, "mrr_k": 10, "n_queries": 4, "n_evaluated": 3, "modes": modes},
        "latency": {"limit": 10, "rounds": 2, "queries": 3, "engines": lat},
        "resolve": {"calls": 1000, "median_ms": 0.04, "p95_ms": 0.06, "target_ms": 1.0, "pass": True},
    }
    return {
        "machine": MACHINE,
        "k": 10,
        "depth": 100,
        "corpora": {"tiny": corpus},
        "dense": {
            "ran": False,
            "not_run_reason": "core.build.builder.build_index cannot embed yet",
            "modes": ["semantic", "reranked", "auto"],
        },
    }


# ---------------------------------------------------------------- targets, progress, sizes


def test_targets_are_judged_only_at_100k_and_from_the_numbers() -> None:
    small = {"1000": _size_result(1000, fts_p50=50.0, hybrid_p50=50.0, build_s=500.0, peak=9000.0)}
    assert {t["status"] for t in bench_scale.judge_targets(small).values()} == {"not judged"}

    big = _size_result(100_000, fts_p50=12.0, hybrid_p50=29.0, build_s=119.0, peak=2000.0)
    judged = bench_scale.judge_targets({"100000": big})
    assert {k: t["status"] for k, t in judged.items()} == {
        "fts_p50": "MISS",
        "hybrid_p50": "PASS",
        "cold_build": "PASS",
        "search_peak_rss": "MISS",
    }
    assert judged["fts_p50"]["value"] == 12.0


def test_an_unfinished_build_is_a_miss_with_a_reason_not_a_number() -> None:
    big = _size_result(100_000, fts_p50=1.0, hybrid_p50=1.0, build_s=1.0, peak=1.0)
    big["build"] = {
        "finished": False,
        "elapsed_seconds": 1200.0,
        "notes_indexed": 40_000,
        "notes_total": 100_000,
        "seconds_per_note": 0.03,
    }
    del big["search"]
    judged = bench_scale.judge_targets({"100000": big})
    assert judged["cold_build"]["status"] == "MISS" and judged["cold_build"]["value"] is None
    assert "did not finish" in judged["cold_build"]["why"]
    assert judged["fts_p50"]["status"] == "MISS"


def test_progress_is_read_from_the_last_tqdm_update() -> None:
    stderr = (
        "indexing:   0%|          | 0/5000 [00:00<?, ?note/s]\r"
        "indexing:  12%|#2        | 600/5000 [00:01<00:08, 500note/s]\r"
        "indexing:  40%|####      | 2000/5000 [00:04<00:06, 480note/s]"
    )
    assert bench_scale.parse_progress(stderr) == (2000, 5000)
    assert bench_scale.parse_progress("Traceback: boom") is None


def test_sizes_accept_k_suffix_and_reject_tiny_vaults() -> None:
    assert bench_scale.parse_sizes("1k, 10000,100k") == [1000, 10000, 100000]
    with pytest.raises(argparse.ArgumentTypeError, match="at least 2 notes"):
        bench_scale.parse_sizes("1")
    with pytest.raises(ValueError):
        bench_scale.parse_sizes("ten")


def test_model_free_modes_exclude_dense_and_reranker_modes() -> None:
    modes = bench_scale.model_free_modes()
    assert "fts" in modes and "hybrid" in modes
    assert "semantic" not in modes and "reranked" not in modes


# ---------------------------------------------------------------- timing helpers


def test_interleaving_shuffles_so_each_engine_goes_first_and_follows_each_other_alike() -> None:
    calls: list[tuple[str, int]] = []
    fns = {name: (lambda item, name=name: calls.append((name, item))) for name in ("a", "b", "c")}
    items = list(range(600))
    samples = time_interleaved(fns, items, warmup=0)
    assert {k: len(v) for k, v in samples.items()} == {"a": 600, "b": 600, "c": 600}
    per_item = [calls[i : i + 3] for i in range(0, len(calls), 3)]
    assert all(
        sorted(n for n, _ in group) == ["a", "b", "c"] and {i for _, i in group} == {item}
        for group, item in zip(per_item, items)
    )  # every engine once per item, in turn
    firsts = Counter(group[0][0] for group in per_item)
    pairs = Counter((x[0], y[0]) for group in per_item for x, y in zip(group, group[1:]))
    assert all(150 <= firsts[n] <= 250 for n in "abc")  # about 200 each
    assert len(pairs) == 6 and all(150 <= c <= 250 for c in pairs.values())  # every ordered pair, about 200


def test_latency_stats_in_milliseconds() -> None:
    stats = latency_stats([0.001, 0.002, 0.003, 0.004, 0.100])
    assert stats["p50_ms"] == pytest.approx(3.0)
    assert stats["n"] == 5 and stats["p95_ms"] > 50


# ---------------------------------------------------------------- dense capability check


def test_dense_section_says_where_dense_scores_come_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_search, "dense_support", lambda: "core.build.embed has no embed_index")
    assert bench_search.dense_section() == {
        "ran": False,
        "not_run_reason": "core.build.embed has no embed_index",
        "modes": ["semantic", "reranked", "auto"],
    }
    monkeypatch.setattr(bench_search, "dense_support", lambda: None)
    assert bench_search.dense_section()["delegated_to"] == "bench.bench_dense"


def test_dense_results_of_bench_dense_replace_the_not_run_line(tmp_path: Path) -> None:
    dev = {
        "fts": {"ndcg@10": 0.70, "recall@100": 0.93, "s_per_query": 0.002},
        "semantic": {"ndcg@10": 0.6996, "recall@100": 0.93, "s_per_query": 0.04},
    }
    dense = {"machine": MACHINE, "model": "MiniLM", "chunks": 100, "dev": dev}
    page = report.render({"search": _search_json(), "dense_quality_scifact": dense}, tmp_path, tmp_path / "b.md")
    assert "| `semantic` | 0.6996 | 0.9300 | 40.0 |" in page
    assert "**not run:" not in page


# ---------------------------------------------------------------- report and plots


def test_report_shows_failures_fallbacks_not_run_rows_and_targets(tmp_path: Path) -> None:
    big = _size_result(100_000, fts_p50=12.0, hybrid_p50=20.0, build_s=100.0, peak=900.0)
    scale = _scale_json(
        {"1000": _size_result(1000, fts_p50=1.0, hybrid_p50=2.0, build_s=1.0, peak=100.0), "100000": big}
    )
    scale["profiles"] = {
        "fts_p50": {
            "profiled_at_notes": 100_000,
            "tool": "cProfile",
            "wall_seconds_profiled": 3.0,
            "by_tottime": [
                {"function": "core/retrieval.py:127(fts_ranking)", "ncalls": 200, "tottime_s": 1.5, "cumtime_s": 2.0}
            ],
            "by_cumtime": [],
        }
    }
    page = report.render({"scale": scale, "search": _search_json()}, tmp_path, tmp_path / "benchmarks.md")

    assert "fails closed: `dense_index_unavailable`" in page
    assert "ran `fts` (`fts_fallback`: `dense_index_unavailable`)" in page
    assert "**not run: core.build.builder.build_index cannot embed yet**" in page
    assert "| scale | fts p50 <= 10 ms at 100,000 notes | 12.0 ms | MISS |" in page
    assert "| scale | hybrid p50 <= 30 ms at 100,000 notes | 20.0 ms | PASS |" in page
    assert "core/retrieval.py:127(fts_ranking)" in page
    assert "./run bench" in page and "python -m bench.run_all" in page
    assert "Test CPU" in page
    semantic_row = next(line for line in page.splitlines() if line.startswith("| `semantic` |"))
    assert "not run" in semantic_row and "0.0" not in semantic_row  # a failed mode is never scored as zero


def test_report_says_which_sections_have_no_results(tmp_path: Path) -> None:
    page = report.render({}, tmp_path, tmp_path / "b.md")
    assert "not run: no bench/results/search.json" in page
    assert "not run: no bench/results/scale.json" in page


def test_plots_are_drawn_from_the_result_files(tmp_path: Path) -> None:
    sizes = {
        str(n): _size_result(n, fts_p50=n / 1000, hybrid_p50=n / 500, build_s=n / 100, peak=100.0)
        for n in (1000, 10_000)
    }
    (tmp_path / "scale.json").write_text(json.dumps(_scale_json(sizes)))
    (tmp_path / "search.json").write_text(json.dumps(_search_json()))
    written = plots.draw_all(tmp_path)
    assert sorted(p.name for p in written) == ["build_vs_size.png", "latency_vs_size.png", "quality_ndcg.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
    assert plots.latency_series(_scale_json(sizes))["fts"] == [(1000, 1.0), (10_000, 10.0)]


# ---------------------------------------------------------------- synthetic vault cache


def _tiny_pool() -> TextPool:
    return TextPool(
        sentences=("Alpha beta gamma delta.", "The quick brown fox jumps."),
        headings=("Intro", "Details"),
        titles=("First note", "Second note"),
        out_degrees=(0, 1, 2),
    )


def test_cached_vault_is_generated_once_and_a_partial_one_is_never_reused(tmp_path: Path) -> None:
    vault, first = cached_vault(tmp_path, 5, seed=1, pool=_tiny_pool())
    assert first["cached"] is False and len(list(vault.rglob("*.md"))) == 5
    again, second = cached_vault(tmp_path, 5, seed=1, pool=_tiny_pool())
    assert again == vault and second["cached"] is True

    (vault.parent / "synth.json").unlink()  # as if generation had been interrupted
    (vault / "d000" / "stray.md").write_text("leftover")
    _vault, third = cached_vault(tmp_path, 5, seed=1, pool=_tiny_pool())
    assert third["cached"] is False and len(list(vault.rglob("*.md"))) == 5


# ---------------------------------------------------------------- end to end on a tiny vault


def test_search_bench_scores_modes_and_baselines_and_keeps_failed_modes(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    notes = {
        "pool.md": ("Connection pooling", "Postgres connection pool sizing and timeouts."),
        "cats.md": ("Cats", "Cats sleep most of the day and purr."),
        "deploy.md": ("Deploy checklist", "Steps to deploy the service safely on Fridays."),
    }
    for name, (title, body) in notes.items():
        (vault / name).write_text(f"---\ntitle: {title}\n---\n{body}\n")
    (tmp_path / "q.jsonl").write_text('{"_id": "q1", "text": "postgres pool"}\n{"_id": "q2", "text": "deploy steps"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tpool.md\t1\nq2\tdeploy.md\t1\n")
    corpus = bench_search.Corpus(vault, tmp_path / "q.jsonl", tmp_path / "qrels.tsv", "tiny")

    result = bench_search.bench_corpus("tiny", corpus, tmp_path / "work")

    by_mode = {m["mode"]: m for m in result["quality"]["modes"]}
    assert set(by_mode) >= {"fts", "hybrid", "semantic", "reranked", "auto", "bare_fts5", "bm25s"}
    assert by_mode["semantic"]["error_reason"] == DenseIndexUnavailableError.reason
    assert by_mode["semantic"]["ndcg"] is None
    assert by_mode["fts"]["ndcg"] == pytest.approx(1.0) and by_mode["bare_fts5"]["ndcg"] == pytest.approx(1.0)
    assert result["modes"]["auto"]["fallback_reason"] == DenseIndexUnavailableError.reason
    assert "semantic" not in result["latency"]["engines"]  # fails closed: no latency to report
    assert {"fts", "bare_fts5", "bm25s"} <= set(result["latency"]["engines"])
    assert result["latency"]["engines"]["fts"]["n"] == 2 * bench_search.LATENCY_ROUNDS
    assert result["resolve"]["calls"] == bench_search.RESOLVE_CALLS


def test_a_child_phase_reports_its_own_peak_memory_not_its_parents() -> None:
    """ru_maxrss survives fork+exec on Linux; the phases must not report the parent's size."""
    import subprocess
    import sys

    from bench.common import REPO_ROOT

    ballast = bytearray(300 * 2**20)  # the parent holds 300 MiB while the child starts
    ballast[::4096] = b"x" * len(ballast[::4096])
    out = subprocess.run(
        [sys.executable, "-c", "from bench.common import peak_rss_mb; print(peak_rss_mb())"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    del ballast
    assert float(out.stdout) < 200.0


def test_memory_and_slowest_mode_profiles_are_rendered_with_their_labels() -> None:
    memory = {
        "profiled_at_notes": 100_000,
        "tool": "tracemalloc",
        "traced_peak_mib": 3000.0,
        "steps": [
            {
                "step": "first `fts` query",
                "traced_peak_mib": 3000.0,
                "held_after_mib": 600.0,
                "process_peak_rss_mib": 3500.0,
            }
        ],
        "by_size": [{"where": "core/sparse.py:79", "mib": 393.9, "blocks": 5}],
    }
    lines = "\n".join(report.profile_lines("search_peak_rss", memory))
    assert "| first `fts` query | 3000 | 600 | 3500 |" in lines and "`core/sparse.py:79`" in lines
    slow = {
        "profiled_at_notes": 100_000,
        "tool": "cProfile",
        "wall_seconds_profiled": 9.0,
        "queries": 50,
        "by_tottime": [],
        "by_cumtime": [],
    }
    assert "the slowest mode, `graph_assisted` (no target" in "\n".join(
        report.profile_lines("slowest_mode_graph_assisted", slow)
    )


def test_a_build_over_its_budget_is_stopped_and_reported_unfinished(tmp_path: Path) -> None:
    vault, _ = cached_vault(tmp_path, 50, seed=3, pool=_tiny_pool())
    result = bench_scale.run_build(vault, tmp_path / "index", budget_s=0.05)
    assert result["finished"] is False
    assert result["budget_seconds"] == 0.05 and result["elapsed_seconds"] < 30
    assert "killed at the time budget" in result["note"]


def test_the_targets_table_judges_the_search_targets() -> None:
    search = _search_json()
    corpus = search["corpora"].pop("tiny")
    corpus["quality"]["modes"] += [{**corpus["quality"]["modes"][0], "mode": "hybrid", "ndcg": 0.49}]
    corpus["latency"]["engines"]["hybrid"] = {"p50_ms": 4.0, "p95_ms": 6.0, "mean_ms": 4.2, "n": 6}
    search["corpora"]["scifact"] = corpus  # fts 0.5, hybrid 0.49, fts p50 2.0 ms
    rows = {target: (measured, status) for _, target, measured, status in report.target_rows({"search": search})}
    assert rows["fts nDCG@10 >= 0.69 (scifact)"] == ("0.5000", "MISS")
    assert rows["hybrid nDCG@10 >= fts (scifact)"] == ("0.4900 vs 0.5000", "MISS")
    assert rows["fts p50 <= 2 ms (scifact, warm, limit=10)"] == ("2.00 ms", "PASS")  # at the ceiling passes
    assert rows["hybrid p50 <= 5 ms (scifact, warm, limit=10)"] == ("4.00 ms", "PASS")


def test_the_build_floor_fills_notes_fts_exactly_as_the_real_build_does(tmp_path: Path) -> None:
    """The floor is only a floor if its FTS5 work is the real build's: same rows, same texts."""
    import shutil
    import sqlite3

    from bench import build_floor
    from core import generations as gen
    from core.build.builder import DEFAULT_TOKENIZER, build_index
    from core.index.tables.meta import get_meta

    vault = shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "vault", tmp_path / "vault")
    (vault / "broken.md").write_text("---\ntitle: [unclosed\n---\nbody survives\n", encoding="utf-8")
    build_index(vault, index_dir=tmp_path / "index")
    real = gen.connect_readonly(gen.resolve(gen.layout_for(vault, tmp_path / "index")))
    assert get_meta(real)["tokenizer"] == DEFAULT_TOKENIZER  # the tokenizer the floor uses
    seconds = build_floor.build_floor(vault, tmp_path / "floor.db")
    floor = sqlite3.connect(tmp_path / "floor.db")
    sql = "SELECT note_id, block, start, size FROM note_text ORDER BY note_id"
    assert seconds > 0 and len(floor.execute(sql).fetchall()) >= 20
    assert floor.execute(sql).fetchall() == real.execute(sql).fetchall()
    blocks = "SELECT id, data FROM text_blocks ORDER BY id"
    assert floor.execute(blocks).fetchall() == real.execute(blocks).fetchall()
    query = "SELECT rowid FROM notes_fts WHERE notes_fts MATCH 'survives' ORDER BY rowid"
    assert floor.execute(query).fetchall() == real.execute(query).fetchall() != []


def test_the_machine_section_skips_a_result_that_describes_its_machine_in_words() -> None:
    from bench import report

    machine = {"cores": 2, "cpu_model": "X", "ram_gib": 1, "python": "3", "sqlite_version": "3", "platform": "p"}
    results = {"a": {"machine": "2 shared cores"}, "b": {"machine": {**machine, "date": "2026-12-02"}}}
    assert "| CPU | X |" in "\n".join(report.machine_section(results))


def test_lang_report_judges_the_build_as_written_and_states_it_without_the_stored_arrays() -> None:
    counted = {
        "how": "callgrind",
        "scifact_fts_per_query": {"pre_lang": 10e6, "now": 12e6},
        "scifact_cold_build": {"pre_lang": 10e9, "now": 15e9},
        "scifact_cold_build_without_stored_arrays": {"now": 12e9},
    }
    rows = {
        target: (measured, status)
        for _, target, measured, status in lang_target_rows({"lang": {"instructions": counted}})
    }
    assert rows["SciFact cold build <= 1.3x before, as instructions (workers=1)"] == ("1.500x", "MISS")
    without = [v for k, v in rows.items() if "without the arrays" in k]
    assert without == [("1.200x", "PASS")]
    text = "\n".join(instruction_rows({"instructions": counted}))
    assert "12.00 G, 1.200x pre_lang" in text and "20.0% of the build" in text
    # a tree that stores no arrays for readers: no such row, and the build is judged as written only
    del counted["scifact_cold_build_without_stored_arrays"]
    assert not [k for _, k, _, _ in lang_target_rows({"lang": {"instructions": counted}}) if "without the arrays" in k]


def test_the_page_opens_with_a_summary_for_users_and_ends_with_the_bookkeeping(tmp_path: Path) -> None:
    big = _size_result(100_000, fts_p50=12.0, hybrid_p50=20.0, build_s=100.0, peak=900.0)
    scale = _scale_json({"100000": big})
    page = report.render({"scale": scale, "search": _search_json()}, tmp_path, tmp_path / "benchmarks.md")
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings[0] == "## In one screen" and headings[1] == "## How it is measured"
    assert headings.index("## Targets") > headings.index("## Appendix: every target, the machine, the last suite run")
    summary = page.split("## How it is measured")[0]
    assert "| a search at 100,000 notes (p50) | 12.0 ms |" in summary
    assert "- scale: fts p50 <= 10 ms at 100,000 notes (12.0 ms)" in summary  # a MISS is named up front
    row = next(line for line in summary.splitlines() if line.startswith("| tiny"))
    assert row.split("|")[3].strip() == "**0.500**" and row.split("|")[6].strip() == "0.400"
    assert row.split("|")[4].strip() == "-"  # hybrid did not run: a dash, never a made-up score


def test_a_summary_without_results_invents_nothing(tmp_path: Path) -> None:
    summary = report.render({}, tmp_path, tmp_path / "b.md").split("## How it is measured")[0]
    assert "| how fast |" not in summary and "nDCG@10 |" not in summary and "targets pass" not in summary


def test_the_vector_norm_section_shows_each_set_and_the_variant_core_ships(tmp_path: Path) -> None:
    row = {"n": 3, "vector": {"today": 0.5, "v1": 0.6}, "hybrid": {"today": 0.7, "v1": 0.69}}
    norm = {"core_variant": "v1", "variants": {"today": {}, "v1": {}}, "ndcg10": {"c": {"s": row, "check": {}}}}
    page = report.render({"vector_norm": norm}, tmp_path, tmp_path / "b.md")
    assert "| c s | 3 | 0.5000 | 0.6000 (+0.1000) | 0.7000 | 0.6900 (-0.0100) |" in page
    assert "| **v1** (core) | 0.6000 | +0.1000 | 0.6900 | -0.0100 |" in page


def test_the_test_suite_section_gives_wall_time_and_the_memory_the_run_added(tmp_path: Path) -> None:
    run = {"tree": "t", "tests": 10, "extras": "test", "wall_s": 300.0, "max_process_rss_mib": 900.0}
    suite = {
        "command": "c",
        "machine": "m",
        "runs": {"after": {**run, "system_used_peak_mib": 1900, "system_used_idle_mib": 400}},
    }
    page = report.render({"test_suite": suite}, tmp_path, tmp_path / "b.md")
    assert "| after | t | 10 | test | 5.0 min | 900 MiB | 1,500 MiB |" in page
