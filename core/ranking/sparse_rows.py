"""A generation's sparse index computed from its rows (``note_terms``, a writer's working table,
core.index.tables.terms): what the build stores, with its per-classification statistics
(core.ranking.classes)."""

from __future__ import annotations

import sqlite3

import numpy as np

from core.errors import IntegrityError
from core.index.tables.connection import read_snapshot
from core.index.tables.notes import note_classes
from core.index.tables.notes_fts import FTS_COLUMNS
from core.index.tables.terms import note_term_rows, note_terms_size, require_working, term_dictionary
from core.ranking import bm25f
from core.ranking.classes import ClassBuilder
from core.ranking.filters import UNCLASSIFIED
from core.ranking.postings import BLOCK, READ_ROWS, TermMajor, row_blocks
from core.ranking.sparse_index import DEFAULT_PARAMS, TITLE_FIELD, RankParams, SparseIndex, id_order_of

_BODY = FTS_COLUMNS.index("body")


def _read_vectors(
    conn: sqlite3.Connection, n_fields: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(note_ids, postings per note, terms, tf [P, fields], field lengths [notes, fields]) in the
    notes' path order (``note_term_rows``), read ``READ_ROWS`` notes at a time into preallocated arrays."""
    n, total = note_terms_size(conn, None)
    note_ids, lengths = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    terms = np.empty(total // 4, dtype=np.int32)
    tf = np.empty((total // 4, n_fields), dtype=np.uint16)
    field_len = np.zeros((n, n_fields), dtype=np.uint32)
    pos = row = 0
    rows = note_term_rows(conn, None)
    while batch := rows.fetchmany(READ_ROWS):
        ids, term_blobs, tf_blobs = zip(*batch)
        k, r = sum(map(len, term_blobs)) // 4, len(batch)
        note_ids[row : row + r] = ids
        lengths[row : row + r] = [len(blob) // 4 for blob in term_blobs]
        terms[pos : pos + k] = np.frombuffer(b"".join(term_blobs), dtype="<i4")
        tf[pos : pos + k] = np.frombuffer(b"".join(tf_blobs), dtype="<u2").reshape(k, n_fields)
        filled = np.flatnonzero(lengths[row : row + r])  # reduceat needs rows with postings
        if filled.size:
            firsts = np.concatenate(([0], np.cumsum(lengths[row : row + r])[:-1]))[filled]
            field_len[row + filled] = np.add.reduceat(tf[pos : pos + k], firsts, axis=0, dtype=np.int64)
        pos, row = pos + k, row + r
    if row != n:
        raise IntegrityError(f"{n - row} of {n} note vectors have no note", vectors=n, read=row)
    return note_ids, lengths, terms, tf, field_len


def compute_sparse(conn: sqlite3.Connection, params: RankParams = DEFAULT_PARAMS) -> SparseIndex:
    """Read every note's term vector and build term-major postings with their raw field counts, and
    the per-classification statistics (each note's class, and per class N, field-length sums and df).
    Rows are in the notes' path order, so a tie broken on the row is broken on the path (a cold build's
    ids ascend with the paths; an incremental build's need not: ``id_order``).

    Memory-lean: the row-major terms and tf (14 bytes per posting) are read once; field masks,
    body counts and the other fields' counts (core.ranking.bm25f) are computed a block of notes
    at a time and dropped straight into their term-major slots (7 bytes per posting, plus 2 per
    non-body field that holds the term).
    """
    require_working(conn)
    with read_snapshot(conn):  # a legacy index.db may change between the reads below
        note_ids, lengths, terms, tf, field_len = _read_vectors(conn, len(FTS_COLUMNS))
        term_id = term_dictionary(conn)
        classes = _class_builder(conn, note_ids, field_len)
    n = int(note_ids.shape[0])
    n_terms = max(max(term_id.values(), default=0), int(terms.max(initial=0))) + 1
    layout = TermMajor(terms, n_terms)
    side_layout = TermMajor(terms, n_terms, _side_counts(tf))
    df = layout.counts.astype(np.int64)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    docs = np.empty(terms.shape[0], dtype=np.int32)
    mask = np.empty(terms.shape[0], dtype=np.uint8)
    body_tf = np.empty(terms.shape[0], dtype=np.uint16)
    side_tf = np.empty(int(side_layout.indptr[-1]), dtype=np.uint16)
    names: list[np.ndarray] = []  # each block's title-field term ids, in row order
    name_ptr = np.zeros(n + 1, dtype=np.int64)
    exact_form = np.zeros(n_terms, dtype=bool)  # `=word` terms: not names of their own
    exact_form[[i for t, i in term_id.items() if t.startswith("=") and i < exact_form.shape[0]]] = True
    for r0, r1 in row_blocks(starts):
        sl = slice(int(starts[r0]), int(starts[r1]))
        block_tf, block_terms = tf[sl], terms[sl]
        block_docs = np.repeat(np.arange(r0, r1, dtype=np.int32), lengths[r0:r1])
        classes.add(block_terms, block_docs)
        order, dest = layout.slots(block_terms)
        docs[dest] = block_docs[order]
        block_mask = bm25f.field_mask(block_tf)
        mask[dest] = block_mask[order]
        body_tf[dest] = block_tf[order, _BODY]
        # the side values of a posting are consecutive and of one term: a stable sort keeps them in order
        order, dest = side_layout.slots(np.repeat(block_terms, bm25f.side_counts(block_mask)))
        side_tf[dest] = bm25f.side_values(block_tf)[order]
        in_name = (block_tf[:, TITLE_FIELD] > 0) & ~exact_form[block_terms]
        names.append(block_terms[in_name])
        name_ptr[r0 + 1 : r1 + 1] = np.bincount(block_docs[in_name] - r0, minlength=r1 - r0)
    np.cumsum(name_ptr, out=name_ptr)
    name_terms = np.concatenate(names).astype(np.int32) if names else np.empty(0, np.int32)
    return SparseIndex(
        note_ids, term_id, layout.indptr, docs, mask, body_tf, side_tf, side_layout.indptr, field_len, df, params,
        name_ptr, name_terms, classes=classes.finish(), id_order=id_order_of(note_ids),
    )  # fmt: skip


def _class_builder(conn: sqlite3.Connection, note_ids: np.ndarray, field_len: np.ndarray) -> ClassBuilder:
    """The per-class statistics' builder of these rows: each note's classification as the filters see it."""
    of = dict(note_classes(conn, UNCLASSIFIED))
    missing = [nid for nid in note_ids.tolist() if nid not in of]
    if missing:
        raise IntegrityError(f"{len(missing)} note vectors have no note (first: id {missing[0]})", notes=missing[:10])
    return ClassBuilder([of[nid] for nid in note_ids.tolist()], field_len)


def _side_counts(tf: np.ndarray) -> np.ndarray:
    """uint8 per posting of ``tf``: its non-body fields that hold the term (a block at a time)."""
    out = np.empty(tf.shape[0], dtype=np.uint8)
    for start in range(0, tf.shape[0], BLOCK):
        out[start : start + BLOCK] = bm25f.side_counts(bm25f.field_mask(tf[start : start + BLOCK]))
    return out
