"""A stored part holds each posting list once (issue 29): its term-major arrays, with the term dictionary
among them; the forward rows (``note_terms``, ``chunk_terms``) and the ``terms`` table are a writer's TEMP
working tables, derived from those arrays exactly (core.build.forward_rows)."""

from __future__ import annotations

import shutil
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLE_VAULT

from core.build.builder import build_index
from core.build.forward_rows import read_forward
from core.errors import IntegrityError
from core.generations import layout_for
from core.ranking.chunk_vectors import load_chunk_vectors
from core.ranking.sparse import SPARSE_GROUP, load_sparse

WORKING = {"terms", "note_terms", "chunk_terms"}


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


def _parts(vault: Path) -> list[Path]:
    return sorted(p for p in layout_for(vault).segments_dir.iterdir() if p.suffix in (".seg", ".del"))


def _written(conn: sqlite3.Connection) -> dict[str, object]:
    """The working rows of a build's connection, decompressed: what the build computed its arrays from."""
    notes = []
    for nid, n, data in conn.execute("SELECT note_id, n_terms, data FROM note_terms ORDER BY note_id"):
        raw = zlib.decompress(data)
        notes.append((nid, raw[: 4 * n], raw[4 * n :]))
    chunks = []
    for nid, c, n, data in conn.execute("SELECT note_id, n_chunks, n_terms, data FROM chunk_terms ORDER BY note_id"):
        raw = zlib.decompress(data)
        chunks.append((nid, raw[: 4 * c], raw[4 * c : 4 * c + 4 * n], raw[4 * c + 4 * n :]))
    return {"terms": dict(conn.execute("SELECT term, id FROM terms")), "notes": notes, "chunks": chunks}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault"))


def test_no_stored_part_holds_forward_rows_or_a_second_dictionary(vault: Path) -> None:
    build_index(vault)
    (cold,) = _parts(vault)
    (vault / "zz-quokka.md").write_text("# Quokka\n\nA quokka line.\n", encoding="utf-8")
    build_index(vault)  # a delta segment of the new note
    (vault / "zz-quokka.md").write_text("# Quokka\n\nA quokka line, edited.\n", encoding="utf-8")
    build_index(vault)  # another, and a tombstone of the first one's note
    parts = _parts(vault)
    assert len(parts) == 4 and cold in parts and {p.suffix for p in parts} == {".seg", ".del"}
    for part in parts:
        assert not _tables(part) & WORKING, part.name
        assert not any(name.startswith("sqlite_autoindex_terms") for name in _tables(part)), part.name


def test_the_rows_a_segment_gives_back_are_the_rows_the_build_wrote(vault: Path) -> None:
    wrote: dict[str, object] = {}

    def keep(conn: sqlite3.Connection) -> int:
        wrote.update(_written(conn))
        return 0

    build_index(vault, before_publish=keep)
    (segment,) = _parts(vault)
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        forward = read_forward(conn)
        some = read_forward(conn, [nid for nid, *_ in wrote["notes"]][1::2])  # type: ignore[index]
    finally:
        conn.close()
    assert forward is not None and some is not None
    assert forward.terms == wrote["terms"] and len(forward.terms) > 100
    notes = [(nid, ids.astype("<i4").tobytes(), tf.astype("<u2").tobytes()) for nid, ids, tf in forward.notes]
    assert notes == wrote["notes"]
    chunks = [
        (nid, lengths.astype("<u4").tobytes(), ids.astype("<i4").tobytes(), tf.astype("<u2").tobytes())
        for nid, lengths, ids, tf in forward.chunks
    ]
    assert chunks == wrote["chunks"]
    assert [r[0] for r in some.notes] == [r[0] for r in forward.notes][1::2]  # the chosen notes only, in order
    assert all(np.array_equal(a[2], b[2]) for a, b in zip(some.chunks, forward.chunks[1::2], strict=True))


def test_a_part_without_arrays_or_working_rows_is_an_integrity_error(vault: Path, tmp_path: Path) -> None:
    """A stored file has nothing left to compute its arrays from: their loss is a typed error, not SQL's."""
    build_index(vault)
    (segment,) = _parts(vault)
    copy = tmp_path / "copy.seg"
    shutil.copyfile(segment, copy)
    copy.chmod(0o644)
    conn = sqlite3.connect(copy)
    try:
        sparse = load_sparse(conn)
        conn.execute("DELETE FROM term_major WHERE name LIKE 'chunks:%'")
        with pytest.raises(IntegrityError, match="neither its term-major arrays nor working"):
            load_chunk_vectors(conn, sparse)
        conn.execute("DELETE FROM term_major WHERE name LIKE ?", (SPARSE_GROUP + "/%",))
        with pytest.raises(IntegrityError, match="neither its term-major arrays nor working"):
            load_sparse(conn)
    finally:
        conn.close()
