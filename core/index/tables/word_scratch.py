"""The scratch FTS5 table the term analyser runs the index's tokenizer through (``core.ranking.analysis``).

It lives in a private in-memory database, never in a generation: contentless (only the index is
needed, and ``delete-all`` empties it without re-tokenising), one word per column of a row, read
back through an ``fts5vocab`` table of its token instances.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence


def create_word_tables(conn: sqlite3.Connection, columns: Sequence[str], tokenizer: str) -> str:
    """Create the scratch table ``w`` (and its vocabulary ``temp.wi``) in ``conn``; returns the statement
    that inserts one row (rowid, one word per column). ``tokenizer`` must be a checked spec."""
    if "'" in tokenizer:
        raise ValueError(f"invalid tokenizer spec: {tokenizer!r}")
    cols = ", ".join(columns)
    conn.execute(f"CREATE VIRTUAL TABLE w USING fts5({cols}, content='', tokenize='{tokenizer}')")
    conn.execute("CREATE VIRTUAL TABLE temp.wi USING fts5vocab(main, w, instance)")
    return f"INSERT INTO w(rowid, {cols}) VALUES (?{', ?' * len(columns)})"


def tokenise_rows(conn: sqlite3.Connection, insert_sql: str, rows: list[tuple]) -> list[tuple[int, str, str]]:
    """(row, column, token) of every token of ``rows``, in row, column and offset order; the table is
    left empty. One transaction."""
    with conn:
        conn.executemany(insert_sql, rows)
        found = conn.execute("SELECT doc, col, term FROM temp.wi ORDER BY doc, col, offset").fetchall()
        conn.execute("INSERT INTO w(w) VALUES ('delete-all')")
    return found
