"""Per-classification statistics (core.ranking.classes): a restricted caller is scored with the
generation's own arrays, its hidden rows masked and its N, df and averages summed over its visible
classes (the results against a cold index without the hidden notes: tests/ranking/test_visibility.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import note, with_working, write_vault

from core import generations as gen
from core.build.builder import build_index
from core.ranking import sparse_rows
from core.ranking.chunk_vectors import load_chunk_vectors
from core.ranking.classes import ClassBuilder, class_stats_from
from core.ranking.sparse import load_sparse
from core.ranking.visibility import VISIBILITY_CACHE
from core.searcher import search_vault

# ---------------------------------------------------------------- the stored statistics

FILES = {
    "p1.md": note("Quasar", "quasar nebula orbit quasar"),
    "p2.md": note("Orbit", "orbit comet", classification="public"),
    "s1.md": note("Secret quasar", "quasar relay budget", classification="secret"),
    "s2.md": note("Budget", "budget budget relay", classification="SECRET"),
    "l1.md": note("Lan", "lan only words: zebrafish", classification="lan"),
}


@pytest.fixture(scope="module")
def vault(tmp_path_factory):
    path = write_vault(tmp_path_factory.mktemp("cls"), FILES)
    build_index(path)
    return path


def _conn(vault):
    return gen.connect_readonly(gen.resolve(gen.layout_for(vault)))


def test_the_stored_class_statistics_are_the_computed_ones_and_sum_to_the_totals(vault):
    stored, computed = load_sparse(_conn(vault)), sparse_rows.compute_sparse(with_working(_conn(vault)))
    a, b = stored.classes, computed.classes
    assert a is not None and b is not None
    assert a.names == b.names == ("lan", "public", "secret")  # SECRET is the class secret, as the filter lowers it
    for name in ("row_class", "docs", "field_len", "df_ptr", "df_terms", "df_counts"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.docs.tolist() == [1, 2, 2] and a.major == 1  # public has the most notes: its df is derived
    assert a.df_ptr[2] == a.df_ptr[1]  # ... and not stored
    assert np.array_equal(a.field_len.sum(axis=0), stored.field_len.sum(axis=0, dtype=np.int64))
    every = np.ones(3, dtype=bool)
    assert np.array_equal(a.df(stored.df, every), stored.df)


@pytest.mark.parametrize("visible", [["public"], ["secret"], ["lan", "secret"], ["public", "lan"], []])
def test_a_views_statistics_equal_those_counted_over_its_visible_rows(vault, visible):
    full = load_sparse(_conn(vault))
    view = full.restrict(visible)
    assert view.seen is not None
    rows = view.seen.rows
    assert view.n_stat == int(rows.sum())
    assert np.array_equal(view.length_sums(), full.field_len[rows].sum(axis=0, dtype=np.int64))
    # df counted posting by posting over the visible rows
    counted = np.zeros_like(full.df)
    for t in range(full.df.shape[0]):
        docs = np.asarray(full.docs[full.indptr[t] : full.indptr[t + 1]])
        counted[t] = int(rows[docs].sum())
    assert np.array_equal(view.df, counted)
    assert set(view.term_id) == {t for t, i in full.term_id.items() if counted[i] > 0}
    hidden_ids = full.note_ids[~rows]
    assert (view.rows_of(hidden_ids) == -1).all()


def test_class_df_without_a_majority_visible_is_the_sum_of_the_visible_classes():
    """Three classes, the majority hidden: the visible df is the sum of the stored per-class df."""
    field_len = np.ones((6, 2), dtype=np.uint32)
    builder = ClassBuilder(["a", "a", "a", "b", "c", "c"], field_len)
    terms = np.array([0, 1, 0, 2, 1, 2, 0, 2, 2], dtype=np.int32)
    rows = np.array([0, 0, 1, 2, 3, 3, 4, 4, 5], dtype=np.int32)
    builder.add(terms, rows)
    stats = builder.finish()
    total = np.bincount(terms, minlength=3).astype(np.int64)
    assert stats.df(total, np.array([False, True, True])).tolist() == [1, 1, 3]
    assert stats.df(total, np.array([True, False, True])).tolist() == [3, 1, 3]
    assert stats.df(total, np.array([False, False, False])).tolist() == [0, 0, 0]
    assert stats.field_len.tolist() == [[3, 3], [1, 1], [2, 2]]


def test_a_restricted_caller_reads_no_rows_for_its_statistics(vault, monkeypatch):
    """The restricted caller's statistics come from the stored arrays (no note_terms / chunk_terms read)."""
    search_vault(vault, "quasar", mode="vector")  # the whole generation's structures, loaded and cached
    VISIBILITY_CACHE.clear()

    def refuse(*args, **kwargs):
        raise AssertionError("a restricted caller's statistics were computed from the rows")

    monkeypatch.setattr(sparse_rows, "note_term_rows", refuse)
    monkeypatch.setattr("core.ranking.chunk_vectors.chunk_term_rows", refuse)
    for mode in ("fts", "vector"):
        results = search_vault(vault, "quasar", mode=mode, classifications=["public"])
        assert [r.rel_path for r in results] == ["p1.md"]


def test_chunk_class_statistics_sum_to_the_generation_mean(vault):
    full = load_sparse(_conn(vault))
    vectors = load_chunk_vectors(_conn(vault), full)
    nonempty = vectors.lengths[vectors.lengths > 0]
    assert int(vectors.class_chunks.sum()) == nonempty.shape[0]
    assert int(vectors.class_chunk_len.sum()) == int(nonempty.sum())


def test_the_per_class_df_survives_its_compact_encoding():
    """Term ids stored as per-class gaps and counts in the smallest type come back exactly, empty classes
    and a majority between them included."""
    rng = np.random.default_rng(7)
    names = [str(c) for c in rng.integers(0, 5, 400)] + ["0"] * 200  # class "0" is the majority
    field_len = rng.integers(0, 50, (len(names), 5)).astype(np.uint32)
    builder = ClassBuilder(names, field_len)
    terms = rng.integers(0, 70_000, 20_000).astype(np.int32)
    rows = rng.integers(0, len(names), 20_000).astype(np.int32)
    pairs = np.unique(np.stack([rows, terms], axis=1), axis=0)  # a (row, term) posting once
    builder.add(pairs[:, 1].copy(), pairs[:, 0].copy())
    stats = builder.finish()
    back = class_stats_from(stats.arrays(), len(names), 5, 70_000)
    assert np.array_equal(back.df_terms, stats.df_terms) and np.array_equal(back.df_counts, stats.df_counts)
    assert back.arrays()["class_df_counts"].dtype.itemsize < 4
    total = np.bincount(pairs[:, 1], minlength=70_000).astype(np.int64)
    row_class = stats.row_class[pairs[:, 0]]
    for chosen in ([True, False, True, False, True], [False, True, True, True, True], [False] * 5):
        sel = np.asarray(chosen)
        want = np.bincount(pairs[:, 1][sel[row_class]], minlength=70_000)
        assert np.array_equal(back.df(total, sel), want), chosen
