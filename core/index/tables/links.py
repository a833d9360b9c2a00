"""``links`` (as written, per source note, carried over with it) and ``edges`` (resolved: one per link,
``dst_id`` NULL when unresolved)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache

from core.index.tables.connection import dead_in, schema_name

# Links as written, per source note (carried over with the note) ...
DDL_LINKS = """
CREATE TABLE IF NOT EXISTS links (
    note_id    INTEGER NOT NULL,
    target     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    heading    TEXT,
    source     TEXT NOT NULL,
    alt_target TEXT
)"""

# ... and resolved edges: one per link, dst NULL when unresolved. ``target`` (the link's, for
# ``unresolved_targets``) only on an unresolved edge: a resolved one's is its link's. No destination path: a
# rebuild re-points the edges into a note re-inserted at a new id first (``move_edges``), then compares ids
# (Dendron docs: 3,212 edges, 219 unresolved; 157 KB of targets and paths before, each stored elsewhere).
DDL_EDGES = """
CREATE TABLE IF NOT EXISTS edges (
    src_id   INTEGER NOT NULL,
    dst_id   INTEGER,
    kind     TEXT NOT NULL,
    target   TEXT,
    CHECK ((dst_id IS NULL) = (target IS NOT NULL))
)"""
# ... and the lookup keys of each note's links (``core.vault.links.link_keys``): which notes' links a note
# that appears (added, renamed, new aliases) could resolve differently, without resolving every link.
# A key is stored as a 63-bit hash (``key_hash``): both tables are only asked which notes have one of some
# keys, and a hash shared by two keys can only add a note to the answer (one more note's links resolved
# again, one more candidate target that no link names: the same resolution), never leave one out. Dendron
# docs: 167 KB of key text (6,405 keys) -> 51 KB of hashes.
DDL_LINK_KEYS = """
CREATE TABLE IF NOT EXISTS link_keys (
    key     INTEGER NOT NULL,
    note_id INTEGER NOT NULL,
    PRIMARY KEY (key, note_id)
) WITHOUT ROWID"""
# ... and the keys under which the links find each note (``core.vault.links.note_keys``, but ``ANY_NAME``):
# the notes a build resolves those links against, without reading every note.
DDL_TARGET_KEYS = """
CREATE TABLE IF NOT EXISTS target_keys (
    key     INTEGER NOT NULL,
    note_id INTEGER NOT NULL,
    PRIMARY KEY (key, note_id)
) WITHOUT ROWID"""
INDEXES = (
    "CREATE INDEX IF NOT EXISTS links_by_note ON links(note_id)",
    # link_keys / target_keys: looked up by key only (their primary key); no index by note, as note_names
    "CREATE INDEX IF NOT EXISTS edges_by_src ON edges(src_id)",
    "CREATE INDEX IF NOT EXISTS edges_by_dst ON edges(dst_id)",
    # covering the filter mask's supersession test (core.ranking.filters), read by every search process; partial:
    # its queries name ``kind = 'supersedes'``, and a vault has few such edges (an index of every edge's kind
    # took 61 KB of the Dendron docs' 3,212 edges, none of them a supersession)
    "CREATE INDEX IF NOT EXISTS edges_superseded ON edges(dst_id, src_id) WHERE kind = 'supersedes'",
)

# meta key: {"notes": N, "dendron": D}, the notes the edges were resolved among and how many of them have
# Dendron names (``LinkResolver.label_first``); absent: no edges resolved yet
NAMES_META = "link_names"

# (source note id, its rel_path, target, kind, heading, source, alt_target) of each link
_LINKS_WITH_PATHS = (
    "SELECT l.note_id, n.rel_path, l.target, l.kind, l.heading, l.source, l.alt_target "
    "FROM links l JOIN notes n ON n.id = l.note_id WHERE "
)


# ---------------------------------------------------------------- links


def insert_links(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(note id, target, kind, heading, source, alt_target) per link."""
    conn.executemany(
        "INSERT INTO links(note_id, target, kind, heading, source, alt_target) VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )


def links_from(conn: sqlite3.Connection, first_note_id: int | None) -> Iterator[tuple]:
    """The links (with their source note's path) of the notes with ids >= ``first_note_id``; of every
    note when None."""
    if first_note_id is None:
        return conn.execute(_LINKS_WITH_PATHS + "1 ORDER BY l.rowid", ())  # a note's links in their order
    return conn.execute(_LINKS_WITH_PATHS + "l.note_id >= ? ORDER BY l.note_id, l.rowid", (first_note_id,))


def links_of(conn: sqlite3.Connection, note_ids: Sequence[int]) -> Iterator[tuple]:
    """Like ``links_from``, for the notes with these ids."""
    return conn.execute(
        _LINKS_WITH_PATHS + "l.note_id IN (SELECT value FROM json_each(?)) ORDER BY l.note_id, l.rowid",
        (json.dumps(list(note_ids)),),
    )


@lru_cache(maxsize=1 << 16)
def key_hash(key: str) -> int:
    """The stored form of a lookup key: 63 bits of its BLAKE2b digest, a non-negative SQLite integer (stable
    across processes and platforms, unlike ``hash``; exact through JSON, unlike a value near -2**63)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def _hashed(rows: list[tuple[str, int]]) -> list[tuple[int, int]]:
    return sorted({(key_hash(key), nid) for key, nid in rows})


def insert_keys(conn: sqlite3.Connection, link_rows: list[tuple[str, int]], target_rows: list[tuple[str, int]]) -> None:
    """(key, note id) rows of ``link_keys`` and of ``target_keys``, each pair once (the key hashed)."""
    conn.executemany("INSERT OR IGNORE INTO link_keys(key, note_id) VALUES (?, ?)", _hashed(link_rows))
    conn.executemany("INSERT OR IGNORE INTO target_keys(key, note_id) VALUES (?, ?)", _hashed(target_rows))


def _key_hashes(keys: Sequence[str]) -> str:
    """The bound JSON array of these keys' stored forms."""
    return json.dumps(sorted({key_hash(key) for key in keys}))


def delete_all_keys(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM link_keys")
    conn.execute("DELETE FROM target_keys")


def target_rows(conn: sqlite3.Connection, first_note_id: int | None) -> list[tuple[int, str, str]]:
    """(id, rel_path, aliases JSON) of the notes with ids >= ``first_note_id``; of every note when None."""
    return conn.execute("SELECT id, rel_path, aliases FROM notes WHERE id >= ?", (first_note_id or 0,)).fetchall()


def target_rows_of(conn: sqlite3.Connection, note_ids: Sequence[int]) -> list[tuple[int, str, str]]:
    """(id, rel_path, aliases JSON) of the notes with these ids."""
    return conn.execute(
        "SELECT id, rel_path, aliases FROM notes WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(note_ids)),),
    ).fetchall()


def targets_by_key(conn: sqlite3.Connection, keys: Sequence[str]) -> list[tuple[int, str, str]]:
    """(id, rel_path, aliases JSON) of the notes with one of these ``target_keys`` (or a key of the same hash:
    a note no link names, which resolves nothing)."""
    return conn.execute(
        "SELECT id, rel_path, aliases FROM notes WHERE id IN "
        "(SELECT note_id FROM target_keys WHERE key IN (SELECT value FROM json_each(?)))",
        (_key_hashes(keys),),
    ).fetchall()


def notes_linking_by_key(conn: sqlite3.Connection, keys: Sequence[str], below_id: int) -> set[int]:
    """Ids (< ``below_id``) of the notes one of whose links has one of these lookup keys (or a key of the same
    hash: a note whose links are resolved again to the same targets)."""
    sql = "SELECT DISTINCT note_id FROM link_keys WHERE key IN (SELECT value FROM json_each(?)) AND note_id < ?"
    return {r[0] for r in conn.execute(sql, (_key_hashes(keys), below_id))}


def visible_links(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> Iterator[tuple]:
    """(link rowid, source note id, its rel_path, target, kind, heading, source, alt_target) of the
    links of the notes the condition (over ``notes n``) allows, in the order they were stored."""
    return conn.execute(
        "SELECT l.rowid, l.note_id, n.rel_path, l.target, l.kind, l.heading, l.source, l.alt_target "
        f"FROM links l JOIN notes n ON n.id = l.note_id WHERE {clause} ORDER BY l.rowid",
        values,
    )


def links_of_kind(conn: sqlite3.Connection, kind: str) -> list[tuple]:
    """(link rowid, source note id, target, kind, heading, source, alt_target) of every link of
    ``kind``, in the order they were stored."""
    return conn.execute(
        "SELECT rowid, note_id, target, kind, heading, source, alt_target FROM links WHERE kind = ? ORDER BY rowid",
        (kind,),
    ).fetchall()


def segment_links(conn: sqlite3.Connection, schema: str, dead_at: int | None) -> list[tuple[int, int, str]]:
    """(rowid, source note id, kind) of the links of the notes one database of a generation holds live
    (``schema``; ``dead_at``: its position in a generation of segments, None for one database), by rowid."""
    dead = "" if dead_at is None else f" WHERE note_id NOT IN ({dead_in(dead_at)})"
    return conn.execute(f"SELECT rowid, note_id, kind FROM {schema_name(schema)}.links{dead} ORDER BY rowid").fetchall()


def segment_edges(conn: sqlite3.Connection, schema: str, dead_at: int | None) -> list[tuple[int, int | None]]:
    """(source note id, destination id or None) of the edges of the notes one database of a generation holds
    live, in the order of their links (by source, then rowid: one edge per link, as ``edges_of``)."""
    dead = "" if dead_at is None else f" WHERE src_id NOT IN ({dead_in(dead_at)})"
    sql = f"SELECT src_id, dst_id FROM {schema_name(schema)}.edges{dead} ORDER BY src_id, rowid"
    return conn.execute(sql).fetchall()


def segment_links_by_rowid(conn: sqlite3.Connection, schema: str, rowids: Sequence[int]) -> dict[int, tuple]:
    """rowid -> (target, kind, heading, source, alt_target) of one database's links with these rowids."""
    sql = (
        f"SELECT rowid, target, kind, heading, source, alt_target FROM {schema_name(schema)}.links "
        "WHERE rowid IN (SELECT value FROM json_each(?))"
    )
    return {r[0]: tuple(r[1:]) for r in conn.execute(sql, (json.dumps(list(rowids)),))}


def link_targets(conn: sqlite3.Connection, rowids: Sequence[int]) -> list[tuple[str, str]]:
    """(target, kind) of the links with these rowids, in the order given."""
    found = dict(
        (r[0], (r[1], r[2]))
        for r in conn.execute(
            "SELECT rowid, target, kind FROM links WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(list(rowids)),),
        )
    )
    return [found[r] for r in rowids]


# ---------------------------------------------------------------- edges: writing


def move_edges(conn: sqlite3.Connection, moved: Mapping[int, int]) -> None:
    """Edges into the notes ``moved`` maps (old id -> new id: re-inserted at the same path) follow them to
    their new ids, in one statement (a new id may be another moved note's old one); found by
    ``edges_by_dst``, so a build pays for the edges into its notes, not for every edge."""
    if not moved:
        return
    mapping = json.dumps({str(old): new for old, new in moved.items()})
    conn.execute(
        "UPDATE edges SET dst_id = json_extract(?1, '$.\"' || dst_id || '\"') "
        "WHERE dst_id IN (SELECT CAST(key AS INTEGER) FROM json_each(?1))",
        (mapping,),
    )


def notes_linking_to(conn: sqlite3.Connection, dst_ids: Sequence[int], below_id: int) -> set[int]:
    """Ids (< ``below_id``) of the notes with an edge into one of the notes ``dst_ids``."""
    sql = "SELECT DISTINCT src_id FROM edges WHERE dst_id IN (SELECT value FROM json_each(?)) AND src_id < ?"
    return {r[0] for r in conn.execute(sql, (json.dumps(list(dst_ids)), below_id))}


def edges_of(conn: sqlite3.Connection, src_ids: Sequence[int]) -> list[tuple[int, int, int | None]]:
    """(rowid, src id, dst id) of the edges from these notes, in the order of their links (``links_of``)."""
    return conn.execute(
        "SELECT rowid, src_id, dst_id FROM edges WHERE src_id IN (SELECT value FROM json_each(?)) "
        "ORDER BY src_id, rowid",
        (json.dumps(list(src_ids)),),
    ).fetchall()


def update_edges(conn: sqlite3.Connection, rows: list[tuple[int | None, str | None, int]]) -> None:
    """(dst id or None, the link's target when unresolved else None, edge rowid) per edge re-resolved."""
    conn.executemany("UPDATE edges SET dst_id = ?, target = ? WHERE rowid = ?", rows)


def delete_all_edges(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM edges")


def insert_edges(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(src id, dst id or None, kind, the link's target when unresolved else None) per edge."""
    conn.executemany("INSERT INTO edges(src_id, dst_id, kind, target) VALUES (?, ?, ?, ?)", rows)


# ---------------------------------------------------------------- edges: reading


def edge_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """(edges, unresolved edges)."""
    edges, unresolved = conn.execute("SELECT count(*), count(*) - count(dst_id) FROM edges").fetchone()
    return edges, unresolved


def count_edges(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM edges").fetchone()[0])


def count_unresolved_edges(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM edges WHERE dst_id IS NULL").fetchone()[0])


def edge_counts_in(conn: sqlite3.Connection, note_ids_json: str) -> tuple[int, int]:
    """(edges, edges unresolved or leaving the set) of the edges from the notes whose ids the bound JSON
    array holds."""
    in_set = "IN (SELECT value FROM json_each(?))"
    row = conn.execute(
        f"SELECT count(*), coalesce(sum(dst_id IS NULL OR dst_id NOT {in_set}), 0) FROM edges WHERE src_id {in_set}",
        (note_ids_json, note_ids_json),
    ).fetchone()
    return int(row[0]), int(row[1])


def graph_edges(conn: sqlite3.Connection) -> Iterator[tuple[int, int, str]]:
    """(src, dst, kind) of every resolved edge between two different notes."""
    return conn.execute("SELECT src_id, dst_id, kind FROM edges WHERE dst_id IS NOT NULL AND src_id != dst_id")


def out_edges(conn: sqlite3.Connection, note_id: int) -> Iterator[tuple[str, int]]:
    """(kind, dst id) of the resolved edges from a note, in the order they were stored (that of the links)."""
    return conn.execute(
        "SELECT kind, dst_id FROM edges WHERE src_id = ? AND dst_id IS NOT NULL ORDER BY rowid", [note_id]
    )


def in_edges(conn: sqlite3.Connection, note_id: int) -> Iterator[tuple[str, int]]:
    """(kind, src id) of the edges to a note, in the order they were stored (that of the links)."""
    return conn.execute("SELECT kind, src_id FROM edges WHERE dst_id = ? ORDER BY rowid", [note_id])


def unresolved_targets(conn: sqlite3.Connection, note_id: int) -> Iterator[tuple[str, str]]:
    """(target, kind) of a note's links that resolve to no note, in the order they were stored."""
    return conn.execute("SELECT target, kind FROM edges WHERE src_id = ? AND dst_id IS NULL ORDER BY rowid", [note_id])


def edge_counts_from(conn: sqlite3.Connection, note_ids_json: str) -> tuple[int, int]:
    """(edges, unresolved edges) of the notes whose ids the bound JSON array holds as sources. The rows are
    counted here: an aggregate over a generation's ``edges`` view is not pushed into its segments (SQLite 3.40
    scans the whole view, 0.09 s at 100k notes), a plain select is (an index lookup per segment)."""
    rows = conn.execute(
        "SELECT dst_id IS NULL FROM edges WHERE src_id IN (SELECT value FROM json_each(?))", (note_ids_json,)
    ).fetchall()
    return len(rows), sum(row[0] for row in rows)


def supersedes_targets(conn: sqlite3.Connection) -> list[int]:
    """The ids of the notes a ``supersedes`` edge names (what the default filters leave out, with the
    notes superseded by their own frontmatter: core.ranking.filters)."""
    sql = "SELECT DISTINCT dst_id FROM edges WHERE kind = 'supersedes' AND dst_id IS NOT NULL"
    return [row[0] for row in conn.execute(sql)]
