"""``chunk_vectors``: a chunk's dense vector (float32 little-endian bytes); empty until embedded.

The model identity of the vectors is the meta key ``dense_model`` (``core.dense``). This module
also answers which chunks still have no vector, and the passages to embed for them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from core.index.tables.connection import count_live, dead_in, schema_name, segment_schemas

DDL_CHUNK_VECTORS = """
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id INTEGER PRIMARY KEY,
    vector   BLOB NOT NULL
)"""

# Chunks to embed with their note's title, newest notes first (the note's updated, else created,
# else file date), then note and chunk order.
_PASSAGES_SQL = (
    "SELECT c.id, n.title, c.heading_path, c.note_id, c.start, c.end FROM chunks c JOIN notes n ON n.id = c.note_id "
    "WHERE {where} "
    "ORDER BY coalesce(n.updated, n.created, strftime('%Y-%m-%dT%H:%M:%S', n.mtime_ns / 1000000000, "
    "'unixepoch')) DESC, n.id, c.ord LIMIT ?"
)


def insert_vectors(conn: sqlite3.Connection, rows: list[tuple[int, bytes]]) -> None:
    """(chunk id, vector bytes) per chunk."""
    conn.executemany("INSERT INTO chunk_vectors(chunk_id, vector) VALUES (?, ?)", rows)


def delete_all_vectors(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM chunk_vectors")


def count_vectors(conn: sqlite3.Connection) -> int:
    return count_live(conn, "chunk_vectors", "chunk_id", "vs_dead_chunks")


def count_vectors_and_chunks(conn: sqlite3.Connection) -> tuple[int, int]:
    """(chunks with a vector, chunks), in one statement."""
    row = conn.execute("SELECT (SELECT count(*) FROM chunk_vectors), (SELECT count(*) FROM chunks)").fetchone()
    return int(row[0]), int(row[1])


def count_visible_coverage(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> tuple[int, int]:
    """(chunks with a vector, chunks) of the notes the condition (over ``notes n``) allows."""
    row = conn.execute(
        "SELECT count(v.chunk_id), count(*) FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_id = c.id "
        f"WHERE c.note_id IN (SELECT n.id FROM notes n WHERE {clause})",
        values,
    ).fetchone()
    return int(row[0]), int(row[1])


def count_vectors_in(conn: sqlite3.Connection, note_ids_json: str) -> int:
    """Vectors of the chunks of the notes whose ids the bound JSON array holds."""
    return int(
        conn.execute(
            "SELECT count(*) FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
            "WHERE c.note_id IN (SELECT value FROM json_each(?))",
            (note_ids_json,),
        ).fetchone()[0]
    )


def vectors_by_position(conn: sqlite3.Connection, note_ids_json: str) -> list[tuple[int, int, int, int, bytes]]:
    """(note id, chunk ord, start, end, vector bytes) of the chunks with a vector of the notes whose ids the
    bound JSON array holds (a chunk's text is its note's body between the offsets)."""
    return conn.execute(
        "SELECT c.note_id, c.ord, c.start, c.end, v.vector FROM chunk_rows c JOIN chunk_vectors v ON v.chunk_id = c.id "
        "WHERE c.note_id IN (SELECT value FROM json_each(?))",
        (note_ids_json,),
    ).fetchall()


def chunks_by_position(conn: sqlite3.Connection, note_ids_json: str) -> list[tuple[int, int, int, int, int]]:
    """(chunk id, note id, chunk ord, start, end) of the chunks of the notes whose ids the bound JSON array
    holds."""
    return conn.execute(
        "SELECT id, note_id, ord, start, end FROM chunk_rows WHERE note_id IN (SELECT value FROM json_each(?))",
        (note_ids_json,),
    ).fetchall()


def count_visible_vectors(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> int:
    """Vectors of the chunks of the notes the condition (over ``notes n``) allows."""
    return int(
        conn.execute(
            "SELECT count(*) FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
            f"JOIN notes n ON n.id = c.note_id WHERE {clause}",
            values,
        ).fetchone()[0]
    )


def count_segment_vectors(
    conn: sqlite3.Connection, schema: str, clause: str, values: Sequence[object], dead_at: int | None
) -> int:
    """``count_visible_vectors`` of one segment (``schema``): of every note it holds (``dead_at`` None) or of
    the ones it holds dead (its position). A chunk's vector is in its note's segment."""
    schema = schema_name(schema)
    dead = "" if dead_at is None else f" AND n.id IN ({dead_in(dead_at)})"
    sql = (
        f"SELECT count(*) FROM {schema}.chunk_vectors v JOIN {schema}.chunk_rows c ON c.id = v.chunk_id "
        f"JOIN {schema}.notes n ON n.id = c.note_id WHERE ({clause}){dead}"
    )
    return int(conn.execute(sql, values).fetchone()[0])


def count_pending(conn: sqlite3.Connection) -> int:
    """Chunks without a vector."""
    return int(
        conn.execute("SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk_id FROM chunk_vectors)").fetchone()[0]
    )


def passages_to_embed(
    conn: sqlite3.Connection, limit: int | None, *, everything: bool = False
) -> list[tuple[int, str, str, int, int, int]]:
    """(chunk id, note title, heading_path JSON, note id, start, end) of the chunks without a vector
    (``everything``: of all chunks), newest notes first, at most ``limit`` (None: all)."""
    where = "1" if everything else "c.id NOT IN (SELECT chunk_id FROM chunk_vectors)"
    return conn.execute(_PASSAGES_SQL.format(where=where), (-1 if limit is None else limit,)).fetchall()


def vector_problems(conn: sqlite3.Connection, dim: int) -> dict[str, int]:
    """Counts of what is wrong with the stored vectors (none: {}): sizes other than ``dim`` floats,
    vectors of no chunk."""
    checks = {
        "vectors of another size": ("SELECT count(*) FROM chunk_vectors WHERE length(vector) != ?", (dim * 4,)),
        "orphan vectors": ("SELECT count(*) FROM chunk_vectors WHERE chunk_id NOT IN (SELECT id FROM chunks)", ()),
    }
    return {name: n for name, (sql, args) in checks.items() if (n := conn.execute(sql, args).fetchone()[0])}


def path_ordered_vector_rows(conn: sqlite3.Connection) -> list[tuple[int, int, str, int, bytes]]:
    """(chunk id, note id, note path, chunk ord, vector bytes) of every vector of ONE database (a segment,
    read through its own connection), by note path then chunk order: a segment's dense matrix, its rows
    in the order a tie is broken on (the path, never an id or a segment)."""
    return conn.execute(
        "SELECT v.chunk_id, c.note_id, n.rel_path, c.ord, v.vector FROM chunk_vectors v "
        "JOIN chunks c ON c.id = v.chunk_id JOIN notes n ON n.id = c.note_id ORDER BY n.rel_path, c.ord, c.id"
    ).fetchall()


def count_chunks_and_vectors_of(conn: sqlite3.Connection, note_ids_json: str) -> tuple[int, int]:
    """(chunks, chunks with a vector) of the live notes whose ids the bound JSON array holds; on a generation
    connection counted per segment by index lookups (``count_live``: the views test every row)."""
    sql = (
        "SELECT count(*), count(v.chunk_id) FROM {s}chunk_rows c LEFT JOIN {s}chunk_vectors v ON v.chunk_id = c.id "
        "WHERE c.note_id IN (SELECT value FROM json_each(?)){live}"
    )
    schemas = segment_schemas(conn)
    if schemas is None:
        row = conn.execute(sql.format(s="", live=""), (note_ids_json,)).fetchone()
        return int(row[0]), int(row[1])
    chunks = vectors = 0
    for pos, schema in enumerate(schemas):
        live = f" AND c.note_id NOT IN ({dead_in(pos)})"
        row = conn.execute(sql.format(s=f"{schema}.", live=live), (note_ids_json,)).fetchone()
        chunks, vectors = chunks + int(row[0]), vectors + int(row[1])
    return chunks, vectors
