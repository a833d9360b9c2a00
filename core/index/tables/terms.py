"""The sparse term vectors: ``terms`` (the dictionary), ``note_terms`` (per note, per field: fts) and
``chunk_terms`` (each chunk's field-weighted vector, one row per note: vector)."""

from __future__ import annotations

import sqlite3

from core.index.tables.notes import visible_rows

DDL_TERMS = """
CREATE TABLE IF NOT EXISTS terms (
    id   INTEGER PRIMARY KEY,
    term TEXT NOT NULL UNIQUE
)"""

# Sparse term vector of a note: int32 term ids (ascending) and a uint16 matrix
# [n_terms, len(FTS_COLUMNS)] of per-field term frequencies, both little-endian bytes.
DDL_NOTE_TERMS = """
CREATE TABLE IF NOT EXISTS note_terms (
    note_id  INTEGER PRIMARY KEY,
    term_ids BLOB NOT NULL,
    tf       BLOB NOT NULL
)"""

# Sparse term vectors of a note's chunks, for the `vector` mode, one row per note (a tenth
# of the rows to write and read of one per chunk): per chunk in `ord` order, its number of
# terms (uint32 in `lengths`), its int32 term ids (ascending) and one uint16 field-weighted
# frequency per term, sum over fields of CHUNK_FIELD_UNITS[f] * tf_f (capped at 65535), the
# chunks' runs concatenated; little-endian. A chunk's fields: its note's title, description
# and tags on chunk 0, its section's heading on the section's first chunk, the chunk text.
DDL_CHUNK_TERMS = """
CREATE TABLE IF NOT EXISTS chunk_terms (
    note_id  INTEGER PRIMARY KEY,
    lengths  BLOB NOT NULL,
    term_ids BLOB NOT NULL,
    tf       BLOB NOT NULL
)"""
# Field weights of a chunk vector (FTS_COLUMNS order) in units of CHUNK_UNIT: title 2, description
# 1.5, tags 1.5, heading 4, body 1 (fts's BM25F field weights). Changing them changes the stored
# numbers, so it needs a new SCHEMA_VERSION.
CHUNK_FIELD_UNITS = (4, 3, 3, 8, 2)
CHUNK_UNIT = 2

Visible = tuple[str, list[object]]


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
    return dict(conn.execute("SELECT term, id FROM terms"))


# ---------------------------------------------------------------- note_terms


def insert_note_terms(conn: sqlite3.Connection, rows: list[tuple[int, bytes, bytes]]) -> None:
    """(note id, term ids bytes, tf bytes) per note."""
    conn.executemany("INSERT INTO note_terms(note_id, term_ids, tf) VALUES (?, ?, ?)", rows)


def note_terms_size(conn: sqlite3.Connection, visible: Visible | None) -> tuple[int, int]:
    """(rows, bytes of term ids) of the note vectors of the notes ``visible`` allows (None: all)."""
    where, vals = visible_rows(visible)
    n, total = conn.execute(
        f"SELECT count(*), coalesce(sum(length(term_ids)), 0) FROM note_terms{where}", vals
    ).fetchone()
    return int(n), int(total)


def note_term_rows(conn: sqlite3.Connection, visible: Visible | None) -> sqlite3.Cursor:
    """(note id, term ids bytes, tf bytes) by note id, of the notes ``visible`` allows; read with fetchmany."""
    where, vals = visible_rows(visible)
    return conn.execute(f"SELECT note_id, term_ids, tf FROM note_terms{where} ORDER BY note_id", vals)


# ---------------------------------------------------------------- chunk_terms


def insert_chunk_terms(conn: sqlite3.Connection, rows: list[tuple[int, bytes, bytes, bytes]]) -> None:
    """(note id, lengths bytes, term ids bytes, tf bytes) per note."""
    conn.executemany("INSERT INTO chunk_terms(note_id, lengths, term_ids, tf) VALUES (?, ?, ?, ?)", rows)


def chunk_terms_bytes(conn: sqlite3.Connection, visible: Visible | None) -> int:
    """Bytes of term ids of the chunk vectors of the notes ``visible`` allows (None: all)."""
    where, vals = visible_rows(visible)
    return int(conn.execute(f"SELECT coalesce(sum(length(term_ids)), 0) FROM chunk_terms{where}", vals).fetchone()[0])


def chunk_term_rows(conn: sqlite3.Connection, visible: Visible | None) -> sqlite3.Cursor:
    """(note id, lengths, term ids, tf bytes) by note id, of the notes ``visible`` allows; read with fetchmany."""
    where, vals = visible_rows(visible)
    return conn.execute(f"SELECT note_id, lengths, term_ids, tf FROM chunk_terms{where} ORDER BY note_id", vals)
