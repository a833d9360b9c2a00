"""A generation of several segments ranked through the segments' own arrays (issue 29: a new process's search
on a segmented generation no slower than on one segment; a reader's switch costs the segments it adds).

``view`` builds one SparseIndex over a generation's segments without copying or re-sorting a posting: the
per-posting arrays (``docs``, ``field_mask``, ``body_tf``, ``side_tf``) are ``RunArray`` s that read a term's
postings from each segment's own arrays (themselves read a piece at a time, core.ranking.stored) when a query
asks for them, so a new process reads the kilobytes its query needs, as it does on one segment. What is built
at once is per note and per term, never per posting: the rows, the term dictionary, the statistics.

- Rows: every row of every segment, dead (tombstoned) rows included, in path order (a dead row and the live
  row that replaced it share a path; no query ever sees the dead one). A dead row's note id is negative
  (-1 - its row), so no look-up by id finds it.
- Terms: the ids of the segment with the most terms, then the other segments' terms it lacks, numbered in
  the order met. A term no live note holds keeps its id with a live df of 0: the caller's dictionary
  (``VisibleTerms``) and vocabulary (filtered by df) never surface it. Within a term, the postings are the
  segments' runs in the generation's order (each one's rows ascending in its own order).
- Dead rows are a classification no caller sees (``DELETED``): its statistics are the tombstones' stored
  ones (their exact contribution per class), so the statistics of every caller, the unrestricted one
  included, are sums over its visible classes (``SparseIndex.restrict``), the very sums that give a
  restricted caller statistics equal to an index of its visible notes alone. ``live`` is the index an
  unrestricted caller ranks with: restricted to every class but ``DELETED``.

Ties break on the row, and rows are in path order, so no ranking depends on segment order or a segment's
own ids; term ids order nothing a ranking reads (core.ranking.vocabulary chooses a word's term by df, then
by the term itself).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from core.errors import IntegrityError
from core.ranking.chunk_vectors import ChunkVectors, class_chunks, restrict_chunks, vector_statistics
from core.ranking.classes import DELETED, ClassStats
from core.ranking.segment_runs import Check, RunArray, Runs, UnionTerms
from core.ranking.segments import Combined, Segment, Tombstone, _class_df, _class_stats
from core.ranking.sparse_index import DEFAULT_PARAMS, SparseIndex, id_order_of
from core.ranking.stored import LazyArray
from core.ranking.vocabulary import Vocabulary, appended_derived, appended_lists, fresh_words


@dataclass(frozen=True)
class View:
    """A generation's view (``Combined`` for what maps segments to it) and its unrestricted caller's index."""

    combined: Combined
    live: SparseIndex
    base: int  # the segment whose term ids are the view's (the one of the most terms)


def _alive(seg: Segment, tomb: Tombstone | None) -> np.ndarray:
    alive = np.ones(seg.sparse.n_docs, dtype=bool)
    if tomb is not None:
        alive[tomb.rows] = False
    return alive


# Up to this many rows in the segments besides one whose paths are read as asked (``lazy``), those rows are
# placed among its rows by bisection (17 look-ups each at 100,000 notes) instead of reading every path
BISECT_ROWS = 512


def _rows(
    parts: Sequence[tuple[Segment, Tombstone | None]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Sequence[str], list[np.ndarray]]:
    """(segment, local row, alive of each view row: every row in the order of (path, segment); the paths;
    each segment's local row -> view row)."""
    alive = [_alive(seg, tomb) for seg, tomb in parts]
    lazy = [s for s, (seg, _) in enumerate(parts) if getattr(seg.paths, "lazy", False)]
    b = max(lazy, key=lambda s: alive[s].shape[0]) if lazy else -1
    if lazy and sum(a.shape[0] for s, a in enumerate(alive) if s != b) <= BISECT_ROWS:
        return _rows_among(parts, alive, b)
    seg_of = np.concatenate([np.full(a.shape[0], i, np.int64) for i, a in enumerate(alive)] or [np.zeros(0, np.int64)])
    local = np.concatenate([np.arange(a.shape[0], dtype=np.int64) for a in alive] or [np.zeros(0, np.int64)])
    live = np.concatenate(alive or [np.zeros(0, bool)])
    paths = np.array([p for seg, _ in parts for p in seg.paths], dtype=object)
    if paths.shape[0] != seg_of.shape[0]:
        raise IntegrityError("a segment's paths do not cover its rows")
    order = np.argsort(paths, kind="stable")
    held = paths[order][live[order]]
    if held.size > 1 and (held[1:] == held[:-1]).any():
        raise IntegrityError("two live notes of the generation's segments have the same path")
    rank = np.empty(order.shape[0], dtype=np.int64)
    rank[order] = np.arange(order.shape[0])
    bounds = np.cumsum([0, *(a.shape[0] for a in alive)])
    maps = [rank[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return seg_of[order], local[order], live[order], tuple(paths[order].tolist()), maps


def _rows_among(
    parts: Sequence[tuple[Segment, Tombstone | None]], alive: list[np.ndarray], b: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Sequence[str], list[np.ndarray]]:
    """``_rows`` when the segment ``b`` is large (its rows in path order, its paths read as asked) and the
    others hold a few rows: each of theirs placed among ``b``'s by bisection on (path, segment)."""
    base = parts[b][0].paths
    n_b = len(base)
    others = sorted((p, s, r) for s, (seg, _) in enumerate(parts) if s != b for r, p in enumerate(seg.paths))
    held = [p for p, s, r in others if alive[s][r]]
    if any(x == y for x, y in zip(held, held[1:])):
        raise IntegrityError("two live notes of the generation's segments have the same path")
    ranks = np.zeros(len(others), dtype=np.int64)
    for j, (p, s, r) in enumerate(others):
        lo, hi = 0, n_b
        while lo < hi:
            mid = (lo + hi) // 2
            q = base[mid]
            lo, hi = (mid + 1, hi) if q < p or (q == p and b < s) else (lo, mid)
        ranks[j] = lo
        twin = lo - 1 if b < s else lo  # a row of b with the same path sits just before (or at) it
        if 0 <= twin < n_b and base[twin] == p and alive[b][twin] and alive[s][r]:
            raise IntegrityError("two live notes of the generation's segments have the same path")
    n = n_b + len(others)
    base_rows = np.arange(n_b, dtype=np.int64) + np.searchsorted(ranks, np.arange(n_b), side="right")
    small_rows = ranks + np.arange(len(others), dtype=np.int64)
    seg_of, local, live = np.full(n, b, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    local[base_rows], live[base_rows] = np.arange(n_b), alive[b]
    maps = [np.zeros(a.shape[0], dtype=np.int64) for a in alive]
    maps[b] = base_rows
    for j, (_, s, r) in enumerate(others):
        seg_of[small_rows[j]], local[small_rows[j]], live[small_rows[j]] = s, r, alive[s][r]
        maps[s][r] = small_rows[j]
    return seg_of, local, live, ViewPaths([seg.paths for seg, _ in parts], seg_of, local), maps


class ViewPaths(Sequence[str]):
    """Each view row's path, read from its segment's paths as asked."""

    def __init__(self, paths: Sequence[Sequence[str]], seg_of: np.ndarray, local: np.ndarray) -> None:
        self._paths, self._seg, self._local = paths, seg_of, local

    def __len__(self) -> int:
        return int(self._seg.shape[0])

    def __getitem__(self, row: int) -> str:  # type: ignore[override]
        if not -len(self) <= row < len(self):
            raise IndexError(row)
        return self._paths[int(self._seg[row])][int(self._local[row])]


def _terms(parts: Sequence[tuple[Segment, Tombstone | None]]) -> tuple[int, UnionTerms, list[np.ndarray]]:
    """(the base segment, the view's dictionary, each segment's local term id -> view id, -1: unnamed)."""
    sizes = [seg.sparse.df.shape[0] for seg, _ in parts]
    base = int(np.argmax(sizes)) if sizes else 0
    base_terms = getattr(parts[base][0].sparse.term_id, "all", parts[base][0].sparse.term_id)
    if len(base_terms) != sizes[base]:  # ids no term names (a segment written with kept ids): none holds a posting
        named = np.zeros(sizes[base], dtype=bool)
        named[np.fromiter(base_terms.values(), dtype=np.int64, count=len(base_terms))] = True
        if np.asarray(parts[base][0].sparse.df)[~named].any():
            raise IntegrityError(f"segment {parts[base][0].key[:12]} holds postings of a term its dictionary lacks")
    extra: dict[str, int] = {}
    maps = []
    n_base = sizes[base]
    for s, (seg, _) in enumerate(parts):
        if s == base:
            maps.append(np.arange(n_base, dtype=np.int64))
            continue
        m = np.full(sizes[s], -1, dtype=np.int64)
        for term, lid in getattr(seg.sparse.term_id, "all", seg.sparse.term_id).items():
            gid = base_terms.get(term)
            if gid is None:
                gid = extra.setdefault(term, n_base + len(extra))
            m[lid] = gid
        maps.append(m)
    return base, UnionTerms(base_terms, extra, n_base), maps


def _scatter(n: int, maps: Sequence[np.ndarray], values: Sequence[np.ndarray], base: int) -> np.ndarray:
    """int64 [n]: each segment's per-local-term ``values`` summed into the view's term ids."""
    out = np.zeros(n, dtype=np.int64)
    for s, (m, v) in enumerate(zip(maps, values)):
        _add_df(out, m, np.asarray(v, dtype=np.int64), s == base)
    return out


def view(parts: Sequence[tuple[Segment, Tombstone | None]]) -> View:
    """The view of the segments ``parts`` (the generation's order) with their tombstones' rows hidden."""
    if not parts:
        raise IntegrityError("a generation of segments lists no segment")
    counts = [np.diff(seg.sparse.indptr) for seg, _ in parts]
    for (seg, _), c in zip(parts, counts):
        if seg.sparse.classes is None:
            raise IntegrityError(f"segment {seg.key[:12]} holds no per-classification statistics")
        if c.shape != seg.sparse.df.shape or not np.array_equal(c, seg.sparse.df):
            raise IntegrityError(f"segment {seg.key[:12]}'s document frequencies do not match its postings")
    seg_of, local, live, paths, row_maps = _rows(parts)
    base, term_id, term_maps = _terms(parts)
    n_terms = term_id.ids
    indptr = np.concatenate(([0], np.cumsum(_scatter(n_terms, term_maps, counts, base)))).astype(np.int64)
    sides = [np.diff(seg.sparse.side_ptr) for seg, _ in parts]
    side_ptr = np.concatenate(([0], np.cumsum(_scatter(n_terms, term_maps, sides, base)))).astype(np.int64)
    total_df = indptr[1:] - indptr[:-1]
    names, classes, class_df = _classes(parts, (term_maps, base), n_terms, seg_of, local, live)
    check = Check(classes.row_class, class_df)
    note_ids, field_len = _per_row(parts, seg_of, local, live)
    name_ptr, name_terms = _names(parts, row_maps, term_maps, seg_of, local)
    identity = tuple(s == base for s in range(len(parts)))
    runs = Runs(indptr, tuple(np.asarray(seg.sparse.indptr) for seg, _ in parts), tuple(term_maps), identity)
    side_runs = Runs(side_ptr, tuple(np.asarray(seg.sparse.side_ptr) for seg, _ in parts), tuple(term_maps), identity)
    first = parts[0][0].sparse
    index = SparseIndex(
        note_ids=note_ids,
        term_id=term_id,
        indptr=indptr,
        docs=RunArray(runs, [seg.sparse.docs for seg, _ in parts], np.dtype(np.int32), rows=row_maps, check=check),  # type: ignore[arg-type]
        field_mask=RunArray(runs, [seg.sparse.field_mask for seg, _ in parts], first.field_mask.dtype),  # type: ignore[arg-type]
        body_tf=RunArray(runs, [seg.sparse.body_tf for seg, _ in parts], first.body_tf.dtype),  # type: ignore[arg-type]
        side_tf=RunArray(side_runs, [seg.sparse.side_tf for seg, _ in parts], first.side_tf.dtype),  # type: ignore[arg-type]
        side_ptr=side_ptr,
        field_len=field_len,
        df=total_df,
        params=first.params if first is not None else DEFAULT_PARAMS,
        name_ptr=name_ptr,
        name_terms=name_terms,
        classes=classes,
        id_order=id_order_of(note_ids),  # fails closed on a repeated id
    )
    base_sparse = parts[base][0].sparse
    words = _unlisted(parts, base, term_maps, term_id)
    if base_sparse.vocabulary is not None and not words:
        index = replace(index, vocabulary=base_sparse.vocabulary)  # the base's words are every word, ids the same
    elif base_sparse.vocabulary is not None:
        index = replace(index, vocabulary_lists=_Lists(base_sparse, words))
    combined = Combined(index, seg_of, paths, tuple(term_maps), tuple(row_maps))
    return View(combined, index.restrict([n for n in names if n != DELETED]), base)


def _per_row(
    parts: Sequence[tuple[Segment, Tombstone | None]], seg_of: np.ndarray, local: np.ndarray, live: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(note id, field lengths) of each view row: its segment's, a dead row's id -1 - its row."""
    offsets = np.cumsum([0, *(seg.sparse.n_docs for seg, _ in parts)])
    at = offsets[seg_of] + local
    note_ids = np.concatenate([np.asarray(seg.sparse.note_ids, dtype=np.int64) for seg, _ in parts])[at]
    dead = np.flatnonzero(~live)
    note_ids[dead] = -1 - dead
    field_len = np.concatenate([np.asarray(seg.sparse.field_len) for seg, _ in parts])[at]
    return note_ids, field_len


def _unlisted(
    parts: Sequence[tuple[Segment, Tombstone | None]], base: int, term_maps: list[np.ndarray], term_id: UnionTerms
) -> dict[str, int]:
    """The terms some segment holds that the base segment's stored vocabulary lacks (it lists the terms the
    base holds: a term it names but no note of it holds is not one), and their view ids."""
    base_df = np.asarray(parts[base][0].sparse.df)
    wanted: set[int] = set()
    for s, ((seg, _), m) in enumerate(zip(parts, term_maps)):
        if s == base:
            continue
        held = m[np.asarray(seg.sparse.df) > 0]
        wanted.update(
            held[(held >= base_df.shape[0]) | (base_df[np.minimum(held, base_df.shape[0] - 1)] == 0)].tolist()
        )
    if not wanted:
        return {}
    names = {gid: t for t, gid in term_id.extra.items()}
    missing = wanted - names.keys()
    if missing:
        names.update((gid, t) for t, gid in term_id.base.items() if gid in missing)
    return {names[gid]: gid for gid in sorted(wanted)}


class _Lists:
    """The view's vocabulary word lists: the base segment's stored ones with the terms it lacks merged in
    (``appended_lists``), built on the first query that asks, once per view."""

    def __init__(self, base: SparseIndex, extra: Mapping[str, int]) -> None:
        self._base, self._extra = base, extra
        self._lists: tuple[list[str], list[int], list[int], list[int]] | None = None
        self._derived: tuple[list[str], set[str]] | None = None
        self._lock = threading.Lock()

    def __call__(self) -> tuple[list[str], list[int], list[int], list[int]]:
        with self._lock:
            if self._lists is None:
                self._lists = appended_lists(self._prev(), self._extra)
            return self._lists

    def _prev(self) -> Vocabulary:
        b = self._base
        return Vocabulary(b.term_id, np.asarray(b.df), b.n_docs, stored=b.vocabulary)

    def derived(self) -> tuple[list[str], set[str]]:
        """The view's suffix list and typo alphabet: the base's stored ones with the words it lacks merged in."""
        with self._lock:
            if self._derived is None:
                stored = self._base.vocabulary
                assert stored is not None  # a view has lists only over a base with stored arrays
                self._derived = appended_derived(stored, fresh_words(self._prev().sorted, self._extra))
            return self._derived


def _classes(
    parts: Sequence[tuple[Segment, Tombstone | None]],
    maps: tuple[list[np.ndarray], int],
    n_terms: int,
    seg_of: np.ndarray,
    local: np.ndarray,
    live: np.ndarray,
) -> tuple[tuple[str, ...], ClassStats, np.ndarray]:
    """(the class names, the view's ClassStats, its df per class and term): each segment's per-class sums minus its tombstone's, and
    the tombstones' own sums as the class ``DELETED`` of the dead rows."""
    dead_any = not live.all()
    held = {n for seg, _ in parts if seg.sparse.classes is not None for n in seg.sparse.classes.names}
    names = tuple(sorted(held | ({DELETED} if dead_any else set())))
    code_of = {n: c for c, n in enumerate(names)}
    fields = parts[0][0].sparse.field_len.shape[1]
    docs, flen = np.zeros(len(names), np.int64), np.zeros((len(names), fields), np.int64)
    df = np.zeros((len(names), n_terms), np.int64)
    row_class = np.zeros(seg_of.shape[0], dtype=np.uint8 if len(names) <= 256 else np.uint16)
    term_maps, base = maps
    for s, ((seg, tomb), m) in enumerate(zip(parts, term_maps)):
        stats = seg.sparse.classes
        assert stats is not None  # view checked
        code = np.asarray([code_of[n] for n in stats.names], dtype=np.int64)
        sdf = _class_df(stats, np.asarray(seg.sparse.df, dtype=np.int64))
        sdocs, sflen = stats.docs.astype(np.int64), stats.field_len.astype(np.int64)
        if tomb is not None:
            if tomb.df.shape != sdf.shape or tomb.field_len.shape != sflen.shape:
                raise IntegrityError(f"the tombstone of segment {seg.key[:12]} does not fit its classes and terms")
            sdocs, sflen, sdf = sdocs - tomb.docs, sflen - tomb.field_len, sdf - tomb.df
            d = code_of[DELETED]
            docs[d] += int(tomb.docs.sum())
            flen[d] += tomb.field_len.sum(axis=0)
            _add_df(df[d], m, tomb.df.sum(axis=0), s == base)
        if (sdocs < 0).any() or (sflen < 0).any() or (sdf < 0).any():
            raise IntegrityError(f"the tombstone of segment {seg.key[:12]} removes more than the segment holds")
        np.add.at(docs, code, sdocs)
        np.add.at(flen, code, sflen)
        for c_local, c in enumerate(code.tolist()):
            _add_df(df[c], m, sdf[c_local], s == base)
        mine = np.flatnonzero(seg_of == s)
        row_class[mine] = code[stats.row_class[local[mine]]]
    if dead_any:
        row_class[~live] = code_of[DELETED]
    if not np.array_equal(np.bincount(row_class, minlength=len(names)), docs):
        raise IntegrityError("the tombstones' notes do not match their segments' dead rows")
    return names, _class_stats(names, row_class, docs, flen, df), df


def _add_df(out: np.ndarray, term_map: np.ndarray, values: np.ndarray, identity: bool) -> None:
    """``values`` (per local term of a segment) added to ``out`` (per view term) through ``term_map``;
    ``identity``: the segment's ids are the view's (the base segment)."""
    if identity:
        out[: term_map.shape[0]] += values
        return
    named = term_map >= 0
    if np.asarray(values)[~named].any():
        raise IntegrityError("a segment holds postings of a term its dictionary does not name")
    np.add.at(out, term_map[named], values[named])


def _names(
    parts: Sequence[tuple[Segment, Tombstone | None]],
    row_maps: list[np.ndarray],
    term_maps: list[np.ndarray],
    seg_of: np.ndarray,
    local: np.ndarray,
) -> tuple[np.ndarray, NameTerms]:
    """(name_ptr, name_terms) of the view: each row's name terms in its segment's order, in view ids, read from
    the segment when a query asks for those rows' (``NameTerms``)."""
    lengths = np.zeros(seg_of.shape[0], dtype=np.int64)
    for (seg, _), rows in zip(parts, row_maps):
        lengths[rows] = np.diff(seg.sparse.name_ptr)
    ptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return ptr, NameTerms(ptr, [seg for seg, _ in parts], term_maps, seg_of, local)


class NameTerms(LazyArray):
    """The view's ``name_terms``: a row's read from its segment's own and put in view ids when a query asks for
    it (``SparseIndex.name_idf``: its candidates' rows), never every row's per generation (at 100k notes that
    read took 37 ms of a reader's first query on each new generation). A term a segment's dictionary lacks
    fails closed when its row is read."""

    def __init__(
        self,
        ptr: np.ndarray,
        segs: Sequence[Segment],
        term_maps: Sequence[np.ndarray],
        seg_of: np.ndarray,
        local: np.ndarray,
    ) -> None:
        self._ptr, self._segs, self._maps, self._seg_of, self._local = ptr, tuple(segs), tuple(term_maps), seg_of, local
        self.dtype, self.shape = np.dtype(np.int32), (int(ptr[-1]),)
        self._full: np.ndarray | None = None
        self._name = "of a segmented generation's names"

    def _take(self, positions: np.ndarray) -> np.ndarray:
        flat = self._positions(positions)
        row = np.searchsorted(self._ptr, flat, side="right") - 1
        seg, out = self._seg_of[row], np.empty(flat.size, np.int32)
        for s, segment in enumerate(self._segs):
            mine = np.flatnonzero(seg == s)
            if not mine.size:
                continue
            at = np.asarray(segment.sparse.name_ptr)[self._local[row[mine]]] + (flat[mine] - self._ptr[row[mine]])
            held, term_map = np.asarray(segment.sparse.name_terms[at], dtype=np.int64), self._maps[s]
            ids = term_map[np.minimum(held, term_map.shape[0] - 1)]
            if int(ids.min()) < 0 or int(held.max()) >= term_map.shape[0]:
                raise IntegrityError(f"segment {segment.key[:12]} names a note by a term its dictionary lacks")
            out[mine] = ids
        return out.reshape(np.shape(positions))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self._full is None:
            self._full = self._take(np.arange(self.shape[0], dtype=np.int64))
        return self._full if dtype is None else self._full.astype(dtype)


def view_chunks(v: View, vectors: Sequence[ChunkVectors]) -> ChunkVectors:
    """The view's chunk vectors from each segment's (the generation's order), seen as its unrestricted caller
    sees them (the dead rows' chunks never scored; idf and the mean chunk length over the live notes): the
    segments' chunks laid end to end (a note's chunks stay together, in their order), their postings read
    from the segments' own arrays as a query asks (``RunArray``), nothing per posting copied."""
    combined = v.combined
    if len(vectors) != len(combined.row_map):
        raise IntegrityError(f"{len(vectors)} segments' chunk vectors for a view of {len(combined.row_map)}")
    sizes = [vec.n_chunks for vec in vectors]
    offsets = np.cumsum([0, *sizes]).astype(np.int64)
    ptrs, starts, rows = [], [], []
    for s, (vec, term_map, row_map) in enumerate(zip(vectors, combined.term_map, combined.row_map)):
        if vec.group_of_row.shape[0] != row_map.shape[0]:
            raise IntegrityError(
                f"segment {s}'s chunk vectors cover {vec.group_of_row.shape[0]} notes, not {row_map.shape[0]}"
            )
        ptr = np.asarray(vec.indptr, dtype=np.int64)
        n = term_map.shape[0]
        if ptr.shape[0] - 1 > n and ptr[-1] != ptr[n]:
            raise IntegrityError(f"segment {s}'s chunk vectors hold postings of a term its dictionary lacks")
        ptrs.append(np.concatenate((ptr[: n + 1], np.full(max(n + 1 - ptr.shape[0], 0), ptr[-1] if ptr.size else 0))))
        starts.append(np.asarray(vec.group_starts, dtype=np.int64) + offsets[s])
        local = np.asarray(vec.group_rows, dtype=np.int64)
        rows.append(np.where(local >= 0, row_map[np.maximum(local, 0)], -1))
    maps, n_terms = combined.term_map, int(combined.sparse.df.shape[0])
    counts = _scatter(n_terms, maps, [np.diff(p) for p in ptrs], v.base)
    identity = tuple(s == v.base for s in range(len(maps)))
    runs = Runs(np.concatenate(([0], np.cumsum(counts))).astype(np.int64), tuple(ptrs), tuple(maps), identity)
    group_starts, group_rows = (
        np.concatenate(starts or [np.zeros(0, np.int64)]),
        np.concatenate(rows or [np.zeros(0, np.int64)]),
    )
    group_of_row = np.full(combined.sparse.n_docs, -1, dtype=np.int64)
    known = group_rows >= 0
    group_of_row[group_rows[known]] = np.flatnonzero(known)
    lengths = np.concatenate([np.asarray(vec.lengths) for vec in vectors] or [np.zeros(0, np.int64)])
    count, total = class_chunks(combined.sparse, group_rows, group_starts, lengths)
    first = vectors[0]
    every = ChunkVectors(
        runs.indptr,
        RunArray(runs, [vec.chunks for vec in vectors], first.chunks.dtype, rows=offsets[:-1].tolist()),  # type: ignore[arg-type]
        RunArray(runs, [vec.tf for vec in vectors], first.tf.dtype),  # type: ignore[arg-type]
        lengths,
        group_starts,
        group_rows,
        np.concatenate([np.asarray(vec.chunk_ids) for vec in vectors] or [np.zeros(0, np.int64)]),
        group_of_row,
        count,
        total,
        **vector_statistics(combined.sparse, n_terms, lengths),
    )
    return restrict_chunks(every, v.live)
