"""core.modes.dense_parts: a generation's dense matrix assembled from its segments' matrices, each segment's
dead notes left out by ITS OWN tombstone (an id dead in an old segment may be live in a newer one), rows in
(note path, chunk order) whatever the segments' order; a part of another model fails closed."""

from __future__ import annotations

import numpy as np
import pytest

from core.dense import DenseMatrix
from core.errors import DenseIncompleteError
from core.modes import dense_parts
from core.modes.dense_parts import PartCache, PartMatrix, assemble, checked


def _part(rows: list[tuple[int, int, str, int]], identity: str | None = "m") -> PartMatrix:
    """rows: (chunk id, note id, path, ord); each row's vector is [chunk id, note id] (easy to trace)."""
    matrix = np.array([[c, n] for c, n, _, _ in rows], dtype=np.float32).reshape(len(rows), 2)
    dense = DenseMatrix(
        matrix=matrix,
        chunk_ids=np.array([r[0] for r in rows], dtype=np.int64),
        note_ids=np.array([r[1] for r in rows], dtype=np.int64),
    )
    paths, ords = np.array([r[2] for r in rows], dtype=str), np.array([r[3] for r in rows], np.int64)
    return PartMatrix.in_path_order(dense, paths, ords, identity)  # rows given out of order on purpose


@pytest.mark.parametrize("runs", [dense_parts.MAX_RUNS, 0])  # slice copies of runs / one gather and scatter
def test_an_id_dead_in_an_old_segment_stays_live_in_the_newer_one_and_rows_follow_the_path(
    runs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dense_parts, "MAX_RUNS", runs)
    old = _part([(1, 5, "b.md", 0), (2, 5, "b.md", 1), (3, 6, "d.md", 0)])
    new = _part([(10, 5, "b.md", 0), (11, 7, "a.md", 0), (12, 8, "c.md", 1), (13, 8, "c.md", 0)])
    dm = assemble([(old, (5,)), (new, ())])
    assert dm.chunk_ids.tolist() == [11, 10, 13, 12, 3]  # a.md, b.md (the new version only), c.md 0, 1, d.md
    assert dm.note_ids.tolist() == [7, 5, 8, 8, 6]
    assert dm.matrix[:, 0].tolist() == [11.0, 10.0, 13.0, 12.0, 3.0]  # each row's own vector
    assert assemble([(new, ()), (old, (5,))]).chunk_ids.tolist() == dm.chunk_ids.tolist()  # not segment order


def test_one_segment_without_a_tombstone_is_served_without_a_copy_and_an_empty_part_adds_nothing() -> None:
    only = _part([(1, 1, "a.md", 0)])
    assert assemble([(only, ())]) is only.dense
    empty = _part([])
    assert assemble([(only, ()), (empty, ())]).chunk_ids.tolist() == [1]


def test_a_part_of_another_model_fails_closed_and_a_part_without_vectors_passes() -> None:
    with pytest.raises(DenseIncompleteError) as err:
        checked(_part([(1, 1, "a.md", 0)], identity="other"), "ab" * 32, "m")
    assert err.value.reason == "dense_incomplete"
    assert checked(_part([], identity=None), "ab" * 32, "m").dense.matrix.shape[0] == 0


def test_the_part_cache_loads_a_part_once_and_keeps_only_the_newest_generations_parts_of_a_vault() -> None:
    cache = PartCache(1 << 20)
    for sha in ("a", "b", "a", "b"):
        cache.get_or_load(("vault", sha, "m"), lambda: _part([(1, 1, "a.md", 0)]))
    assert (cache.stats.loads, cache.stats.hits, len(cache)) == (2, 2, 2)
    cache.get_or_load(("other vault", "a", "m"), lambda: _part([(1, 1, "a.md", 0)]))
    cache.keep_only([("vault", "b", "m")])  # a generation of "vault" listing only part b
    assert ("vault", "b", "m") in cache and ("vault", "a", "m") not in cache and ("other vault", "a", "m") in cache
    with pytest.raises(TypeError):
        cache.get_or_load("not a key", lambda: _part([]))  # type: ignore[arg-type]
