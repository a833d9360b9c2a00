"""Segments with tombstones as the ranking reads them (core.ranking.segments, core.modes.segment_arrays):
tombstones (stored or counted) checked against their segment, the modes' one function over a generation's
segments cached per segment, and the fixtures the view's tests share (tests/ranking/test_segment_view.py:
random splits of a vault's notes into segments, each built as its own small vault)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import note, write_vault

from core import generations as gen
from core.build.builder import build_index
from core.errors import IntegrityError
from core.modes.segment_arrays import tombstone_of
from core.ranking import segment_view, segments
from core.ranking.chunk_vectors import load_chunk_vectors, restrict_chunks, vector_scores
from core.ranking.expansion import QueryAnalyzer, vocabulary
from core.ranking.sparse import bm25_scores, load_sparse, query_postings

FILES = {
    "a/quasar.md": note("Quasar log", "quasar observations tonight with the telescope", tags=["sky"]),
    "a/comet.md": note("Comet", "comet orbit near the quasar; orbit tables", classification="public"),
    "b/budget.md": note("Budget", "budget budget relay zebrafish", classification="secret"),
    "b/relay.md": note("Relay wiring", "relay wiring of the quasar mount", classification="lan"),
    "c/garden.md": note("Garden", "gardening and the old shed, telescope stand"),
    "c/orbit.md": note("Orbit tables", "orbit orbit tables for the comet season"),
    "d/secret.md": note("Quasar secret", "quasar budget notes, xylophone only here", classification="secret"),
    "d/telescope.md": note("Telescope", "telescope maintenance: mount, mirror, quasar", tags=["sky", "gear"]),
    "e/mirror.md": note("Mirror", "mirror polishing notes; telescope mirror", classification="lan"),
    "e/season.md": note("Season", "the comet season and the garden shed"),
}
QUERIES = ("quasar", "telescope mirror", "orbit tables", "quas", "telescop", "budgte", "zebrafish", "xylophone",
           "comet season garden", "relay")  # fmt: skip
CLASS_SETS = (None, ("public",), ("public", "lan"), ("secret",), ("lan", "secret"), ())


def _index(root: Path):
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(root)))
    sparse = load_sparse(conn)
    by_id = dict(conn.execute("SELECT id, rel_path FROM notes").fetchall())
    return sparse, [by_id[int(i)] for i in sparse.note_ids], load_chunk_vectors(conn, sparse)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every subset a property example asks for, built once (keyed by its paths)."""
    cache: dict[tuple[str, ...], tuple] = {}

    def build(paths: tuple[str, ...]):
        if paths not in cache:
            root = write_vault(tmp_path_factory.mktemp("seg"), {p: FILES[p] for p in paths})
            build_index(root)
            cache[paths] = _index(root)
        return cache[paths]

    return build


def _ranked(sparse, paths, text: str, visible, chunks=None):
    """(analysed terms, [(path, score)] best first, ties on the row) of ``text`` for a caller: fts's
    BM25F with its bonuses, or with ``chunks`` vector's chunk BM25 (and its best chunk's id)."""
    sp = sparse if visible is None else sparse.restrict(visible)
    analysis = QueryAnalyzer(sp.term_id, vocabulary(sp), ["en"]).analyse(text)
    postings = query_postings(sp, analysis.terms, analysis.weights, analysis.cover)
    if chunks is None:
        scores, matched = bm25_scores(sp, analysis.terms, postings)
    else:
        vectors = chunks if visible is None else restrict_chunks(chunks, sp)
        scores, matched, _ = vector_scores(sp, vectors, analysis.terms, postings)
    rows = np.flatnonzero((matched > 0) & sp.sees(np.arange(sp.n_docs)))
    order = rows[np.lexsort((rows, -scores[rows]))]
    return sorted(analysis.terms), [(paths[r], scores[r].tobytes()) for r in order.tolist()]


def split_parts(built, which: list[int], k: int, dead: set[str], stored_stats: bool = False):
    """The (segment, tombstone) list of the notes of FILES split by ``which`` (each note's segment) into ``k``
    segments, ids unique in the generation, ``dead`` tombstoned (their statistics as a tombstone stores them,
    or counted from the segment's arrays); and each segment's chunk vectors."""
    parts, vectors = [], []
    for s in range(k):
        mine = tuple(p for p, w in zip(sorted(FILES), which) if w == s)
        if not mine:
            continue
        sparse, paths, chunks = built(mine)
        sparse = replace(sparse, note_ids=sparse.note_ids + 100 * (k - s))  # ids unique in the generation
        vectors.append(chunks)
        seg = segments.Segment(f"s{s}", sparse, paths)
        rows = [r for r, p in enumerate(paths) if p in dead]
        ids = [int(sparse.note_ids[r]) for r in rows]
        tomb = tombstone_of(seg, ids, _stored(sparse, rows) if stored_stats and rows else None) if rows else None
        parts.append((seg, tomb))
    return parts, vectors


def test_a_tombstone_beyond_its_segment_or_stating_no_term_fails_closed(built):
    sparse, paths, _ = built(tuple(sorted(FILES)))
    tomb = segments.tombstone(sparse, np.asarray([0, 3], dtype=np.int64))
    doctored = segments.Tombstone(tomb.rows, tomb.docs, tomb.field_len, tomb.df * 0)
    view = segment_view.view([(segments.Segment("s", sparse, paths), doctored)]).live
    term = int(np.flatnonzero(tomb.df.sum(axis=0))[0])
    with pytest.raises(IntegrityError, match="do not match their postings"):
        view.docs[int(view.indptr[term]) : int(view.indptr[term + 1])]
    with pytest.raises(IntegrityError, match="beyond"):
        segments.tombstone(sparse, np.asarray([len(paths)], dtype=np.int64))


def _stored(sparse, rows):
    """A tombstone's stored statistics (core.index.tables.segments.create_tombstone) of ``rows``."""
    counted = segments.tombstone(sparse, np.asarray(rows, dtype=np.int64))
    names = sparse.classes.names
    classes = [(n, int(counted.docs[c]), json.dumps(counted.field_len[c].tolist())) for c, n in enumerate(names)]
    cls, terms = np.nonzero(counted.df)
    return classes, [(names[c], int(t), int(counted.df[c, t])) for c, t in zip(cls.tolist(), terms.tolist())]


def misstated(sparse, df_rows):
    """(the term misstated, ``df_rows`` with one count moved to another class that holds the term (the same
    total per term), ``df_rows`` with that count one too many)."""
    names, per_class = sparse.classes.names, segments._class_df(sparse.classes, np.asarray(sparse.df))
    held = {(c, t) for c, t, _ in df_rows}
    i, other = next(
        (i, o) for i, (c, t, _) in enumerate(df_rows) for o in names
        if o != c and (o, t) not in held and per_class[names.index(o), t] > 0
    )  # fmt: skip
    moved = [(other if j == i else c, t, n) for j, (c, t, n) in enumerate(df_rows)]
    more = [(c, t, n + (j == i)) for j, (c, t, n) in enumerate(df_rows)]
    return df_rows[i][1], moved, more


def test_a_stored_tombstone_is_used_and_a_doctored_one_fails_closed(built, monkeypatch):
    """The reader takes a tombstone's statistics from the tombstone (not counted from the segment's whole
    arrays) and checks its notes and lengths against the dead rows (its df per class: on the first query
    that reads a term, core.ranking.segment_runs.Check, tests/ranking/test_segment_view.py)."""
    sparse, paths, _ = built(tuple(sorted(FILES)))
    seg = segments.Segment("s", sparse, paths)
    classes = sparse.classes.row_class
    rows = [0, next(r for r in range(1, len(paths)) if classes[r] != classes[0])]  # two classes
    dead = [int(sparse.note_ids[r]) for r in rows]
    classes_rows, df_rows = _stored(sparse, rows)
    expected = segment_view.view([(seg, segments.tombstone(sparse, np.asarray(rows)))]).live
    monkeypatch.setattr(segments, "tombstone", lambda *a: pytest.fail("counted from the segment's arrays"))
    got = segment_view.view([(seg, tombstone_of(seg, dead, (classes_rows, df_rows)))]).live
    assert np.array_equal(got.df, expected.df) and got.n_stat == expected.n_stat == len(paths) - 2
    assert np.array_equal(got.classes.docs, expected.classes.docs)
    wrong_docs = [(c, n + 1, f) for c, n, f in classes_rows]
    with pytest.raises(IntegrityError, match="does not match its dead notes"):
        tombstone_of(seg, dead, (wrong_docs, df_rows))
    with pytest.raises(IntegrityError, match="does not fit"):
        tombstone_of(seg, dead, (classes_rows, [("nosuchclass", 1, 1)]))


def test_a_word_only_a_dead_note_holds_is_not_in_the_vocabulary(built):
    sparse, paths, _ = built(tuple(sorted(FILES)))
    rows = [paths.index("d/secret.md"), paths.index("b/budget.md")]
    view = segment_view.view([(segments.Segment("s", sparse, paths), segments.tombstone(sparse, np.asarray(rows)))])
    assert "xylophon" not in view.live.term_id and "zebrafish" not in view.live.term_id
    assert _ranked(view.live, view.combined.paths, "xylophone", None)[1] == []
    assert vocabulary(view.live).known(["xylophon", "quasar"]) == ["quasar"]


def test_the_modes_load_a_generation_of_segments_through_one_function_cached_per_segment(tmp_path, built):
    from core.modes import segment_arrays as sa

    names = sorted(FILES)
    # segment two starts with five placeholder notes (paths sorting first), tombstoned: its own notes get
    # ids 6.., after segment one's 1..5, as a build numbers notes once per generation
    placeholders = {f"0/p{i}.md": note(f"Placeholder {i}", "placeholder words only") for i in range(5)}
    files = {"one": {p: FILES[p] for p in names[:5]}, "two": {**placeholders, **{p: FILES[p] for p in names[5:]}}}
    roots = {}
    for name, content in files.items():
        roots[name] = write_vault(tmp_path / name, content)
        build_index(roots[name])

    def source(name, dead=()):
        root = roots[name]
        return sa.SegmentSource(name * 32, lambda: gen.connect_readonly(gen.resolve(gen.layout_for(root))), dead)

    sa.SEGMENT_CACHE.clear()
    base_loads = sa.SEGMENT_CACHE.loads  # a process counter: earlier tests may have loaded segments
    marker = load_sparse(source("one").connect())
    assert sa.generation_sparse([source("one")], "dir", ("g1",), lambda: marker) is marker  # today's path
    assert sa.SEGMENT_CACHE.loads == base_loads
    two = _index(roots["two"])
    dead = tuple(int(i) for i, p in zip(two[0].note_ids, two[1]) if p.startswith("0/"))
    generation = [source("one"), source("two", dead)]
    got = sa.generation_sparse(generation, "dir", ("g2",), lambda: marker)
    cold, cold_paths, cold_chunks = built(tuple(names))
    assert got.visible_note_ids().tolist() == cold.note_ids.tolist()  # ids 1..10 in path order, as the cold build's
    assert (got.note_ids[~got.seen.rows] < 0).all()  # the dead rows: no id finds them
    assert {t: int(got.df[i]) for t, i in got.term_id.items()} == {
        t: int(cold.df[i]) for t, i in cold.term_id.items() if cold.df[i] > 0
    }
    assert "placeholder" not in got.term_id
    vectors = sa.generation_chunks(generation, "dir", ("g2",), lambda: cold_chunks)
    view_paths = sa.COMBINED_CACHE._entries["dir"][1].view.combined.paths
    assert _ranked(got, view_paths, "telescope mirror", ("public",), vectors) == _ranked(
        cold, cold_paths, "telescope mirror", ("public",), cold_chunks
    )
    assert sa.SEGMENT_CACHE.loads - base_loads == 4  # each segment's sparse and chunk arrays, once
    # the next generation drops segment one's notes but "a/comet.md": nothing is loaded again
    first = _index(roots["one"])
    gone = tuple(int(i) for i, p in zip(first[0].note_ids, first[1]) if p != "a/comet.md")
    after = sa.generation_sparse([source("one", gone), source("two", dead)], "dir", ("g3",), lambda: marker)
    assert sa.SEGMENT_CACHE.loads - base_loads == 4 and after.n_stat == 6
    with pytest.raises(IntegrityError, match="names notes it does not hold"):
        sa.generation_sparse([source("one", (999,)), source("two", dead)], "dir", ("g4",), lambda: marker)


def test_fusion_breaks_equal_scores_by_the_tie_order_it_is_given():
    """hybrid / graph_assisted fuse by note id; over segments the ids do not follow the paths, so the
    context hands the index row (path order) as the tie order (core.modes.context.tie_order)."""
    from core.modes.lexical import fused

    rankings = [[(7, 1.0), (3, 0.5)], [(3, 1.0), (7, 0.5)]]  # 3 and 7 tie
    assert [nid for nid, _ in fused(rankings, 2, (1.0, 1.0))] == [3, 7]
    assert [nid for nid, _ in fused(rankings, 2, (1.0, 1.0), tie={7: 0, 3: 1}.__getitem__)] == [7, 3]
