"""A generation's view of its segments (core.ranking.segment_view): random splits of a vault's notes into
segments (each built as its own small vault), some notes tombstoned, rank exactly (paths, order, scores to
the bit) as one index of the live notes, for every visible class set, in fts and vector; the dead rows are a
class no caller sees, whatever it names; the postings are read from the segments as a query asks (a new
process's first search reads no array whole); a tombstone whose stored statistics misstate its notes fails
closed on the first query that reads a term it misstates."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.build.builder import build_index
from core.errors import IntegrityError
from core.modes import segment_arrays as sa
from core.modes.segment_arrays import tombstone_of
from core.ranking import segment_runs, segment_view, segments, stored
from core.ranking.classes import DELETED
from core.searcher import search_vault
from tests.conftest import EXAMPLE_VAULT
from tests.ranking import test_segments
from tests.ranking.test_segments import CLASS_SETS, FILES, QUERIES, _ranked, _stored, misstated, split_parts

built = test_segments.built  # the same module-scoped fixture: every subset of FILES built once

ALL = tuple(sorted(FILES))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_view_ranks_as_one_index_of_the_live_notes(built, data):
    k = data.draw(st.integers(1, 4), label="segments")
    split = data.draw(st.lists(st.integers(0, k - 1), min_size=len(ALL), max_size=len(ALL)), label="split")
    dead = set(data.draw(st.lists(st.sampled_from(ALL), max_size=4, unique=True), label="dead"))
    parts, vectors = split_parts(built, split, k, dead, data.draw(st.booleans(), label="stored statistics"))
    live = tuple(p for p in ALL if p not in dead)
    view = segment_view.view(parts)
    chunks = segment_view.view_chunks(view, vectors)
    paths = view.combined.paths
    assert list(paths) == sorted(p for seg, _ in parts for p in seg.paths)  # every row, dead ones too
    rows = view.live.seen.rows
    assert [p for p, r in zip(paths, rows) if r] == list(live)
    cold, cold_paths, cold_chunks = built(live)
    live_terms = {t: int(cold.df[i]) for t, i in cold.term_id.items() if cold.df[i] > 0}
    assert {t: int(view.live.df[i]) for t, i in view.live.term_id.items()} == live_terms
    for text in QUERIES:
        for visible in CLASS_SETS:
            got = _ranked(view.live, paths, text, visible)
            assert got == _ranked(cold, cold_paths, text, visible), (text, visible)
            got = _ranked(view.live, paths, text, visible, chunks)
            assert got == _ranked(cold, cold_paths, text, visible, cold_chunks), ("vector", text, visible)
    # a caller naming the dead rows' class sees no dead row and no statistic of one
    named = view.live.restrict(["public", "lan", DELETED])
    assert not named.seen.rows[~rows].any()
    assert _ranked(view.live, paths, "quasar", ("public", "lan", DELETED)) == _ranked(
        cold, cold_paths, "quasar", ("public", "lan")
    )


def test_a_view_array_reads_what_it_is_asked_as_the_segments_hold_it(built, monkeypatch):
    """The view's ``docs`` is, term by term, each segment's run (the generation's order) in view rows: read by
    slices, positions (negative ones too) and whole, the same values."""
    split = [i % 3 for i in range(len(ALL))]
    parts, _ = split_parts(built, split, 3, {"b/budget.md", "c/garden.md"}, True)
    view = segment_view.view(parts)
    sp = view.combined.sparse
    expected = []
    for t in range(sp.df.shape[0]):
        for (seg, _), term_map, row_map in zip(parts, view.combined.term_map, view.combined.row_map):
            local = np.flatnonzero(term_map == t)
            for lt in local.tolist():
                run = np.asarray(seg.sparse.docs[seg.sparse.indptr[lt] : seg.sparse.indptr[lt + 1]])
                expected.extend(row_map[run].tolist())
    whole = np.asarray(sp.docs)
    assert whole.tolist() == expected
    picks = np.asarray([5, 0, len(expected) - 1, -1, 9, 9, 10, 11])
    for copy_runs in (segment_runs.MAX_COPY_RUNS, 0):  # slice copies per run, or a binary search per position
        monkeypatch.setattr(segment_runs, "MAX_COPY_RUNS", copy_runs)
        fresh = segment_view.view(parts).combined.sparse.docs
        assert fresh[3:17].tolist() == expected[3:17]
        assert fresh[picks].tolist() == [expected[i] for i in picks.tolist()]
        assert int(fresh[-2]) == expected[-2]
        assert np.asarray(fresh).tolist() == expected
        with pytest.raises(IndexError):
            fresh[np.asarray([len(expected)])]


def test_a_tombstone_whose_statistics_misstate_its_notes_fails_closed_on_a_query(built):
    """Moving one count between two classes (the same total) or counting one too many: the view is built (its
    sums are not negative), and the first query reading a term the tombstone misstates fails closed."""
    sparse, paths, _ = built(ALL)
    seg = segments.Segment("s", sparse, paths)
    classes = sparse.classes.row_class
    rows = [0, next(r for r in range(1, len(paths)) if classes[r] != classes[0])]
    dead = [int(sparse.note_ids[r]) for r in rows]
    classes_rows, df_rows = _stored(sparse, rows)
    term, moved, more = misstated(sparse, df_rows)
    for doctored in (moved, more):
        view = segment_view.view([(seg, tombstone_of(seg, dead, (classes_rows, doctored)))])
        sp = view.live
        with pytest.raises(IntegrityError, match="do not match their postings"):
            sp.docs[int(sp.indptr[term]) : int(sp.indptr[term + 1])]
    honest = segment_view.view([(seg, tombstone_of(seg, dead, (classes_rows, df_rows)))]).live
    assert honest.docs[int(honest.indptr[term]) : int(honest.indptr[term + 1])].size == int(sparse.df[term])


def test_two_live_notes_with_one_path_fail_closed_in_a_view(built):
    sparse, paths, _ = built(("a/quasar.md", "c/garden.md"))
    seg = segments.Segment("s", sparse, paths)
    with pytest.raises(IntegrityError, match="same path"):
        segment_view.view([(seg, None), (seg, None)])


class _Refused(stored.LazyArray):
    """A segment's name terms that must not be read (the view is built without them)."""

    def __init__(self, array: np.ndarray) -> None:
        self.dtype, self.shape, self._full, self._name = array.dtype, array.shape, None, "refused"

    def _take(self, positions: np.ndarray) -> np.ndarray:
        raise AssertionError("a segment's name terms were read to build the view")

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        raise AssertionError("a segment's name terms were read whole")


def test_a_views_name_terms_are_each_rows_own_read_as_a_query_asks(built):
    """The view's name terms (a row's title terms, for ``name_idf``) are each row's segment's own, in view
    ids: by positions, slices and whole the same values; building the view reads none of them, and a row a
    segment names by a term its dictionary lacks fails closed when it is read."""
    split = [i % 3 for i in range(len(ALL))]
    parts, _ = split_parts(built, split, 3, {"b/budget.md"}, True)
    real = [np.asarray(seg.sparse.name_terms) for seg, _ in parts]
    refused = [
        (replace(seg, sparse=replace(seg.sparse, name_terms=_Refused(r))), t) for (seg, t), r in zip(parts, real)
    ]
    segment_view.view(refused)  # built without reading a name term
    view = segment_view.view(parts)
    sp, name = view.live, {i: t for t, i in view.live.term_id.all.items()}
    expected: list[str] = []
    for row, path in enumerate(view.combined.paths):
        (seg, _), local = next((p, p[0].paths.index(path)) for p in parts if path in p[0].paths)
        own = {i: t for t, i in seg.sparse.term_id.items()}
        run = real[[q[0] for q in parts].index(seg)][seg.sparse.name_ptr[local] : seg.sparse.name_ptr[local + 1]]
        assert [name[int(i)] for i in sp.name_terms[sp.name_ptr[row] : sp.name_ptr[row + 1]]] == [own[i] for i in run]
        expected += [own[i] for i in run]
    assert [name[int(i)] for i in np.asarray(sp.name_terms)] == expected
    positions = np.asarray([0, len(expected) - 1, -1, 3], dtype=np.int64)
    assert [name[int(i)] for i in sp.name_terms[positions]] == [expected[p] for p in positions.tolist()]
    seg, tomb = parts[1]
    broken = real[1].copy()
    broken[0] = seg.sparse.df.shape[0] + 5  # a term the segment's dictionary lacks
    doctored = list(parts)
    doctored[1] = (replace(seg, sparse=replace(seg.sparse, name_terms=broken)), tomb)
    bad = segment_view.view(doctored).live
    with pytest.raises(IntegrityError, match="by a term its dictionary lacks"):
        np.asarray(bad.name_terms)


def _two_segments(tmp_path: Path) -> Path:
    """A copy of the example vault built, one note edited and built again: a base segment, a delta and a tombstone."""
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    target = sorted((root / "projects").glob("*.md"))[0]
    target.write_text(target.read_text(encoding="utf-8") + "\nAn edit: a second segment.\n", encoding="utf-8")
    build_index(root)
    return root


def test_a_new_process_first_search_on_segments_reads_no_array_whole(tmp_path: Path, whole_reads) -> None:
    """What made a new process's first search on a segmented generation slow (the combination of every
    segment's postings: 26.6 s of a 100k-note one) is gone: it reads pieces of the segments' arrays."""
    root = _two_segments(tmp_path)
    sa.SEGMENT_CACHE.clear()
    sa.COMBINED_CACHE.clear()
    for mode in ("fts", "vector", "hybrid"):
        found = search_vault(root, "postgres connection pool", 5, mode=mode, freshness=False)
        assert found.hits and found.actual_mode == mode, mode
    assert whole_reads == []  # the combination of every segment's postings read every array whole
    assert len(sa.COMBINED_CACHE._entries) == 1


def test_a_small_segment_is_read_whole_and_a_large_one_a_piece_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """An edit's delta segment (a few notes) is read whole through one connection, closed after: no connection
    is kept open per small segment; a segment over ``WHOLE_SEGMENT_BYTES`` keeps one, its postings read as
    queries ask."""
    from core.index import verify
    from core.index.layout import layout_for

    root = _two_segments(tmp_path)
    for limit, kept_open in ((sa.WHOLE_SEGMENT_BYTES, False), (0, True)):
        monkeypatch.setattr(sa, "WHOLE_SEGMENT_BYTES", limit)
        sa.SEGMENT_CACHE.clear()
        sources = sa.segment_sources(verify.resolve(layout_for(root)))
        opened: list[str] = []

        def counting(source: sa.SegmentSource, opened: list[str] = opened) -> sa.SegmentSource:
            def shared():
                opened.append(source.sha256)
                return source.shared()

            return replace(source, shared=shared)

        view = sa._view([counting(s) for s in sources]).view
        assert opened == ([s.sha256 for s in sources] if kept_open else [])
        n = int(view.live.indptr[-1])
        assert np.asarray(view.live.docs[0:n]).size == n


def test_rows_placed_by_bisection_are_the_rows_a_sort_of_every_path_gives(tmp_path: Path, monkeypatch) -> None:
    """A large segment's paths read as asked: the few rows of the other segments placed among its rows by
    bisection give the same view (rows, their segments, liveness, paths) as sorting every path, the edited
    note's dead row and live row (one path) included; and a live row whose path a live row of the large
    segment holds fails closed."""
    from core.index import verify
    from core.index.layout import layout_for
    from core.ranking import segment_view as sv

    root = _two_segments(tmp_path)
    monkeypatch.setattr(sa, "WHOLE_SEGMENT_BYTES", 0)  # every segment large: its paths read as asked

    def view_rows(bisect_rows: int):
        monkeypatch.setattr(sv, "BISECT_ROWS", bisect_rows)
        sa.SEGMENT_CACHE.clear()
        sources = sa.segment_sources(verify.resolve(layout_for(root)))
        parts = [(seg, sa._tombstone(s, seg)) for s, seg in ((s, sa._segment(s)) for s in sources)]
        seg_of, local, live, paths, maps = sv._rows(parts)
        return parts, (seg_of.tolist(), local.tolist(), live.tolist(), list(paths), [m.tolist() for m in maps])

    parts, bisected = view_rows(sv.BISECT_ROWS)
    assert getattr(parts[0][0].paths, "lazy", False) and isinstance(sv._rows(parts)[3], sv.ViewPaths)
    _, sorted_all = view_rows(0)
    assert bisected == sorted_all
    paths = bisected[3]
    assert len(paths) == len(set(paths)) + 1  # the edited note: a dead row and a live row, one path
    seg, tomb = parts[1]
    assert tomb is None and seg.sparse.n_docs == 1
    with pytest.raises(IntegrityError, match="same path"):
        sv._rows([parts[0], (seg, None), (seg, None)])  # the delta twice: its note live in both
    base, base_tomb = parts[0]
    with pytest.raises(IntegrityError, match="same path"):
        sv._rows([(base, None), (seg, None)])  # the edited note live in the base too


def test_a_long_lived_reader_of_a_view_has_the_segments_read_their_arrays_whole(tmp_path: Path, monkeypatch) -> None:
    """As one segment's reader does (core.ranking.stored.WHOLE_AFTER_GATHERS): after that many gathers from a
    view's array, its segments' arrays are read whole and kept; the values read stay the same."""
    from core.ranking import stored

    monkeypatch.setattr(stored, "PIECE_BYTES", 256)  # the example vault's postings in pieces, as a large vault's
    root = _two_segments(tmp_path)
    monkeypatch.setattr(sa, "WHOLE_SEGMENT_BYTES", 0)
    monkeypatch.setattr(stored, "WHOLE_AFTER_GATHERS", 3)
    sa.SEGMENT_CACHE.clear()
    sa.COMBINED_CACHE.clear()
    found = search_vault(root, "postgres", 5, mode="fts", freshness=False)
    assert found.hits
    live = sa.COMBINED_CACHE._entries[next(iter(sa.COMBINED_CACHE._entries))][1].view.live
    docs = live.docs
    parts = [p for p in docs._parts if isinstance(p, stored.StoredArray)]
    assert parts and all(p._full is None for p in parts)  # a piece reader so far
    n = int(live.indptr[-1])
    picks = np.arange(0, n, 3)
    first = docs[picks]
    for _ in range(3):
        assert np.array_equal(docs[picks], first)
    assert all(p._full is not None for p in parts)  # read whole once the view was gathered from often
    assert np.array_equal(docs[picks], first) and np.array_equal(np.asarray(docs)[picks], first)
