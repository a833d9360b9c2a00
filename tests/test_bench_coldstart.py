"""bench/bench_coldstart.py and its section of docs/benchmarks.md (the bench itself is long: only its
parts run here, on trivial commands)."""

from __future__ import annotations

import sys

import numpy as np

from bench import bench_coldstart, report


def test_engines_run_interleaved_query_by_query(tmp_path) -> None:
    log = tmp_path / "log"
    engines = {
        name: (lambda q, n=name: [sys.executable, "-c", f"open({str(log)!r}, 'a').write({n!r} + ' ' + {q!r} + '\\n')"])
        for name in ("a", "b")
    }
    result = bench_coldstart.interleaved(engines, ["q1", "q2", "q3"])
    assert set(result) == {"a", "b"} and all(len(r["samples_s"]) == 3 for r in result.values())
    lines = log.read_text().splitlines()
    assert lines == ["a q1", "b q1", "a q1", "b q1", "a q2", "b q2", "a q3", "b q3"]  # warm-ups, then round-robin


def test_import_probe_runs_the_given_tree() -> None:
    figures = bench_coldstart.import_time_ms(bench_coldstart.REPO_ROOT, runs=2)
    assert len(figures["samples_ms"]) == 2 and figures["min_ms"] <= figures["median_ms"]


def test_coldstart_section_reports_each_engine_beside_its_target() -> None:
    machine = {"date": "2026-12-01", "load_avg_1m": 9.0}
    engines = {
        "python -c 'import numpy'": {"median_s": 0.13},
        "vaultsearch fts (after)": {"median_s": 0.2, "cpu_median_s": 0.09},
        "vaultsearch hybrid (after)": {"median_s": 0.3},
        "tantivy-py": {"median_s": 0.04},
    }
    cold = {
        "machine": machine,
        "engines": engines,
        "queries": ["q"] * 10,
        "notes": 3088,
        "import_core_searcher": {"after": {"median_ms": 120.0, "min_ms": 88.0}},
    }
    text = "\n".join(report.coldstart_section({"coldstart": cold}))
    # judged as multiples of the run's `import numpy` process: 0.2 / 0.13 against 0.15 / 0.065
    assert "| vaultsearch fts (after) | 0.200 | 0.090 | 1.54 | <= 0.15 s | <= 2.31 | PASS |" in text
    assert "| vaultsearch hybrid (after) | 0.300 | - | 2.31 | <= 0.20 s | <= 3.08 | PASS |" in text
    assert "| after | 120.0 | 0.92 | <= 90 ms | <= 1.38 | PASS |" in text
    assert "shared and loaded" in text
    slow = {**cold, "engines": {**engines, "vaultsearch fts (after)": {"median_s": 0.31}}}
    assert "| vaultsearch fts (after) | 0.310 | - | 2.38 | <= 0.15 s | <= 2.31 | MISS |" in "\n".join(
        report.coldstart_section({"coldstart": slow})
    )
    assert report.coldstart_section({})[2].startswith("_not run")


def test_embed_cost_counts_padding_and_copies() -> None:
    from bench import bench_embed_cost

    texts = ["a", "bb", "a", "cccc", "bb", "a"]
    lengths = np.array([2, 3, 2, 5, 3, 2])
    figures = bench_embed_cost.cost(texts, lengths, publish_every=3)
    assert (figures["chunks"], figures["distinct_texts"], figures["tokens"]) == (6, 3, 17)
    # before: batches [a bb a] [cccc bb a], each one model batch padded to its longest: 3*3 + 5*3
    assert figures["fed_before"] == figures["fed_sorted"] == 24
    # after: the first occurrences only (a, bb | cccc): 3*2 + 5*1
    assert figures["fed_after"] == 11


def test_embed_cost_section_renders_each_corpus() -> None:
    data = {
        "machine": {"date": "2026-12-01", "load_avg_1m": 9.0},
        "model": "m",
        "corpora": {
            "powershell": {
                "chunks": 10,
                "distinct_texts": 4,
                "tokens": 100,
                "fed_before": 120,
                "fed_sorted": 102,
                "fed_after": 40,
                "padding_before_pct": 16.67,
                "after_over_before": 0.3333,
            }
        },
    }
    text = "\n".join(report.embed_cost_section({"embed_cost": data}))
    assert "| powershell | 10 | 4 | 100 | 120 | 16.7% | 102 | 40 | 0.33 |" in text
    data["identity_sample"] = {"corpus": "scifact", "chunks": 8, "max_abs_diff": 0.0, "before_s": 2.0, "after_s": 1.5}
    assert "differ by at most 0 (element-wise)" in "\n".join(report.embed_cost_section({"embed_cost": data}))


def test_every_figure_is_also_a_multiple_of_the_numpy_floor() -> None:
    result = {
        "engines": {"python -c 'import numpy'": {"median_s": 0.2}, "vaultsearch fts (after)": {"median_s": 0.45}},
        "import_core_searcher": {"after": {"median_ms": 150.0}},
    }
    out = bench_coldstart.with_ratios(result)
    assert out["engines"]["vaultsearch fts (after)"]["x_numpy"] == 2.25
    assert out["engines"]["python -c 'import numpy'"]["x_numpy"] == 1.0
    assert out["import_core_searcher"]["after"]["x_numpy"] == 0.75


def test_the_100k_and_overlap_sections_render_their_runs() -> None:
    machine = {"date": "2026-12-02", "load_avg_1m": 8.0}
    cold = {
        "machine": machine,
        "notes": 100000,
        "queries": ["q"] * 10,
        "engines": {
            "python -c 'import numpy'": {"median_s": 0.325, "x_numpy": 1.0},
            "vaultsearch fts (after)": {"median_s": 1.04, "cpu_median_s": 0.55, "x_numpy": 3.2},
        },
    }
    text = "\n".join(report.coldstart_100k_section({"coldstart_100k": cold}))
    assert "| vaultsearch fts (after) | 1.040 | 0.550 | 3.20 | <= 1.00 s | <= 15.38 | PASS |" in text
    run = {"overlap": 60, "chunks": 10, "tokens_fed": 100, "chunks_per_s": 3.0, "dev": {"semantic": {"ndcg@10": 0.7}}}
    overlap = {"machine": machine, "runs": [run, {**run, "overlap": 0, "chunks": 9}]}
    text = "\n".join(report.chunk_overlap_section({"chunk_overlap": overlap}))
    assert "| 0 | 9 | 100 | 3.0 | 0.7000 |" in text
    assert report.coldstart_100k_section({}) == [] and report.chunk_overlap_section({}) == []
