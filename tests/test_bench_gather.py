"""bench/bench_gather.py's pure helpers: the stopwatch that splits a first search into the combination and
the rest, and the per-mode summary of the edits."""

from __future__ import annotations

from bench.bench_gather import Stopwatch, summary


def test_the_stopwatch_sums_the_wrapped_calls_until_taken():
    watch = Stopwatch()
    double = watch.wrap("double", lambda x: 2 * x)
    assert double(2) == 4 and double(3) == 6
    spent = watch.take()
    assert set(spent) == {"double"} and spent["double"] >= 0.0
    assert watch.take() == {}


def _run(mode: str, first: float, combine: float, warm: float) -> dict:
    return {
        "mode": mode,
        "build_s": 1.0,
        "first_ms": first,
        "combine_ms": combine,
        "combine_chunks_ms": 0.0,
        "rest_ms": first - combine,
        "warm_p50_ms": {"fts": warm, "vector": warm, "hybrid": warm},
    }


def test_the_summary_takes_each_modes_medians_over_its_own_edits():
    runs = [_run("fts", 10.0, 4.0, 1.0), _run("vector", 30.0, 5.0, 2.0), _run("fts", 20.0, 6.0, 3.0)]
    out = summary(runs)
    assert out["fts"]["first_ms"] == 15.0 and out["fts"]["combine_ms"] == 5.0 and out["fts"]["first_max_ms"] == 20.0
    assert out["vector"]["first_ms"] == 30.0 and "hybrid" not in out
    assert out["fts"]["warm_p50_ms"] == 2.0  # the warm p50 after every edit, whichever mode went first
    assert out["build_s_median"] == 1.0


def test_the_report_puts_each_corpus_before_beside_after_and_skips_what_was_not_run() -> None:
    from bench.report_segments import gather_section, staged_section

    def run(first: float, combine: float) -> dict:
        return {
            "summary": {
                m: {"first_ms": first, "combine_ms": combine, "combine_chunks_ms": 1.0}
                for m in ("fts", "vector", "hybrid")
            }
        }

    lines = gather_section(
        {
            "gather": {
                "before": {"powershell": run(373.0, 228.0)},
                "after": {"powershell": run(125.0, 46.0)},
                "before_reused_index": {"synth100000": run(18_700.0, 16_300.0)},
            }
        }
    )
    rows = [line for line in lines if line.startswith("| PowerShell") or line.startswith("| synthetic")]
    assert (
        rows[0]
        == "| PowerShell docs | 373 ms (229) | 125 ms (47) | 373 ms (229) | 125 ms (47) | 373 ms (229) | 125 ms (47) |"
    )
    assert rows[1].startswith("| synthetic 100k | 18.7 s (16.3) | - |")  # an after that was not run is a dash
    assert len(rows) == 2  # synthetic 10k: neither run, no row
    assert gather_section({}) == []

    def edit(wall: float, written: int) -> dict:
        vs = {"median_wall_seconds": wall, "median_proc_write_bytes": written, "median_walk_bytes": 130_000}
        return {"corpora": {"scifact": {"vaultsearch": vs}}}

    table = staged_section({"edit_fedplan_before": edit(1.32, 8_070_000), "edit_fedplan": edit(0.98, 213_000)})
    assert "| scifact | 1.32 s | 0.98 s | 8.07 MB | 0.21 MB | 0.13 MB |" in table
    assert staged_section({"edit_fedplan": edit(0.98, 213_000)}) == []  # no pair, no section


def test_the_tombstone_report_lists_each_vault_it_ran_on() -> None:
    from bench.report_segments import tombstone_section

    run = {"notes": 30000, "postings": 13_499_849, "before_ms_median": 781.8, "after_ms_median": 176.2,
           "docs_pieces_read_median": 448, "docs_pieces": 3296, "how": ["verified"]}  # fmt: skip
    lines = tombstone_section({"tombstone": {"load_avg_before": [5.7], "machine": {}, "synth-30000": run}})
    assert "| synthetic 30k | 30,000 | 13,499,849 | 782 ms | 176 ms | 448 of 3,296 | verified |" in lines
    assert tombstone_section({}) == []
