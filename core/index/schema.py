"""The generation database: DDL, schema version, meta, and the transaction primitive.

Each table's DDL lives here with the small queries that belong to it; modules that read
or write a table use these names. The index is derived from the vault, so a schema
version mismatch means "delete and rebuild", never a migration.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

SCHEMA_VERSION = 10

# FTS5 columns of notes_fts, in order: one row per note holding exactly the texts its
# sparse term vector counts (its names: title, file name and aliases; description, tags, its
# headings, its body).
FTS_COLUMNS = ("title", "description", "tags", "headings", "body")

DDL_META = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
)"""

DDL_NOTES = """
CREATE TABLE IF NOT EXISTS notes (
    id             INTEGER PRIMARY KEY,
    rel_path       TEXT NOT NULL UNIQUE,
    title          TEXT NOT NULL,
    description    TEXT,
    note_type      TEXT,
    tags           TEXT NOT NULL DEFAULT '[]',
    created        TEXT,
    updated        TEXT,
    source_date    TEXT,
    date           TEXT,
    volatility     TEXT,
    status         TEXT,
    classification TEXT,
    namespace      TEXT,
    supersedes     TEXT NOT NULL DEFAULT '[]',
    superseded_by  TEXT NOT NULL DEFAULT '[]',
    aliases        TEXT NOT NULL DEFAULT '[]',
    frontmatter_id TEXT,
    extra          TEXT NOT NULL DEFAULT '{}',
    content_sha256 TEXT NOT NULL,
    mtime_ns       INTEGER NOT NULL,
    size           INTEGER NOT NULL,
    body_chars     INTEGER NOT NULL,
    git_date       TEXT,
    git_created    TEXT,
    body_line      INTEGER NOT NULL DEFAULT 0,
    created_utc_us     INTEGER,
    updated_utc_us     INTEGER,
    source_date_utc_us INTEGER,
    date_utc_us        INTEGER
)"""

NOTE_COLUMNS = (
    "id",
    "rel_path",
    "title",
    "description",
    "note_type",
    "tags",
    "created",
    "updated",
    "source_date",
    "date",
    "volatility",
    "status",
    "classification",
    "namespace",
    "supersedes",
    "superseded_by",
    "aliases",
    "frontmatter_id",
    "extra",
    "content_sha256",
    "mtime_ns",
    "size",
    "body_chars",
    "body_line",
    "created_utc_us",
    "updated_utc_us",
    "source_date_utc_us",
    "date_utc_us",
)

# Date fields a filter may name: the frontmatter dates (ISO text in the column of that name,
# its instant as a UTC key in ``<name>_utc_us``, microseconds since the epoch), the file's
# modification time (``mtime_ns``) and, for a git-sourced index, git_date / git_created (UTC ISO,
# set by ``core.index.gitbuild`` after the rows are written: NOTE_COLUMNS does not list them).
DATE_FIELDS = ("created", "updated", "source_date", "date", "mtime", "git_date", "git_created")
GIT_DATE_FIELDS = ("git_date", "git_created")


def date_key_column(date_field: str) -> str:
    """SQL (alias ``n`` = notes) of a date field's UTC key in microseconds; NULL when the note has none."""
    if date_field == "mtime":
        return "(n.mtime_ns / 1000)"
    if date_field in GIT_DATE_FIELDS:
        return f"CAST(round((julianday(n.{date_field}) - 2440587.5) * 86400000000.0) AS INTEGER)"
    if date_field not in DATE_FIELDS:
        raise ValueError(f"not a date field: {date_field!r}")
    return f"n.{date_field}_utc_us"


DDL_NOTE_TAGS = """
CREATE TABLE IF NOT EXISTS note_tags (
    tag     TEXT NOT NULL,
    note_id INTEGER NOT NULL,
    PRIMARY KEY (tag, note_id)
) WITHOUT ROWID"""

DDL_NOTE_PROBLEMS = """
CREATE TABLE IF NOT EXISTS note_problems (
    note_id INTEGER NOT NULL,
    reason  TEXT NOT NULL,
    detail  TEXT NOT NULL
)"""

DDL_CHUNKS = """
CREATE TABLE IF NOT EXISTS chunks (
    id           INTEGER PRIMARY KEY,
    note_id      INTEGER NOT NULL,
    ord          INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    start        INTEGER NOT NULL,
    end          INTEGER NOT NULL,
    text_sha256  TEXT NOT NULL,
    UNIQUE (note_id, ord)
)"""


DDL_GIT_DATES = """
CREATE TABLE IF NOT EXISTS git_dates (
    rel_path TEXT PRIMARY KEY,
    last_ct  INTEGER NOT NULL,
    added_ct INTEGER
) WITHOUT ROWID"""


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


def note_bodies(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, str]:
    """note id -> its body (the ``body`` cell of notes_fts): a chunk's text is ``body[start:end]``.

    Read once per note and sliced in Python: a per-chunk ``substr`` in SQL would read the
    note's whole row again for every chunk (ten times slower snippets on long notes).
    """
    ids = sorted(set(note_ids))
    out: dict[int, str] = {}
    for at in range(0, len(ids), 500):
        part = ids[at : at + 500]
        out.update(
            conn.execute(f"SELECT rowid, body FROM notes_fts WHERE rowid IN ({', '.join('?' * len(part))})", part)
        )
    return out


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

# Links as written, per source note (carried over with the note) ...
DDL_LINKS = """
CREATE TABLE IF NOT EXISTS links (
    note_id    INTEGER NOT NULL,
    target     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    heading    TEXT,
    alias      TEXT,
    source     TEXT NOT NULL,
    alt_target TEXT
)"""

# ... and resolved edges: one per link, dst NULL when unresolved. dst_path lets a rebuild
# re-point edges at a changed note (new id, same path) without resolving every link again.
DDL_EDGES = """
CREATE TABLE IF NOT EXISTS edges (
    src_id   INTEGER NOT NULL,
    dst_id   INTEGER,
    kind     TEXT NOT NULL,
    target   TEXT NOT NULL,
    dst_path TEXT
)"""

# Term-major arrays the sparse loaders hold, computed from note_terms / chunk_terms at the end of every
# build (core.ranking.stored): one BLOB per array, name = '<group>/<array>' (an array of more than
# stored.PIECE_BYTES: a header row of no bytes and pieces '<group>/<array>#000000', ...), covered by the
# generation's SHA-256 like every other row; a reader loads a group without rebuilding it.
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

DDL_DENSE = """
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id INTEGER PRIMARY KEY,
    vector   BLOB NOT NULL
)"""

# Source files that were read but not indexed (binary), so that they count as
# "seen" by the staleness scan and the snapshot hash.
DDL_SKIPPED = """
CREATE TABLE IF NOT EXISTS skipped_files (
    rel_path       TEXT PRIMARY KEY,
    content_sha256 TEXT NOT NULL,
    mtime_ns       INTEGER NOT NULL,
    size           INTEGER NOT NULL,
    reason         TEXT NOT NULL,
    detail         TEXT NOT NULL
)"""

DDL_BUILD_PROBLEMS = """
CREATE TABLE IF NOT EXISTS build_problems (
    path   TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL
)"""

INDEXES = (
    "CREATE INDEX IF NOT EXISTS links_by_note ON links(note_id)",
    "CREATE INDEX IF NOT EXISTS edges_by_src ON edges(src_id)",
    "CREATE INDEX IF NOT EXISTS edges_by_dst ON edges(dst_id)",
    "CREATE INDEX IF NOT EXISTS note_tags_by_note ON note_tags(note_id)",
    "CREATE INDEX IF NOT EXISTS note_problems_by_note ON note_problems(note_id)",
    # Covering indexes of the two whole-table reads every new search process makes (the notes table
    # holds the wide metadata rows): the filter mask's supersession test (core.ranking.filters) and
    # the freshness check's (path, stat, hash, classification) rows (core.index.freshness). PowerShell
    # docs, loaded machine: 13.0 -> 5.6 ms and 12.5 -> 7.7 ms a process; +0.8 MB.
    "CREATE INDEX IF NOT EXISTS notes_supersession ON notes(superseded_by, status)",
    "CREATE INDEX IF NOT EXISTS edges_by_kind ON edges(kind, dst_id)",
    "CREATE INDEX IF NOT EXISTS notes_stat ON notes(rel_path, mtime_ns, size, content_sha256, classification)",
)


def create_schema(conn: sqlite3.Connection, tokenizer: str) -> None:
    for ddl in (
        DDL_META,
        DDL_NOTES,
        DDL_NOTE_TAGS,
        DDL_NOTE_PROBLEMS,
        DDL_CHUNKS,
        ddl_notes_fts(tokenizer),
        DDL_TERMS,
        DDL_NOTE_TERMS,
        DDL_CHUNK_TERMS,
        DDL_TERM_MAJOR,
        DDL_LINKS,
        DDL_EDGES,
        DDL_DENSE,
        DDL_SKIPPED,
        DDL_BUILD_PROBLEMS,
        DDL_GIT_DATES,
        *INDEXES,
    ):
        conn.execute(ddl)
    set_meta(conn, {"schema_version": SCHEMA_VERSION, "tokenizer": tokenizer})


def get_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def set_meta(conn: sqlite3.Connection, values: Mapping[str, Any]) -> None:
    conn.executemany(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()],
    )


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
