"""bench_git's report section: PASS/MISS follow the numbers, absent results say 'not run'."""

from __future__ import annotations

from pathlib import Path

from bench import report
from bench.bench_git import render_markdown

MACHINE = {
    "cpu_model": "Test CPU",
    "cores": 2,
    "ram_gib": 8.0,
    "python": "3.11.7",
    "sqlite_version": "3.40.1",
    "platform": "Linux",
    "load_avg_1m": 1.0,
    "date": "2026-01-01T00:00:00+00:00",
}


def _result(cold_ratio: float, uptodate_ms: float) -> dict:
    access = {"read_all_s": 1.0, "dates_s": 0.1, "resolve_head_s": 0.002}
    return {
        "machine": MACHINE,
        "repository": {"notes": 3088, "commits": 1000, "note_edits": 4500},
        "access": {"git_executable": access, "dulwich": access, "pygit2": {"not_run": "not installed: pygit2"}},
        "cold_worktree": {"wall_seconds": 10.0},
        "cold_git": {"wall_seconds": 10.0 * cold_ratio},
        "uptodate": {"watermark_median_ms": uptodate_ms},
        "dates_pass": {"median_s": 0.2},
        "incremental": {"wall_seconds": 1.0, "touched_notes": 154},
        "ratios": {"cold_ratio": cold_ratio, "incremental_ratio": 0.1},
    }


def test_git_targets_are_judged_from_the_numbers() -> None:
    page = "\n".join(render_markdown(_result(1.5, 3.0)))
    assert "| cold build, git vs working tree | 1.50x | <= 1.3x | MISS |" in page
    assert "| up-to-date check (watermark) | 3.0 ms | <= 20 ms | PASS |" in page
    assert "not installed: pygit2" in page


def test_the_report_has_a_git_section_or_says_it_was_not_run(tmp_path: Path) -> None:
    assert "not run: no bench/results/git.json" in report.render({}, tmp_path, tmp_path / "b.md")
    page = report.render({"git": _result(1.0, 25.0)}, tmp_path, tmp_path / "b.md")
    assert "## Git source" in page and "| up-to-date check (watermark) | 25.0 ms | <= 20 ms | MISS |" in page
