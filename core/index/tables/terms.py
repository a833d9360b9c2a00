"""The build's working tables of sparse term vectors: ``terms`` (the dictionary), ``note_terms`` (per note,
per field: fts) and ``chunk_terms`` (each chunk's field-weighted vector, one row per note: vector).

They are TEMP tables of the connection that writes a database (the build's, a segment writer's), never
stored: a stored database holds its postings once, term-major (``term_major``, core.ranking.stored),
with the dictionary as its ``term_text`` / ``term_ids`` arrays; a writer fills these tables from those
arrays (``core.build.forward_rows``) and computes the arrays again from them. Unqualified SQL names
resolve to the TEMP schema first, so every query below reads the working copy.

A vector row is a zlib stream (level 0: stored blocks, the rows never leave the writer) with its counts
beside it, so that a reader sizes its arrays without reading the bytes; the readers here give back the
uncompressed parts. The dictionary is keyed by term (WITHOUT ROWID: one B-tree; filled in term order).
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable, Iterator

from core.errors import IntegrityError
from core.index.tables.notes import visible_rows
from core.index.tables.notes_fts import FTS_COLUMNS

DDL_TERMS = """
CREATE TEMP TABLE IF NOT EXISTS terms (
    term TEXT PRIMARY KEY,
    id   INTEGER NOT NULL
) WITHOUT ROWID"""

# Sparse term vector of a note: int32 term ids (ascending) and a uint16 matrix
# [n_terms, len(FTS_COLUMNS)] of per-field term frequencies, both little-endian bytes, stored as
# zlib(term ids + tf) in `data`; `n_terms` is the number of term ids.
DDL_NOTE_TERMS = """
CREATE TEMP TABLE IF NOT EXISTS note_terms (
    note_id  INTEGER PRIMARY KEY,
    n_terms  INTEGER NOT NULL,
    data     BLOB NOT NULL
)"""

# Sparse term vectors of a note's chunks, for the `vector` mode, one row per note (a tenth
# of the rows to write and read of one per chunk): per chunk in `ord` order, its number of
# terms (uint32 in `lengths`), its int32 term ids (ascending) and one uint16 field-weighted
# frequency per term, sum over fields of CHUNK_FIELD_UNITS[f] * tf_f (capped at 65535), the
# chunks' runs concatenated; little-endian. A chunk's fields: its note's title, description
# and tags on chunk 0, its section's heading on the section's first chunk, the chunk text.
# Stored as zlib(lengths + term ids + tf) in `data`, with the numbers of chunks and of term ids.
DDL_CHUNK_TERMS = """
CREATE TEMP TABLE IF NOT EXISTS chunk_terms (
    note_id  INTEGER PRIMARY KEY,
    n_chunks INTEGER NOT NULL,
    n_terms  INTEGER NOT NULL,
    data     BLOB NOT NULL
)"""
# Field weights of a chunk vector (FTS_COLUMNS order) in units of CHUNK_UNIT: title 2, description
# 1.5, tags 1.5, heading 4, body 1 (fts's BM25F field weights). Changing them changes the stored
# numbers, so it needs a new SCHEMA_VERSION.
CHUNK_FIELD_UNITS = (4, 3, 3, 8, 2)
CHUNK_UNIT = 2
WORKING_DDL = (DDL_TERMS, DDL_NOTE_TERMS, DDL_CHUNK_TERMS)

Visible = tuple[str, list[object]]
# zlib level of a working vector row: 0 (stored blocks, a copy): the rows are never stored, so compressing them
# only costs time (level 1: 2.3 s of a 4.6 s SciFact edit went to zlib)
_LEVEL = 0


class VectorRows:
    """The rows of a vector query, ``(note id, count, term count, data)``, with ``data`` decompressed and
    split back into the parts ``sizes(count, term count)`` gives the byte lengths of: iterate it or read it
    with ``fetchmany``, as a cursor. A row that does not decode is an IntegrityError."""

    def __init__(self, cursor: sqlite3.Cursor, table: str, sizes: Callable[[int, int], tuple[int, ...]]) -> None:
        self._cursor, self._table, self._sizes = cursor, table, sizes

    def _decode(self, row: tuple) -> tuple:
        note_id, count, n_terms, data = row
        sizes = self._sizes(count, n_terms)
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise IntegrityError(f"{self._table} row of note {note_id} does not decompress: {exc}") from exc
        if len(raw) != sum(sizes):
            raise IntegrityError(f"{self._table} row of note {note_id} holds {len(raw)} bytes, not {sum(sizes)}")
        out, at = [note_id], 0
        for size in sizes:
            out.append(raw[at : at + size])
            at += size
        return tuple(out)

    def fetchmany(self, size: int) -> list[tuple]:
        return [self._decode(row) for row in self._cursor.fetchmany(size)]

    def __iter__(self) -> Iterator[tuple]:
        return map(self._decode, self._cursor)


def require_working(conn: sqlite3.Connection) -> None:
    """An IntegrityError unless this connection has the working tables (a stored database has its arrays
    instead: a reader that finds neither has a damaged file)."""
    if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = 'note_terms'").fetchone() is None:
        raise IntegrityError("the database holds neither its term-major arrays nor working term vectors")


def working_loaded(conn: sqlite3.Connection) -> bool:
    """Does this connection's working dictionary hold a term already?"""
    return conn.execute("SELECT 1 FROM temp.terms LIMIT 1").fetchone() is not None


# ---------------------------------------------------------------- terms


def insert_terms(conn: sqlite3.Connection, rows: list[tuple[int, str]]) -> None:
    """(id, term) of new terms."""
    conn.executemany("INSERT INTO terms(id, term) VALUES (?, ?)", rows)


def next_term_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM terms").fetchone()[0])


def term_ids(conn: sqlite3.Connection, terms: list[str]) -> dict[str, int]:
    """The ids the ``terms`` table holds for some of ``terms`` (a carried-over index knows many)."""
    found: dict[str, int] = {}
    for start in range(0, len(terms), 500):
        part = terms[start : start + 500]
        found.update(conn.execute(f"SELECT term, id FROM terms WHERE term IN ({', '.join('?' * len(part))})", part))
    return found


def term_dictionary(conn: sqlite3.Connection) -> dict[str, int]:
    """term -> id of every term."""
    return dict(conn.execute("SELECT term, id FROM terms ORDER BY id"))


# ---------------------------------------------------------------- note_terms


def insert_note_terms(conn: sqlite3.Connection, rows: list[tuple[int, bytes, bytes]]) -> None:
    """(note id, term ids bytes, tf bytes) per note."""
    conn.executemany(
        "INSERT INTO note_terms(note_id, n_terms, data) VALUES (?, ?, ?)",
        ((nid, len(ids) // 4, zlib.compress(ids + tf, _LEVEL)) for nid, ids, tf in rows),
    )


def note_terms_size(conn: sqlite3.Connection, visible: Visible | None) -> tuple[int, int]:
    """(rows, bytes of term ids) of the note vectors of the notes ``visible`` allows (None: all)."""
    where, vals = visible_rows(visible)
    n, total = conn.execute(f"SELECT count(*), coalesce(sum(n_terms), 0) * 4 FROM note_terms{where}", vals).fetchone()
    return int(n), int(total)


def note_term_rows(conn: sqlite3.Connection, visible: Visible | None) -> VectorRows:
    """(note id, term ids bytes, tf bytes) by the note's path (the sparse index's row order: equal scores
    are ordered by path, whatever ids the notes have), of the notes ``visible`` allows; read with fetchmany.
    A vector whose note is missing is not read (the caller counts the rows it read against the table's)."""
    where, vals = visible_rows(visible, "t.note_id")
    cursor = conn.execute(
        f"SELECT t.note_id, 0, t.n_terms, t.data FROM notes n JOIN note_terms t ON t.note_id = n.id{where} "
        "ORDER BY n.rel_path",
        vals,
    )
    return VectorRows(cursor, "note_terms", lambda _, n: (4 * n, 2 * len(FTS_COLUMNS) * n))


# ---------------------------------------------------------------- chunk_terms


def insert_chunk_terms(conn: sqlite3.Connection, rows: list[tuple[int, bytes, bytes, bytes]]) -> None:
    """(note id, lengths bytes, term ids bytes, tf bytes) per note."""
    conn.executemany(
        "INSERT INTO chunk_terms(note_id, n_chunks, n_terms, data) VALUES (?, ?, ?, ?)",
        (
            (nid, len(lengths) // 4, len(ids) // 4, zlib.compress(lengths + ids + tf, _LEVEL))
            for nid, lengths, ids, tf in rows
        ),
    )


def chunk_terms_bytes(conn: sqlite3.Connection, visible: Visible | None) -> int:
    """Bytes of term ids of the chunk vectors of the notes ``visible`` allows (None: all)."""
    where, vals = visible_rows(visible)
    return int(conn.execute(f"SELECT coalesce(sum(n_terms), 0) * 4 FROM chunk_terms{where}", vals).fetchone()[0])


def chunk_term_rows(conn: sqlite3.Connection, visible: Visible | None) -> VectorRows:
    """(note id, lengths, term ids, tf bytes) by note id, of the notes ``visible`` allows; read with fetchmany."""
    where, vals = visible_rows(visible)
    cursor = conn.execute(f"SELECT note_id, n_chunks, n_terms, data FROM chunk_terms{where} ORDER BY note_id", vals)
    return VectorRows(cursor, "chunk_terms", lambda chunks, n: (4 * chunks, 4 * n, 2 * n))


def clear_working(conn: sqlite3.Connection) -> None:
    """Empty the working tables (filled again by the caller)."""
    for name in ("terms", "note_terms", "chunk_terms"):
        conn.execute(f"DELETE FROM temp.{name}")
