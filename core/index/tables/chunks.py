"""``chunks``: a note's passages as character offset ranges into its body (``note_text``).

A chunk's text is ``body[start:end]`` (``notes_fts.note_bodies``), never stored twice. Its heading
path (JSON) is stored once per distinct path of the segment (``headings``; a chunk row names it by
id: ``chunk_rows``); ``chunks`` is the view every reader reads, with the path as ``heading_path``.
PowerShell docs: 93,256 chunks, 17,669 distinct paths; the paths took 5.7 MB stored per chunk.

A chunk row holds no digest of its text (schema 22 stored its SHA-256, 32 bytes a chunk that no reader
read: PowerShell docs 93,256 chunks, 3.1 MB of 5.2 MB of ``chunk_rows``): the text is its note's body
between two offsets, and the note's ``content_sha256`` names the file it came from.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from core.index.tables.connection import count_live, dead_in, schema_name
from core.index.tables.notes import visible_rows

DDL_HEADINGS = """
CREATE TABLE IF NOT EXISTS headings (
    id   INTEGER PRIMARY KEY,
    path TEXT NOT NULL
)"""
DDL_CHUNK_ROWS = """
CREATE TABLE IF NOT EXISTS chunk_rows (
    id          INTEGER PRIMARY KEY,
    note_id     INTEGER NOT NULL,
    ord         INTEGER NOT NULL,
    heading_id  INTEGER NOT NULL,
    start       INTEGER NOT NULL,
    end         INTEGER NOT NULL,
    UNIQUE (note_id, ord)
)"""
# LEFT JOIN on the headings' key: a query that reads no heading path does not visit ``headings``
DDL_CHUNKS = """
CREATE VIEW IF NOT EXISTS chunks AS
SELECT c.id, c.note_id, c.ord, h.path AS heading_path, c.start, c.end
FROM chunk_rows c LEFT JOIN headings h ON h.id = c.heading_id"""

Visible = tuple[str, list[object]]


class HeadingIds:
    """The id of each heading path in a segment being written: the stored ones, then new ones."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.ids: dict[str, int] = {path: hid for hid, path in conn.execute("SELECT id, path FROM headings")}
        self.next_id = max(self.ids.values(), default=0) + 1
        self.new: list[tuple[int, str]] = []

    def id_of(self, path: str) -> int:
        found = self.ids.get(path)
        if found is None:
            found = self.ids[path] = self.next_id
            self.next_id += 1
            self.new.append((found, path))
        return found

    def take_new(self) -> list[tuple[int, str]]:
        """The (id, path) rows to insert since the last call."""
        new, self.new = self.new, []
        return new


def insert_headings(conn: sqlite3.Connection, rows: list[tuple[int, str]]) -> None:
    conn.executemany("INSERT INTO headings(id, path) VALUES (?, ?)", rows)


def insert_chunks(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(id, note id, ord, heading id, start, end) per chunk."""
    conn.executemany("INSERT INTO chunk_rows(id, note_id, ord, heading_id, start, end) VALUES (?, ?, ?, ?, ?, ?)", rows)


def next_chunk_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunk_rows").fetchone()[0])


def count_chunks(conn: sqlite3.Connection) -> int:
    return count_live(conn, "chunk_rows", "note_id", "vs_dead")


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


def count_segment_chunks(
    conn: sqlite3.Connection, schema: str, clause: str, values: Sequence[object], dead_at: int | None
) -> int:
    """``count_visible_chunks`` of one segment (``schema``): of every note it holds (``dead_at`` None) or of the
    ones it holds dead (its position). A note's chunks are in its segment."""
    dead = "" if dead_at is None else f" AND n.id IN ({dead_in(dead_at)})"
    s = schema_name(schema)
    sql = f"SELECT count(*) FROM {s}.chunk_rows c JOIN {s}.notes n ON n.id = c.note_id WHERE ({clause}){dead}"
    return int(conn.execute(sql, values).fetchone()[0])


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
