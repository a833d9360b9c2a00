"""The generation-state database (``state.db``): ``meta``, ``generations`` and the ``active`` pointer.

A generation row names its manifest (``file_name`` = ``<sha256>.json``, ``sha256`` and ``size`` are the
manifest's); two rows may name the same manifest (equal content). ``removed_at`` starts the grace period
after which the parts only a removed generation references are deleted (``core.build.publish``).

``core.index.state`` decides what the rows mean (schema version, vault identity, the active
generation's consistency, the compare-and-swap of a publish); the statements are here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

STATE_DDL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE generations (
    generation_id TEXT PRIMARY KEY,
    file_name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    source_snapshot_hash TEXT NOT NULL,
    notes INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    dense_chunks INTEGER NOT NULL,
    chunker TEXT NOT NULL,
    tokenizer TEXT NOT NULL,
    dense_model TEXT,
    timings TEXT NOT NULL,
    problems TEXT NOT NULL,
    created_at REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ready', 'removed')),
    removed_at REAL
);
CREATE TABLE active (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation_id TEXT NOT NULL REFERENCES generations (generation_id)
);
"""
STATE_TABLES = ("meta", "generations", "active")
SQL_SET_VERSION = "INSERT INTO meta (key, value) VALUES ('state_schema_version', ?)"
SQL_GET_VERSION = "SELECT value FROM meta WHERE key = 'state_schema_version'"
SQL_SET_VAULT = "INSERT INTO meta (key, value) VALUES ('vault_identity', ?)"
SQL_GET_VAULT = "SELECT value FROM meta WHERE key = 'vault_identity'"
SQL_INSERT_GENERATION = (
    "INSERT INTO generations (generation_id, file_name, sha256, size, source_snapshot_hash, notes, chunks,"
    " dense_chunks, chunker, tokenizer, dense_model, timings, problems, created_at, status) VALUES (:generation_id,"
    " :file_name, :sha256, :size, :source_snapshot_hash, :notes, :chunks, :dense_chunks, :chunker, :tokenizer,"
    " :dense_model, :timings, :problems, :created_at, 'ready')"
)
SQL_GET_ACTIVE_ID = "SELECT generation_id FROM active WHERE id = 1"
SQL_SET_ACTIVE = (
    "INSERT INTO active (id, generation_id) VALUES (1, ?)"
    " ON CONFLICT (id) DO UPDATE SET generation_id = excluded.generation_id"
)
SQL_GET_GENERATION = "SELECT * FROM generations WHERE generation_id = ?"
SQL_LIST_GENERATIONS = "SELECT * FROM generations ORDER BY created_at DESC, generation_id DESC"
SQL_MARK_REMOVED = "UPDATE generations SET status = 'removed', removed_at = ? WHERE generation_id = ?"


def create_state(conn: sqlite3.Connection, version: int, vault_identity: str) -> None:
    """The tables of a new state database, stamped with its schema version and the vault it indexes."""
    conn.executescript(STATE_DDL)
    conn.execute(SQL_SET_VERSION, (str(version),))
    conn.execute(SQL_SET_VAULT, (vault_identity,))


def state_version(conn: sqlite3.Connection) -> str | None:
    row = conn.execute(SQL_GET_VERSION).fetchone()
    return None if row is None else row[0]


def state_vault(conn: sqlite3.Connection) -> str | None:
    """The vault identity the state records (``core.index.layout.vault_identity``)."""
    row = conn.execute(SQL_GET_VAULT).fetchone()
    return row[0] if row else None


def active_id(conn: sqlite3.Connection) -> str | None:
    """The generation id the active pointer names (None: no pointer)."""
    row = conn.execute(SQL_GET_ACTIVE_ID).fetchone()
    return None if row is None else row[0]


def generation_row(conn: sqlite3.Connection, generation_id: str) -> sqlite3.Row | None:
    return conn.execute(SQL_GET_GENERATION, (generation_id,)).fetchone()


def generation_rows(conn: sqlite3.Connection) -> Iterator[sqlite3.Row]:
    """Every generation row, newest first."""
    return conn.execute(SQL_LIST_GENERATIONS)


def insert_generation(conn: sqlite3.Connection, row: dict[str, Any]) -> None:
    """A generation row (status ``ready``), by column name."""
    conn.execute(SQL_INSERT_GENERATION, row)


def set_active(conn: sqlite3.Connection, generation_id: str) -> None:
    conn.execute(SQL_SET_ACTIVE, (generation_id,))


def mark_removed(conn: sqlite3.Connection, generation_id: str, removed_at: float) -> None:
    conn.execute(SQL_MARK_REMOVED, (removed_at, generation_id))
