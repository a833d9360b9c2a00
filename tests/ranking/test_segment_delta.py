"""A generation's combined index derived from the previous generation's (core.ranking.segment_delta): for
any previous generation (segments with tombstones) and any next one (the same segments, tombstones that
grew, added segments holding edited or new notes), ``extend`` gives exactly ``combine``'s index of the
next generation's parts, array for array (its chunk vectors and query vocabulary too); a tombstone whose
stored statistics do not match the notes it drops fails closed."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from conftest import note, write_vault
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import generations as gen
from core.build.builder import build_index
from core.errors import IntegrityError
from core.ranking import segment_delta, segments, vocabulary
from core.ranking.chunk_vectors import load_chunk_vectors
from core.ranking.segment_chunks import combine_chunks, extend_chunks
from core.ranking.sparse import load_sparse
from tests.ranking.test_segments import FILES

NEW = {  # notes a later generation adds (new paths, new words, a new class)
    "0/first.md": note("First", "aardvark quasar first words", classification="ops"),
    "c/hinge.md": note("Hinge", "hinge of the telescope mount, zymurgy", classification="secret"),
    "z/last.md": note("Last", "last note, comet and zebrafish"),
}
EDITED = " edited: kumquat and the telescope again"


def _content(path: str, edited: bool) -> str:
    text = {**FILES, **NEW}[path]
    return text + EDITED if edited else text


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(Segment, chunk vectors) of a subset of notes (edited or not), built once per subset."""
    cache: dict[tuple, tuple] = {}

    def build(paths: tuple[str, ...], edited: bool, shift: int):
        key = (paths, edited)
        if key not in cache:
            root = write_vault(tmp_path_factory.mktemp("seg"), {p: _content(p, edited) for p in paths})
            build_index(root)
            conn = gen.connect_readonly(gen.resolve(gen.layout_for(root)))
            sparse = load_sparse(conn)
            by_id = dict(conn.execute("SELECT id, rel_path FROM notes").fetchall())
            cache[key] = (sparse, [by_id[int(i)] for i in sparse.note_ids], load_chunk_vectors(conn, sparse))
        sparse, paths_, chunks = cache[key]
        shifted = replace(sparse, note_ids=sparse.note_ids + shift)  # ids unique in the generation
        return segments.Segment(f"{key}", shifted, paths_), chunks

    return build


def assert_same_sparse(got, want):
    for f in fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if f.name == "_derived":
            continue
        if f.name == "classes":
            for g in fields(b):
                x, y = getattr(a, g.name), getattr(b, g.name)
                assert np.array_equal(np.asarray(x), np.asarray(y)) and np.asarray(x).dtype == np.asarray(y).dtype, g
        elif f.name == "term_id":
            assert dict(a) == dict(b)
        elif isinstance(b, np.ndarray) or b is None:
            assert (a is None) == (b is None), f.name
            if b is not None:
                assert np.array_equal(a, b) and a.dtype == b.dtype, f.name
        else:
            assert a == b, f.name


def assert_same_chunks(got, want):
    for f in fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        assert (a is None) == (b is None), f.name
        if b is not None:
            assert np.array_equal(np.asarray(a), np.asarray(b)) and np.asarray(a).dtype == np.asarray(b).dtype, f.name


def _generation(draw, built):
    """(previous parts, previous vectors, next parts, next vectors, grown rows per previous segment)."""
    names = sorted(FILES)
    k = draw(st.integers(1, 3), label="segments")
    which = draw(st.lists(st.integers(0, k - 1), min_size=len(names), max_size=len(names)), label="split")
    dead = set(draw(st.lists(st.sampled_from(names), max_size=3, unique=True), label="dead"))
    edited = set(draw(st.lists(st.sampled_from(names), max_size=3, unique=True), label="edited"))
    deleted = set(draw(st.lists(st.sampled_from(names), max_size=2, unique=True), label="deleted"))
    new = draw(st.lists(st.sampled_from(sorted(NEW)), max_size=3, unique=True), label="new")
    prev, prev_vec, grown_rows = [], [], []
    for s in range(k):
        mine = tuple(p for p, w in zip(names, which) if w == s)
        if not mine:
            continue
        seg, chunks = built(mine, False, 100 * (len(prev) + 1))
        rows = [r for r, p in enumerate(seg.paths) if p in dead]
        more = [r for r, p in enumerate(seg.paths) if p not in dead and p in (edited | deleted)]
        prev.append((seg, segments.tombstone(seg.sparse, np.asarray(rows, np.int64)) if rows else None))
        prev_vec.append(chunks)
        grown_rows.append((rows, more))
    added_paths = tuple(sorted((edited - dead) | set(new)))
    return prev, prev_vec, grown_rows, added_paths


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_extended_generation_is_the_combined_index_of_its_parts(built, data):
    prev, prev_vec, grown_rows, added_paths = _generation(data.draw, built)
    before = segments.combine(prev)
    nxt, grown = [], {}
    for s, ((seg, _), (rows, more)) in enumerate(zip(prev, grown_rows)):
        all_rows = np.asarray(sorted(rows + more), np.int64)
        tomb = segments.tombstone(seg.sparse, all_rows) if all_rows.size else None
        nxt.append((seg, tomb))
        if more:
            old = prev[s][1]
            expected = segments.Tombstone(
                np.asarray(more, np.int64),
                tomb.docs - (old.docs if old else 0),
                tomb.field_len - (old.field_len if old else 0),
                tomb.df - (old.df if old else 0),
            )
            grown[s] = segment_delta.Grown(before.row_map[s][more], seg.sparse.classes.names, expected)
    vectors = list(prev_vec)
    if added_paths:
        seg, chunks = built(added_paths, True, 1000)
        nxt.append((seg, None))
        vectors.append(chunks)
    want = segments.combine(nxt)
    got, delta = segment_delta.extend(before, grown, nxt[len(prev) :])
    assert got.paths == want.paths
    assert np.array_equal(got.segment, want.segment) and np.array_equal(got.words, want.words)
    for a, b in zip(got.row_map, want.row_map, strict=True):
        assert np.array_equal(a, b)
    for a, b in zip(got.term_map, want.term_map, strict=True):  # a previous segment's keeps its dead notes' terms
        assert np.array_equal(a[b >= 0], b[b >= 0]) and ((a == -1) | (b == -1) | (a == b)).all()
    assert_same_sparse(got.sparse, want.sparse)
    lists = vocabulary.derived_lists(vocabulary.vocabulary(before.sparse), delta.terms, delta.fresh)
    assert lists == vocabulary._vocabulary_lists(want.sparse.term_id, want.sparse.df)
    before_chunks = combine_chunks(before, prev_vec)
    want_chunks = combine_chunks(want, vectors)
    assert_same_chunks(extend_chunks(before_chunks, delta, got, vectors[len(prev) :]), want_chunks)
    missed = replace(delta, dead_terms=np.zeros(0, np.int64))  # runs that miss the dead chunks: looked for everywhere
    assert_same_chunks(extend_chunks(before_chunks, missed, got, vectors[len(prev) :]), want_chunks)


def test_a_grown_tombstone_that_does_not_match_the_notes_it_drops_fails_closed(built):
    seg, _ = built(tuple(sorted(FILES)), False, 0)
    before = segments.combine([(seg, None)])
    rows = np.asarray([0, 3], np.int64)
    tomb = segments.tombstone(seg.sparse, rows)
    names = seg.sparse.classes.names
    for doctored in (
        replace(tomb, df=tomb.df * 0),
        replace(tomb, docs=tomb.docs + 1),
        replace(tomb, field_len=tomb.field_len + 1),
    ):
        with pytest.raises(IntegrityError, match="do not match their live postings"):
            segment_delta.extend(before, {0: segment_delta.Grown(before.row_map[0][rows], names, doctored)}, [])
    got, _ = segment_delta.extend(before, {0: segment_delta.Grown(before.row_map[0][rows], names, tomb)}, [])
    assert_same_sparse(got.sparse, segments.combine([(seg, tomb)]).sparse)


def test_an_added_note_whose_path_is_live_fails_closed(built, tmp_path: Path):
    seg, _ = built(("a/quasar.md", "c/garden.md"), False, 0)
    again, _ = built(("a/quasar.md",), True, 100)
    before = segments.combine([(seg, None)])
    with pytest.raises(IntegrityError, match="same path"):
        segment_delta.extend(before, {}, [(again, None)])


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_splice_is_delete_then_insert(data):
    from core.ranking.postings import splice

    n = data.draw(st.integers(0, 40))
    width = data.draw(st.sampled_from([None, 2]))
    shape = (n,) if width is None else (n, width)
    old = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    drop = np.asarray(sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=n))) if n else [], np.int64)
    at = np.asarray(sorted(data.draw(st.lists(st.integers(0, n - drop.shape[0]), max_size=6))), np.int64)
    values = 1000 + np.arange(at.shape[0] * (width or 1)).reshape((at.shape[0], *shape[1:]))
    want = np.insert(np.delete(old, drop, axis=0), at, values, axis=0)
    assert np.array_equal(splice(old, drop, at, values), want)


def test_an_edit_that_keeps_its_path_copies_the_kept_rows_and_still_fails_closed(built, monkeypatch):
    """An edited note keeps its path, so its new row takes the old one's place and no kept row moves: the
    kept postings' rows are copied as they are (no renumbering through a lookup of every posting), the
    arrays equal ``combine``'s, the term dictionary is a look-up in the sorted terms (no dict of every term
    built again), and a tombstone whose statistics do not name every term of the note it drops fails closed."""
    from core.ranking import segment_dropped
    from core.ranking.sorted_terms import SortedTerms

    seg, _ = built(tuple(sorted(FILES)), False, 0)
    again, _ = built(("a/quasar.md",), True, 100)  # new words ("kumquat"): the term ids move
    before = segments.combine([(seg, None)])
    rows = np.asarray([seg.paths.index("a/quasar.md")], np.int64)
    tomb = segments.tombstone(seg.sparse, rows)
    names = seg.sparse.classes.names
    lookups: list[bool] = []
    real = segment_dropped.splice

    def splice(old, drop, at, values, lookup=None):
        lookups.append(lookup is not None)
        return real(old, drop, at, values, lookup=lookup)

    monkeypatch.setattr(segment_dropped, "splice", splice)
    got, _ = segment_delta.extend(
        before, {0: segment_delta.Grown(before.row_map[0][rows], names, tomb)}, [(again, None)]
    )
    assert lookups == [False]
    assert isinstance(got.sparse.term_id, SortedTerms)
    assert_same_sparse(got.sparse, segments.combine([(seg, tomb), (again, None)]).sparse)
    fewer = replace(
        tomb, df=np.where(np.arange(tomb.df.shape[1]) == int(np.flatnonzero(tomb.df.sum(axis=0))[0]), 0, tomb.df)
    )
    with pytest.raises(IntegrityError, match="do not match their live postings"):
        segment_delta.extend(before, {0: segment_delta.Grown(before.row_map[0][rows], names, fewer)}, [(again, None)])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_generation_whose_last_segments_were_merged_away_is_the_combined_index_of_its_parts(built, data):
    """A segment-limit merge of the newest segments: the kept ones first (their tombstones may grow), then the
    merged segment (the merged-away segments' live notes, new ids) and the edit's: ``extend`` with ``keep``
    gives ``combine``'s arrays, the chunk vectors ``combine_chunks``'s."""
    names = sorted(FILES)
    cut = data.draw(st.integers(2, len(names) - 2), label="cut")
    kept_paths, merged_paths = tuple(names[:cut]), tuple(names[cut:])
    split = data.draw(st.integers(1, len(merged_paths)), label="split")
    seg, vec = built(kept_paths, False, 100)
    a, a_vec = built(merged_paths[:split], False, 200)
    b, b_vec = built(merged_paths[split:], False, 300) if split < len(merged_paths) else (None, None)
    parts = [(seg, None)] + [(x, None) for x in (a, b) if x is not None]
    vectors = [vec] + [v for v in (a_vec, b_vec) if v is not None]
    before = segments.combine(parts)
    merged, merged_vec = built(merged_paths, False, 400)
    edited = data.draw(st.sampled_from(kept_paths), label="edited")
    again, again_vec = built((edited,), True, 500)
    rows = np.asarray([seg.paths.index(edited)], np.int64)
    tomb = segments.tombstone(seg.sparse, rows)
    grown = {0: segment_delta.Grown(before.row_map[0][rows], seg.sparse.classes.names, tomb)}
    for s, (x, _) in enumerate(parts[1:], start=1):
        live = np.arange(x.sparse.n_docs, dtype=np.int64)
        grown[s] = segment_delta.Grown(
            before.row_map[s][live], x.sparse.classes.names, segments.tombstone(x.sparse, live)
        )
    nxt = [(seg, tomb), (merged, None), (again, None)]
    got, delta = segment_delta.extend(before, grown, nxt[1:], kept=[0])
    want = segments.combine(nxt)
    assert got.paths == want.paths and np.array_equal(got.segment, want.segment)
    assert_same_sparse(got.sparse, want.sparse)
    for x, y in zip(got.row_map, want.row_map, strict=True):
        assert np.array_equal(x, y)
    chunks = extend_chunks(combine_chunks(before, vectors), delta, got, [merged_vec, again_vec])
    assert_same_chunks(chunks, combine_chunks(want, [vec, merged_vec, again_vec]))
