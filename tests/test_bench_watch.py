"""bench/bench_watch.py's pure helpers (words, percentiles, byte counts, the watcher's lines) and its
section of docs/benchmarks.md (bench/report_edit.watch_section). The bench itself is not run here."""

from __future__ import annotations

import json

import pytest

from bench import bench_watch
from bench.report_edit import watch_section


def test_markers_are_distinct_letter_only_words() -> None:
    words = [bench_watch.marker(i) for i in range(800)]
    assert len(set(words)) == len(words)
    assert all(w.isalpha() and w.islower() and w.startswith("zqxedit") for w in words)
    with pytest.raises(ValueError):
        bench_watch.marker(-1)


def test_seconds_stats_interpolates_percentiles_and_keeps_the_max() -> None:
    stats = bench_watch.seconds_stats([float(i) for i in range(1, 21)])  # 1..20 s
    assert stats == {"p50_s": 10.5, "p95_s": 19.05, "max_s": 20.0, "mean_s": 10.5, "n": 20}
    assert bench_watch.seconds_stats([2.0])["p95_s"] == 2.0
    with pytest.raises(ValueError):
        bench_watch.seconds_stats([])


def test_bytes_stats_needs_a_figure_for_every_edit() -> None:
    assert bench_watch.bytes_stats([10, 30, 20]) == {"median": 20, "max": 30, "n": 3}
    assert bench_watch.bytes_stats([10, None]) is None
    assert bench_watch.bytes_stats([]) is None


def test_io_delta_subtracts_counters_present_in_both_readings() -> None:
    before = {"write_bytes": 4096, "wchar": 100, "rchar": 5}
    after = {"write_bytes": 12288, "wchar": 350, "rchar": 9}
    assert bench_watch.io_delta(before, after) == {"write_bytes": 8192, "wchar": 250}
    assert bench_watch.io_delta(None, after) == {"write_bytes": None, "wchar": None}
    assert bench_watch.io_delta({"wchar": 1}, after) == {"write_bytes": None, "wchar": 349}


def test_a_watch_line_is_parsed_and_covers_only_the_notes_it_built() -> None:
    line = json.dumps({"ok": True, "changed_paths": ["a/b.md"], "seconds": 1.5, "generation_id": "g1"})
    outcome = bench_watch.parse_outcome(line)
    assert bench_watch.covers(outcome, "a/b.md") and not bench_watch.covers(outcome, "a/c.md")
    assert not bench_watch.covers({**outcome, "ok": False}, "a/b.md")
    for bad in ("[1, 2]", '{"seconds": 1}'):
        with pytest.raises(ValueError):
            bench_watch.parse_outcome(bad)


def test_reflected_wants_the_note_as_a_hit_for_the_word_itself() -> None:
    assert bench_watch.reflected(["x.md", "n.md"], (), "n.md")
    assert not bench_watch.reflected(["x.md"], (), "n.md")
    assert not bench_watch.reflected(["n.md"], ({"word": "zqxeditb", "kind": "typo"},), "n.md")


def test_watch_section_renders_one_row_per_corpus() -> None:
    corpus = {
        "notes": 3088,
        "markdown_bytes": 33 * 2**20,
        "edit_to_searchable": {"p50_s": 2.1, "p95_s": 2.456, "max_s": 3.0, "mean_s": 2.2, "n": 20},
        "build_seconds": {"p50_s": 1.9, "p95_s": 2.2, "max_s": 2.5, "mean_s": 2.0, "n": 20},
        "walk_bytes": {"median": 150 * 2**20, "max": 151 * 2**20, "n": 20},
        "proc_write_bytes": None,
        "load_avg_1m": {"before": 2.1, "after": 2.4},
    }
    data = {
        "machine": {"date": "2026-12-06", "cores": 2},
        "load_avg_before": [2.0, 1, 1],
        "load_avg_after": [2.5, 1, 1],
        "poll_ms": 20.0,
        "corpora": {"powershell": corpus},
    }
    lines = watch_section({"watch": data})
    row = next(line for line in lines if line.startswith("| powershell"))
    assert row == "| powershell | 3,088 | 33.0 MiB | 20 | 2.10 s | 2.46 s | 3.00 s | 1.90 s | 150.0 MiB | - |"
    assert any(
        "load average (1 min) 2.0 before and 2.5 after (per corpus, before-after: powershell 2.1-2.4)" in line
        for line in lines
    )
    assert watch_section({}) == [] and watch_section({"watch": {"corpora": {}}}) == []


def test_an_edit_is_split_into_event_build_after_build_and_the_finding_search() -> None:
    from bench.bench_watch import edit_split

    build = {"at": 100.05, "seconds": 0.5}
    got = edit_split(100.0, 0.7, build, 0.12)
    assert got == {"event_to_build_s": 0.05, "after_build_s": 0.15, "last_search_s": 0.12}
    early = edit_split(100.0, 0.5, build, 0.1)  # the reader switched before the build's retention step ended
    assert early["after_build_s"] == -0.05


def test_the_watchers_memory_is_read_from_its_proc_status() -> None:
    status = "Name:\tpython\nVmHWM:\t  812345 kB\nVmRSS:\t  402100 kB\nThreads:\t3\n"
    assert bench_watch.parse_vm_status(status) == {"rss": 402100, "peak_rss": 812345}
    assert bench_watch.parse_vm_status("Name:\tpython\n") == {}
