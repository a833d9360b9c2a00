"""Writing a segment from existing segments' rows (the merge and split path: no note is parsed again), and
a tombstone part for a segment's deleted notes (issue 29, step 2a).

``write_segment`` creates a new segment file holding the given notes' rows of every per-note table
(notes, note_tags, note_names, note_problems, chunks, note_text and its FTS5 rows, links, link_keys,
target_keys, the edges those notes are the source of, note_terms / chunk_terms, dense chunk_vectors),
copied from each source segment ATTACHed read-only; then the term-major arrays and per-class
statistics over THAT segment's notes only, with the builder's own array code. The first source's term
dictionary is kept as it is (its ids unchanged); a term of a later source that it lacks gets the next
id, and that source's vectors are remapped. An edge to a note listed as dead is left out.

Generation-level tables (meta, skipped_files, build_problems, git_dates) are carried by the NEWEST
segment of a generation (``core.index.segmented`` reads them there): ``generation_from`` names the
source they are copied from (every segment carries its own ``meta`` schema version and tokenizer).

``write_tombstone`` writes ``dead(note_id)`` and, in ``term_major``, the deleted notes' exact
statistics: the ``class_*`` arrays of the sparse and chunk groups (core.ranking.classes' encoding),
the sparse group's total ``df`` and both groups' ``indptr`` (per term: its dead notes / chunks), all
over the segment's own term ids; computed by writing those notes as a scratch segment with the
segment's whole dictionary (the builder's own array code): what the ranking side subtracts.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.index.schema import create_schema
from core.index.segmented import PER_NOTE_TABLES
from core.index.tables.connection import set_journal_mode, set_working_mode
from core.index.tables.notes_fts import SQL_INSERT_FTS, decode_texts
from core.index.tables.term_major import DDL_TERM_MAJOR
from core.ranking.chunk_vectors import compute_chunk_vectors, store_chunk_vectors
from core.ranking.sparse import store_sparse
from core.ranking.sparse_rows import compute_sparse

# per-note tables copied by note id (edges, the vectors and chunk_vectors have their own copy)
_BY_NOTE = {t: c for t, c in PER_NOTE_TABLES.items() if t not in ("edges", "note_terms", "chunk_terms")}
GENERATION_TABLES = ("skipped_files", "build_problems", "git_dates")
_FIELDS = 5  # len(FTS_COLUMNS): the tf columns of a note_terms row


@dataclass(frozen=True)
class SegmentSource:
    """A segment file to copy notes from (a path SQLite can open: a pinned ``/proc/self/fd/N`` too)."""

    path: Path
    note_ids: Collection[int]


def _attach(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("ATTACH DATABASE ? AS src", (f"file:{path}?mode=ro&immutable=1",))


def _dictionary(conn: sqlite3.Connection, first: bool) -> np.ndarray | None:
    """Merge ``src.terms`` into ``main.terms``: None when the source's ids are kept as they are, else the
    array old id -> new id."""
    if first:
        conn.execute("INSERT INTO main.terms SELECT * FROM src.terms")
        return None
    conn.execute(
        "INSERT INTO main.terms(id, term) SELECT (SELECT coalesce(max(id), 0) FROM main.terms) + "
        "row_number() OVER (ORDER BY s.id), s.term FROM src.terms s "
        "WHERE s.term NOT IN (SELECT term FROM main.terms)"
    )
    pairs = conn.execute("SELECT s.id, m.id FROM src.terms s JOIN main.terms m ON m.term = s.term").fetchall()
    table = np.zeros(max((p[0] for p in pairs), default=0) + 1, dtype=np.int32)
    for old, new in pairs:
        table[old] = new
    return table


def _remap(ids: np.ndarray, tf: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    new = table[ids]
    order = np.argsort(new, kind="stable")
    return new[order], tf[order]


def _copy_vectors(conn: sqlite3.Connection, table: np.ndarray | None) -> None:
    """note_terms and chunk_terms of the chosen notes, their term ids remapped when ``table`` is given."""
    where = "WHERE note_id IN (SELECT id FROM temp.ws_ids)"
    if table is None:
        conn.execute(f"INSERT INTO main.note_terms SELECT * FROM src.note_terms {where}")
        conn.execute(f"INSERT INTO main.chunk_terms SELECT * FROM src.chunk_terms {where}")
        return
    rows = []
    for nid, n, data in conn.execute(f"SELECT note_id, n_terms, data FROM src.note_terms {where}").fetchall():
        raw = zlib.decompress(data)
        ids = np.frombuffer(raw, dtype="<i4", count=n)
        tf = np.frombuffer(raw, dtype="<u2", offset=4 * n).reshape(n, _FIELDS)
        ids, tf = _remap(ids, tf, table)
        rows.append((nid, n, zlib.compress(ids.astype("<i4").tobytes() + tf.astype("<u2").tobytes(), 1)))
    conn.executemany("INSERT INTO main.note_terms(note_id, n_terms, data) VALUES (?, ?, ?)", rows)
    chunk_rows = []
    sql = f"SELECT note_id, n_chunks, n_terms, data FROM src.chunk_terms {where}"
    for nid, chunks, n, data in conn.execute(sql).fetchall():
        raw = zlib.decompress(data)
        lengths = np.frombuffer(raw, dtype="<u4", count=chunks)
        ids = np.frombuffer(raw, dtype="<i4", offset=4 * chunks, count=n)
        tf = np.frombuffer(raw, dtype="<u2", offset=4 * chunks + 4 * n, count=n)
        runs, at = [], 0
        for length in lengths.tolist():
            runs.append(_remap(ids[at : at + length], tf[at : at + length], table))
            at += length
        new_ids = np.concatenate([r[0] for r in runs]) if runs else ids
        new_tf = np.concatenate([r[1] for r in runs]) if runs else tf
        blob = lengths.tobytes() + new_ids.astype("<i4").tobytes() + new_tf.astype("<u2").tobytes()
        chunk_rows.append((nid, chunks, n, zlib.compress(blob, 1)))
    sql = "INSERT INTO main.chunk_terms(note_id, n_chunks, n_terms, data) VALUES (?, ?, ?, ?)"
    conn.executemany(sql, chunk_rows)


def _copy_source(conn: sqlite3.Connection, source: SegmentSource, first: bool) -> None:
    conn.execute("DELETE FROM temp.ws_ids")
    conn.executemany("INSERT INTO temp.ws_ids(id) VALUES (?)", ((i,) for i in source.note_ids))
    _attach(conn, source.path)
    conn.execute("BEGIN")
    try:
        table = _dictionary(conn, first)
        for name, column in _BY_NOTE.items():
            conn.execute(
                f"INSERT INTO main.{name} SELECT * FROM src.{name} WHERE {column} IN (SELECT id FROM temp.ws_ids)"
            )
        conn.execute(
            "INSERT INTO main.edges SELECT * FROM src.edges WHERE src_id IN (SELECT id FROM temp.ws_ids) "
            "AND (dst_id IS NULL OR dst_id NOT IN (SELECT id FROM temp.ws_dead))"
        )
        conn.execute(
            "INSERT INTO main.chunk_vectors SELECT * FROM src.chunk_vectors WHERE chunk_id IN "
            "(SELECT id FROM src.chunks WHERE note_id IN (SELECT id FROM temp.ws_ids))"
        )
        _copy_vectors(conn, table)
        if first:
            conn.execute("INSERT OR REPLACE INTO main.meta SELECT * FROM src.meta")
    finally:
        conn.commit()
        conn.execute("DETACH DATABASE src")


def _fill_fts(conn: sqlite3.Connection) -> None:
    """FTS5 rows of the copied notes, from their stored texts (contentless: nothing to copy)."""
    rows = conn.execute("SELECT note_id, data FROM note_text ORDER BY note_id").fetchall()
    conn.executemany(SQL_INSERT_FTS, ((nid, *decode_texts(nid, data)) for nid, data in rows))


def write_segment(
    dest: Path,
    sources: Sequence[SegmentSource],
    *,
    tokenizer: str,
    dead: Collection[int] = (),
    generation_from: Path | None = None,
) -> dict[str, int]:
    """Write a new segment file ``dest`` (must not exist) of ``sources``' chosen notes; ``dead``: note ids
    no edge may point at; ``generation_from``: the segment whose generation-level tables it carries.
    Returns the segment's counts (notes, chunks, dense_chunks)."""
    conn = sqlite3.connect(f"file:{dest}?mode=rwc", uri=True, isolation_level=None)
    try:
        set_working_mode(conn, durable=False)
        create_schema(conn, tokenizer)
        conn.execute("CREATE TEMP TABLE ws_ids(id INTEGER PRIMARY KEY)")
        conn.execute("CREATE TEMP TABLE ws_dead(id INTEGER PRIMARY KEY)")
        conn.executemany("INSERT INTO temp.ws_dead(id) VALUES (?)", ((i,) for i in dead))
        for i, source in enumerate(sources):
            _copy_source(conn, source, i == 0)
        if generation_from is not None:
            _attach(conn, generation_from)
            conn.execute("BEGIN")
            conn.execute("INSERT OR REPLACE INTO main.meta SELECT * FROM src.meta")
            for name in GENERATION_TABLES:
                conn.execute(f"INSERT INTO main.{name} SELECT * FROM src.{name}")
            conn.commit()
            conn.execute("DETACH DATABASE src")
        conn.execute("BEGIN")
        _fill_fts(conn)
        sparse = compute_sparse(conn)
        store_sparse(conn, sparse)
        store_chunk_vectors(conn, compute_chunk_vectors(conn, sparse))
        conn.commit()
        counts = {
            name: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for name, table in (("notes", "notes"), ("chunks", "chunks"), ("dense_chunks", "chunk_vectors"))
        }
        set_journal_mode(conn, "DELETE")
    finally:
        conn.close()
    return counts


def _statistic(name: str) -> bool:
    """An array (or piece) a tombstone keeps: per-class statistics, the total df (``df``) and the
    postings' term pointers (``indptr``: a term's notes / chunks) of the dead notes."""
    array = name.split("/", 1)[-1].split("#", 1)[0]
    return array.startswith("class_") or array in ("df", "indptr")


def write_tombstone(dest: Path, segment: Path, dead_ids: Collection[int], *, tokenizer: str) -> int:
    """Write a tombstone part ``dest`` for ``segment``: ALL of that segment's deleted note ids (a newer
    delete writes a new tombstone) and their per-class statistics. Returns how many ids it lists."""
    ids = sorted(set(dead_ids))
    scratch = dest.with_name(dest.name + ".scratch")
    try:
        write_segment(scratch, [SegmentSource(segment, ids)], tokenizer=tokenizer)
        conn = sqlite3.connect(f"file:{dest}?mode=rwc", uri=True, isolation_level=None)
        try:
            conn.execute("CREATE TABLE dead(note_id INTEGER PRIMARY KEY)")
            conn.execute(DDL_TERM_MAJOR)
            conn.execute("ATTACH DATABASE ? AS src", (f"file:{scratch}?mode=ro",))
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO dead(note_id) VALUES (?)", ((i,) for i in ids))
            names = [r[0] for r in conn.execute("SELECT name FROM src.term_major") if _statistic(r[0])]
            sql = "INSERT INTO main.term_major SELECT * FROM src.term_major WHERE name = ?"
            conn.executemany(sql, ((n,) for n in names))
            conn.commit()
            conn.execute("DETACH DATABASE src")
            set_journal_mode(conn, "DELETE")
        finally:
            conn.close()
    finally:
        scratch.unlink(missing_ok=True)
    return len(ids)
