"""bench/bench_edit.py's pure helpers and its section of docs/benchmarks.md (bench/report_edit.py).
The bench itself (subprocess builds, tantivy) is not run here."""

from __future__ import annotations

import json
import os

import pytest

from bench import bench_edit
from bench.report_edit import edit_section


def test_bytes_written_counts_new_and_rewritten_files_whole_and_ignores_untouched_ones() -> None:
    before = {"a.db": (100, 1, 10), "b.db": (200, 1, 11), "gone.db": (50, 1, 12), "same": (7, 1, 13)}
    after = {
        "a.db": (100, 2, 10),  # same size, new mtime: rewritten in place
        "b.db": (200, 1, 99),  # same size and mtime, new inode: replaced by rename
        "new.db": (300, 5, 14),
        "same": (7, 1, 13),
    }
    diff = bench_edit.bytes_written(before, after)
    assert diff == {"bytes": 100 + 200 + 300, "created": 1, "changed": 2, "removed": 1}
    assert bench_edit.bytes_written(after, after)["bytes"] == 0


def test_walk_sees_a_rewrite_and_a_new_file(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.db").write_bytes(b"12345")
    (tmp_path / "keep").write_bytes(b"k")
    before = bench_edit.walk_files(tmp_path)
    assert set(before) == {os.path.join("sub", "x.db"), "keep"}
    (tmp_path / "sub" / "x.db").write_bytes(b"1234567")
    (tmp_path / "y").write_bytes(b"yy")
    diff = bench_edit.bytes_written(before, bench_edit.walk_files(tmp_path))
    assert diff["bytes"] == 7 + 2 and diff["created"] == 1 and diff["changed"] == 1


def test_proc_io_parsing_and_the_unreadable_marker() -> None:
    text = "rchar: 10\nwchar: 20\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n"
    assert bench_edit.parse_proc_io(text) == {"rchar": 10, "wchar": 20, "write_bytes": 4096, "cancelled_write_bytes": 0}
    assert bench_edit.parse_proc_io("unreadable: [Errno 2]") is None


def test_mid_sized_picks_distinct_notes_around_the_median() -> None:
    files = [(f"n{i}.md", size) for i, size in enumerate([1, 5, 100, 7, 9, 3, 1000])]
    picks = bench_edit.mid_sized(files, 3)
    assert picks == ["n3.md", "n4.md", "n1.md"]  # sizes 7 (median), 9, 5


def test_note_title_prefers_frontmatter_then_heading_then_stem() -> None:
    assert bench_edit.note_title("a/b.md", "---\ntitle: 'T'\n---\n# H\n") == "T"
    assert bench_edit.note_title("a/b.md", "intro\n# Heading\n") == "Heading"
    assert bench_edit.note_title("a/b.md", "no heading") == "b"


def test_index_size_row_gives_each_engine_its_ratio_to_the_markdown() -> None:
    row = bench_edit.index_size_row(1000, {"vaultsearch": 5000, "tantivy": 250, "bm25s": None})
    assert row == {
        "markdown_bytes": 1000,
        "vaultsearch": {"bytes": 5000, "over_markdown": 5.0},
        "tantivy": {"bytes": 250, "over_markdown": 0.25},
        "bm25s": None,
    }
    with pytest.raises(ValueError):
        bench_edit.index_size_row(0, {"tantivy": 1})


def test_generation_files_and_the_active_one_are_found_in_a_walk() -> None:
    walk = {
        "state.db": (28672, 1, 1),
        os.path.join("generations", "g1-aa.db"): (100, 1, 2),
        os.path.join("generations", "g2-bb.db"): (120, 2, 3),
        os.path.join("generations", "g2-bb.db-wal"): (9, 2, 4),
    }
    gens = bench_edit.generation_bytes(walk)
    assert gens == {os.path.join("generations", "g1-aa.db"): 100, os.path.join("generations", "g2-bb.db"): 120}
    assert bench_edit.active_generation_bytes(gens, "g2-bb") == 120
    assert bench_edit.active_generation_bytes(gens, "g3-cc") is None
    assert bench_edit.active_generation_bytes(gens, None) is None


def test_one_generation_in_the_segment_layout_is_its_manifest_and_the_parts_it_lists(tmp_path) -> None:
    (tmp_path / "manifests").mkdir()
    manifest = {"segments": [{"sha256": "a" * 64, "size": 4096}, {"sha256": "b" * 64, "size": 100}], "tombstones": []}
    text = json.dumps(manifest)
    (tmp_path / "manifests" / ("e4516fb0815b" + "0" * 52 + ".json")).write_text(text)
    (tmp_path / "manifests" / ("0fc5c296b229" + "0" * 52 + ".json")).write_text("{}")
    expected = len(text) + 4096 + 100
    assert bench_edit.manifest_generation_bytes(tmp_path, "g20261206T230436-e4516fb0815b") == expected
    assert bench_edit.one_generation_bytes(tmp_path, "g20261206T230436-e4516fb0815b") == expected
    assert bench_edit.manifest_generation_bytes(tmp_path, "g20261206T230436-ffffffffffff") is None
    assert bench_edit.manifest_generation_bytes(tmp_path, None) is None


def test_one_generation_in_the_one_file_layout_is_its_file(tmp_path) -> None:
    (tmp_path / "generations").mkdir()
    (tmp_path / "generations" / "g1-aa.db").write_bytes(b"x" * 300)
    assert bench_edit.one_generation_bytes(tmp_path, "g1-aa") == 300
    assert bench_edit.one_generation_bytes(tmp_path, "g2-bb") is None


def _corpus(wall: float, walk: int) -> dict:
    return {
        "notes": 3088,
        "markdown_bytes": 38 * 2**20,
        "vaultsearch": {
            "median_wall_seconds": wall,
            "median_walk_bytes": walk,
            "median_proc_write_bytes": 3 * 2**20,
            "median_proc_wchar": None,
            "index_bytes": 400 * 2**20,
            "index_over_markdown": 10.53,
        },
        "tantivy": {
            "median_wall_seconds": 0.0123,
            "median_walk_bytes": 4096,
            "index_bytes": 20 * 2**20,
            "index_over_markdown": 0.53,
        },
    }


def test_edit_section_renders_one_row_per_corpus_with_both_engines() -> None:
    data = {
        "machine": {"date": "2026-12-06", "cores": 2},
        "load_avg_before": [3.5, 3, 3],
        "load_avg_after": [4.0, 3, 3],
        "edits_per_corpus": 3,
        "corpora": {"powershell": _corpus(2.5, 150 * 2**20), "scifact": _corpus(3.25, 2**30)},
    }
    lines = edit_section({"edit": data})
    rows = [line for line in lines if line.startswith("| powershell") or line.startswith("| scifact")]
    assert len(rows) == 2
    assert "| 2.50 s | 150.0 MiB | 3.0 MiB | - | 400.0 MiB (10.53x) | 12.3 ms | 4.0 KiB | 20.0 MiB (0.53x) |" in rows[0]
    assert "1.00 GiB" in rows[1] and "3,088" in rows[1]
    assert any("load average (1 min) 3.5 before and 4.0 after" in line for line in lines)
    assert edit_section({}) == []


def test_edit_section_adds_bm25s_columns_and_the_index_size_table() -> None:
    corpus = _corpus(2.5, 2**20)
    corpus["bm25s"] = {"median_wall_seconds": 3.384, "median_walk_bytes": 6 * 2**20}
    corpus["index_sizes"] = bench_edit.index_size_row(
        2**20, {"vaultsearch": 10 * 2**20, "vaultsearch_one_generation": 5 * 2**20, "tantivy": 2**19, "bm25s": None}
    )
    data = {"machine": {}, "edits_per_corpus": 3, "corpora": {"mdn": corpus, "old": _corpus(1.0, 1)}}
    lines = edit_section({"edit": data})
    edit_rows = [line for line in lines if line.endswith("| 3.38 s | 6.0 MiB |") or line.endswith("| - | - |")]
    assert [row.split(" |")[0] for row in edit_rows] == ["| mdn", "| old"]  # an older result has no bm25s
    size_rows = [line for line in lines if line.startswith("| mdn | 3,088 | 1.0 MiB |")]
    assert size_rows == ["| mdn | 3,088 | 1.0 MiB | 10.0 MiB (10.00x) | 5.0 MiB (5.00x) | 512.0 KiB (0.50x) | - |"]


def test_reuse_summary_reports_the_first_edit_apart_and_medians_over_the_rest() -> None:
    from bench.edit_reuse import step_medians, summarize

    def run(wall: float, cpu: float, steps: dict[str, float]) -> dict:
        return {
            "wall_seconds": wall, "cpu_seconds": cpu, "in_process_seconds": wall - 0.5, "timings": steps,
            "walk": {"bytes": 100}, "proc_write_bytes": 4096,
        }  # fmt: skip

    runs = [run(20.0, 9.0, {"scan": 5.0}), run(2.0, 1.0, {"scan": 0.5, "plan": 0.2}), run(4.0, 1.2, {"scan": 0.7})]
    out = summarize(runs)
    assert out["first"]["wall_seconds"] == 20.0  # the first edit (parts hashed once) is not in the medians
    assert (out["median_wall_seconds"], out["median_cpu_seconds"]) == (3.0, 1.1)
    assert out["median_steps"] == {"plan": 0.1, "scan": 0.6} == step_medians(runs[1:])
    assert summarize(runs[:1])["median_wall_seconds"] == 20.0
