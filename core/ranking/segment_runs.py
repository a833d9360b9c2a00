"""The lazy per-posting arrays of a generation's view of its segments (core.ranking.segment_view): a term's
postings are each segment's run of it, one after another, read from the segment's own arrays (themselves read a
piece at a time, core.ranking.stored) when a query asks for them; and the view's term dictionary, the largest
segment's own with the terms it lacks after it."""

from __future__ import annotations

import threading
from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import IntegrityError
from core.ranking import stored
from core.ranking.postings import distinct
from core.ranking.stored import LazyArray


class UnionTerms(Mapping[str, int]):
    """term -> id over a base dictionary (one segment's own, not copied) and the terms it lacks (``extra``,
    numbered from ``first``, the base's id space, on)."""

    def __init__(self, base: Mapping[str, int], extra: dict[str, int], first: int) -> None:
        self.base, self.extra = base, extra
        self.ids = first + len(extra)  # the id space: the base's ids (some may be unnamed), then the extra terms
        self._n = len(base) + len(extra)

    def __getitem__(self, term: str) -> int:
        found = self.base.get(term)
        return self.extra[term] if found is None else found

    def get(self, term: str, default: Any = None) -> Any:
        found = self.base.get(term)
        return self.extra.get(term, default) if found is None else found

    def __contains__(self, term: object) -> bool:
        return term in self.base or term in self.extra

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        yield from self.extra

    def __len__(self) -> int:
        return self._n

    def items(self) -> ItemsView[str, int]:
        return _UnionItems(self)

    def values(self) -> ValuesView[int]:
        return _UnionValues(self)


class _UnionItems(ItemsView[str, int]):
    _mapping: UnionTerms

    def __iter__(self) -> Iterator[tuple[str, int]]:  # the dicts' own iterators (no look-up per key)
        yield from self._mapping.base.items()
        yield from self._mapping.extra.items()


class _UnionValues(ValuesView[int]):
    _mapping: UnionTerms

    def __iter__(self) -> Iterator[int]:
        yield from self._mapping.base.values()
        yield from self._mapping.extra.values()


@dataclass(frozen=True)
class Runs:
    """Where each term's postings lie: in the view (``indptr``) and in each segment (``seg_ptr``: its own
    CSR offsets; ``seg_terms``: each of its local term ids' view id, -1 for an id no term names)."""

    indptr: np.ndarray
    seg_ptr: tuple[np.ndarray, ...]
    seg_terms: tuple[np.ndarray, ...]
    identity: tuple[bool, ...]  # the segment's local ids are the view's (the base segment)
    # the last positions located and where they lie (a query asks the same of several arrays)
    _memo: list[Any] = field(default_factory=list, repr=False, compare=False)
    _orders: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)

    def whole_runs(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(term, start, end) of each whole term run ``positions`` holds as consecutive positions (a term's
        postings asked for at once: the indexes ``start:end`` of ``positions``)."""
        breaks = np.flatnonzero(positions[1:] != positions[:-1] + 1) + 1
        starts, ends = np.concatenate(([0], breaks)), np.append(breaks, positions.shape[0])
        term = np.searchsorted(self.indptr, positions[starts], side="right") - 1
        whole = (positions[starts] == self.indptr[term]) & (positions[ends - 1] + 1 == self.indptr[term + 1])
        return term[whole], starts[whole], ends[whole]

    def local(self, s: int, terms: np.ndarray) -> np.ndarray:
        """The local id in segment ``s`` of each view term id of ``terms`` (-1: the segment lacks it)."""
        if self.identity[s]:
            n = self.seg_terms[s].shape[0]
            return np.where(terms < n, terms, -1)
        found = self._orders.get(s)
        if found is None:  # the segment's term map sorted, once per view (a dict item is set atomically)
            order = np.argsort(self.seg_terms[s], kind="stable")
            found = self._orders[s] = (order, self.seg_terms[s][order])
        order, ordered = found
        at = np.minimum(np.searchsorted(ordered, terms), max(ordered.shape[0] - 1, 0))
        hit = ordered[at] == terms if ordered.size else np.zeros(terms.shape, dtype=bool)
        return np.where(hit, order[at], -1)

    def locate(self, positions: np.ndarray) -> Located:
        """Where ``positions`` (view posting positions) lie in the segments (``Located``).

        The terms are found per run of consecutive positions (a query asks for whole runs of its terms), then
        each term's run is cut into its segments' pieces, laid out in view order (term after term, segment
        after segment). A few runs (a query's terms) become slice copies, one per piece a run covers; many
        (a subset of positions) a binary search per position among the pieces."""
        if not positions.size:
            return Located((), ())
        last = self._memo[0] if self._memo else None  # one read: another thread may replace it
        if last is not None and last[0].shape == positions.shape and np.array_equal(last[0], positions):
            return last[1]  # the same positions asked of another of the view's arrays (docs, then masks, then tf)
        found = self._locate(positions)
        if self._memo:
            self._memo[0] = (positions.copy(), found)
        else:
            self._memo.append((positions.copy(), found))
        return found

    def _pieces(self, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(view position, length, position in its segment, segment) of each non-empty piece of the runs of
        ``terms`` (ascending), in view order."""
        shape = (terms.shape[0], len(self.seg_ptr))
        lengths, starts = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        for s, ptr in enumerate(self.seg_ptr):
            lid = self.local(s, terms)
            held = lid >= 0
            starts[:, s] = np.where(held, ptr[np.maximum(lid, 0)], 0)
            lengths[:, s] = np.where(held, ptr[np.maximum(lid, 0) + 1] - starts[:, s], 0)
        at = self.indptr[terms][:, None] + np.cumsum(lengths, axis=1) - lengths
        keep = (lengths > 0).ravel()
        seg = np.broadcast_to(np.arange(len(self.seg_ptr)), shape).ravel()[keep]
        return at.ravel()[keep], lengths.ravel()[keep], starts.ravel()[keep], seg

    def _locate(self, positions: np.ndarray) -> Located:
        breaks = np.flatnonzero(positions[1:] != positions[:-1] + 1) + 1
        run_out = np.concatenate(([0], breaks))
        first, last = positions[run_out], positions[np.append(breaks - 1, positions.shape[0] - 1)]
        lo = np.searchsorted(self.indptr, first, side="right") - 1
        hi = np.searchsorted(self.indptr, last, side="right") - 1
        span = hi - lo + 1
        terms = distinct(_expand(lo, span))
        piece_at, piece_len, piece_local, piece_seg = self._pieces(terms)
        if run_out.shape[0] <= MAX_COPY_RUNS:
            i0 = np.searchsorted(piece_at, first, side="right") - 1
            count = np.searchsorted(piece_at, last, side="right") - i0
            idx, run = _expand(i0, count), np.repeat(np.arange(count.shape[0]), count)
            a = np.maximum(first[run], piece_at[idx])
            b = np.minimum(last[run] + 1, piece_at[idx] + piece_len[idx])
            keep = b > a
            idx, run, a, b = idx[keep], run[keep], a[keep], b[keep]
            copies = zip(
                piece_seg[idx].tolist(), (run_out[run] + a - first[run]).tolist(),
                (piece_local[idx] + a - piece_at[idx]).tolist(), (b - a).tolist(),
            )  # fmt: skip
            return Located(tuple(copies), ())
        piece = np.searchsorted(piece_at, positions, side="right") - 1
        seg = piece_seg[piece]
        local = piece_local[piece] + positions - piece_at[piece]
        present = distinct(piece_seg).tolist()
        if len(present) == 1:
            return Located((), ((present[0], np.arange(positions.shape[0]), local),))
        return Located((), tuple((s, mine, local[mine]) for s in present if (mine := np.flatnonzero(seg == s)).size))


# Postings of a view by segment: (segment, its local positions), in view order
Segmented = tuple[tuple[int, np.ndarray], ...]

# Up to this many runs of consecutive positions, a gather is slice copies (one per segment piece a run covers)
MAX_COPY_RUNS = 512


def _expand(start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``concatenate([arange(a, a + n) for a, n in zip(start, count)])`` in one repeat."""
    return np.repeat(start - np.cumsum(count) + count, count) + np.arange(int(count.sum()))


@dataclass(frozen=True)
class Located:
    """Where a gather's positions lie: slice copies (segment, first output index, first position in the
    segment, length), or per segment the output indexes it holds and their positions in it."""

    copies: tuple[tuple[int, int, int, int], ...]
    gathers: tuple[tuple[int, np.ndarray, np.ndarray], ...]


class Check:
    """The statistics a view was built from (the segments' per class, minus their tombstones', plus the
    tombstones' as ``DELETED``) checked against the postings, term by term as queries read a term's whole run:
    its rows counted per class must be its df per class. A tombstone whose stored statistics misstate its
    notes (a count moved between classes, one too many) fails closed on the first query that reads one of
    the terms it misstates; each term is checked once per view."""

    def __init__(self, row_class: np.ndarray, class_df: np.ndarray) -> None:
        self._row_class = row_class
        self._df = class_df.astype(np.int32 if class_df.size == 0 or int(class_df.max()) < 2**31 else np.int64)
        self._done = np.zeros(class_df.shape[1], dtype=bool)
        self._lock = threading.Lock()

    def done(self, term: int) -> bool:
        """Has ``term`` been checked?"""
        return bool(self._done[term])

    def runs(self, terms: np.ndarray, starts: np.ndarray, ends: np.ndarray, rows: np.ndarray) -> None:
        """Check the terms ``terms`` whose whole runs are ``rows[starts[i]:ends[i]]`` (view rows)."""
        todo = np.flatnonzero(~self._done[terms])
        if not todo.size:
            return
        c = self._df.shape[0]
        for i in todo.tolist():
            counted = np.bincount(self._row_class[rows[starts[i] : ends[i]]], minlength=c)
            if not np.array_equal(counted, self._df[:, terms[i]]):
                raise IntegrityError(
                    f"the segments' statistics minus their tombstones do not match their postings (term id {int(terms[i])})"
                )
        with self._lock:
            self._done[terms[todo]] = True


class RunArray(LazyArray):
    """A per-posting array of the view (``Runs``): each value read from the segment that holds the posting
    (``parts``: each segment's array; ``rows``: each segment's local row -> view row, for ``docs``; ``check``:
    the statistics the rows a query reads whole are checked against)."""

    def __init__(
        self,
        runs: Runs,
        parts: Sequence[Any],
        dtype: np.dtype,
        rows: Sequence[np.ndarray | int] | None = None,
        check: Check | None = None,
    ) -> None:
        self._runs, self._parts, self._check = runs, tuple(parts), check
        # each segment's local value -> the view's: a map (rows), or an offset added (chunk rows laid end to end)
        self._rows = None if rows is None else [m if isinstance(m, np.ndarray) else int(m) for m in rows]
        self.dtype, self._name = np.dtype(dtype), "of a segmented generation's view"
        self.shape = (int(runs.indptr[-1]) if runs.indptr.size else 0,)
        self._full = None
        self._gathers = 0

    def _take(self, positions: np.ndarray) -> np.ndarray:
        """A gather (counted: a process that has gathered ``WHOLE_AFTER_GATHERS`` times from the view, a long-lived
        one, has the segments read their arrays whole, as one segment's reader does, core.ranking.stored)."""
        self.gathered()
        return self._read(positions)

    def gathered(self) -> None:
        """Count a gather (``_take``'s, or a query's runs read as slices: ``term_runs``, ``find``)."""
        self._gathers += 1
        if self._gathers == stored.WHOLE_AFTER_GATHERS:
            for part in self._parts:
                np.asarray(part)  # a StoredArray reads its pieces once and keeps the whole array

    def _range(self, a: int, b: int) -> np.ndarray:
        return self._read(np.arange(a, b, dtype=np.int64))  # a slice (a term's run): not counted

    def _read(self, positions: np.ndarray) -> np.ndarray:
        flat = self._positions(positions)
        out = np.empty(flat.size, self.dtype)
        found = self._runs.locate(flat)
        for s, at, local, n in found.copies:
            out[at : at + n] = self._mapped(s, np.asarray(self._parts[s][local : local + n]))
        for s, mine, where in found.gathers:
            out[mine] = self._mapped(s, np.asarray(self._parts[s][where]))
        if self._check is not None and flat.size:
            self._check.runs(*self._runs.whole_runs(flat), out)
        return out.reshape(np.shape(positions))

    def term_runs(self, terms: np.ndarray) -> list[np.ndarray]:
        """The values of each term's whole run (``terms``: view term ids), read segment by segment as slices (no
        position is located); a run's rows are checked against the statistics as ``_read`` checks them."""
        lids = [self._runs.local(s, terms) for s in range(len(self._runs.seg_ptr))]
        out = []
        for i, t in enumerate(terms.tolist()):
            if self._full is not None:
                out.append(self._full[int(self._runs.indptr[t]) : int(self._runs.indptr[t + 1])])
                continue
            pieces = [
                self._mapped(s, np.asarray(self._parts[s][int(ptr[lid]) : int(ptr[lid + 1])]))
                for s, ptr in enumerate(self._runs.seg_ptr)
                if (lid := int(lids[s][i])) >= 0 and ptr[lid + 1] > ptr[lid]
            ]
            run = np.concatenate(pieces).astype(self.dtype, copy=False) if pieces else np.empty(0, self.dtype)
            if self._check is not None and run.size:
                self._check.runs(np.asarray([t]), np.asarray([0]), np.asarray([run.size]), run)
            out.append(run)
        return out

    def find(self, terms: np.ndarray, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, Segmented]]:
        """Per term of ``terms``: (view positions, values, where they lie) of its postings whose value is a row
        marked in ``rows`` (bool per view row), in its run's order: each segment's run tested against the rows its
        map sends there (a byte per posting), the values mapped for the postings found only; ``take`` reads
        another array of the view there. A term's statistics are checked against its whole run the first time
        it is asked for (``Check``)."""
        if self._check is not None:
            self.term_runs(np.asarray([t for t in terms.tolist() if not self._check.done(t)], dtype=np.int64))
        n_segments = len(self._runs.seg_ptr)
        lids = [self._runs.local(s, terms) for s in range(n_segments)]
        marked = [self._marked(s, rows) for s in range(n_segments)]
        out: list[tuple[np.ndarray, np.ndarray, Segmented]] = []
        for i, t in enumerate(terms.tolist()):
            at, found, values, where = int(self._runs.indptr[t]), [], [], []
            for s, ptr in enumerate(self._runs.seg_ptr):
                lid = int(lids[s][i])
                if lid < 0 or ptr[lid + 1] == ptr[lid]:
                    continue
                a, b = int(ptr[lid]), int(ptr[lid + 1])
                run = np.asarray(self._parts[s][a:b])
                hit = np.flatnonzero(marked[s][run])
                found.append(at + hit)
                values.append(self._mapped(s, run[hit]))
                where.append((s, a + hit))
                at += b - a
            if not found:
                out.append((np.empty(0, np.int64), np.empty(0, self.dtype), ()))
                continue
            out.append(
                (np.concatenate(found).astype(np.int64), np.concatenate(values).astype(self.dtype), tuple(where))
            )
        return out

    def take(self, where: Segmented) -> np.ndarray:
        """The values at ``where`` (per segment, local positions: ``find``'s, of an array of the same runs)."""
        parts = [self._mapped(s, np.asarray(self._parts[s][local])) for s, local in where]
        return np.concatenate(parts).astype(self.dtype, copy=False) if parts else np.empty(0, self.dtype)

    def _marked(self, s: int, rows: np.ndarray) -> np.ndarray:
        """bool per local row of segment ``s``: is its view row marked in ``rows``?"""
        m = self._rows[s] if self._rows is not None else 0
        if isinstance(m, np.ndarray):
            return rows[m]
        return rows[m : m + len(self._parts[s])]

    def _mapped(self, s: int, values: np.ndarray) -> np.ndarray:
        if self._rows is None:
            return values
        m = self._rows[s]
        return m[values] if isinstance(m, np.ndarray) else values + m

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The whole array (read once, then kept: a process that asks for it is a long-lived one)."""
        if self._full is None:
            full = self._read(np.arange(self.shape[0], dtype=np.int64))
            full.flags.writeable = False
            self._full = full
        return self._full if dtype is None else self._full.astype(dtype)
