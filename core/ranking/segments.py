"""One sparse index over a generation's segments (issue 29, storage step 2b): what the modes rank with
when a generation is several segments, each with its own local term dictionary, rows and note ids,
and tombstones marking some of their rows dead.

Strategy: one combined SparseIndex per generation (``combine``), built from the per-segment indexes
(each loaded once and cached per segment SHA-256 by the caller, core.modes.segmented): the live
postings of every segment, their term ids remapped to one dictionary of the live terms (sorted) and
their rows to one row order, the notes' paths sorted, so a tie (broken on the row / note id by every
mode) is broken on the path, never on segment order or a segment's own note ids. Its statistics are
sums over (segment, class) minus the tombstones' exact contributions (``Tombstone``), checked against
the live postings counted per class and term (a tombstone that does not match its segment fails closed). A restricted
caller restricts the combined index as a generation's (``SparseIndex.restrict``: per-class sums).

The combined index's note ids are the segments' own (unique across a generation: the build numbers
notes once, core.build.segment_writer), its rows in path order (``SparseIndex.id_order`` finds a row
by id); ``Combined.segment`` names each row's segment for the SQL side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.errors import IntegrityError
from core.ranking import bm25f
from core.ranking.classes import ClassStats
from core.ranking.postings import stable_order
from core.ranking.sparse_index import DEFAULT_PARAMS, SparseIndex, gather_postings, id_order_of


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
    """A generation's combined index and where each of its notes comes from."""

    sparse: SparseIndex
    segment: np.ndarray  # int64 [n_docs]: the index into the segment list of each row's segment
    paths: tuple[str, ...]  # each row's path (ascending)
    # per segment: its local term id -> the combined one, and its local row -> the combined row (-1: none); a
    # term map derived by core.ranking.segment_delta may still map a term only the segment's dead notes hold
    term_map: tuple[np.ndarray, ...]
    row_map: tuple[np.ndarray, ...]
    words: np.ndarray | None = None  # object [terms]: each combined term id's term (what an extension merges into)


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
    rows = np.unique(np.asarray(dead_rows, dtype=np.int64))
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


def _live_stats(seg: Segment, tomb: Tombstone | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(notes, field-length sums, df per term) per class of a segment, minus its tombstone's."""
    stats = seg.sparse.classes
    if stats is None:
        raise IntegrityError(f"segment {seg.key[:12]} holds no per-classification statistics")
    docs, field_len = stats.docs.astype(np.int64), stats.field_len.astype(np.int64)
    df = _class_df(stats, np.asarray(seg.sparse.df, dtype=np.int64))
    if tomb is not None:
        if tomb.df.shape != df.shape or tomb.field_len.shape != field_len.shape:
            raise IntegrityError(f"the tombstone of segment {seg.key[:12]} does not fit its classes and terms")
        docs, field_len, df = docs - tomb.docs, field_len - tomb.field_len, df - tomb.df
    if (docs < 0).any() or (field_len < 0).any() or (df < 0).any():
        raise IntegrityError(f"the tombstone of segment {seg.key[:12]} removes more than the segment holds")
    return docs, field_len, df


def _terms(seg: Segment) -> np.ndarray:
    """object [local terms]: each local term id's term ('' for an id no term names)."""
    out = np.full(seg.sparse.df.shape[0], "", dtype=object)
    terms = getattr(seg.sparse.term_id, "all", seg.sparse.term_id)
    out[np.fromiter(terms.values(), dtype=np.int64, count=len(terms))] = list(terms)
    return out


def combine(parts: Sequence[tuple[Segment, Tombstone | None]]) -> Combined:
    """The combined index of the segments ``parts`` (in the generation's order) without their dead rows:
    exactly the index one segment of the live notes would give (statistics, postings, names), up to
    term ids, which are the live terms' sorted order."""
    live = [_live_stats(seg, tomb) for seg, tomb in parts]
    words, remap = _dictionary(parts, live)
    seg_of, local_row, paths, row_of = _rows(parts)
    ids = [np.asarray(seg.sparse.note_ids, dtype=np.int64) for seg, _ in parts]
    note_ids = np.asarray([ids[s][r] for s, r in zip(seg_of.tolist(), local_row.tolist())], dtype=np.int64)
    sparse = _finish(parts, _postings(parts, remap, row_of, len(words)), live, remap, row_of, words)
    sparse.note_ids, sparse.id_order = note_ids, id_order_of(note_ids)  # fails closed on a repeated id
    return Combined(sparse, seg_of, paths, tuple(remap), tuple(row_of), words)


def _dictionary(
    parts: Sequence[tuple[Segment, Tombstone | None]], live: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(the terms some live note holds, sorted; each segment's local -> global term id, -1: none live)."""
    held = [df.sum(axis=0) > 0 for _, _, df in live]
    chosen = [_terms(seg)[h] for (seg, _), h in zip(parts, held)]
    words, inverse = np.unique(np.concatenate(chosen or [np.zeros(0, object)]), return_inverse=True)
    return words, _spread(held, inverse)


def _spread(masks: list[np.ndarray], values: np.ndarray) -> list[np.ndarray]:
    """Per mask: -1 where it is False, else the next of ``values`` (taken in order across the masks)."""
    out, at = [], 0
    for mask in masks:
        m = np.full(mask.shape[0], -1, dtype=np.int64)
        m[mask] = values[at : at + int(mask.sum())]
        out.append(m)
        at += int(mask.sum())
    return out


def _rows(
    parts: Sequence[tuple[Segment, Tombstone | None]],
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], list[np.ndarray]]:
    """(segment, local row and path of each global row: the live rows in path order; each segment's local
    row -> global row, -1: dead)."""
    alive = [_alive(seg, tomb) for seg, tomb in parts]
    empty = np.zeros(0, np.int64)
    seg_of = np.concatenate([np.full(int(a.sum()), i, np.int64) for i, a in enumerate(alive)] or [empty])
    local_row = np.concatenate([np.flatnonzero(a) for a in alive] or [empty])
    paths = np.array([parts[s][0].paths[r] for s, r in zip(seg_of.tolist(), local_row.tolist())], dtype=object)
    order = np.argsort(paths, kind="stable") if paths.size else empty
    if paths.size > 1 and (paths[order][1:] == paths[order][:-1]).any():
        raise IntegrityError("two live notes of the generation's segments have the same path")
    rank = np.empty(order.shape[0], dtype=np.int64)
    rank[order] = np.arange(order.shape[0])
    return seg_of[order], local_row[order], tuple(paths[order].tolist()), _spread(alive, rank)


def posting_terms(indptr: np.ndarray) -> np.ndarray:
    """int64 per posting of a term-major layout: its term id (one repeat, no binary search)."""
    return np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))


def _alive(seg: Segment, tomb: Tombstone | None) -> np.ndarray:
    alive = np.ones(seg.sparse.n_docs, dtype=bool)
    if tomb is not None:
        alive[tomb.rows] = False
    return alive


def live_postings(seg: Segment, term_map: np.ndarray, row_map: np.ndarray) -> tuple[np.ndarray, ...]:
    """A segment's postings of live rows, in its term-major order, in global ids: (term, row, field mask,
    body tf, side values per posting, the side values)."""
    sp = seg.sparse
    docs = np.asarray(sp.docs[:]).astype(np.int64)
    fmask = np.asarray(sp.field_mask[:])
    counts = bm25f.side_counts(fmask).astype(np.int64)
    alive = row_map[docs] >= 0
    keep = np.flatnonzero(alive)
    side = np.asarray(sp.side_tf[:])
    return (
        term_map[posting_terms(sp.indptr)[keep]],
        row_map[docs[keep]],
        fmask[keep],
        np.asarray(sp.body_tf[:])[keep],
        counts[keep],
        side if alive.all() else side[np.repeat(alive, counts)],
    )


def _postings(
    parts: Sequence[tuple[Segment, Tombstone | None]], remap: list[np.ndarray], row_of: list[np.ndarray], n_terms: int
) -> dict[str, np.ndarray]:
    """The live postings of every segment, term-major in global ids: within a term, segment after segment
    (each one's rows ascending), so one stable counting sort by term places them (no sort by row: a
    note holds a term once, so no sum over a note's postings depends on the order within a term)."""
    found = [live_postings(seg, m, r) for (seg, _), m, r in zip(parts, remap, row_of)]
    term, row, mask, body, side_len, side_vals = (list(x) for x in zip(*found)) if found else ([],) * 6
    t, r_ = np.concatenate(term), np.concatenate(row)
    if t.size and int(t.min()) < 0:  # a live posting of a term its statistics say no live note holds
        raise IntegrityError("the segments' statistics minus their tombstones do not match their live postings")
    order = stable_order(t, max(n_terms, 1))
    counts = np.concatenate(side_len)
    sptr = np.concatenate(([0], np.cumsum(counts)))
    spos, _ = gather_postings(sptr, order)
    indptr = np.concatenate(([0], np.cumsum(np.bincount(t, minlength=n_terms)))).astype(np.int64)
    side_per_term = np.bincount(t, weights=counts, minlength=n_terms).astype(np.int64)
    return {
        "indptr": indptr,
        "docs": r_[order].astype(np.int32),
        "field_mask": np.concatenate(mask)[order],
        "body_tf": np.concatenate(body)[order],
        "side_tf": np.concatenate(side_vals)[spos].astype(np.uint16),
        "side_ptr": np.concatenate(([0], np.cumsum(side_per_term))).astype(np.int64),
    }


def _finish(
    parts: Sequence[tuple[Segment, Tombstone | None]],
    arrays: dict[str, np.ndarray],
    live: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    remap: list[np.ndarray],
    row_of: list[np.ndarray],
    words: np.ndarray,
) -> SparseIndex:
    """The combined SparseIndex: per-row arrays, and statistics summed over (segment, class)."""
    names = tuple(sorted({n for seg, _ in parts for n in (seg.sparse.classes.names if seg.sparse.classes else ())}))
    n, n_terms = sum(int((r >= 0).sum()) for r in row_of), int(words.shape[0])
    fields = parts[0][0].sparse.field_len.shape[1] if parts else 5
    field_len = np.zeros((n, fields), dtype=np.uint32)
    row_class = np.zeros(n, dtype=np.uint8 if len(names) <= 256 else np.uint16)
    name_rows, name_ids = [], []
    docs, flen = np.zeros(len(names), np.int64), np.zeros((len(names), fields), np.int64)
    df = np.zeros((len(names), n_terms), np.int64)
    for (seg, _), m, r, (sdocs, sflen, sdf) in zip(parts, remap, row_of, live):
        sp, stats = seg.sparse, seg.sparse.classes
        assert stats is not None  # _live_stats checked
        code = np.asarray([names.index(x) for x in stats.names], dtype=np.int64)
        mine = np.flatnonzero(r >= 0)
        field_len[r[mine]] = sp.field_len[mine]
        row_class[r[mine]] = code[stats.row_class[mine]]
        np.add.at(docs, code, sdocs)
        np.add.at(flen, code, sflen)
        held = m >= 0
        for c_local, c in enumerate(code.tolist()):
            np.add.at(df[c], m[held], sdf[c_local][held])
        pos, owner = gather_postings(sp.name_ptr, mine)
        name_rows.append(r[mine][owner])
        name_ids.append(m[np.asarray(sp.name_terms[pos], dtype=np.int64)])
    total = df.sum(axis=0)
    if not np.array_equal(df, _counted_df(arrays, row_class, len(names), n_terms)) or int(docs.sum()) != n:
        raise IntegrityError("the segments' statistics minus their tombstones do not match their live postings")
    name_row, name_id = (np.concatenate(x or [np.zeros(0, np.int64)]) for x in (name_rows, name_ids))
    by_row = np.lexsort((name_id, name_row))  # each row's name terms, ascending (as a build stores them)
    name_ptr = np.concatenate(([0], np.cumsum(np.bincount(name_row, minlength=n)))).astype(np.int64)
    classes = _class_stats(names, row_class, docs, flen, df)
    return SparseIndex(
        note_ids=np.arange(1, n + 1, dtype=np.int64),  # the segments' ids: set by ``combine``
        term_id={w: i for i, w in enumerate(words.tolist())},
        field_len=field_len,
        df=total,
        params=parts[0][0].sparse.params if parts else DEFAULT_PARAMS,
        name_ptr=name_ptr,
        name_terms=name_id[by_row].astype(np.int32),
        classes=classes,
        indptr=arrays["indptr"],
        docs=arrays["docs"],
        field_mask=arrays["field_mask"],
        body_tf=arrays["body_tf"],
        side_tf=arrays["side_tf"],
        side_ptr=arrays["side_ptr"],
    )


def _counted_df(arrays: dict[str, np.ndarray], row_class: np.ndarray, classes: int, n_terms: int) -> np.ndarray:
    """int64 [classes, terms]: the live postings counted per (class of the posting's row, term)."""
    key = row_class[arrays["docs"]].astype(np.int64) * n_terms + posting_terms(arrays["indptr"])
    return np.bincount(key, minlength=classes * n_terms).reshape(classes, n_terms).astype(np.int64)


def _class_stats(
    names: tuple[str, ...], row_class: np.ndarray, docs: np.ndarray, flen: np.ndarray, df: np.ndarray
) -> ClassStats:
    """The combined ClassStats from per-class sums (the majority's df derived, as a build stores it)."""
    major = int(np.argmax(docs)) if docs.size else -1
    minor = [c for c in range(len(names)) if c != major and len(names) > 1]
    df_ptr, df_terms, df_counts = [0], [], []
    for c in range(len(names)):
        t = np.flatnonzero(df[c]) if c in minor else np.zeros(0, np.int64)
        df_terms.append(t.astype(np.int32))
        df_counts.append(df[c][t].astype(np.int32))
        df_ptr.append(df_ptr[-1] + t.shape[0])
    return ClassStats(names, row_class, docs, flen, np.asarray(df_ptr, np.int64),
                         np.concatenate(df_terms or [np.zeros(0, np.int32)]),
                         np.concatenate(df_counts or [np.zeros(0, np.int32)]))  # fmt: skip
