"""bench/bench_quality_segments.py's largest gaps and the report section it feeds: a set whose segmented
run ranks otherwise than the cold one shows as a gap, never as "equal"."""

from __future__ import annotations

from bench.bench_quality_segments import max_gap
from bench.report_segments import merge_section, quality_segments_section


def _run(ndcg: float) -> dict[str, float]:
    return {"n": 10, "ndcg10": ndcg, "nohit": 0.0}


SETS = {
    "heading": {"fts": {"before": _run(0.9), "now": _run(0.9), "now_segmented": _run(0.9)}},
    "prefix": {"hybrid": {"before": _run(0.5), "now": _run(0.502), "now_segmented": _run(0.51)}},
}


def test_the_largest_gaps_are_taken_over_every_set_and_mode() -> None:
    gaps = max_gap(SETS)
    assert round(gaps["now_vs_before"], 4) == 0.002 and round(gaps["segmented_vs_now"], 4) == 0.008


def test_the_section_lists_every_set_and_mode_and_the_gaps() -> None:
    results = {
        "quality_segments": {
            "machine": {"date": "2026-12-07"},
            "note": "code: test",
            "corpora": {
                "tiny": {"sets": SETS, "generation": {"now_segmented": {"parts": {"segments": 3, "tombstones": 2}}}}
            },
        }
    }
    text = "\n".join(quality_segments_section(results))
    assert "| tiny | prefix | hybrid | 0.5000 | 0.5020 | 0.5100 |" in text
    assert "tiny: largest |now - before| 0.0020, |segmented - now| 0.0080 (3 segments, 2 tombstones)" in text
    assert "code: test" in text
    assert quality_segments_section({}) == [] and merge_section({}) == []


def test_a_merge_whose_answers_differ_says_so() -> None:
    merge = {"segments_before": 3, "segments_after": 1, "seconds": 0.1, "bytes_written": 10, "bytes_before": 30}
    run = {
        "corpus": "tiny", "notes": 9, "edits": [{}, {}], "policy_merge": {**merge, "bytes_after": 20},
        "results_identical": {"policy": False},
    }  # fmt: skip
    text = "\n".join(merge_section({"merge": {"runs": [run], "machine": {}}}))
    assert "| tiny | 9 | 2 | policy | 3 -> 1 |" in text and "DIFFER" in text
