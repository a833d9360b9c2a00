"""``notes``: one row per note (every SPEC metadata column), and the removal of notes.

The read queries take the filters' condition over ``notes`` aliased ``n`` (``core.ranking.filters``)
as ``(clause, values)``; the values are always bound.

``content_sha256`` (the file's SHA-256) is stored as its 32 bytes, not 64 hex digits (stored twice: the
row and the ``notes_stat`` index; SciFact's 5,183 notes: 0.33 MB); every reader here gives it as the
lower-case hex digest, and ``insert_notes`` takes that.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from json.encoder import encode_basestring
from typing import Any

from core.index.tables.connection import count_live, dead_in, schema_name, segment_schemas
from core.index.tables.notes_fts import delete_fts_rows

_encode_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


def json_cell(value: list[str] | tuple[str, ...] | dict[str, Any]) -> str:
    """``json.dumps(value, ensure_ascii=False, sort_keys=True)``, the text of a JSON column (tags,
    aliases, extra, a chunk's heading path). A list of strings, nearly every cell, is joined from
    the encoder's own string quoting: the encoder's set-up per call cost more than the encoding."""
    if isinstance(value, dict):
        return _encode_json(value) if value else "{}"
    if all(type(item) is str for item in value):
        return "[" + ", ".join(map(encode_basestring, value)) + "]"
    return _encode_json(list(value))


DDL_NOTES = """
CREATE TABLE IF NOT EXISTS notes (
    id             INTEGER PRIMARY KEY,
    rel_path       TEXT NOT NULL,
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
    content_sha256 BLOB NOT NULL,
    mtime_ns       INTEGER NOT NULL,
    size           INTEGER NOT NULL,
    body_chars     INTEGER NOT NULL,
    git_date       TEXT,
    git_created    TEXT,
    body_line      INTEGER NOT NULL DEFAULT 0,
    created_utc_us     INTEGER,
    updated_utc_us     INTEGER,
    source_date_utc_us INTEGER,
    date_utc_us        INTEGER,
    updated_key    TEXT
)"""
# Covering indexes of the two whole-table reads every new search process makes (the notes rows are
# wide): the filter mask's supersession test (core.ranking.filters) and the freshness check's (path,
# stat, hash, classification) rows (core.index.freshness). PowerShell docs, loaded machine: 13.0 ->
# 5.6 ms and 12.5 -> 7.7 ms a process; +0.8 MB. ``notes_stat`` is also every lookup by path (its first
# column): ``rel_path`` has no UNIQUE index of its own (it held every path a third time: Dendron docs 52 KB);
# a segment with two rows of one path fails validation (``core.index.tables.checks``).
INDEXES = (
    "CREATE INDEX IF NOT EXISTS notes_supersession ON notes(superseded_by, status)",
    "CREATE INDEX IF NOT EXISTS notes_stat ON notes(rel_path, mtime_ns, size, content_sha256, classification)",
)

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
    "updated_key",
)

# Date fields a filter may name: the frontmatter dates (ISO text in the column of that name,
# its instant as a UTC key in ``<name>_utc_us``, microseconds since the epoch), the file's
# modification time (``mtime_ns``) and, for a git-sourced index, git_date / git_created (UTC ISO,
# set by ``core.build.gitbuild`` after the rows are written: NOTE_COLUMNS does not list them).
DATE_FIELDS = ("created", "updated", "source_date", "date", "mtime", "git_date", "git_created")
# The frontmatter keys a date field is read from, the first present (and readable) one winning; its
# key is kept (``updated_key``: NULL for ``updated`` itself) and a hit's ``date_field`` names it. A
# filter may name a field by any of its keys (``modified`` filters on ``updated``).
DATE_FIELD_KEYS = {
    "created": ("created",),
    "updated": ("updated", "modified", "lastmod", "last_modified", "updated_at", "date_modified"),
    "source_date": ("source_date",),
    "date": ("date",),
}
# Every name a filter accepts for a date field, and the field each one names.
DATE_FIELD_NAMES = {
    **{key: name for name, keys in DATE_FIELD_KEYS.items() for key in keys},
    **{name: name for name in DATE_FIELDS},
}
GIT_DATE_FIELDS = ("git_date", "git_created")

SQL_NOTE_CLASSIFICATIONS = "SELECT rel_path, lower(classification) FROM notes"

SQL_INSERT_NOTE = f"INSERT INTO notes({', '.join(NOTE_COLUMNS)}) VALUES ({', '.join('?' * len(NOTE_COLUMNS))})"

# The tables whose rows a note's removal drops with it (the column naming the note), notes last.
DERIVED_ROWS = (
    ("chunk_rows", "note_id"),
    ("note_tags", "note_id"),
    ("note_names", "note_id"),
    ("note_problems", "note_id"),
    ("note_terms", "note_id"),
    ("chunk_terms", "note_id"),
    ("links", "note_id"),
    ("link_keys", "note_id"),
    ("target_keys", "note_id"),
    ("edges", "src_id"),
    ("notes", "id"),
)


def date_key_column(date_field: str) -> str:
    """SQL (alias ``n`` = notes) of a date field's UTC key in microseconds; NULL when the note has none."""
    if date_field == "mtime":
        return "(n.mtime_ns / 1000)"
    if date_field in GIT_DATE_FIELDS:
        return f"CAST(round((julianday(n.{date_field}) - 2440587.5) * 86400000000.0) AS INTEGER)"
    if date_field not in DATE_FIELDS:
        raise ValueError(f"not a date field: {date_field!r}")
    return f"n.{date_field}_utc_us"


def visible_rows(visible: tuple[str, list[object]] | None, column: str = "note_id") -> tuple[str, list[object]]:
    """``WHERE`` text (with its values) keeping the rows of another table whose ``column`` names a note
    the ``visible`` clause (over ``notes n``) allows; empty when every note is read."""
    if visible is None:
        return "", []
    return f" WHERE {column} IN (SELECT n.id FROM notes n WHERE {visible[0]})", list(visible[1])


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


# ---------------------------------------------------------------- writing (the build)


_SHA = NOTE_COLUMNS.index("content_sha256")


def insert_notes(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """Rows in NOTE_COLUMNS order (the id first), the SHA-256 as its hex digest (stored as its bytes)."""
    conn.executemany(SQL_INSERT_NOTE, ((*r[:_SHA], bytes.fromhex(r[_SHA]), *r[_SHA + 1 :]) for r in rows))


def next_note_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM notes").fetchone()[0])


def touch_notes(conn: sqlite3.Connection, rows: list[tuple[int, int]]) -> None:
    """(mtime_ns, note id) of notes whose file was touched but whose content is the same."""
    conn.executemany("UPDATE notes SET mtime_ns = ? WHERE id = ?", rows)


def delete_notes(conn: sqlite3.Connection, note_ids: Iterable[int]) -> int:
    """Remove notes and everything derived from them. Returns the number removed."""
    ids = [(i,) for i in note_ids]
    if not ids:
        return 0
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS gone(id INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.gone")
    conn.executemany("INSERT INTO temp.gone(id) VALUES (?)", ids)
    delete_fts_rows(conn)  # before the notes' other rows: it reads their stored texts
    conn.execute(
        "DELETE FROM chunk_vectors WHERE chunk_id IN "
        "(SELECT id FROM chunk_rows WHERE note_id IN (SELECT id FROM temp.gone))"
    )
    for table, col in DERIVED_ROWS:
        conn.execute(f"DELETE FROM {table} WHERE {col} IN (SELECT id FROM temp.gone)")
    conn.execute("DELETE FROM temp.gone")
    return len(ids)


# ---------------------------------------------------------------- reading: the whole table


def count_notes(conn: sqlite3.Connection) -> int:
    return count_live(conn, "notes", "id", "vs_dead")


def files_bytes(conn: sqlite3.Connection, note_ids: Iterable[int]) -> int:
    """The bytes of these notes' files, as scanned."""
    sql = "SELECT coalesce(sum(size), 0) FROM notes WHERE id IN (SELECT value FROM json_each(?))"
    return int(conn.execute(sql, (json.dumps(sorted(note_ids)),)).fetchone()[0])


def note_file_rows(conn: sqlite3.Connection) -> Iterator[tuple[str, int, str, int, int]]:
    """(rel_path, id, content sha256, mtime_ns, size) of every note: what a build plans against."""
    rows = conn.execute("SELECT rel_path, id, content_sha256, mtime_ns, size FROM notes")
    return ((rel, nid, sha.hex(), mtime, size) for rel, nid, sha, mtime, size in rows)


def note_names_by_path(conn: sqlite3.Connection) -> Iterator[tuple[str, str]]:
    """(rel_path, aliases JSON) of every note in path order: what link resolution depends on."""
    return conn.execute("SELECT rel_path, aliases FROM notes ORDER BY rel_path")


def note_names(conn: sqlite3.Connection) -> Iterator[tuple[str, str]]:
    """(rel_path, aliases JSON) of every note: the names a link may resolve to."""
    return conn.execute("SELECT rel_path, aliases FROM notes")


def names_of_notes(conn: sqlite3.Connection, note_ids: Iterable[int]) -> list[tuple[int, str, str]]:
    """(id, rel_path, aliases JSON) of the notes with these ids."""
    return conn.execute(
        "SELECT id, rel_path, aliases FROM notes WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(note_ids)),),
    ).fetchall()


def note_extra(conn: sqlite3.Connection, note_id: int) -> dict[str, Any]:
    """A note's ``extra`` frontmatter (its other keys: ``lang`` among them), {} when it has none; its text
    ``id`` as it was (``extra_cell`` stores it once, in ``frontmatter_id``)."""
    row = conn.execute("SELECT extra, frontmatter_id FROM notes WHERE id = ?", (note_id,)).fetchone()
    found = json.loads(row[0]) if row is not None and row[0] else {}
    if not isinstance(found, dict):
        return {}
    if row[1] is not None and "id" not in found:
        found["id"] = row[1]
    return found


def extra_cell(extra: dict[str, Any], frontmatter_id: str | None) -> str:
    """The ``extra`` column's JSON: ``extra`` without an ``id`` that is the text ``frontmatter_id`` holds (a
    Dendron note's: 25 KB of the Dendron docs' 55 KB). An id of another type (``id: 123``) stays: the column
    holds its text only."""
    if frontmatter_id is not None and extra.get("id") == frontmatter_id and isinstance(extra["id"], str):
        extra = {k: v for k, v in extra.items() if k != "id"}
    return json_cell(extra)


def note_ids_by_path(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT rel_path, id FROM notes"))


def rel_path_of(conn: sqlite3.Connection, note_id: int) -> str | None:
    """The path of one note (None: no such note)."""
    row = conn.execute("SELECT rel_path FROM notes WHERE id = ?", (note_id,)).fetchone()
    return None if row is None else str(row[0])


def note_classifications(conn: sqlite3.Connection) -> Iterator[tuple[str, str | None]]:
    """(rel_path, lower-cased classification, None when none is set) of every note."""
    return conn.execute(SQL_NOTE_CLASSIFICATIONS)


# ---------------------------------------------------------------- reading: the notes a caller may see


def filtered_note_ids(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> list[int]:
    """Ids of the notes the condition allows (the filter mask of a search)."""
    return [row[0] for row in conn.execute(f"SELECT n.id FROM notes n WHERE {clause}", values)]


def refused_note_ids(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> list[int]:
    """Ids of the notes the condition does not allow (false or NULL): the complement of ``filtered_note_ids``
    among the notes, a few rows where that is every note (a generation's default mask: the superseded). On a
    generation of several segments each segment's own ``notes`` is scanned and the ids it holds dead are left
    out (the ``notes`` view tests every row against the dead ids: 35 against 22 ms at 100k notes); the clause's
    subqueries still read the views."""
    schemas = segment_schemas(conn)
    if schemas is None:
        sql = f"SELECT n.id FROM notes n WHERE NOT coalesce(({clause}), 0)"
        return [row[0] for row in conn.execute(sql, values)]
    out: list[int] = []
    for pos, schema in enumerate(schemas):
        sql = f"SELECT n.id FROM {schema}.notes n WHERE NOT coalesce(({clause}), 0) AND n.id NOT IN ({dead_in(pos)})"
        out += [row[0] for row in conn.execute(sql, values)]
    return out


def latest_note_ids(
    conn: sqlite3.Connection, clause: str, values: Sequence[object], date_key: str, limit: int
) -> list[tuple[int]]:
    """The ``limit`` notes the condition allows, newest first by the SQL date key ``date_key``."""
    return conn.execute(
        f"SELECT n.id FROM notes n WHERE {clause} ORDER BY {date_key} DESC, n.rel_path LIMIT ?",
        [*values, limit],
    ).fetchall()


def hides_notes(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> bool:
    """True when some note of the database is outside the condition."""
    row = conn.execute(f"SELECT EXISTS (SELECT 1 FROM notes n WHERE NOT ({clause}))", values).fetchone()
    return bool(row[0])


def note_classes(conn: sqlite3.Connection, unclassified: str) -> list[tuple[int, str]]:
    """(id, classification) of every note, lowered as the classification filter lowers it (SQLite's
    ``lower``), ``unclassified`` for a note without one: the class a caller's classifications select."""
    return conn.execute(
        "SELECT id, lower(coalesce(classification, ?)) FROM notes ORDER BY id", (unclassified,)
    ).fetchall()


def visible_paths(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> dict[int, str]:
    """note id -> rel_path of the notes the condition allows."""
    return dict(conn.execute(f"SELECT n.id, n.rel_path FROM notes n WHERE {clause}", values))


def visible_paths_of(
    conn: sqlite3.Connection, clause: str, values: Sequence[object], note_ids: Iterable[int]
) -> dict[int, str]:
    """note id -> rel_path of the notes among ``note_ids`` the condition allows."""
    sql = f"SELECT n.id, n.rel_path FROM notes n WHERE n.id IN (SELECT value FROM json_each(?)) AND ({clause})"
    return dict(conn.execute(sql, [json.dumps(sorted(set(note_ids))), *values]))


def visible_names(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> list[tuple[int, str, str]]:
    """(id, rel_path, aliases JSON) of the notes the condition allows: the names their links resolve to."""
    return conn.execute(f"SELECT n.id, n.rel_path, n.aliases FROM notes n WHERE {clause}", values).fetchall()


def visible_titles(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> dict[int, tuple[str, str]]:
    """note id -> (rel_path, title) of the notes the condition allows."""
    return {
        r[0]: (r[1], r[2])
        for r in conn.execute(f"SELECT n.id, n.rel_path, n.title FROM notes n WHERE {clause}", values)
    }


def visible_doc_ids(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> list[tuple[str, str | None]]:
    """(rel_path, frontmatter id) of the notes the condition allows: what qrels ids are matched to."""
    return conn.execute(f"SELECT n.rel_path, n.frontmatter_id FROM notes n WHERE {clause}", values).fetchall()


def visible_note_at(
    conn: sqlite3.Connection, rel_path: str, clause: str, values: Sequence[object]
) -> tuple[int, str, str, str, int] | None:
    """(id, rel_path, title, content sha256, body_line) of the note at ``rel_path`` if the condition allows it."""
    row = conn.execute(
        f"SELECT n.id, n.rel_path, n.title, n.content_sha256, n.body_line FROM notes n "
        f"WHERE n.rel_path = ? AND {clause}",
        [rel_path, *values],
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2], row[3].hex(), row[4])


def count_visible_notes(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> int:
    return int(conn.execute(f"SELECT count(*) FROM notes n WHERE {clause}", values).fetchone()[0])


def count_segment_notes(
    conn: sqlite3.Connection, schema: str, clause: str, values: Sequence[object], dead_at: int | None
) -> int:
    """``count_visible_notes`` of one segment (``schema`` of a generation connection): of every note it holds
    (``dead_at`` None) or of the ones it holds dead (its position)."""
    dead = "" if dead_at is None else f" AND n.id IN ({dead_in(dead_at)})"
    sql = f"SELECT count(*) FROM {schema_name(schema)}.notes n WHERE ({clause}){dead}"
    return int(conn.execute(sql, values).fetchone()[0])


# ---------------------------------------------------------------- reading: the hits of a search


def hit_rows(conn: sqlite3.Connection, note_ids: list[int]) -> Iterator[tuple]:
    """(id, rel_path, title, description, note_type, tags JSON, created, updated, source_date, date,
    git_date, git_created, mtime_ns, updated_key) of the given notes (a result's fields)."""
    return conn.execute(
        f"SELECT id, rel_path, title, description, note_type, tags, created, updated, source_date, date, "
        f"git_date, git_created, mtime_ns, updated_key FROM notes WHERE id IN ({_marks(note_ids)})",
        note_ids,
    )


def hit_files(conn: sqlite3.Connection, note_ids: list[int]) -> dict[int, tuple[str, int]]:
    """note id -> (content SHA-256, lines before the body) of the given notes."""
    rows = conn.execute(f"SELECT id, content_sha256, body_line FROM notes WHERE id IN ({_marks(note_ids)})", note_ids)
    return {r[0]: (r[1].hex(), r[2]) for r in rows}


def paths_of(conn: sqlite3.Connection, note_ids: list[int]) -> dict[int, str]:
    """note id -> rel_path of the given notes."""
    return dict(conn.execute(f"SELECT id, rel_path FROM notes WHERE id IN ({_marks(note_ids)})", note_ids))


def decay_rows(conn: sqlite3.Connection, note_ids: list[int], date_fields: Sequence[str]) -> Iterator[tuple]:
    """(id, lower-cased volatility or '', the first of ``date_fields`` the note has) of the given notes."""
    cols = ", ".join(date_fields)
    return conn.execute(
        f"SELECT id, lower(coalesce(volatility, '')), coalesce({cols}, NULL) FROM notes "
        f"WHERE id IN ({_marks(note_ids)})",
        note_ids,
    )


def holds_files_under(conn: sqlite3.Connection, folder: str) -> bool:
    """Does the generation hold a note (or a skipped source file) anywhere under the vault folder ``folder``?"""
    lo, hi = folder + "/", folder + "0"  # '0' follows '/': every path under the folder sorts between
    return (
        conn.execute(
            "SELECT 1 FROM notes WHERE rel_path >= ? AND rel_path < ? "
            "UNION ALL SELECT 1 FROM skipped_files WHERE rel_path >= ? AND rel_path < ? LIMIT 1",
            (lo, hi, lo, hi),
        ).fetchone()
        is not None
    )
