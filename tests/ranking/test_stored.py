"""Term-major arrays stored in the generation (core.ranking.stored): what the build stores is exactly
what the row readers compute, readers load it without touching the rows, and a damaged or foreign
group is refused or not used."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from conftest import note

from core import generations as gen
from core.errors import IntegrityError
from core.ranking.chunk_vectors import chunk_group, compute_chunk_vectors, load_chunk_vectors
from core.ranking.sparse import DEFAULT_PARAMS, RankParams, compute_sparse, load_sparse, sparse_group

FILES = {
    "a.md": note("Alpha", "# Soil\n\nalpha soil compost " * 40, tags=["x"]),
    "b.md": note("Beta", "beta compost water", description="wet things"),
    "c.md": note("Gamma", "gamma ünïcödé wörds and soil"),
    "empty.md": "---\ntitle: Bare\n---\n",
}
SPARSE = ("note_ids", "indptr", "docs", "field_mask", "body_tf", "df", "bm25", "bm25_idf", "name_idf")
CHUNKS = ("indptr", "chunks", "weights", "idf", "group_starts", "group_rows", "chunk_ids", "group_of_row")


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def writable_copy(vault: Path, tmp_path: Path) -> sqlite3.Connection:
    copy = tmp_path / "copy.db"
    shutil.copyfile(gen.resolve(gen.layout_for(vault)).path, copy)
    copy.chmod(0o644)
    return sqlite3.connect(copy)


def same(a: object, b: object, names: tuple[str, ...]) -> None:
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name


def test_stored_arrays_are_exactly_what_the_rows_give(vault: Path) -> None:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    loaded, computed = load_sparse(conn), compute_sparse(conn)
    same(loaded, computed, SPARSE)
    assert loaded.term_id == computed.term_id
    same(load_chunk_vectors(conn, loaded), compute_chunk_vectors(conn, computed), CHUNKS)


def test_loading_reads_the_stored_group_not_the_rows(vault: Path, tmp_path: Path) -> None:
    db = writable_copy(vault, tmp_path)
    expected = load_sparse(db)
    expected_chunks = load_chunk_vectors(db, expected)
    db.executescript("DELETE FROM note_terms; DELETE FROM chunk_terms; DELETE FROM terms;")
    same(load_sparse(db), expected, SPARSE)
    same(load_chunk_vectors(db, expected), expected_chunks, CHUNKS)
    assert len(compute_sparse(db).term_id) == 0  # the rows are really gone


def test_other_parameters_are_computed_not_taken_from_the_stored_group(vault: Path) -> None:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    other = RankParams(k1=1.7)
    assert sparse_group(other) != sparse_group(DEFAULT_PARAMS)
    same(load_sparse(conn, other), compute_sparse(conn, other), SPARSE)
    assert not np.array_equal(load_sparse(conn, other).bm25, load_sparse(conn).bm25)


def test_a_group_of_an_older_layout_is_not_used(vault: Path, tmp_path: Path) -> None:
    """A generation stored before the layout changed (v1 held name term counts, no name idf) is
    computed from its rows, never read as the current layout (which would lack arrays)."""
    db = writable_copy(vault, tmp_path)
    group = sparse_group(DEFAULT_PARAMS)
    old = group.replace("sparse:v2:", "sparse:", 1)
    assert old != group
    db.execute("UPDATE term_major SET name = ? || substr(name, ?) WHERE name LIKE 'sparse:v2:%'", (old, len(group) + 1))
    assert db.execute("SELECT count(*) FROM term_major WHERE name LIKE 'sparse:v2:%'").fetchone()[0] == 0
    same(load_sparse(db), compute_sparse(db), SPARSE)


@pytest.mark.parametrize("array", ["sparse_docs", "chunk_weights"])
def test_truncated_stored_array_is_an_integrity_error(vault: Path, tmp_path: Path, array: str) -> None:
    db = writable_copy(vault, tmp_path)
    group, name = (sparse_group(DEFAULT_PARAMS), "docs") if array == "sparse_docs" else (chunk_group(0.3), "weights")
    db.execute("UPDATE term_major SET data = substr(data, 1, 4) WHERE name = ?", (f"{group}/{name}",))
    with pytest.raises(IntegrityError):
        load_chunk_vectors(db, load_sparse(db))


def test_missing_array_of_a_group_is_an_integrity_error(vault: Path, tmp_path: Path) -> None:
    db = writable_copy(vault, tmp_path)
    db.execute("DELETE FROM term_major WHERE name = ?", (f"{sparse_group(DEFAULT_PARAMS)}/bm25",))
    with pytest.raises(IntegrityError):
        load_sparse(db)
