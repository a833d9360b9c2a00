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
    assert judged["--watch edit-to-searchable p95 (PowerShell)"]["status"] == "PASS"
    assert bench_serve._judge(_serve_json(watch=False))["--watch edit-to-searchable p95 (PowerShell)"]["status"] == (
        "not run"
    )


def test_the_report_has_a_serving_section_and_its_targets(tmp_path: Path):
    page = report.render({"serve": _serve_json(watch=True)}, tmp_path, tmp_path / "b.md")
    assert "## Serving agents" in page and "MCP stdio" in page and "edit-to-searchable p50 0.00 s, p95 1.50 s" in page
    assert "| serve | stdio search fts p95 <= 25 ms | 30.0 ms | MISS |" in page
    assert "No `bench/results/serve.json` yet" in report.render({}, tmp_path, tmp_path / "b.md")
