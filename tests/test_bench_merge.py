"""bench/bench_merge.py on a small vault of unlinked notes: its edits publish delta segments, the policy
merge and the one-segment merge are recorded with their bytes, and the answers stay the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_merge
from tests.conftest import note, write_vault


def test_the_merge_bench_records_both_merges_on_a_small_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = write_vault(
        tmp_path / "corpus", {f"n{i:02}.md": note(f"N{i}", f"cancer cells {i} trial") for i in range(9)}
    )
    monkeypatch.setitem(bench_merge.CORPORA, "tiny", corpus)
    run = bench_merge.run_corpus("tiny", 4)
    assert [e["one_segment_reason"] for e in run["edits"]] == [None] * 4  # each edit a delta segment
    policy, one = run["policy_merge"], run["one_segment_merge"]
    assert (policy["outcome"], policy["segments_before"], policy["segments_after"]) == ("merged", 5, 1)
    assert policy["bytes_written"] == policy["bytes_after"] and policy["merges"][0]["reason"] == "tier"
    assert one["outcome"] == "nothing_to_merge"  # one segment without dead rows already
    assert run["results_identical"] == {"policy": True, "one_segment": True}
