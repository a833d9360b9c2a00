"""``term_major``: the term-major arrays the sparse loaders hold, one little-endian BLOB per array.

The one stored copy of a database's postings and term dictionary (issue 29): computed from a writer's
working note_terms / chunk_terms (core.build.forward_rows) at the end of every build (``core.ranking.stored``): name =
``<group>/<array>``; an array of more than ``stored.PIECE_BYTES`` is a header row of no bytes and
pieces ``<group>/<array>#000000``, ... (each compressed on its own) read on demand. Covered by the generation's SHA-256 like every
other row; a reader lists a group without reading its bytes, then reads the arrays (or pieces) it needs.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

DDL_TERM_MAJOR = """
CREATE TABLE IF NOT EXISTS term_major (
    name  TEXT PRIMARY KEY,
    dtype TEXT NOT NULL,
    shape TEXT NOT NULL,
    data  BLOB NOT NULL
)"""
# a group's names are '<group>/...': the range [<group>/, <group>0) ('0' follows '/' in every collation)
SQL_TERM_MAJOR_DELETE_GROUP = "DELETE FROM term_major WHERE name >= ? AND name < ?"
SQL_TERM_MAJOR_INSERT = "INSERT INTO term_major (name, dtype, shape, data) VALUES (?, ?, ?, ?)"
# length(data) is read from the record header: listing a group reads none of its bytes
SQL_TERM_MAJOR_READ_GROUP = "SELECT name, dtype, shape, length(data) FROM term_major WHERE name >= ? AND name < ?"
SQL_TERM_MAJOR_READ_DATA = "SELECT data FROM term_major WHERE name = ?"
SQL_TERM_MAJOR_READ_GROUP_DATA = "SELECT name, data FROM term_major WHERE name >= ? AND name < ?"
SQL_TERM_MAJOR_READ_NAMED = (
    "SELECT name, dtype, shape, length(data) FROM term_major WHERE name IN (SELECT value FROM json_each(?))"
)


def _range(group: str) -> tuple[str, str]:
    return group + "/", group + "0"


def has_term_major(conn: sqlite3.Connection) -> bool:
    """False for a database built before the table existed."""
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'term_major'").fetchone() is not None
    )


def delete_group(conn: sqlite3.Connection, group: str) -> None:
    """Remove every array (and piece) of ``group``."""
    conn.execute(SQL_TERM_MAJOR_DELETE_GROUP, _range(group))


def insert_rows(conn: sqlite3.Connection, rows: Iterable[tuple[str, str, str, Any]]) -> None:
    """Insert (full name, dtype, shape JSON, bytes or a buffer) rows; an iterator is consumed row by row, so a
    caller can bind views of its arrays without a list of copies."""
    conn.executemany(SQL_TERM_MAJOR_INSERT, rows)


def group_listing(conn: sqlite3.Connection, group: str) -> Iterator[tuple[str, str, str, int]]:
    """(full name, dtype, shape JSON, byte length) of every row of ``group``: none of its bytes are read."""
    return conn.execute(SQL_TERM_MAJOR_READ_GROUP, _range(group))


def group_data(conn: sqlite3.Connection, group: str) -> dict[str, bytes]:
    """Full name -> bytes of every row of ``group`` (its arrays and pieces), in one query."""
    return {name: bytes(data) for name, data in conn.execute(SQL_TERM_MAJOR_READ_GROUP_DATA, _range(group))}


def named_listing(conn: sqlite3.Connection, names: list[str]) -> Iterator[tuple[str, str, str, int]]:
    """``group_listing`` of the rows of these full names only (an array's header, not its pieces): a reader
    of a few arrays of a group of thousands of pieces lists those alone."""
    return conn.execute(SQL_TERM_MAJOR_READ_NAMED, (json.dumps(names),))


def read_data(conn: sqlite3.Connection, name: str) -> bytes | None:
    """The bytes of one row (an array or a piece), ``None`` when there is no such row."""
    row = conn.execute(SQL_TERM_MAJOR_READ_DATA, (name,)).fetchone()
    return None if row is None else bytes(row[0])
