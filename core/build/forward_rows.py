"""A writer's forward rows, derived from a stored database's term-major arrays (issue 29: each posting list
stored once).

A stored segment holds its postings once, term-major (``term_major``: the sparse and chunk groups of
core.ranking.sparse / core.ranking.chunk_vectors) and its term dictionary as that group's ``term_text`` /
``term_ids`` arrays. A writer (the build, ``core.build.segment_writer``) works on note-major rows, the TEMP
tables of ``core.index.tables.terms``: ``read_forward`` turns a database's arrays back into exactly the
rows they were computed from (per note: ascending term ids and per-field counts; per chunk: ascending term
ids and weighted counts), for all notes or the chosen ones, with the term ids mapped through a table;
``fill_working`` puts rows and a dictionary into the connection's working tables.

A build on a base (core.build.builder) starts from EMPTY working tables: they hold only the notes it
writes (``working_forward`` reads them back for its delta segment), and ``complete_working`` adds every
other note's rows from the base segments' arrays when the delta is refused and the whole is published.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from core.errors import IntegrityError
from core.index.tables.connection import run_statements
from core.index.tables.notes_fts import FTS_COLUMNS
from core.index.tables.terms import (
    WORKING_DDL,
    chunk_term_rows,
    clear_working,
    insert_chunk_terms,
    insert_note_terms,
    insert_terms,
    note_term_rows,
    term_dictionary,
    working_loaded,
)
from core.ranking import bm25f, stored
from core.ranking.chunk_vectors import CHUNK_GROUP
from core.ranking.postings import distinct
from core.ranking.sparse import SPARSE_GROUP

_SPARSE = ("note_ids", "indptr", "docs", "field_mask", "body_tf", "side_tf", "term_text", "term_ids")
_CHUNKS = ("indptr", "chunks", "tf", "group_starts", "group_rows", "chunk_ids")


@dataclass
class Forward:
    """The forward rows of some notes of a database, as its arrays hold them."""

    terms: dict[str, int]  # the database's whole dictionary: term -> id
    notes: list[tuple[int, np.ndarray, np.ndarray]]  # note id, term ids int32, tf uint16 [n, fields]
    chunks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]  # note id, terms per chunk, term ids, tf
    _used: np.ndarray | None = None

    def used_terms(self) -> np.ndarray:
        """The distinct term ids the rows name, ascending (computed once)."""
        if self._used is not None:
            return self._used
        held = [ids for _, ids, _ in self.notes] + [ids for _, _, ids, _ in self.chunks]
        self._used = distinct(np.concatenate(held)) if held else np.zeros(0, np.int64)
        return self._used

    def only(self, note_ids: Collection[int]) -> Forward:
        """The rows of ``note_ids`` (each must have its rows: else an IntegrityError), the same dictionary."""
        wanted = set(note_ids)
        notes = [row for row in self.notes if row[0] in wanted]
        chunks = [row for row in self.chunks if row[0] in wanted]
        if len(notes) != len(wanted) or len(chunks) != len(wanted):
            raise IntegrityError(f"{len(wanted) - len(notes)} of {len(wanted)} notes have no term vectors")
        return Forward(self.terms, notes, chunks)


def create_working(conn: sqlite3.Connection) -> None:
    """The connection's TEMP working tables (``terms``, ``note_terms``, ``chunk_terms``), if not there yet."""
    run_statements(conn, WORKING_DDL)


def read_forward(conn: sqlite3.Connection, note_ids: Collection[int] | None = None) -> Forward | None:
    """The forward rows of ``note_ids`` (None: every note) from ``conn``'s stored arrays, by note id; None
    when ``conn`` holds no arrays (an empty new database). A group that lacks an array is an IntegrityError."""
    sparse = stored.load_group(conn, SPARSE_GROUP, _SPARSE)
    if sparse is None:
        return None
    chunks = stored.load_group(conn, CHUNK_GROUP, _CHUNKS)
    if chunks is None:
        raise IntegrityError("the database holds sparse arrays but no chunk arrays", group=CHUNK_GROUP)
    all_ids = np.asarray(sparse["note_ids"], dtype=np.int64)
    chosen = np.ones(all_ids.shape[0], dtype=bool) if note_ids is None else np.isin(all_ids, list(note_ids))
    return Forward(
        stored.unpack_terms(sparse), _note_rows(sparse, all_ids, chosen), _chunk_rows(chunks, all_ids, chosen)
    )


def _by_row(rows: np.ndarray, terms: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(order sorting the postings by row then term, start of each row's postings [n_rows + 1])."""
    order = np.lexsort((terms, rows))
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=starts[1:])
    return order, starts


def _posting_terms(indptr: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int32), np.diff(indptr))


def _note_rows(arrays: dict, note_ids: np.ndarray, chosen: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
    indptr = np.asarray(arrays["indptr"], dtype=np.int64)
    docs = np.asarray(arrays["docs"], dtype=np.int64)
    tf = bm25f.posting_tf(
        np.asarray(arrays["field_mask"]), np.asarray(arrays["body_tf"]), np.asarray(arrays["side_tf"])
    )
    if docs.size and (docs.min() < 0 or docs.max() >= note_ids.shape[0]):
        raise IntegrityError(f"stored postings name rows outside the {note_ids.shape[0]} notes")
    keep = np.flatnonzero(chosen[docs])
    docs, terms, tf = docs[keep], _posting_terms(indptr)[keep], tf[keep]
    order, starts = _by_row(docs, terms, note_ids.shape[0])
    terms, tf = terms[order], tf[order]
    return [
        (int(note_ids[r]), terms[starts[r] : starts[r + 1]], tf[starts[r] : starts[r + 1]])
        for r in np.flatnonzero(chosen).tolist()
    ]


def _chunk_rows(arrays: dict, note_ids: np.ndarray, chosen: np.ndarray) -> list[tuple]:
    n_chunks = int(arrays["chunk_ids"].shape[0])
    group_starts = np.asarray(arrays["group_starts"], dtype=np.int64)
    group_rows = np.asarray(arrays["group_rows"], dtype=np.int64)
    bounds = np.append(group_starts, n_chunks)
    if (group_rows < 0).any() or (group_rows >= note_ids.shape[0]).any() or (np.diff(bounds) < 0).any():
        raise IntegrityError(f"stored chunk groups do not fit the {note_ids.shape[0]} notes and {n_chunks} chunks")
    group_of = np.full(note_ids.shape[0], -1, dtype=np.int64)
    group_of[group_rows] = np.arange(group_rows.shape[0])
    chunk_row = np.asarray(arrays["chunks"], dtype=np.int64)
    chunk_chosen = np.repeat(chosen[group_rows], np.diff(bounds))
    keep = np.flatnonzero(chunk_chosen[chunk_row])
    rows, terms = chunk_row[keep], _posting_terms(np.asarray(arrays["indptr"], dtype=np.int64))[keep]
    tf = np.asarray(arrays["tf"])[keep]
    order, starts = _by_row(rows, terms, n_chunks)
    terms, tf = terms[order], tf[order]
    out = []
    for r in np.flatnonzero(chosen).tolist():
        g = int(group_of[r])
        c0, c1 = (int(bounds[g]), int(bounds[g + 1])) if g >= 0 else (0, 0)
        sl = slice(int(starts[c0]), int(starts[c1]))
        out.append(
            (int(note_ids[r]), np.diff(starts[c0 : c1 + 1]) if c1 > c0 else np.zeros(0, np.int64), terms[sl], tf[sl])
        )
    return out


def _mapped(ids: np.ndarray, tf: np.ndarray, lengths: np.ndarray, table: np.ndarray | None) -> tuple[bytes, bytes]:
    """(term ids, tf) bytes of a row whose runs have ``lengths``, ids mapped through ``table`` and each run
    sorted by its new ids again."""
    if table is not None and ids.size:
        ids = table[ids]
        order = np.lexsort((ids, np.repeat(np.arange(lengths.shape[0]), lengths)))
        ids, tf = ids[order], tf[order]
    return ids.astype("<i4").tobytes(), tf.astype("<u2").tobytes()


def fill_working(conn: sqlite3.Connection, forward: Forward, table: np.ndarray | None = None) -> None:
    """Insert ``forward``'s rows into the working tables, their term ids mapped through ``table`` (old id ->
    new id; None: kept); the dictionary is the caller's (``insert_dictionary``)."""
    one = np.zeros(1, dtype=np.int64)
    notes = []
    for nid, ids, tf in forward.notes:
        one[0] = ids.shape[0]
        notes.append((nid, *_mapped(ids, tf, one, table)))
    insert_note_terms(conn, notes)
    insert_chunk_terms(
        conn,
        [
            (nid, lengths.astype("<u4").tobytes(), *_mapped(ids, tf, lengths, table))
            for nid, lengths, ids, tf in forward.chunks
        ],
    )


def insert_dictionary(conn: sqlite3.Connection, terms: dict[str, int]) -> None:
    insert_terms(conn, sorted(((i, t) for t, i in terms.items()), key=lambda row: row[1]))  # in key order: appends


def load_working(conn: sqlite3.Connection) -> None:
    """The working tables of a database being built on (the build's staging copy, a legacy index.db): created,
    and filled with every note's rows and the dictionary from its stored arrays (none: left empty)."""
    create_working(conn)
    if working_loaded(conn):
        return  # already loaded on this connection
    forward = read_forward(conn)
    if forward is not None:
        insert_dictionary(conn, forward.terms)
        fill_working(conn, forward)


def merge_terms(dictionary: dict[str, int], forward: Forward, first: bool, compact: bool) -> np.ndarray | None:
    """Merge ``forward``'s terms into ``dictionary``; the source id -> new id table (None: ids kept). The first
    source's dictionary is kept whole (or, ``compact``, only the terms its chosen notes hold, numbered 1..
    in their order); a later source's term the dictionary lacks gets the next id, in source id order."""
    if first and not compact:
        dictionary.update(forward.terms)
        return None
    size = max(max(forward.terms.values(), default=0), int(forward.used_terms().max(initial=0))) + 1
    table = np.zeros(size, dtype=np.int32)
    word = {i: t for t, i in forward.terms.items()}
    if first:
        for new, old in enumerate(forward.used_terms().tolist(), start=1):
            table[old] = dictionary[word[old]] = new
        return table
    next_id = max(dictionary.values(), default=0) + 1
    for old in sorted(word):
        found = dictionary.get(word[old])
        if found is None:
            found = dictionary[word[old]] = next_id
            next_id += 1
        table[old] = found
    return table


def working_forward(conn: sqlite3.Connection) -> Forward:
    """Every row of the connection's working tables, with their dictionary: on a build on a base, the rows of
    the notes that build wrote (``core.build.builder``), which its delta segment is written from."""
    notes = [
        (nid, np.frombuffer(ids, dtype="<i4"), np.frombuffer(tf, dtype="<u2").reshape(-1, len(FTS_COLUMNS)))
        for nid, ids, tf in note_term_rows(conn, None)
    ]
    chunks = [
        (nid, np.frombuffer(lengths, dtype="<u4"), np.frombuffer(ids, dtype="<i4"), np.frombuffer(tf, dtype="<u2"))
        for nid, lengths, ids, tf in chunk_term_rows(conn, None)
    ]
    return Forward(term_dictionary(conn), notes, chunks)


def complete_working(conn: sqlite3.Connection, sources: Sequence[tuple[sqlite3.Connection, Collection[int]]]) -> None:
    """Working tables over every note of a build on a base (``working_forward``: the notes the build wrote
    only): the other notes' rows from the base's arrays, ``sources`` (a connection holding a base segment's
    arrays, and the note ids to take from it), then the build's own, into one dictionary (the first source's
    ids kept), replacing what the tables held."""
    built = working_forward(conn)
    dictionary: dict[str, int] = {}
    forwards = []
    for i, (source, note_ids) in enumerate(sources):
        forward = read_forward(source, note_ids)
        if forward is None:
            raise IntegrityError("a base segment holds no term-major arrays")
        forwards.append((forward, merge_terms(dictionary, forward, i == 0, False)))
    forwards.append((built, merge_terms(dictionary, built, not sources, False)))
    clear_working(conn)
    for forward, table in forwards:
        fill_working(conn, forward, table)
    insert_dictionary(conn, dictionary)
