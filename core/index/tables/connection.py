"""Connection setup of the index databases: journal modes, probes, the read snapshot, ``atomic``.

Every PRAGMA and transaction statement of ``core/`` is here, beside the catalog queries
(``sqlite_master``) that probe a freshly opened file.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


@contextmanager
def atomic(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One transaction (``BEGIN IMMEDIATE``), or a savepoint when nested; errors roll back and re-raise.

    The connection must be in autocommit mode (``isolation_level=None``) so that this is the only
    place that opens and closes transactions.
    """
    if conn.in_transaction:
        name = f"sp_{os.urandom(16).hex()}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Several reads that must see one snapshot (a legacy ``index.db`` may change between them): a
    read transaction, rolled back afterwards; inside the caller's transaction nothing is added."""
    snapshot = not conn.in_transaction
    if snapshot:
        conn.execute("BEGIN")
    try:
        yield
    finally:
        if snapshot:
            conn.execute("ROLLBACK")


def run_statements(conn: sqlite3.Connection, statements: Iterable[str]) -> None:
    """Execute each statement in order (the DDL ``core.index.schema`` assembles from the table modules)."""
    for statement in statements:
        conn.execute(statement)


def set_page_size(conn: sqlite3.Connection, size: int) -> None:
    """``PRAGMA page_size`` of a database not written yet (a small segment or a tombstone: 512-byte pages)."""
    if size not in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
        raise ValueError(f"not an SQLite page size: {size!r}")
    conn.execute(f"PRAGMA page_size = {size}")


def set_journal_mode(conn: sqlite3.Connection, mode: str) -> None:
    """``PRAGMA journal_mode`` (``DELETE`` before a database is published or renamed into place:
    no -wal or -journal file may stay beside it; ``MEMORY`` for a staging copy thrown away on failure)."""
    if mode not in ("DELETE", "MEMORY"):
        raise ValueError(f"not a journal mode of ours: {mode!r}")
    conn.execute(f"PRAGMA journal_mode={mode}")


def set_working_mode(conn: sqlite3.Connection, *, durable: bool) -> None:
    """How a build writes: an in-place ``index.db`` durably (rollback journal, full sync); a staging
    file is thrown away on any failure, so it needs no durable journal."""
    if durable:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA synchronous=FULL")
    else:
        conn.execute("PRAGMA journal_mode=MEMORY")
        conn.execute("PRAGMA synchronous=OFF")


def read_header(conn: sqlite3.Connection) -> None:
    """Read the database header now (``PRAGMA schema_version``): an unreadable file fails at open."""
    conn.execute("PRAGMA schema_version").fetchone()


def probe_schema(conn: sqlite3.Connection) -> None:
    """Read the schema table (the first page of a database), so an unreadable file fails here."""
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


def integrity_lines(conn: sqlite3.Connection) -> list[str]:
    """Every problem line of ``PRAGMA integrity_check`` ([] when it says ``ok``)."""
    rows = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    return [] if rows == ["ok"] else rows


def table_names(conn: sqlite3.Connection) -> set[str]:
    """The names of the database's tables."""
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def segment_schemas(conn: sqlite3.Connection) -> list[str] | None:
    """The segment schemas, manifest order, of a generation connection of several parts
    (``core.index.segmented``: its ``temp.vs_segments``); None for a connection to one database."""
    if (
        conn.execute("SELECT 1 FROM temp.sqlite_master WHERE type = 'table' AND name = 'vs_segments'").fetchone()
        is None
    ):
        return None  # asked, not guessed from an error: any other failure is raised
    rows = conn.execute("SELECT schema FROM temp.vs_segments ORDER BY pos").fetchall()
    return [str(r[0]) for r in rows]


def segment_parts(conn: sqlite3.Connection) -> list[tuple[str, str]] | None:
    """(schema, SHA-256) of each segment, manifest order, of a generation connection of several parts; None
    for a connection to one database."""
    if segment_schemas(conn) is None:
        return None
    rows = conn.execute("SELECT schema, sha256 FROM temp.vs_segments ORDER BY pos").fetchall()
    return [(str(schema), str(sha)) for schema, sha in rows]


def schema_name(name: str) -> str:
    """``name`` as a schema in SQL text (ValueError unless an identifier: it is never a bound value)."""
    if not name.isidentifier():
        raise ValueError(f"not a schema name: {name!r}")
    return name


def dead_in(pos: int, table: str = "vs_dead") -> str:
    """The subquery of the ids dead in the segment at position ``pos`` of a generation connection
    (``table``: ``vs_dead`` note ids or ``vs_dead_chunks`` chunk ids; core.index.tables.segments.federate)."""
    if table not in ("vs_dead", "vs_dead_chunks"):
        raise ValueError(f"not a dead-id table: {table!r}")
    return f"SELECT id FROM temp.{table} WHERE pos = {int(pos)}"


def count_live(conn: sqlite3.Connection, table: str, dead_column: str, dead_table: str) -> int:
    """``count(*)`` of a per-note table: through a generation's views every row pays a dead-id test (SciFact,
    4 segments: 14 ms against 1.7), so a generation of several parts counts each segment's rows and
    subtracts the ones it holds dead itself (index lookups)."""
    schemas = segment_schemas(conn)
    if schemas is None:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    total = 0
    for pos, schema in enumerate(schemas):
        total += int(conn.execute(f"SELECT count(*) FROM {schema}.{table}").fetchone()[0])
        total -= int(
            conn.execute(
                f"SELECT count(*) FROM {schema}.{table} WHERE {dead_column} IN ({dead_in(pos, dead_table)})"
            ).fetchone()[0]
        )
    return total
