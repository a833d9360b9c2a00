"""bench/bench_cold_ab.py: the figures it reads from ``/usr/bin/time -v`` (wall clock in either of its forms,
CPU as user + system, peak RSS in MB) and its refusal of output that lacks one."""

from __future__ import annotations

import pytest

from bench.bench_cold_ab import parse_time, summary

TIME_V = """\tCommand being timed: "python -m core.cli index v"
\tUser time (seconds): 31.50
\tSystem time (seconds): 2.25
\tPercent of CPU this job got: 98%
\tElapsed (wall clock) time (h:mm:ss or m:ss): {wall}
\tMaximum resident set size (kbytes): 393216
"""


@pytest.mark.parametrize(("wall", "seconds"), [("0:34.12", 34.12), ("1:02:03", 3723.0)])
def test_time_output_is_read_as_seconds_and_megabytes(wall: str, seconds: float) -> None:
    out = parse_time(TIME_V.format(wall=wall))
    assert out["wall_s"] == seconds
    assert out["cpu_s"] == 33.75
    assert out["peak_rss_mb"] == 384.0


def test_time_output_without_a_figure_is_refused() -> None:
    with pytest.raises(ValueError, match="rss_kb"):
        parse_time(TIME_V.format(wall="0:01.00").replace("Maximum resident", "Max resident"))


def test_the_summary_is_the_median_and_the_least_of_each_figure() -> None:
    runs = [{"wall_s": w, "cpu_s": w - 1, "peak_rss_mb": 100.0 + w} for w in (3.0, 1.0, 2.0)]
    assert summary(runs) == {
        "wall_s_median": 2.0,
        "wall_s_min": 1.0,
        "cpu_s_median": 1.0,
        "cpu_s_min": 0.0,
        "peak_rss_mb_median": 102.0,
        "peak_rss_mb_min": 101.0,
    }
