"""``notes_fts``: the FTS5 table over notes (rowid = note id), one row per note.

It holds exactly the texts a note's sparse term vector counts (its names: title, file name and
aliases; description, tags, its headings, its body). The tokenizer is part of the index identity.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

# FTS5 columns of notes_fts, in order: one row per note holding exactly the texts its
# sparse term vector counts (its names: title, file name and aliases; description, tags, its
# headings, its body).
FTS_COLUMNS = ("title", "description", "tags", "headings", "body")

SQL_INSERT_FTS = f"INSERT INTO notes_fts(rowid, {', '.join(FTS_COLUMNS)}) VALUES (?{', ?' * len(FTS_COLUMNS)})"


def ddl_notes_fts(tokenizer: str) -> str:
    """FTS5 over notes; rowid = notes.id. The tokenizer is part of the index identity.

    One row per note rather than per chunk: the body is stored and tokenised once (no
    chunk overlaps), a phrase or NEAR never breaks at a chunk boundary, and FTS5's
    per-row cost is paid 3,000 times rather than 90,000 on the PowerShell docs. A chunk
    is an offset range into its note's ``body`` cell (``note_bodies``).
    """
    if "'" in tokenizer:
        raise ValueError(f"invalid tokenizer spec: {tokenizer!r}")
    cols = ", ".join(FTS_COLUMNS)
    return f"CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5({cols}, tokenize='{tokenizer}')"


def insert_fts_rows(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(note id, *the texts of FTS_COLUMNS) per note."""
    conn.executemany(SQL_INSERT_FTS, rows)


def note_bodies(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, str]:
    """note id -> its body (the ``body`` cell of notes_fts): a chunk's text is ``body[start:end]``.

    Read once per note and sliced in Python: a per-chunk ``substr`` in SQL would read the
    note's whole row again for every chunk (ten times slower snippets on long notes).
    """
    return _by_rowid(conn, "body", note_ids)


def _by_rowid(conn: sqlite3.Connection, column_sql: str, note_ids: Iterable[int]) -> dict[int, str]:
    """note id -> ``column_sql`` of its notes_fts row, read in batches of 500 ids."""
    ids = sorted(set(note_ids))
    out: dict[int, str] = {}
    for at in range(0, len(ids), 500):
        part = ids[at : at + 500]
        out.update(
            conn.execute(
                f"SELECT rowid, {column_sql} FROM notes_fts WHERE rowid IN ({', '.join('?' * len(part))})", part
            )
        )
    return out


def note_texts(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, str]:
    """note id -> the texts of all its FTS_COLUMNS, one per line (a phrase looked up as a substring)."""
    return _by_rowid(conn, " || char(10) || ".join(f"coalesce({c}, '')" for c in FTS_COLUMNS), note_ids)


def matching_rowids(conn: sqlite3.Connection, expression: str) -> list[tuple[int]]:
    """The note ids (as rows) an FTS5 ``MATCH`` expression finds, every note considered."""
    return conn.execute("SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?", (expression,)).fetchall()


def matching_note_ids(conn: sqlite3.Connection, expression: str, clause: str, values: Sequence[object]) -> list[int]:
    """Ids, ascending, of the notes the condition (over ``notes n``) allows that the FTS5 expression
    finds; an invalid expression raises ``sqlite3.OperationalError``."""
    sql = (
        f"SELECT n.id FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid "
        f"WHERE notes_fts MATCH ? AND {clause} ORDER BY n.id"
    )
    return [r[0] for r in conn.execute(sql, [expression, *values])]
