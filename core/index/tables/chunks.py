"""``chunks``: a note's passages as character offset ranges into its body (``note_text``).

A chunk's text is ``body[start:end]`` (``notes_fts.note_bodies``), never stored twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from core.index.tables.connection import count_live
from core.index.tables.notes import visible_rows

DDL_CHUNKS = """
CREATE TABLE IF NOT EXISTS chunks (
    id           INTEGER PRIMARY KEY,
    note_id      INTEGER NOT NULL,
    ord          INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    start        INTEGER NOT NULL,
    end          INTEGER NOT NULL,
    text_sha256  BLOB NOT NULL,
    UNIQUE (note_id, ord)
)"""

Visible = tuple[str, list[object]]


def insert_chunks(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(id, note id, ord, heading_path JSON, start, end, SHA-256 digest of the text: 32 bytes) per chunk."""
    conn.executemany(
        "INSERT INTO chunks(id, note_id, ord, heading_path, start, end, text_sha256) VALUES (?, ?, ?, ?, ?, ?, ?)", rows
    )


def next_chunk_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0])


def count_chunks(conn: sqlite3.Connection) -> int:
    return count_live(conn, "chunks", "note_id", "vs_dead")


def count_chunks_of(conn: sqlite3.Connection, visible: Visible | None) -> int:
    """Chunks of the notes the ``visible`` clause (over ``notes n``) allows; every chunk when None."""
    where, vals = visible_rows(visible)
    return int(conn.execute(f"SELECT count(*) FROM chunks{where}", vals).fetchone()[0])


def chunk_ids_in_order(conn: sqlite3.Connection, visible: Visible | None) -> sqlite3.Cursor:
    """The chunk ids (rows of one id) by note and ``ord``, of the notes ``visible`` allows; read with fetchmany."""
    where, vals = visible_rows(visible)
    return conn.execute(f"SELECT id FROM chunks{where} ORDER BY note_id, ord", vals)


def count_chunks_in(conn: sqlite3.Connection, note_ids_json: str) -> int:
    """Chunks of the notes whose ids the bound JSON array holds."""
    return int(
        conn.execute(
            "SELECT count(*) FROM chunks WHERE note_id IN (SELECT value FROM json_each(?))", (note_ids_json,)
        ).fetchone()[0]
    )


def count_visible_chunks(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> int:
    """Chunks of the notes the condition (over ``notes n``) allows."""
    return int(
        conn.execute(
            f"SELECT count(*) FROM chunks c JOIN notes n ON n.id = c.note_id WHERE {clause}", values
        ).fetchone()[0]
    )


def note_chunks(conn: sqlite3.Connection, note_ids: list[int]) -> list[tuple[int, int, str, int, int]]:
    """(note id, chunk id, heading_path JSON, start, end) of every chunk of the given notes, by note and ord."""
    return conn.execute(
        "SELECT note_id, id, heading_path, start, end FROM chunks "
        f"WHERE note_id IN ({', '.join('?' * len(note_ids))}) ORDER BY note_id, ord",
        note_ids,
    ).fetchall()


def titled_chunks(conn: sqlite3.Connection, chunk_ids: list[int]) -> list[tuple[int, int, str, int, int]]:
    """(note id, chunk id, note title, start, end) of the given chunks."""
    return conn.execute(
        "SELECT c.note_id, c.id, n.title, c.start, c.end FROM chunks c JOIN notes n ON n.id = c.note_id "
        f"WHERE c.id IN ({', '.join('?' * len(chunk_ids))})",
        chunk_ids,
    ).fetchall()
