"""bench/report_stop35.py: the 100k edit, link edit and cold-build sections render what their JSON holds, and
are absent without it."""

from __future__ import annotations

from bench.report_stop35 import (
    cold_ab_section,
    edit_100k_section,
    link_edit_section,
    new_process_section,
    size_section,
    watch_split_section,
)


def test_sections_without_results_are_absent() -> None:
    assert edit_100k_section({}) == link_edit_section({}) == cold_ab_section({}) == []


def test_the_100k_edit_section_shows_the_medians_the_first_edit_and_the_steps() -> None:
    first = {"wall_seconds": 4.68, "cpu_seconds": 3.95, "in_process_seconds": 2.32, "proc_write_bytes": 315392}
    data = {
        "edits": [{}] * 5,
        "first": {**first, "walk": {"bytes": 136329}},
        "median_wall_seconds": 2.633,
        "median_cpu_seconds": 2.549,
        "median_in_process_seconds": 2.04,
        "median_proc_write_bytes": 301056,
        "median_walk_bytes": 152688,
        "median_steps": {"publish": 0.436, "scan": 0.773, "odd": 0.01},
        "notes": 100000,
        "markdown_bytes": 385085313,
        "load_avg_before": [2.01],
        "load_avg_after": [2.08],
    }
    page = "\n".join(edit_100k_section({"edit_100k_final": {**data, "label": "final"}}))
    assert "| final: median of 4 edits | 2.63 s | 2.55 s | 2.04 s | 294.0 KiB | 149.1 KiB |" in page
    assert "| final: first edit | 4.68 s | 3.95 s | 2.32 s | 308.0 KiB | 133.1 KiB |" in page
    assert "scan 0.77 s, publish 0.44 s, odd 0.01 s." in page
    assert "load 2.01 before and 2.08 after" in page


def test_the_link_edit_section_puts_before_beside_after() -> None:
    steps = {
        name: {"wall_seconds_median": w, "bytes_written_median": b}
        for name, w, b in (
            ("delete_linked", 3.0, 5_800_000),
            ("add_resolving", 2.0, 100),
            ("rename_linked", 1.0, 2048),
            ("rename_back", 0.5, 4096),
        )
    }
    run = {"steps": steps, "deleted": {"path": "a.md", "backlinks": 10}, "renamed": {"path": "b.md", "backlinks": 3}}
    after = {**run, "steps": {**steps, "delete_linked": {"wall_seconds_median": 1.25, "bytes_written_median": 1024}}}
    page = "\n".join(link_edit_section({"link_edit": {"before": run, "after": after}}))
    assert "| delete a note other notes link to | 3.00 s | 5.5 MiB | 1.25 s | 1.0 KiB |" in page
    assert "`a.md` (10 notes link to it)" in page


def test_the_cold_build_section_lists_each_tree_per_corpus() -> None:
    row = {"wall_s_median": 30.0, "wall_s_min": 29.0, "cpu_s_median": 31.5, "cpu_s_min": 30.2}
    runs = [{"load_1m": [1.5, 2.5]}]
    data = {
        "runs": 3,
        "trees": {"before": "/b", "now": "."},
        "corpora": {
            "synth10k": {
                "before": {**row, "peak_rss_mb_median": 350.0, "peak_rss_mb_min": 340.0, "runs": runs},
                "now": {
                    **row,
                    "cpu_s_median": 33.0,
                    "peak_rss_mb_median": 380.0,
                    "peak_rss_mb_min": 370.0,
                    "runs": runs,
                },
            }
        },
    }
    page = "\n".join(cold_ab_section({"cold_ab": data}))
    assert "| cold_ab | synth10k | before | 1 | 30.0 s (29.0) | 31.5 s (30.2) | 350 MB (340) | 1.5-2.5 |" in page
    assert "| cold_ab | synth10k | now | 1 | 30.0 s (29.0) | 33.0 s (30.2) | 380 MB (370) | 1.5-2.5 |" in page


def test_the_watch_section_splits_each_corpus_edit_into_its_parts() -> None:
    def split(p50: float, p95: float) -> dict[str, float]:
        return {"p50_s": p50, "p95_s": p95, "n": 20}

    corpus = {
        "notes": 3088,
        "edit_to_searchable": split(1.04, 1.6),
        "event_to_build": split(0.04, 0.05),
        "build_seconds": split(0.8, 1.0),
        "after_build": split(0.17, 0.82),
        "last_search": split(0.26, 0.82),
        "walk_bytes": {"median": 157502},
        "load_avg_1m": {"before": 6.61, "after": 7.3},
    }
    data = {"powershell": {"corpora": {"reused_v": corpus}, "machine": {"date": "2026-12-07T10:55:00"}}}
    page = "\n".join(watch_split_section({"watch_s35": data}))
    assert (
        "| powershell | 3,088 | 20 | 1.04 / 1.60 s | 0.04 / 0.05 s | 0.80 / 1.00 s | 0.17 / 0.82 s "
        "| 0.26 / 0.82 s | 153.8 KiB | 6.61-7.3 |" in page
    )
    assert watch_split_section({}) == []
    after = "\n".join(watch_split_section({"watch_s37": data}, "watch_s37", ("After the view.",)))
    assert "after the view" in after and "After the view." in after and "| powershell | 3,088 |" in after
    assert watch_split_section({"watch_s35": data}, "watch_s37", ("x",)) == []


def test_the_size_section_puts_schema_22_24_25_and_27_beside_now_with_the_biggest_tables() -> None:
    tables = {"term_major": {"bytes": 4_440_000}, "text_blocks": {"bytes": 3_150_000}, "meta": {"bytes": 4096}}
    now = {"notes": 5183, "markdown_bytes": 7947554, "index_over_markdown": 1.906, "tables": tables}
    results = {
        "size": {"corpora": {"scifact": now}, "machine": {"date": "2026-12-07T10:37:31"}},
        "size_mdn": {"corpora": {"mdn": {**now, "index_over_markdown": 1.431}}},
        "size_schema22": {"corpora": {"scifact": {"index_over_markdown": 2.321}}},
        "size_schema24": {"corpora": {"scifact": {"index_over_markdown": 1.976}}},
        "size_mdn_schema24": {"corpora": {"mdn": {"index_over_markdown": 1.531}}},
        "size_schema25": {"corpora": {"scifact": {"index_over_markdown": 1.954}}},
        "size_100k": {"corpora": {"synth_100000": {**now, "notes": 100000, "index_over_markdown": 1.734}}},
        "size_100k_schema25": {"corpora": {"synth_100000": {"index_over_markdown": 1.954}}},
        "size_schema27": {"corpora": {"scifact": {"index_over_markdown": 1.884}}},
    }
    page = "\n".join(size_section(results))
    assert (
        "| scifact | 5,183 | 7.6 MiB | 2.32x | 1.98x | 1.95x | 1.88x | 1.91x | term_major 4.44, text_blocks 3.15, "
        "meta 0.00 |" in page
    )
    assert "| mdn | 5,183 | 7.6 MiB | - | 1.53x | - | - | 1.43x |" in page
    assert "| synth_100000 | 100,000 | 7.6 MiB | - | - | 1.95x | - | 1.73x |" in page
    assert "What the blocks cost" not in page
    warm = {"before": {"p50_ms": 5.462, "p95_ms": 8.664}, "now": {"p50_ms": 5.583, "p95_ms": 8.631}}
    results["fts_warm_blocks"] = {"vaults": {"powershell": warm}, "machine": {"date": "2026-12-07T20:15:24"}}
    page = "\n".join(size_section(results))
    assert "| powershell | 5.46 / 8.66 ms | 5.58 / 8.63 ms |" in page and "Measured 2026-12-07T20:15" in page
    assert "What this stop's format costs" not in page
    zstd = {"before": {"p50_ms": 5.1, "p95_ms": 8.0}, "now": {"p50_ms": 4.9, "p95_ms": 7.5}}
    results["fts_warm_s40"] = {"vaults": {"scifact": zstd}, "machine": {"date": "2026-12-08T00:40:00"}}
    page = "\n".join(size_section(results))
    assert page.index("What this stop's format costs") < page.index("What the blocks cost")
    assert "| scifact | 5.10 / 8.00 ms | 4.90 / 7.50 ms |" in page and "Measured 2026-12-08T00:40" in page
    assert "Stop 41's query path" not in page
    results["fts_warm_s41"] = {"vaults": {"synth100k": zstd}, "machine": {"date": "2026-12-08T02:44:00"}}
    page = "\n".join(size_section(results))
    assert page.index("Stop 41's query path") < page.index("What this stop's format costs")
    s41 = page[page.index("Stop 41's query path") : page.index("What this stop's format costs")]
    assert "--vault-of" not in s41 and "| synth100k | 5.10 / 8.00 ms | 4.90 / 7.50 ms |" in s41  # one build for both
    assert size_section({}) == []


def test_the_new_process_section_puts_one_segment_beside_segmented() -> None:
    corpus = {
        "one_segment": {"median": 1.1},
        "segmented": {"median": 3.25, "segments": 6},
        "load_avg_1m": 9.5,
    }
    page = "\n".join(new_process_section({"new_process": {"corpora": {"powershell": corpus}}}))
    assert "| powershell | 1.10 s | 3.25 s | 6 | 9.5 |" in page
    assert new_process_section({}) == []


def test_the_new_process_section_puts_each_code_tree_beside_the_other_on_built_vaults() -> None:
    tree = {"one_segment": {"median": 0.84}, "segmented": {"median": 1.25}, "segments": 8}
    built = {"built": {"now": tree, "before": {**tree, "segmented": {"median": 18.31}}, "load_avg_1m": 1.1}}
    page = "\n".join(new_process_section({"new_process_100k_view": built}))
    assert "| now | 0.84 s | 1.25 s |" in page and "| before | 0.84 s | 18.31 s |" in page
    assert "load 1.1" in page and "| corpus |" not in page  # no corpus run: no corpus table


def test_the_new_process_section_puts_the_numpy_ma_change_beside_the_code_before() -> None:
    one = {"one_segment": {"median": 0.0702}, "segmented": {"median": 0.0978}}
    now = {"one_segment": {"median": 0.0638}, "segmented": {"median": 0.0885}}
    data = {"built": {"before": one, "now": now, "load_avg_1m": 1.6}, "machine": {"date": "2026-12-07T20:24:00"}}
    page = "\n".join(new_process_section({"new_process_numpy_ma": data}))
    assert "| before | 70.2 ms | 97.8 ms |" in page and "| now | 63.8 ms | 88.5 ms |" in page
    assert "numpy.ma" not in "\n".join(new_process_section({"new_process_100k_view": {"built": {"now": now}}}))


def test_the_new_process_section_puts_the_one_query_group_read_beside_the_code_before() -> None:
    one = {"one_segment": {"median": 0.0663}, "segmented": {"median": 0.0947}}
    now = {"one_segment": {"median": 0.0660}, "segmented": {"median": 0.0931}}
    data = {"built": {"before": one, "now": now, "load_avg_1m": 0.6}, "machine": {"date": "2026-12-08T01:05:00"}}
    page = "\n".join(new_process_section({"new_process_held": data}))
    assert "| before | 66.3 ms | 94.7 ms |" in page and "| now | 66.0 ms | 93.1 ms |" in page
    assert "HELD_GROUP_BYTES" in page and "--runs 9" in page and "Measured 2026-12-08T01:05" in page
    assert "HELD_GROUP_BYTES" not in "\n".join(new_process_section({"new_process_numpy_ma": data}))
