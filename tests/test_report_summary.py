"""bench/report_summary.py: the first screen of docs/benchmarks.md says what the index costs on disk and per
edit from the latest edit bench, not from issue 29's baseline once a later run exists."""

from __future__ import annotations

from bench.report_summary import size_line


def _corpus(ratio: float, seconds: float, written: int) -> dict:
    mine = {"index_over_markdown": ratio, "median_wall_seconds": seconds, "median_walk_bytes": written}
    theirs = {"index_over_markdown": 0.48, "median_wall_seconds": 0.066, "median_walk_bytes": 5 * 1024}
    return {"vaultsearch": mine, "tantivy": theirs}


def test_the_size_line_takes_the_latest_edit_run_over_the_baseline() -> None:
    baseline = {"edit": {"corpora": {"dendron": _corpus(15.0, 2.65, 16 * 2**20)}}}
    old = "\n".join(size_line(baseline))
    assert "dendron 15.0x (tantivy 0.48x)" in old and "dendron 2.6 s and 16 MiB written" in old
    assert "work in progress" in old
    latest = {"corpora": {"dendron": _corpus(2.41, 0.85, 100 * 1024)}, "machine": {"date": "2026-12-07T21:00:00"}}
    now = "\n".join(size_line({**baseline, "edit_now": latest}))
    assert "dendron 2.4x (tantivy 0.48x)" in now and "dendron 0.8 s and 100 KiB written" in now
    assert "15.0x" not in now and "work in progress" not in now and "measured 2026-12-07" in now


def test_without_an_edit_run_the_size_line_falls_back_to_the_build_stage() -> None:
    build = {"build": {"corpora": {"powershell": {"index_dir_bytes": 40 * 2**20, "vault_bytes": 32 * 2**20}}}}
    assert "powershell 1.2x" in "\n".join(size_line(build))
    assert size_line({}) == []


def test_the_speed_rows_say_how_soon_an_edit_is_searchable_through_a_watching_server() -> None:
    from bench.report_summary import speed_rows

    serve = {"serve": {"watch_scale": {"notes": 100_000, "edit_to_searchable": {"p95_ms": 772.8}}}}
    assert "| an edit searchable through `serve --watch` (100,000 notes, p95) | 772.8 ms | - | - |" in speed_rows(serve)
    assert not any("serve --watch" in row for row in speed_rows({}))
