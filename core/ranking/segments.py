"""What the ranking reads of a generation's segments (issue 29): each segment as loaded (``Segment``: its
SparseIndex and each row's path), its tombstone (``Tombstone``: the dead rows and their exact statistics per
class, as the segment writer stores them or counted from the segment's arrays), and the maps from each
segment's rows and terms to a generation's (``Combined``, what core.ranking.segment_view builds); and the
per-class statistics a generation's ClassStats is made of."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.errors import IntegrityError
from core.ranking.classes import ClassStats
from core.ranking.postings import distinct
from core.ranking.sparse_index import SparseIndex


@dataclass(frozen=True)
class Tombstone:
    """A segment's dead rows and their exact statistics per class of the segment (ClassStats.names)."""

    rows: np.ndarray  # int64: the dead local rows, ascending
    docs: np.ndarray  # int64 [classes]: dead notes per class
    field_len: np.ndarray  # int64 [classes, fields]: their field-length sums
    df: np.ndarray  # int64 [classes, local terms]: their document frequencies


@dataclass(frozen=True)
class Segment:
    """One segment as the ranking reads it: its whole SparseIndex and each local row's note path."""

    key: str  # the segment's SHA-256 (what its arrays are cached by)
    sparse: SparseIndex
    paths: Sequence[str]  # rel_path of each local row


@dataclass(frozen=True)
class Combined:
    """A generation's index over its segments and where each of its rows comes from."""

    sparse: SparseIndex
    segment: np.ndarray  # int64 [n_docs]: the index into the segment list of each row's segment
    paths: Sequence[str]  # each row's path (ascending)
    # per segment: its local term id -> the generation's (-1: an id no term names), its local row -> the row
    term_map: tuple[np.ndarray, ...]
    row_map: tuple[np.ndarray, ...]


def _class_df(stats: ClassStats, total: np.ndarray) -> np.ndarray:
    """int64 [classes, terms]: every class's df (the majority's derived as the total minus the others')."""
    out = np.zeros((len(stats.names), total.shape[0]), dtype=np.int64)
    for c in range(len(stats.names)):
        out[c] = stats.df(total, np.arange(len(stats.names)) == c)
    return out


def tombstone(sparse: SparseIndex, dead_rows: np.ndarray) -> Tombstone:
    """The exact contribution of ``dead_rows`` to ``sparse``'s per-class statistics, counted from its own
    arrays (``dead_counts``: what the segment writer stores with a tombstone; the reader counts it for a
    tombstone without them)."""
    if sparse.classes is None:
        raise IntegrityError("a segment's sparse index holds no per-classification statistics")
    docs = np.asarray(sparse.docs[:])
    return dead_counts(sparse.classes, sparse.field_len, sparse.indptr, docs, sparse.df.shape[0], dead_rows)


def dead_counts(
    stats: ClassStats, field_len: np.ndarray, indptr: np.ndarray, docs: np.ndarray, n_terms: int, dead_rows: np.ndarray
) -> Tombstone:
    """``tombstone`` from the arrays it reads only (a writer loads no other array of the segment):
    ``field_len`` [rows, fields], the postings' ``indptr`` and ``docs``."""
    n_docs = int(field_len.shape[0])
    rows = distinct(np.asarray(dead_rows, dtype=np.int64))
    if rows.size and (rows[0] < 0 or rows[-1] >= n_docs):
        raise IntegrityError(f"a tombstone names a row beyond the segment's {n_docs} notes")
    c = len(stats.names)
    cls = stats.row_class[rows].astype(np.intp)
    lengths = np.zeros((c, field_len.shape[1]), dtype=np.int64)
    np.add.at(lengths, cls, np.asarray(field_len[rows], dtype=np.int64))
    dead = np.zeros(n_docs, dtype=bool)
    dead[rows] = True
    hit = np.flatnonzero(dead[docs])
    terms = np.searchsorted(indptr, hit, side="right") - 1
    df = np.zeros((c, n_terms), dtype=np.int64)
    np.add.at(df, (stats.row_class[docs[hit]].astype(np.intp), terms), 1)
    return Tombstone(rows, np.bincount(cls, minlength=c).astype(np.int64), lengths, df)


def _class_stats(
    names: tuple[str, ...], row_class: np.ndarray, docs: np.ndarray, flen: np.ndarray, df: np.ndarray
) -> ClassStats:
    """The combined ClassStats from per-class sums (the majority's df derived, as a build stores it)."""
    major = int(np.argmax(docs)) if docs.size else -1
    minor = [c for c in range(len(names)) if c != major and len(names) > 1]
    df_ptr, df_terms, df_counts = [0], [], []
    for c in range(len(names)):
        t = np.flatnonzero(df[c] != 0) if c in minor else np.zeros(0, np.int64)
        df_terms.append(t.astype(np.int32))
        df_counts.append(df[c][t].astype(np.int32))
        df_ptr.append(df_ptr[-1] + t.shape[0])
    return ClassStats(names, row_class, docs, flen, np.asarray(df_ptr, np.int64),
                         np.concatenate(df_terms or [np.zeros(0, np.int32)]),
                         np.concatenate(df_counts or [np.zeros(0, np.int32)]))  # fmt: skip
