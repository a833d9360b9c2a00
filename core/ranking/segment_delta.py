"""A generation's combined index derived from the previous generation's (issue 29: a reader switching to
a new generation pays for the change, not for the vault).

When the new generation lists the previous one's segments (same order) with tombstones that only grew,
plus a few added segments after them (what a publish of a one-note edit gives: one small segment, one
tombstone), its combined index (core.ranking.segments.combine) is the previous one with the newly dead
rows and the postings of the added segments' live notes taken in:

- rows: the previous rows minus the dead, the added live rows merged in by path (a binary search
  each), so rows stay in path order; terms: the previous dictionary minus the terms no live note holds
  any more, plus the added segments' new terms (a binary search each), so ids stay the sorted live terms;
- postings: the previous runs (rows and term ids renumbered by monotone maps) with the dead rows'
  postings left out and the added ones appended at the end of their term's run: within a term segment
  after segment, as ``combine`` lays them, so the arrays equal ``combine``'s of the new parts;
- statistics: the previous per-class sums minus the dropped postings, counted (O(dropped)), plus the
  added segments' live statistics, checked like ``combine`` checks: the dropped counts against the
  tombstones' stored statistics (their growth since the previous generation), the added segments'
  statistics against their live postings.

No segment's own arrays are read but the added segments' (and a grown tombstone's notes and lengths):
the previous combined arrays are moved by slice copies between the few dropped and added runs
(core.ranking.postings.splice) and their rows renumbered by one gather, never re-sorted or re-counted
(``combine`` lays every segment's postings again: a dictionary union of strings, a counting sort of
every posting, every statistic counted again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from core.errors import IntegrityError
from core.ranking.postings import merge_sorted, splice
from core.ranking.segment_dropped import (
    MISMATCH,
    Dropped,
    Grown,
    candidates,
    check_grown,
    dropped,
    spliced_rows,
)
from core.ranking.segments import (
    Combined,
    Segment,
    Tombstone,
    _alive,
    _class_df,
    _class_stats,
    _live_stats,
    _terms,
    live_postings,
)
from core.ranking.sorted_terms import SortedTerms
from core.ranking.sparse_index import SparseIndex, gather_postings, id_order_of


@dataclass(frozen=True)
class Delta:
    """How a derived generation's rows and terms follow from the previous one's."""

    rows: np.ndarray  # int64 [previous rows]: each previous row's new row, -1: dead now
    terms: np.ndarray  # int64 [previous terms]: each previous term's new id, -1: no live note holds it now
    first_added: int  # the index of the first added segment in the new parts
    fresh: Mapping[str, int]  # the terms the previous dictionary lacked, and their new ids
    dead_terms: np.ndarray | None = None  # the previous term ids of the dropped postings (None: not known)


@dataclass(frozen=True)
class _Rows:
    """Where the added live rows go: their paths sorted, their insert positions among the kept rows,
    (segment, local row) of each, and each added segment's local row -> new row."""

    paths: np.ndarray
    at: np.ndarray
    seg: np.ndarray
    local: np.ndarray
    maps: list[np.ndarray]


def _added_rows(
    prev: Combined, alive_prev: np.ndarray, added: Sequence[tuple[Segment, Tombstone | None]]
) -> tuple[np.ndarray, _Rows]:
    """(previous row -> new row, -1: dead; where the added segments' live rows go)."""
    alive = [_alive(seg, tomb) for seg, tomb in added]
    seg = np.concatenate([np.full(int(a.sum()), i, np.int64) for i, a in enumerate(alive)] or [np.zeros(0, np.int64)])
    local = np.concatenate([np.flatnonzero(a) for a in alive] or [np.zeros(0, np.int64)])
    paths = np.array([added[s][0].paths[r] for s, r in zip(seg.tolist(), local.tolist())], dtype=object)
    order = np.argsort(paths, kind="stable")
    paths, seg, local = paths[order], seg[order], local[order]
    kept = np.asarray(prev.paths, dtype=object)[alive_prev]
    pos = np.searchsorted(kept, paths).astype(np.int64)
    inside = pos < kept.shape[0]
    if (paths[1:] == paths[:-1]).any() or (kept[pos[inside]] == paths[inside]).any():
        raise IntegrityError("two live notes of the generation's segments have the same path")
    kept_at, added_at = merge_sorted(kept, paths)
    row_map = np.full(alive_prev.shape[0], -1, dtype=np.int64)
    row_map[alive_prev] = kept_at
    maps = [np.full(a.shape[0], -1, dtype=np.int64) for a in alive]
    for s in range(len(added)):
        mine = seg == s
        maps[s][local[mine]] = added_at[mine]
    return row_map, _Rows(paths, pos, seg, local, maps)


def _new_terms(
    prev: Combined, remaining: np.ndarray, added: Sequence[tuple[Segment, Tombstone | None]], held: list[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, Mapping[str, int], dict[str, int]]:
    """(previous term -> new id; each added segment's local term -> new id; the new dictionary's words;
    its term -> id map: the previous one itself when no term came or went)."""
    assert prev.words is not None
    lookup = prev.sparse.term_id
    words = [_terms(seg)[h] for (seg, _), h in zip(added, held)]
    known = [np.fromiter((lookup.get(w, -1) for w in ws), dtype=np.int64, count=ws.shape[0]) for ws in words]
    keep = remaining.copy()
    for ids in known:
        keep[ids[ids >= 0]] = True
    fresh = np.unique(np.concatenate([ws[ids < 0] for ws, ids in zip(words, known)] or [np.zeros(0, object)]))
    kept_words = prev.words[keep]
    kept_at, fresh_at = merge_sorted(kept_words, fresh)
    term_map = np.full(keep.shape[0], -1, dtype=np.int64)
    term_map[keep] = kept_at
    new_words = np.empty(kept_words.shape[0] + fresh.shape[0], dtype=object)
    new_words[kept_at], new_words[fresh_at] = kept_words, fresh
    maps = []
    for h, ws, ids in zip(held, words, known):
        m = np.full(h.shape[0], -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(fresh, ws), max(fresh.shape[0] - 1, 0)) if fresh.size else ids * 0
        m[h] = np.where(ids >= 0, term_map[np.maximum(ids, 0)], fresh_at[at] if fresh.size else -1)
        maps.append(m)
    same = fresh.size == 0 and bool(keep.all())
    term_id = lookup if same else SortedTerms(new_words)
    return term_map, maps, new_words, term_id, dict(zip(fresh.tolist(), fresh_at.tolist()))


def _insert(old: np.ndarray, at: np.ndarray, values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``old`` with ``values`` inserted before the positions ``at`` (ascending or not: equal positions keep
    the values' order), a copy of ``old`` when nothing is inserted."""
    if not at.size:
        return old.copy()
    return np.insert(old, at, values.astype(old.dtype, copy=False), axis=axis)


@dataclass(frozen=True)
class _Added:
    """The added segments' live postings in new ids, sorted by new term (segment after segment within one)."""

    terms: np.ndarray
    rows: np.ndarray
    mask: np.ndarray
    body: np.ndarray
    side_len: np.ndarray
    side: np.ndarray  # their side values, in the postings' order


def _added_postings(
    added: Sequence[tuple[Segment, Tombstone | None]], row_maps: list[np.ndarray], term_maps: list[np.ndarray]
) -> _Added:
    found = [live_postings(seg, m, r) for (seg, _), r, m in zip(added, row_maps, term_maps)]
    term, row, mask, body, side_len, side_vals = (list(x) for x in zip(*found)) if found else ([],) * 6
    empty = np.zeros(0, np.int64)
    t = np.concatenate(term or [empty])
    if t.size and int(t.min()) < 0:
        raise IntegrityError(MISMATCH)
    order = np.argsort(t, kind="stable")
    lens = np.concatenate(side_len or [empty])
    spos, _ = gather_postings(np.concatenate(([0], np.cumsum(lens))).astype(np.int64), order)
    return _Added(
        t[order],
        np.concatenate(row or [empty])[order],
        np.concatenate(mask or [np.zeros(0, np.uint8)])[order],
        np.concatenate(body or [np.zeros(0, np.uint16)])[order],
        lens[order],
        np.concatenate(side_vals or [np.zeros(0, np.uint16)])[spos],
    )


def _relaid(
    prev: SparseIndex,
    gone: Dropped,
    maps: tuple[np.ndarray, np.ndarray],
    new: _Added,
    n_terms: int,
) -> dict[str, np.ndarray]:
    """The new term-major arrays: each previous run without its dropped postings (``gone``), renumbered
    (``maps``: previous row -> new row, previous term -> new term), the added postings appended to their
    term's run; spliced (core.ranking.postings.splice), never masked or sorted."""
    row_map, term_map = maps
    counts = np.diff(prev.indptr) - np.bincount(gone.terms, minlength=prev.indptr.shape[0] - 1)
    if counts[term_map < 0].any():  # a live posting of a term no live note holds
        raise IntegrityError(MISMATCH)
    sides = np.diff(prev.side_ptr) - np.bincount(gone.terms, weights=gone.side_len, minlength=counts.shape[0]).astype(
        np.int64
    )
    held = term_map >= 0
    kept_counts, kept_sides = np.zeros(n_terms, np.int64), np.zeros(n_terms, np.int64)
    kept_counts[term_map[held]], kept_sides[term_map[held]] = counts[held], sides[held]
    at = np.cumsum(kept_counts)[new.terms]
    side_at = np.repeat(np.cumsum(kept_sides)[new.terms], new.side_len)
    rows = spliced_rows(np.asarray(prev.docs), gone.pos, at, new.rows, row_map)
    added_counts = np.bincount(new.terms, minlength=n_terms).astype(np.int64)
    added_sides = np.bincount(new.terms, weights=new.side_len, minlength=n_terms).astype(np.int64)
    return {
        "indptr": np.concatenate(([0], np.cumsum(kept_counts + added_counts))).astype(np.int64),
        "docs": rows,
        "field_mask": splice(np.asarray(prev.field_mask), gone.pos, at, new.mask),
        "body_tf": splice(np.asarray(prev.body_tf), gone.pos, at, new.body),
        "side_tf": splice(np.asarray(prev.side_tf), gone.side, side_at, new.side),
        "side_ptr": np.concatenate(([0], np.cumsum(kept_sides + added_sides))).astype(np.int64),
    }


def _per_row(
    prev: Combined,
    alive: np.ndarray,
    rows: _Rows,
    added: Sequence[tuple[Segment, Tombstone | None]],
    names: list[str],
    kept: list[int],
) -> dict[str, np.ndarray]:
    """The per-row arrays of the new index: the kept rows' with the added rows' inserted in path order."""
    sp, stats = prev.sparse, prev.sparse.classes
    assert stats is not None
    code_prev = np.asarray([names.index(n) for n in stats.names], dtype=np.int64)
    fields = sp.field_len.shape[1]
    lengths = np.zeros((rows.at.shape[0], fields), dtype=sp.field_len.dtype)
    classes, ids = np.zeros(rows.at.shape[0], np.int64), np.zeros(rows.at.shape[0], np.int64)
    for s, (seg, _) in enumerate(added):
        mine, seg_stats = np.flatnonzero(rows.seg == s), seg.sparse.classes
        assert seg_stats is not None  # _live_stats checked
        code = np.asarray([names.index(n) for n in seg_stats.names], dtype=np.int64)
        local = rows.local[mine]
        lengths[mine], classes[mine] = seg.sparse.field_len[local], code[seg_stats.row_class[local]]
        ids[mine] = np.asarray(seg.sparse.note_ids, dtype=np.int64)[local]
    row_class = _insert(code_prev[stats.row_class[alive]], rows.at, classes)
    return {
        "field_len": _insert(sp.field_len[alive], rows.at, lengths, axis=0),
        "row_class": row_class.astype(np.uint8 if len(names) <= 256 else np.uint16),
        "note_ids": _insert(np.asarray(sp.note_ids, dtype=np.int64)[alive], rows.at, ids),
        "segment": _insert(_renumbered(prev.segment[alive], kept, len(prev.row_map)), rows.at, len(kept) + rows.seg),
    }


def _renumbered(segment: np.ndarray, kept: list[int], n: int) -> np.ndarray:
    """Each kept row's segment index (of ``n``) in the new list: the ``kept`` segments first, in order."""
    index = np.full(n, -1, dtype=segment.dtype)
    index[kept] = np.arange(len(kept), dtype=segment.dtype)
    return index[segment]


def _names(
    prev: Combined,
    alive: np.ndarray,
    rows: _Rows,
    added: Sequence[tuple[Segment, Tombstone | None]],
    term_maps: tuple[np.ndarray, list[np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """(name_ptr, name_terms) of the new index: each kept row's names renumbered, the added rows' inserted."""
    sp, (term_map, added_maps) = prev.sparse, term_maps
    per_row = np.diff(sp.name_ptr)
    kept = term_map[np.asarray(sp.name_terms)[np.repeat(alive, per_row)].astype(np.int64)]
    if kept.size and int(kept.min()) < 0:
        raise IntegrityError(MISMATCH)
    which, ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    counts = np.zeros(rows.at.shape[0], np.int64)
    for s, (seg, _) in enumerate(added):
        mine = np.flatnonzero(rows.seg == s)
        pos, owner = gather_postings(seg.sparse.name_ptr, rows.local[mine])
        which.append(mine[owner])
        ids.append(added_maps[s][np.asarray(seg.sparse.name_terms[pos], dtype=np.int64)])
        counts[mine] = np.diff(seg.sparse.name_ptr)[rows.local[mine]]
    row, term = np.concatenate(which), np.concatenate(ids)
    order = np.lexsort((term, row))
    kept_ptr = np.concatenate(([0], np.cumsum(per_row[alive]))).astype(np.int64)
    terms = _insert(kept.astype(np.int32), np.repeat(kept_ptr[rows.at], counts), term[order])
    lengths = _insert(per_row[alive], rows.at, counts)
    return np.concatenate(([0], np.cumsum(lengths))).astype(np.int64), terms


def _new_stats(
    prev: Combined,
    after: np.ndarray,
    alive: np.ndarray,
    term_maps: tuple[np.ndarray, list[np.ndarray]],
    added: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]],
    names: list[str],
    n_terms: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(notes, field-length sums, df per term) per class of the new index: the previous sums minus the dead
    rows' (``after``: the previous df minus the dropped postings, counted) plus the added segments' live
    statistics (``added``: docs, lengths, df and class names of each)."""
    stats = prev.sparse.classes
    assert stats is not None
    term_map, maps = term_maps
    code_prev = np.asarray([names.index(n) for n in stats.names], dtype=np.int64)
    dead = stats.row_class[~alive].astype(np.intp)
    dead_len = np.zeros_like(stats.field_len, dtype=np.int64)
    np.add.at(dead_len, dead, prev.sparse.field_len[~alive].astype(np.int64))
    docs, flen = np.zeros(len(names), np.int64), np.zeros((len(names), stats.field_len.shape[1]), np.int64)
    docs[code_prev] = stats.docs.astype(np.int64) - np.bincount(dead, minlength=len(stats.names))
    flen[code_prev] = stats.field_len.astype(np.int64) - dead_len
    held = term_map >= 0
    if after[:, ~held].any():
        raise IntegrityError(MISMATCH)
    df = np.zeros((len(names), n_terms), np.int64)
    df[np.ix_(code_prev, term_map[held])] = after[:, held]
    for (sdocs, sflen, sdf, seg_names), m in zip(added, maps):
        code = np.asarray([names.index(n) for n in seg_names], dtype=np.int64)
        np.add.at(docs, code, sdocs)
        np.add.at(flen, code, sflen)
        h = m >= 0
        for c_local, c in enumerate(code.tolist()):
            np.add.at(df[c], m[h], sdf[c_local][h])
    return docs, flen, df


def extend(
    prev: Combined,
    grown: dict[int, Grown],
    added: Sequence[tuple[Segment, Tombstone | None]],
    kept: Sequence[int] | None = None,
) -> tuple[Combined, Delta]:
    """The combined index of ``prev``'s segments (same order; segment ``s``'s newly dead rows in
    ``grown[s]``) followed by the ``added`` segments: equal to ``combine`` of those parts, array for array.
    ``kept``: the indexes (ascending) of ``prev``'s segments the new generation lists first (None: all); the
    others were dropped or merged away (their live notes in a merged segment among ``added``): every live row
    of theirs is in ``grown``."""
    kept = list(range(len(prev.row_map))) if kept is None else list(kept)
    for s in sorted(set(range(len(prev.row_map))) - set(kept)):
        if int((prev.row_map[s] >= 0).sum()) != (grown[s].rows.shape[0] if s in grown else 0):
            raise IntegrityError("a segment the new generation drops keeps a live note it does not drop")
    sp = prev.sparse
    if sp.classes is None:
        raise IntegrityError("a combined index holds no per-classification statistics")
    alive = np.ones(sp.n_docs, dtype=bool)
    for g in grown.values():
        alive[g.rows] = False
    gone = dropped(sp, alive, candidates(prev, grown))
    check_grown(prev, grown, gone.counted)
    after = _class_df(sp.classes, np.asarray(sp.df, dtype=np.int64)) - gone.counted
    if (after < 0).any():
        raise IntegrityError(MISMATCH)
    live = [_live_stats(seg, tomb) for seg, tomb in added]
    held = [df.sum(axis=0) > 0 for _, _, df in live]
    term_map, term_maps, words, term_id, fresh = _new_terms(prev, after.sum(axis=0) > 0, added, held)
    row_map, rows = _added_rows(prev, alive, added)
    names = sorted({*sp.classes.names, *(n for seg, _ in added for n in _class_names(seg))})
    new = _added_postings(added, rows.maps, term_maps)
    arrays = _relaid(sp, gone, (row_map, term_map), new, int(words.shape[0]))
    per_row = _per_row(prev, alive, rows, added, names, kept)
    name_ptr, name_terms = _names(prev, alive, rows, added, (term_map, term_maps))
    sums = [(d, f, df, _class_names(seg)) for (d, f, df), (seg, _) in zip(live, added)]
    docs, flen, df = _new_stats(prev, after, alive, (term_map, term_maps), sums, names, int(words.shape[0]))
    _check_added(new, per_row["row_class"], sums, (term_map, term_maps), (len(names), int(words.shape[0])), names)
    if int(docs.sum()) != per_row["note_ids"].shape[0]:
        raise IntegrityError(MISMATCH)
    note_ids = per_row["note_ids"]
    changes: dict[str, Any] = {  # the previous index's params; nothing derived from its numbers
        **arrays, "note_ids": note_ids, "term_id": term_id, "field_len": per_row["field_len"], "df": df.sum(axis=0),
        "name_ptr": name_ptr, "name_terms": name_terms.astype(np.int32), "id_order": id_order_of(note_ids),
        "classes": _class_stats(tuple(names), per_row["row_class"], docs, flen, df),
        "vocabulary": None, "default_mask": None, "seen": None, "_derived": {},
    }  # fmt: skip
    index = replace(sp, **changes)
    paths = tuple(_insert(np.asarray(prev.paths, dtype=object)[alive], rows.at, rows.paths).tolist())
    old_rows = tuple(np.where(m >= 0, row_map[np.maximum(m, 0)], -1) for m in (prev.row_map[s] for s in kept))
    old_terms = tuple(np.where(m >= 0, term_map[np.maximum(m, 0)], -1) for m in (prev.term_map[s] for s in kept))
    combined = Combined(
        index, per_row["segment"], paths, old_terms + tuple(term_maps), old_rows + tuple(rows.maps), words
    )
    return combined, Delta(row_map, term_map, len(kept), fresh, np.unique(gone.terms))


def _class_names(seg: Segment) -> tuple[str, ...]:
    if seg.sparse.classes is None:
        raise IntegrityError(f"segment {seg.key[:12]} holds no per-classification statistics")
    return seg.sparse.classes.names


def _check_added(
    new: _Added,
    row_class: np.ndarray,
    sums: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]],
    term_maps: tuple[np.ndarray, list[np.ndarray]],
    shape: tuple[int, int],
    names: list[str],
) -> None:
    """The added segments' live statistics (df per class and term) against their live postings, counted."""
    expect = np.zeros(shape, dtype=np.int64)
    for (_, _, sdf, seg_names), m in zip(sums, term_maps[1]):
        h = m >= 0
        for c_local, n in enumerate(seg_names):
            np.add.at(expect[names.index(n)], m[h], sdf[c_local][h])
    key = row_class[new.rows].astype(np.int64) * shape[1] + new.terms
    counted = np.bincount(key, minlength=shape[0] * shape[1]).reshape(shape)
    if not np.array_equal(expect, counted):
        raise IntegrityError(MISMATCH)
