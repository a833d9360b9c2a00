"""A note id dead in an older segment and live in a newer one (an edited note keeps its id, issue 29).

The example vault's one segment is written again as segment 0 with some notes tombstoned, and those notes
as segment 1 (live there, under the SAME ids): the generation holds the same live notes as one segment of
them all, so every read-path query answers as that one segment does (per-note views, FTS5 matching and
its filtered form, counts, edges into the re-written notes, ranking in every mode, read tools). Before
the dead sets were per segment, a tombstone in segment 0 hid the notes' rows in segment 1 too.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from core.build.lock import build_lock, new_staging_path
from core.build.publish_segments import PlannedPart, publish_segments
from core.build.segment_writer import SegmentSource, write_segment, write_tombstone
from core.errors import IntegrityError
from core.index import verify
from core.index.layout import IndexLayout, ResolvedIndex, layout_for
from core.index.state import active_record
from core.serve.tools import ServeConfig, Tools
from tests.index.test_segmented import _tool_answers, assert_reads_alike, base, publish_split, split_record
from tests.index.test_segmented_search import CALLERS, MODES, QUERIES, _ranking

__all__ = ["base"]  # the module fixture, shared


def _publish_parts(
    layout: IndexLayout, segment: Path, groups: list[list[int]], dead: list[list[int]], tokenizer: str
) -> ResolvedIndex:
    """``groups`` of ``segment``'s notes as segments (the last carries the generation tables), each with
    its own ``dead`` ids tombstoned; no edge is dropped (a dead id may be live in another segment)."""
    with build_lock(layout):
        segments, stones = [], []
        for i, (group, gone) in enumerate(zip(groups, dead, strict=True)):
            staged = new_staging_path(layout)
            last = i == len(groups) - 1
            counts = write_segment(
                staged, [SegmentSource(segment, group)], tokenizer=tokenizer, generation_from=segment if last else None
            )
            segments.append(PlannedPart("segment", staged, notes=counts["notes"], chunks=counts["chunks"]))
            if gone:
                stone = new_staging_path(layout)
                write_tombstone(stone, staged, gone, tokenizer=tokenizer)
                stones.append(PlannedPart("tombstone", stone, notes=len(gone), segment=i))
        live = sum(map(len, groups)) - sum(map(len, dead))
        record = active_record(layout)
        return publish_segments(
            layout, segments, stones, split_record(live), next_ids=(10_000, 100_000),
            expected_base=record["generation_id"] if record else None, grace_s=0.0,
        )  # fmt: skip


def _linked_ids(segment: Path, ids: list[int], rng: random.Random) -> list[int]:
    """Some notes other notes link to (their edges must survive) and a few others."""
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        targets = sorted({r[0] for r in conn.execute("SELECT dst_id FROM edges WHERE dst_id IS NOT NULL")})
    finally:
        conn.close()
    assert len(targets) >= 3
    return sorted(set(rng.sample(targets, 3)) | set(rng.sample(ids, 3)))


def test_an_id_dead_in_segment_0_and_live_in_segment_1_reads_as_one_segment(
    base: tuple[Path, Path, list[int], str], tmp_path: Path
) -> None:
    root, segment, ids, tokenizer = base
    moved = _linked_ids(segment, ids, random.Random(29))
    again = moved[:2]  # and again: dead in segments 0 and 1, live in 2
    kept = _publish_parts(
        layout_for(root, tmp_path / "kept"), segment, [ids, moved, again], [moved, again, []], tokenizer
    )
    publish_split(layout_for(root, tmp_path / "one"), segment, [ids], set(), tokenizer)
    assert [p.kind for p in kept.parts].count("tombstone") == 2
    assert_reads_alike(root, tmp_path / "kept", tmp_path / "one", len(ids))
    conn = verify.connect_readonly(kept)
    try:
        into = "SELECT count(*) FROM edges WHERE dst_id IN (SELECT value FROM json_each(?))"
        assert conn.execute(into, (str(moved),)).fetchone()[0] > 0  # edges into the re-written notes kept
    finally:
        conn.close()
    for mode in MODES:
        for query in QUERIES[:3]:
            for classes in CALLERS:
                assert _ranking(root, tmp_path / "kept", query, mode, classes) == _ranking(
                    root, tmp_path / "one", query, mode, classes
                ), (mode, query, classes)
    conn = sqlite3.connect(segment)
    paths = [r[0] for r in conn.execute("SELECT rel_path FROM notes ORDER BY id")][::3]
    conn.close()
    for classes in (("public",), ("lan", "public", "restricted")):
        got_tools, want_tools = (
            _tool_answers(Tools(ServeConfig(root, index_dir=tmp_path / name, classifications=classes)), paths)
            for name in ("kept", "one")
        )
        assert got_tools == want_tools


def test_an_id_live_in_two_segments_fails_closed(base: tuple[Path, Path, list[int], str], tmp_path: Path) -> None:
    """One dead row of a note and TWO live ones (a broken generation): not served."""
    root, segment, ids, tokenizer = base
    twice = ids[:2]
    resolved = _publish_parts(
        layout_for(root, tmp_path / "bad"), segment, [ids, twice, twice], [twice, [], []], tokenizer
    )
    with pytest.raises(IntegrityError, match="live in two segments"):
        verify.connect_readonly(resolved).close()
