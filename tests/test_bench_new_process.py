"""bench/bench_new_process.py: a new process's first search timed on one segment, then on the generation the
edits made segmented (its segment count read from the active generation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import note, write_files

from bench import bench_new_process


@pytest.mark.slow
def test_one_segment_then_a_segmented_generation_of_the_same_vault(tmp_path: Path) -> None:
    vault = write_files(
        tmp_path / "vault",
        {f"n{i}.md": note(f"Note {i}", f"files of a folder number {i} " * (3 + i)) for i in range(6)},
    )
    out = bench_new_process.measure(vault, runs=1, edits=2)
    assert out["edits"] == 2
    assert len(out["one_segment"]["seconds"]) == len(out["segmented"]["seconds"]) == 1
    assert all(s > 0 for s in out["one_segment"]["seconds"] + out["segmented"]["seconds"])
    assert out["segmented"]["segments"] >= 2  # each edit published a delta segment
    assert bench_new_process.segments_of(vault) == out["segmented"]["segments"]
