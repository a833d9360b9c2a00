"""The previous combined index's postings of the rows a derived generation drops (core.ranking.segment_delta):
found run by run in the terms the grown tombstones' statistics name, checked against those statistics, and
the row numbers of the kept postings renumbered (or copied as they are when no kept row moves)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import IntegrityError
from core.ranking import bm25f
from core.ranking.postings import splice
from core.ranking.segments import Combined, Tombstone
from core.ranking.sparse_index import SparseIndex, gather_postings

MISMATCH = "the segments' statistics minus their tombstones do not match their live postings"


@dataclass(frozen=True)
class Grown:
    """A previous segment's newly dead rows (previous combined rows) and, when its tombstone's statistics are
    stored, what they grew by since the previous generation (in the segment's classes ``names`` and terms)."""

    rows: np.ndarray  # int64: previous combined rows
    names: tuple[str, ...]  # the segment's class names (what ``expected``'s rows are)
    expected: Tombstone | None


@dataclass(frozen=True)
class Dropped:
    """The previous postings of the newly dead rows."""

    pos: np.ndarray  # their positions, ascending
    terms: np.ndarray  # each one's term
    side: np.ndarray  # the positions of their side values, ascending
    side_len: np.ndarray  # how many side values each holds
    counted: np.ndarray  # int64 [classes, terms]: how many per (class of the row, term)


def dropped(prev: SparseIndex, alive: np.ndarray, named: np.ndarray | None) -> Dropped:
    """The postings of the rows ``alive`` says are dead: found in the runs of the ``named`` terms (the
    terms the tombstones' statistics say the dead notes hold; ``extend`` then checks that no dead row is left
    in the arrays), or, when None, by a look at every posting."""
    assert prev.classes is not None
    docs, fmask = np.asarray(prev.docs), np.asarray(prev.field_mask)
    if alive.all():
        pos, terms, first = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    elif named is None:
        pos = np.flatnonzero(~alive[docs])
        terms = np.searchsorted(prev.indptr, pos, side="right") - 1
        every = bm25f.side_counts(fmask)
        first = np.cumsum(every, dtype=np.int64)[pos] - every[pos]
    else:
        pos, terms, first = _in_runs(prev, docs, fmask, np.unique(named), np.flatnonzero(~alive))
    held = bm25f.side_counts(fmask[pos]).astype(np.int64)
    side, _ = gather_postings(spans(first, first + held), 2 * np.arange(pos.shape[0]))
    counted = np.zeros((len(prev.classes.names), prev.df.shape[0]), dtype=np.int64)
    np.add.at(counted, (prev.classes.row_class[docs[pos]].astype(np.intp), terms), 1)
    return Dropped(pos, terms, side, held, counted)


def _in_runs(
    prev: SparseIndex, docs: np.ndarray, fmask: np.ndarray, ids: np.ndarray, dead: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, terms, first side value) of the postings of the ``dead`` rows in the runs of the terms
    ``ids`` (ascending), run by run: a comparison over each run and a side count over its part before the
    last hit, with no index array the size of the runs (a common term's run holds most of the notes)."""
    indptr, side_ptr = prev.indptr, prev.side_ptr
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for t in ids.tolist():
        a, b = int(indptr[t]), int(indptr[t + 1])
        run = docs[a:b]
        hit = np.flatnonzero(run == dead[0]) if dead.shape[0] == 1 else np.flatnonzero(np.isin(run, dead))
        if not hit.size:
            continue
        before = np.cumsum(bm25f.side_counts(fmask[a : a + int(hit[-1])]), dtype=np.int64)
        offset = np.concatenate(([0], before))[hit]
        found.append((a + hit, np.full(hit.shape[0], t, np.int64), int(side_ptr[t]) + offset))
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    pos, terms, first = (np.concatenate(x).astype(np.int64) for x in zip(*found))
    return pos, terms, first


def candidates(prev: Combined, grown: dict[int, Grown]) -> np.ndarray | None:
    """The terms the grown tombstones' statistics say their newly dead notes hold (combined ids); None when
    a tombstone stores none (an older format: its notes' postings are looked for everywhere)."""
    found = [np.zeros(0, np.int64)]
    for s, g in grown.items():
        if g.expected is None:
            return None
        local = np.flatnonzero(g.expected.df.sum(axis=0) > 0)
        found.append(prev.term_map[s][local])
    ids = np.concatenate(found)
    if (ids < 0).any():  # a dead note's term the segment's live notes did not hold
        raise IntegrityError(MISMATCH)
    return ids


def check_grown(prev: Combined, grown: dict[int, Grown], counted: np.ndarray) -> None:
    """The dropped rows' classes and lengths, and their postings per (class, term), against what the
    tombstones' stored statistics grew by. A tombstone without stored statistics (an older format) is
    counted from the postings it drops: exact by construction, nothing to check it against."""
    stats = prev.sparse.classes
    assert stats is not None
    names, fields = stats.names, prev.sparse.field_len.shape[1]
    expect = np.zeros_like(counted)
    for s, g in grown.items():
        if g.expected is None:
            return
        code = np.asarray([names.index(n) for n in g.names], dtype=np.int64)
        held = prev.term_map[s] >= 0
        if (g.expected.df[:, ~held] != 0).any():
            raise IntegrityError(MISMATCH)
        for c_local, c in enumerate(code.tolist()):
            np.add.at(expect[c], prev.term_map[s][held], g.expected.df[c_local][held])
        cls = stats.row_class[g.rows].astype(np.intp)
        lengths = np.zeros((len(names), fields), dtype=np.int64)
        np.add.at(lengths, cls, prev.sparse.field_len[g.rows].astype(np.int64))
        docs = np.bincount(cls, minlength=len(names))
        mine = np.zeros(len(names), dtype=bool)
        mine[code] = True
        if docs[~mine].any() or not np.array_equal(docs[code], g.expected.docs):
            raise IntegrityError(MISMATCH)
        if not np.array_equal(lengths[code], g.expected.field_len):
            raise IntegrityError(MISMATCH)
    if not np.array_equal(expect, counted):
        raise IntegrityError(MISMATCH)


def spliced_rows(
    docs: np.ndarray, drop: np.ndarray, at: np.ndarray, values: np.ndarray, row_map: np.ndarray
) -> np.ndarray:
    """The new ``docs``: the previous ones without the postings ``drop`` (those of the dead rows), renumbered
    by ``row_map``, with the added rows ``values`` inserted at ``at``. A dead row's posting the tombstones'
    statistics did not name fails closed. When every kept row keeps its number (an edit whose note keeps
    its path: its new row takes the old one's place) the kept values are copied as they are, and the
    check is a count of the dead rows' postings; else they are renumbered run by run."""
    kept = row_map >= 0
    if docs.dtype != np.int32 or not np.array_equal(row_map[kept], np.flatnonzero(kept)):
        rows = splice(docs, drop, at, values, lookup=row_map.astype(np.int32))
        if rows.size and int(rows.min()) < 0:
            raise IntegrityError(MISMATCH)
        return rows
    dead = np.flatnonzero(~kept)
    left = np.count_nonzero(docs == dead[0]) if dead.shape[0] == 1 else np.count_nonzero(np.isin(docs, dead))
    if left != drop.shape[0]:
        raise IntegrityError(MISMATCH)
    return splice(docs, drop, at, values)


def spans(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """An indptr-like array whose entries 2i, 2i+1 are starts[i], ends[i] (for gather_postings)."""
    out = np.empty(2 * starts.shape[0], dtype=np.int64)
    out[0::2], out[1::2] = starts, ends
    return out
