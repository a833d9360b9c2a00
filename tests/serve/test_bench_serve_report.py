"""The serving section of docs/benchmarks.md: rendered from bench_serve's JSON, targets judged."""

from __future__ import annotations

from pathlib import Path

from bench import bench_serve, report

LAT = {"p50_ms": 4.0, "p95_ms": 30.0, "mean_ms": 5.0, "n": 300}
FRESH = {"notes": 3088, "walk_every_call": LAT, "window_2s": LAT}


def _serve_json(watch: bool) -> dict:
    data = {
        "machine": {
            "date": "2026-12-01",
            "load_avg_1m": 1.0,
            "cpu_model": "cpu",
            "cores": 2,
            "ram_gib": 8,
            "python": "3.11",
            "sqlite_version": "3.40",
            "platform": "linux",
        },
        "queries": 150,
        "rounds": 2,
        "in_process": LAT,
        "in_process_no_freshness": LAT,
        "stdio": LAT,
        "http": LAT,
        "freshness": {"powershell": FRESH},
        "watch": {
            "notes": 3088,
            "edits": 20,
            "poll_ms": 20.0,
            "edit_to_searchable": {**LAT, "p95_ms": 1500.0},
            "build_seconds": LAT,
        }
        if watch
        else None,
    }
    data["targets"] = bench_serve._judge(data)
    return data


def test_targets_are_judged_and_an_unrun_watch_says_so():
    judged = bench_serve._judge(_serve_json(watch=True))
    assert judged["stdio search fts p50"]["status"] == "PASS" and judged["stdio search fts p95"]["status"] == "MISS"
    assert judged["--watch edit-to-searchable p95 (PowerShell)"]["status"] == "MISS"  # 1.5 s against 0.5 s
    assert bench_serve._judge(_serve_json(watch=False))["--watch edit-to-searchable p95 (PowerShell)"]["status"] == (
        "not run"
    )


def test_the_report_has_a_serving_section_and_its_targets(tmp_path: Path):
    page = report.render({"serve": _serve_json(watch=True)}, tmp_path, tmp_path / "b.md")
    assert "## Serving agents" in page and "MCP stdio" in page and "edit-to-searchable p50 0.00 s, p95 1.50 s" in page
    assert "| serve | stdio search fts p95 <= 25 ms | 30.0 ms | MISS |" in page
    assert "No `bench/results/serve.json` yet" in report.render({}, tmp_path, tmp_path / "b.md")


def test_the_scale_figures_are_judged_and_shown():
    data = _serve_json(watch=True)
    data["freshness"]["synthetic_100k"] = {
        **FRESH,
        "notes": 100_000,
        "rows_load_ms": 500.0,
        "walk": {"fast": {**LAT, "p50_ms": 300.0}, "scan_vault": {**LAT, "p50_ms": 600.0}},
        "paced_10_per_s": {**LAT, "walks": 15, "over_budget": 0},
        "watch_in_process": LAT,
        "watch_other_process": LAT,
    }
    data["watch_scale"] = {
        "notes": 100_000,
        "edits": 21,
        "ops": {"edit": 15, "add": 3, "delete": 3},
        "poll_ms": 20.0,
        "edit_to_searchable": {**LAT, "p95_ms": 60_000.0},
        "by_op": {"edit": LAT, "add": LAT, "delete": LAT},
        "build_seconds": LAT,
    }
    data["incremental_scale"] = {
        "notes": 100_000,
        "seconds": 50.0,
        "phases": {"term-major: BM25F postings (compute)": 25.0},
        "active_pointer_moved_at_s": 45.0,
    }
    judged = bench_serve._judge(data)
    assert judged["--watch edit-to-searchable p95 (100k synthetic)"] == {
        "target": "<= 1 s",
        "value": 60.0,
        "status": "MISS",
    }
    data["targets"] = judged
    page = "\n".join(report.serve_section({"serve": data}))
    assert (
        "| synthetic_100k (100,000 notes) | watcher in another process (watch.json) | 4.000 | 30.000 | 5.000 |" in page
    )
    assert "defaults, 10 searches/s (15 walks)" in page and "300.0 ms per walk" in page and "600.0 ms" in page
    assert "15 edits, 3 adds, 3 deletes" in page and "p95 60.00 s" in page
    assert "| term-major: BM25F postings (compute) | 25.00 | 50% |" in page
