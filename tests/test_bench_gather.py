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
