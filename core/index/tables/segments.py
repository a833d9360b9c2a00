"""The SQL of a generation of several segments: attaching segments, the federated TEMP views that serve
them through one connection (``core.index.segmented``), a tombstone part's tables, and the row copies
a new segment is written with (``core.build.segment_writer``).

A tombstone part is a small SQLite file: ``dead(note_id)`` (ALL the deleted note ids of its segment)
and those notes' exact per-class statistics for the terms they hold only (``create_tombstone``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable, Sequence

from core.errors import IntegrityError
from core.index.tables import text_blocks
from core.index.tables.connection import count_live, dead_in, segment_schemas
from core.index.tables.notes_fts import FTS_COLUMNS, SQL_INSERT_FTS, stored_texts

# per-note table -> the column that names its note (edges: the source; a dead destination is dropped too)
PER_NOTE_TABLES = {
    "notes": "id",
    "note_tags": "note_id",
    "note_names": "note_id",
    "note_problems": "note_id",
    "chunks": "note_id",
    "note_text": "note_id",
    "links": "note_id",
    "edges": "src_id",
    "link_keys": "note_id",
    "target_keys": "note_id",
}
# carried by a generation's NEWEST segment (meta: every segment has its own schema version and tokenizer)
GENERATION_TABLES = ("meta", "skipped_files", "build_problems", "git_dates")
ROWID_TABLES = ("links", "edges")  # the read path names a link by its rowid (core.index.tables.links)
ROWID_SHIFT = 40
_COPIED_BY_NOTE = {t: c for t, c in PER_NOTE_TABLES.items() if t not in ("edges", "note_text", "chunks")}


def _schema(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"not a schema name: {name!r}")
    return name


# ---------------------------------------------------------------- attaching


def attach(conn: sqlite3.Connection, uri: str, schema: str) -> None:
    """ATTACH the database at ``uri`` (a ``file:`` URI) as ``schema`` and read its first page."""
    conn.execute(f"ATTACH DATABASE ? AS {_schema(schema)}", (uri,))
    conn.execute(f"SELECT count(*) FROM {schema}.sqlite_master").fetchone()


def detach(conn: sqlite3.Connection, schema: str) -> None:
    conn.execute(f"DETACH DATABASE {_schema(schema)}")


# ---------------------------------------------------------------- the federated views


def dead_note_ids(conn: sqlite3.Connection) -> list[int]:
    """The note ids a tombstone part lists."""
    return [int(r[0]) for r in conn.execute("SELECT note_id FROM dead ORDER BY note_id")]


def _drop_live_elsewhere(conn: sqlite3.Connection, schemas: list[str]) -> None:
    """``temp.vs_gone``: the dead ids no segment holds live. An id dead somewhere is live in at most one
    segment (the edited note's newer row), else IntegrityError (checked for the dead ids only: cheap; the
    ranking side's combine checks every live id)."""
    conn.execute("INSERT OR IGNORE INTO temp.vs_gone(id) SELECT id FROM temp.vs_dead")
    live: list[int] = []
    for pos, schema in enumerate(schemas):
        live += [
            int(r[0])
            for r in conn.execute(
                f"SELECT g.id FROM temp.vs_gone g JOIN {schema}.notes n ON n.id = g.id WHERE g.id NOT IN ({dead_in(pos)})"
            )
        ]
    if len(live) != len(set(live)):
        twice = sorted({i for i in live if live.count(i) > 1})
        raise IntegrityError(f"notes {twice[:5]} are live in two segments of the generation", note_ids=twice[:5])
    conn.executemany("DELETE FROM temp.vs_gone WHERE id = ?", ((i,) for i in live))


def _rowid(table: str, pos: int) -> str:
    """A view of a table whose rowids the read path uses has a ``rowid`` column: the segment's position
    above bit 40, its own rowid below (unique across segments, in segment then insertion order)."""
    return f"({pos} << {ROWID_SHIFT}) + rowid AS rowid, " if table in ROWID_TABLES else ""


def federate(conn: sqlite3.Connection, schemas: list[str], shas: list[str], dead: list[list[int]]) -> None:
    """``temp.vs_segments`` (the schemas in manifest order), ``temp.vs_dead`` / ``vs_dead_chunks`` (each
    segment's dead note / chunk ids, by its position: an edited note keeps its id, dead in an older segment
    and live in a newer one), ``temp.vs_gone`` (the dead ids no segment holds live: an edge's destination
    is dropped only then) and a TEMP VIEW per per-note table (UNION ALL over ``schemas``, each segment's own
    dead rows left out) and per generation table (the newest segment's)."""
    conn.execute("CREATE TEMP TABLE vs_segments(pos INTEGER PRIMARY KEY, schema TEXT NOT NULL, sha256 TEXT)")
    conn.executemany("INSERT INTO temp.vs_segments VALUES (?, ?, ?)", zip(range(len(schemas)), schemas, shas))
    conn.execute("CREATE TEMP TABLE vs_dead(pos INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (pos, id))")
    conn.execute("CREATE TEMP TABLE vs_dead_chunks(pos INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (pos, id))")
    conn.execute("CREATE TEMP TABLE vs_gone(id INTEGER PRIMARY KEY)")
    for pos, (schema, ids) in enumerate(zip(map(_schema, schemas), dead, strict=True)):
        conn.executemany(f"INSERT INTO temp.vs_dead(pos, id) VALUES ({pos}, ?)", ((i,) for i in ids))
        conn.execute(
            f"INSERT INTO temp.vs_dead_chunks(pos, id) SELECT {pos}, id FROM {schema}.chunk_rows "
            f"WHERE note_id IN ({dead_in(pos)})"
        )
    _drop_live_elsewhere(conn, schemas)
    for table, column in PER_NOTE_TABLES.items():
        keep = " AND (dst_id IS NULL OR dst_id NOT IN (SELECT id FROM temp.vs_gone))" if table == "edges" else ""
        union = " UNION ALL ".join(
            f"SELECT {_rowid(table, pos)}* FROM {s}.{table} WHERE {column} NOT IN ({dead_in(pos)}){keep}"
            for pos, s in enumerate(schemas)
        )
        conn.execute(f"CREATE TEMP VIEW {table} AS {union}")
    union = " UNION ALL ".join(
        f"SELECT * FROM {s}.chunk_vectors WHERE chunk_id NOT IN ({dead_in(pos, 'vs_dead_chunks')})"
        for pos, s in enumerate(schemas)
    )
    conn.execute(f"CREATE TEMP VIEW chunk_vectors AS {union}")
    union = " UNION ALL ".join(f"SELECT * FROM {s}.text_dict" for s in schemas)  # every segment's: cells name theirs
    conn.execute(f"CREATE TEMP VIEW text_dict AS {union}")
    for table in GENERATION_TABLES:
        conn.execute(f"CREATE TEMP VIEW {table} AS SELECT * FROM {schemas[-1]}.{table}")


# ---------------------------------------------------------------- writing a segment from ``src``


def start_copy(conn: sqlite3.Connection, dead: Collection[int]) -> None:
    """The copy's scratch tables: the notes to copy (``temp.ws_ids``) and the dead ids no edge may name."""
    conn.execute("CREATE TEMP TABLE ws_ids(id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE ws_dead(id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO temp.ws_dead(id) VALUES (?)", ((i,) for i in dead))


def choose_notes(conn: sqlite3.Connection, note_ids: Iterable[int]) -> None:
    conn.execute("DELETE FROM temp.ws_ids")
    conn.executemany("INSERT INTO temp.ws_ids(id) VALUES (?)", ((i,) for i in note_ids))


def copy_note_rows(conn: sqlite3.Connection) -> None:
    """Every per-note row of the chosen notes (their term vectors are the writer's: core.build.forward_rows);
    edges to a dead note are left out."""
    for name, column in _COPIED_BY_NOTE.items():
        conn.execute(f"INSERT INTO main.{name} SELECT * FROM src.{name} WHERE {column} IN (SELECT id FROM temp.ws_ids)")
    copy_chunk_rows(conn)
    conn.execute(
        "INSERT INTO main.edges SELECT * FROM src.edges WHERE src_id IN (SELECT id FROM temp.ws_ids) "
        "AND (dst_id IS NULL OR dst_id NOT IN (SELECT id FROM temp.ws_dead))"
    )
    conn.execute(
        "INSERT INTO main.chunk_vectors SELECT * FROM src.chunk_vectors WHERE chunk_id IN "
        "(SELECT id FROM src.chunks WHERE note_id IN (SELECT id FROM temp.ws_ids))"
    )


def copy_chunk_rows(conn: sqlite3.Connection) -> None:
    """The chosen notes' chunk rows, their heading ids mapped to the new segment's (a path it lacks is added).
    Paths are matched through TEMP tables keyed by path (``main.headings`` has no index on its paths: joining
    on them was quadratic, 85 s for the PowerShell docs' 17,669 paths)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ws_src_headings(id INTEGER PRIMARY KEY, path TEXT NOT NULL)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ws_paths(path TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ws_headings(old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
    for table in ("ws_src_headings", "ws_paths", "ws_headings"):
        conn.execute(f"DELETE FROM temp.{table}")
    conn.execute(
        "INSERT INTO temp.ws_src_headings(id, path) SELECT h.id, h.path FROM src.headings h WHERE h.id IN "
        "(SELECT heading_id FROM src.chunk_rows WHERE note_id IN (SELECT id FROM temp.ws_ids))"
    )
    conn.execute("INSERT OR IGNORE INTO temp.ws_paths(path, id) SELECT path, id FROM main.headings")
    top = int(conn.execute("SELECT coalesce(max(id), 0) FROM main.headings").fetchone()[0])
    conn.execute(
        "INSERT INTO main.headings(id, path) SELECT ? + row_number() OVER (ORDER BY s.id), s.path "
        "FROM temp.ws_src_headings s WHERE NOT EXISTS (SELECT 1 FROM temp.ws_paths p WHERE p.path = s.path)",
        (top,),
    )
    conn.execute(
        "INSERT OR IGNORE INTO temp.ws_paths(path, id) SELECT path, id FROM main.headings WHERE id > ?", (top,)
    )
    conn.execute(
        "INSERT INTO temp.ws_headings(old, new) SELECT s.id, p.id FROM temp.ws_src_headings s "
        "JOIN temp.ws_paths p ON p.path = s.path"
    )
    conn.execute(
        "INSERT INTO main.chunk_rows SELECT c.id, c.note_id, c.ord, w.new, c.start, c.end "
        "FROM src.chunk_rows c JOIN temp.ws_headings w ON w.old = c.heading_id "
        "WHERE c.note_id IN (SELECT id FROM temp.ws_ids)"
    )


def copy_note_texts(conn: sqlite3.Connection, *, use_dict: bool) -> None:
    """The chosen notes' cells, stored in note order in new blocks (a note left out or deleted never comes
    along). The new segment's dictionary is the first one a source brings (none unless ``use_dict``); a cell
    is copied as it is when it needs no dictionary or that one, else it is decoded and compressed again with
    the new segment's dictionary (or without one). 2,000 notes at a time: each block is read once."""
    src = conn.execute("SELECT data FROM src.text_dict").fetchone()
    mine = text_blocks.stored_text_dict(conn)
    if use_dict and mine is None and src is not None:
        mine = bytes(src[0])
        text_blocks.store_text_dict(conn, mine)
    same = src is None or bytes(src[0]) == mine
    dicts = text_blocks.text_dicts_of(conn, "src")
    places = conn.execute(
        "SELECT note_id, block, start, size FROM src.note_text WHERE note_id IN (SELECT id FROM temp.ws_ids) "
        "ORDER BY note_id"
    ).fetchall()
    for at in range(0, len(places), 2000):
        part = places[at : at + 2000]
        wanted = sorted({p[1] for p in part})
        sql = f"SELECT id, data FROM src.text_blocks WHERE id IN ({', '.join('?' * len(wanted))})"
        blocks = dict(conn.execute(sql, wanted))
        cells = text_blocks.cells_of((nid, start, size, blocks.get(block, b"")) for nid, block, start, size in part)
        if not same:
            cells = {
                nid: text_blocks.encode_cell(
                    text_blocks.decode_cell(nid, cell, dicts, len(FTS_COLUMNS)), len(FTS_COLUMNS), mine
                )
                for nid, cell in cells.items()
            }
        text_blocks.write_packed(conn, list(cells), text_blocks.pack(cells.values()))


def copy_generation_tables(conn: sqlite3.Connection, *, meta_only: bool) -> None:
    """``src``'s meta (over the new segment's), and unless ``meta_only`` its other generation tables."""
    conn.execute("INSERT OR REPLACE INTO main.meta SELECT * FROM src.meta")
    for name in () if meta_only else GENERATION_TABLES[1:]:
        conn.execute(f"INSERT INTO main.{name} SELECT * FROM src.{name}")


def index_stored_texts(conn: sqlite3.Connection, only: Collection[int] | None = None) -> None:
    """FTS5 rows of every note (``only``: of these notes) from its stored texts (contentless FTS5 has
    nothing to copy), in note order, 500 notes at a time."""
    ids = [int(r[0]) for r in conn.execute("SELECT note_id FROM main.note_text ORDER BY note_id")]
    if only is not None:
        wanted = set(only)
        ids = [i for i in ids if i in wanted]
    for at in range(0, len(ids), 500):
        texts = stored_texts(conn, ids[at : at + 500])
        conn.executemany(SQL_INSERT_FTS, ((nid, *texts[nid]) for nid in ids[at : at + 500]))


def reindex_stored_texts(conn: sqlite3.Connection) -> None:
    """Every note's FTS5 rows anew from its stored texts (whatever the FTS5 table held before is dropped)."""
    conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('delete-all')")
    index_stored_texts(conn)


def segment_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        name: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        for name, table in (("notes", "notes"), ("chunks", "chunks"), ("dense_chunks", "chunk_vectors"))
    }


# ---------------------------------------------------------------- a tombstone part


def create_tombstone(
    conn: sqlite3.Connection,
    note_ids: Sequence[int],
    classes: Sequence[tuple[str, int, str]],
    df: Iterable[tuple[str, int, int]],
) -> None:
    """A tombstone's tables: ``dead`` (its note ids), ``dead_classes`` (class name, dead notes, their
    field-length sums as a JSON list) and ``dead_df`` (class name, the segment's term id, how many dead
    notes of that class hold the term), only the terms the dead notes hold."""
    conn.execute("CREATE TABLE dead(note_id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE dead_classes(class TEXT PRIMARY KEY, docs INTEGER NOT NULL, field_len TEXT NOT NULL)")
    conn.execute(
        "CREATE TABLE dead_df(class TEXT NOT NULL, term_id INTEGER NOT NULL, df INTEGER NOT NULL, "
        "PRIMARY KEY (class, term_id)) WITHOUT ROWID"
    )
    conn.executemany("INSERT INTO dead(note_id) VALUES (?)", ((i,) for i in note_ids))
    conn.executemany("INSERT INTO dead_classes(class, docs, field_len) VALUES (?, ?, ?)", classes)
    conn.executemany("INSERT INTO dead_df(class, term_id, df) VALUES (?, ?, ?)", df)


# a tombstone's stored statistics: (class, dead notes, field-length sums as JSON) rows, (class, term id, df) rows
DeadStatistics = tuple[list[tuple[str, int, str]], list[tuple[str, int, int]]]


def dead_statistics(conn: sqlite3.Connection) -> DeadStatistics | None:
    """A tombstone's stored statistics (``create_tombstone``): (classes rows, df rows by class then term);
    None for a tombstone written before they were stored (no ``dead_df`` table)."""
    found = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dead_df'").fetchone()
    if not found[0]:
        return None
    classes = [(str(c), int(n), str(f)) for c, n, f in conn.execute("SELECT * FROM dead_classes ORDER BY class")]
    df = [(str(c), int(t), int(n)) for c, t, n in conn.execute("SELECT * FROM dead_df ORDER BY class, term_id")]
    return classes, df


# ---------------------------------------------------------------- the edit path's delta (core.build.incremental)


def segment_note_ids(conn: sqlite3.Connection) -> list[int]:
    """Every note id a segment holds (its dead ones too), in order."""
    return [int(r[0]) for r in conn.execute("SELECT id FROM notes ORDER BY id")]


def held_note_ids(conn: sqlite3.Connection, note_ids: Sequence[int]) -> list[int]:
    """Those of ``note_ids`` the database holds (its dead ones too), in order: a primary-key lookup each."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM notes WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(sorted(note_ids)),),
        )
    ]


def note_ids_from(conn: sqlite3.Connection, first: int, also: Sequence[int] = ()) -> list[int]:
    """The note ids from ``first`` and those of ``also`` the database holds, in order."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM notes WHERE id >= ? OR id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (first, json.dumps(sorted(also))),
        )
    ]


def next_ids(conn: sqlite3.Connection) -> tuple[int, int]:
    """(note id, chunk id) above every row of this database."""
    row = conn.execute(
        "SELECT (SELECT coalesce(max(id), 0) + 1 FROM notes), (SELECT coalesce(max(id), 0) + 1 FROM chunks)"
    ).fetchone()
    return int(row[0]), int(row[1])


def links_and_edges(conn: sqlite3.Connection) -> tuple[int, int]:
    row = conn.execute("SELECT (SELECT count(*) FROM links), (SELECT count(*) FROM edges)").fetchone()
    return int(row[0]), int(row[1])


def live_links_and_edges(conn: sqlite3.Connection) -> tuple[int, int]:
    """``links_and_edges`` counted per segment (``count_live``: each segment's rows minus those it holds dead,
    index lookups) instead of through the views, where every row pays the dead-id tests (100k notes, 260k
    links: 0.33 s of CPU of every build on the generation). An edge is also dropped when its destination is
    dead in every segment (``temp.vs_gone``), as the ``edges`` view drops it."""
    schemas = segment_schemas(conn)
    if schemas is None:
        return links_and_edges(conn)
    links = count_live(conn, "links", "note_id", "vs_dead")
    edges = count_live(conn, "edges", "src_id", "vs_dead")
    for pos, schema in enumerate(schemas):
        edges -= int(
            conn.execute(
                f"SELECT count(*) FROM {schema}.edges WHERE dst_id IN (SELECT id FROM temp.vs_gone) "
                f"AND src_id NOT IN ({dead_in(pos)})"
            ).fetchone()[0]
        )
    return links, edges


def live_edge_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """``links.edge_counts`` (edges, unresolved edges) as the ``edges`` view gives them, counted per segment
    (``live_links_and_edges``'s edges; the unresolved ones through the index on ``dst_id``), not through the
    view, where every one of 100k notes' edges pays the dead-id tests (0.09 s of a one-note edit's build)."""
    schemas = segment_schemas(conn)
    if schemas is None:
        row = conn.execute("SELECT count(*), (SELECT count(*) FROM edges WHERE dst_id IS NULL) FROM edges").fetchone()
        return int(row[0]), int(row[1])
    edges = live_links_and_edges(conn)[1]
    unresolved = 0
    for pos, schema in enumerate(schemas):
        unresolved += int(
            conn.execute(
                f"SELECT (SELECT count(*) FROM {schema}.edges WHERE dst_id IS NULL) - (SELECT count(*) FROM "
                f"{schema}.edges WHERE dst_id IS NULL AND src_id IN ({dead_in(pos)}))"
            ).fetchone()[0]
        )
    return edges, unresolved


def edges_below(conn: sqlite3.Connection, below: int) -> Iterable[tuple]:
    """(src id, dst id, kind, target) of the edges of notes with ids below ``below``, in order."""
    return conn.execute(
        "SELECT src_id, dst_id, kind, target FROM edges WHERE src_id < ? ORDER BY src_id, rowid", (below,)
    )
