"""The ranking arrays of a generation of several segments (issue 29, storage step 2b): each segment's
SparseIndex and ChunkVectors loaded once and cached per segment SHA-256 (a reader switching to a
generation that adds one small segment loads only that one), then combined with the tombstones' dead rows
left out (core.ranking.segments, core.ranking.segment_chunks). A generation that lists the previous one's
segments first, with tombstones that only grew (what publishing an edit gives), is derived from the
previous generation's combined arrays, chunk vectors and query vocabulary instead (core.ranking.segment_delta:
the switch costs what changed plus a copy, not a recombination of every segment). ``generation_sparse`` is the
one function the modes' context (core.modes.context) and a multi-segment connection call with the
(segment, tombstone) list of a resolved generation; one segment without a tombstone is today's path.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.errors import IntegrityError
from core.index import pinned
from core.index.layout import ResolvedIndex, ResolvedPart
from core.index.tables.notes import note_ids_by_path
from core.index.tables.segments import DeadStatistics, dead_statistics
from core.ranking import segments
from core.ranking.chunk_vectors import ChunkVectors, load_chunk_vectors
from core.ranking.segment_chunks import combine_chunks, extend_chunks
from core.ranking.segment_delta import Delta, Grown, extend
from core.ranking.sparse import GenerationCache, SparseIndex, load_sparse
from core.ranking.vocabulary import derive


@dataclass(frozen=True)
class SegmentSource:
    """One verified segment of a resolved generation and its tombstone (the note ids it marks dead)."""

    sha256: str
    connect: Callable[[], sqlite3.Connection]  # a read-only connection to the verified segment
    dead: tuple[int, ...] = ()
    stored: Callable[[], DeadStatistics | None] | None = None  # its tombstone's stored statistics


class SegmentCache:
    """A segment's loaded arrays by its SHA-256 (immutable: the same bytes, the same arrays), the most
    recently used ``size`` kept (a generation's segments, and the previous generation's while it switches)."""

    def __init__(self, size: int = 64) -> None:
        self.size, self.loads = size, 0
        self._lock = threading.Lock()
        self._items: dict[tuple[str, str], object] = {}

    def get(self, key: tuple[str, str], loader: Callable[[], object]) -> object:
        with self._lock:
            found = self._items.pop(key, None)
        if found is None:  # loaded outside the lock (a request thread may load another segment meanwhile)
            found = loader()
            with self._lock:
                self.loads += 1
        with self._lock:
            self._items[key] = found  # most recent last
            while len(self._items) > self.size:
                del self._items[next(iter(self._items))]
        return found

    def peek(self, key: tuple[str, str]) -> object | None:
        """The item of ``key`` if it is kept (never loaded here)."""
        with self._lock:
            return self._items.get(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


@dataclass
class Generation:
    """A generation's combined index (core.ranking.segments), what it was combined from, and its chunk vectors
    once the vector mode asked for them (``base``: the previous generation's and the way there, until then)."""

    parts: tuple[tuple[str, frozenset[int]], ...]  # (segment SHA-256, its dead note ids), manifest order
    combined: segments.Combined
    tombs: tuple[segments.Tombstone | None, ...]  # per segment: the tombstone its statistics were checked with
    base: tuple[ChunkVectors, Delta] | None = None
    chunks: ChunkVectors | None = None
    default_mask: np.ndarray | None = None  # the default filters' mask over its rows, once a search asked
    # (the previous generation's default mask, previous row -> new row, the added segments' rows): what the
    # default mask is derived from (``generation_default_mask``) until it is
    mask_base: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class CombinedCache(GenerationCache):
    """GenerationCache of a Generation per index dir, which also hands out the one it holds for a dir
    (``previous``: what the next generation of that dir is derived from, core.ranking.segment_delta);
    ``extended`` counts the generations derived so."""

    def __init__(self) -> None:
        super().__init__()
        self.extended = 0

    def previous(self, owner: str) -> Generation | None:
        with self._lock:
            found = self._entries.get(owner)
        return None if found is None else found[1]


SEGMENT_CACHE = SegmentCache()
COMBINED_CACHE = CombinedCache()  # a generation's combined index (core.ranking.segments)


def _segment(source: SegmentSource) -> segments.Segment:
    def load() -> segments.Segment:
        conn = source.connect()
        try:
            sparse = load_sparse(conn)  # whole arrays: the combination reads every posting
            by_id = {i: p for p, i in note_ids_by_path(conn).items()}
            return segments.Segment(source.sha256, sparse, [by_id[int(i)] for i in sparse.note_ids])
        finally:
            conn.close()

    found = SEGMENT_CACHE.get(("sparse", source.sha256), load)
    assert isinstance(found, segments.Segment)
    return found


def _stored_tombstone(segment: segments.Segment, rows: np.ndarray, stored: DeadStatistics) -> segments.Tombstone:
    """The Tombstone of the stored statistics (``core.index.tables.segments.create_tombstone``), their notes
    and field lengths checked against the dead rows (O(dead)); their df is checked by the combination
    (``core.ranking.segments``: per class, the sums against the counted live postings)."""
    sparse, key = segment.sparse, segment.key[:12]
    if sparse.classes is None:
        raise IntegrityError(f"segment {key} holds no per-classification statistics")
    names = sparse.classes.names
    code = {n: c for c, n in enumerate(names)}
    classes, df_rows = stored
    docs = np.zeros(len(names), dtype=np.int64)
    field_len = np.zeros((len(names), sparse.field_len.shape[1]), dtype=np.int64)
    df = np.zeros((len(names), sparse.df.shape[0]), dtype=np.int64)
    try:
        for name, n, lengths in classes:
            docs[code[name]], field_len[code[name]] = n, json.loads(lengths)
        for name, term, n in df_rows:
            df[code[name], term] = n
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise IntegrityError(f"the tombstone of segment {key} does not fit its classes and terms: {exc!r}") from exc
    cls = sparse.classes.row_class[rows].astype(np.intp)
    counted = np.zeros_like(field_len)
    np.add.at(counted, cls, sparse.field_len[rows].astype(np.int64))
    if not np.array_equal(docs, np.bincount(cls, minlength=len(names))) or not np.array_equal(field_len, counted):
        raise IntegrityError(f"the tombstone of segment {key} does not match its dead notes' classes and lengths")
    return segments.Tombstone(np.sort(rows), docs, field_len, df)


def tombstone_of(
    segment: segments.Segment, dead: Sequence[int], stored: DeadStatistics | None = None
) -> segments.Tombstone | None:
    """The tombstone of ``segment`` for its dead note ids: its ``stored`` statistics (checked), or, for a
    tombstone written before they were stored (None), counted from the segment's own arrays; None when no
    note of it is dead."""
    if not dead:
        return None
    rows = segment.sparse.positions(np.asarray(dead, dtype=np.int64))
    if (rows < 0).any():
        missing = [int(i) for i, r in zip(dead, rows.tolist()) if r < 0][:5]
        raise IntegrityError(f"a tombstone of segment {segment.key[:12]} names notes it does not hold: {missing}")
    if stored is None:
        return segments.tombstone(segment.sparse, rows)
    return _stored_tombstone(segment, np.asarray(rows, dtype=np.int64), stored)


def _single(sources: Sequence[SegmentSource]) -> bool:
    return len(sources) <= 1 and not any(s.dead for s in sources)


def segment_sources(resolved: ResolvedIndex) -> list[SegmentSource]:
    """The (segment, tombstone) list of a resolved generation, manifest order: each segment part with the
    note ids its tombstone part lists (a ``dead(note_id)`` table, core.build.segment_writer)."""
    from core.index.segmented import dead_ids_of  # a tombstone's ids, read once per part (its SQL: tables)

    stones = {p.segment or "": p for p in resolved.parts if p.kind == "tombstone"}  # format 2: names its segment
    dead = {sha: dead_ids_of(part, resolved.generation_id) for sha, part in stones.items()}

    def opener(part: ResolvedPart) -> Callable[[], sqlite3.Connection]:
        return lambda: pinned.connect_pinned(part.pinned, resolved.generation_id)

    def statistics(part: ResolvedPart) -> Callable[[], DeadStatistics | None]:
        def read() -> DeadStatistics | None:
            conn = opener(part)()
            try:
                return dead_statistics(conn)
            finally:
                conn.close()

        return read

    segs = [p for p in resolved.parts if p.kind == "segment"]
    return [
        SegmentSource(
            p.sha256, opener(p), dead.get(p.sha256, ()), statistics(stones[p.sha256]) if p.sha256 in stones else None
        )
        for p in segs
    ]


def generation_sparse(
    sources: Sequence[SegmentSource], owner: str, key: tuple, today: Callable[[], SparseIndex]
) -> SparseIndex:
    """The SparseIndex the modes rank the generation ``key`` (of the index dir ``owner``) with: ``today()``
    (the single segment's stored arrays, read a piece at a time) for one segment without a tombstone, else
    the segments' combined index (cached per generation; each segment's arrays per SHA-256)."""
    if _single(sources):
        return today()
    return _generation(sources, owner, key).combined.sparse


def _generation(sources: Sequence[SegmentSource], owner: str, key: tuple) -> Generation:
    return COMBINED_CACHE.get(owner, key, lambda: _combine(sources, COMBINED_CACHE.previous(owner)))


def _tombstone(source: SegmentSource, seg: segments.Segment) -> segments.Tombstone | None:
    return tombstone_of(seg, source.dead, None if source.stored is None or not source.dead else source.stored())


def _combine(sources: Sequence[SegmentSource], previous: Generation | None) -> Generation:
    """The generation of ``sources``: derived from ``previous`` when it lists the segments it keeps of them
    first with tombstones that only grew (a publish adding segments and tombstones, dropping or merging
    others: ``kept_segments``, core.ranking.segment_delta), else combined from every segment (the first
    generation of several segments, or one whose segments come in another order)."""
    parts = tuple((s.sha256, frozenset(s.dead)) for s in sources)
    kept = None if previous is None else kept_segments(previous.parts, parts)
    if previous is not None and kept is not None:
        gone = [SEGMENT_CACHE.peek(("sparse", sha)) for i, (sha, _) in enumerate(previous.parts) if i not in kept]
        arrays = [seg for seg in gone if isinstance(seg, segments.Segment)]
        if len(arrays) == len(gone):  # the dropped segments' arrays are still kept
            return _extend(sources, previous, parts, kept, arrays)
    segs = [_segment(s) for s in sources]
    tombs = tuple(_tombstone(s, seg) for s, seg in zip(sources, segs))
    return Generation(parts, segments.combine(list(zip(segs, tombs))), tombs)


def extends(before: Sequence[tuple[str, frozenset[int]]], after: Sequence[tuple[str, frozenset[int]]]) -> bool:
    """Is the generation ``after`` derived from ``before`` (``kept_segments``) rather than combined again?"""
    return kept_segments(before, after) is not None


def kept_segments(
    before: Sequence[tuple[str, frozenset[int]]], after: Sequence[tuple[str, frozenset[int]]]
) -> list[int] | None:
    """The indexes of ``before``'s segments ``after`` keeps, when it lists them first, in the same order, with
    dead sets that only grew, and then only new segments: the others were dropped (every note of theirs dead)
    or merged away (a build's segment-limit merge of the newest segments writes their live notes into a
    segment after the kept ones). None when ``after`` is not derived so (none kept, another order, a dead
    note alive again, a new segment before a kept one: combined from its segments)."""
    listed = {sha for sha, _ in after}
    kept = [i for i, (sha, _) in enumerate(before) if sha in listed]
    same = all(after[j][0] == before[i][0] and before[i][1] <= after[j][1] for j, i in enumerate(kept))
    return kept if kept and same else None


def _dropped(previous: Generation, i: int, seg: segments.Segment) -> Grown:
    """A previous segment the new generation dropped (``seg``: its arrays): every row of it the previous
    generation served is dead now, with those rows' statistics counted from its arrays (such a segment is
    small: a merge takes the smallest or the newest, an edit's segment whose notes were all edited again holds a few)."""
    live = np.flatnonzero(previous.combined.row_map[i] >= 0)
    tomb = segments.tombstone(seg.sparse, live)  # IntegrityError: no per-classification statistics
    assert seg.sparse.classes is not None  # segments.tombstone checked
    return Grown(previous.combined.row_map[i][live], seg.sparse.classes.names, tomb)


def _extend(
    sources: Sequence[SegmentSource], previous: Generation, parts: tuple, kept: list[int], gone: list[segments.Segment]
) -> Generation:
    grown, tombs = {}, [previous.tombs[i] for i in kept]
    for j, i in enumerate(kept):
        if parts[j][1] == previous.parts[i][1]:
            continue
        source = sources[j]
        seg = _segment(source)
        tomb, old = _tombstone(source, seg), previous.tombs[i]
        assert tomb is not None and seg.sparse.classes is not None  # dead ids were added; tombstone_of checked
        if old is None:
            fresh, expected = tomb.rows, tomb
        else:
            fresh = np.setdiff1d(tomb.rows, old.rows)
            expected = segments.Tombstone(fresh, tomb.docs - old.docs, tomb.field_len - old.field_len, tomb.df - old.df)
        grown[i] = Grown(previous.combined.row_map[i][fresh], seg.sparse.classes.names, expected)
        tombs[j] = tomb
    for i, seg in zip([i for i in range(len(previous.parts)) if i not in kept], gone, strict=True):
        grown[i] = _dropped(previous, i, seg)
    added = [(seg, _tombstone(s, seg)) for s, seg in ((s, _segment(s)) for s in sources[len(kept) :])]
    combined, delta = extend(previous.combined, grown, added, kept)
    derive(previous.combined.sparse, combined.sparse, delta.terms, delta.fresh)  # when a query built the previous one
    with COMBINED_CACHE._lock:
        COMBINED_CACHE.extended += 1
    base = (previous.chunks, delta) if previous.chunks is not None else None
    mask = previous.default_mask
    mask_base = None if mask is None else (mask, delta.rows, np.flatnonzero(combined.segment >= delta.first_added))
    return Generation(parts, combined, (*tombs, *(t for _, t in added)), base, mask_base=mask_base)


def generation_chunks(
    sources: Sequence[SegmentSource], owner: str, key: tuple, today: Callable[[], ChunkVectors]
) -> ChunkVectors:
    """The chunk vectors of ``generation_sparse``'s index: ``today()`` for one segment without a tombstone,
    else each segment's (cached by SHA-256) combined, or the previous generation's extended by the added
    segments' (``extend_chunks``), once per generation (kept with its combined index)."""
    if _single(sources):
        return today()
    generation = _generation(sources, owner, key)

    def chunks_of(source: SegmentSource) -> ChunkVectors:
        def load() -> ChunkVectors:
            conn = source.connect()
            try:
                return load_chunk_vectors(conn, _segment(source).sparse)
            finally:
                conn.close()

        found = SEGMENT_CACHE.get(("chunks", source.sha256), load)
        assert isinstance(found, ChunkVectors)
        return found

    with generation.lock:  # computed once per generation, whoever asks first
        if generation.chunks is None:
            if generation.base is not None:
                prev, delta = generation.base
                added = [chunks_of(s) for s in sources[delta.first_added :]]
                generation.chunks = extend_chunks(prev, delta, generation.combined, added)
            else:
                generation.chunks = combine_chunks(generation.combined, [chunks_of(s) for s in sources])
            generation.base = None
        return generation.chunks


def generation_default_mask(
    sources: Sequence[SegmentSource],
    owner: str,
    key: tuple,
    allowed: Callable[[np.ndarray | None], np.ndarray],
    targets: Callable[[], np.ndarray],
) -> np.ndarray | None:
    """The default filters' mask (``Filters()``: what ``default_filter_mask`` stores for one segment) over the
    rows of ``generation_sparse``'s combined index; None for one segment without a tombstone (its stored mask
    serves). ``allowed(ids)``: the ids of ``ids`` (None: of every note) the default filters let through (SQL);
    ``targets()``: the ids of the notes a ``supersedes`` edge names. Computed once per generation: over every
    note for the first, else derived from the previous generation's (``_derived_mask``)."""
    if _single(sources):
        return None
    generation = _generation(sources, owner, key)
    with generation.lock:
        if generation.default_mask is None:
            sparse = generation.combined.sparse
            if generation.mask_base is None:
                generation.default_mask = np.isin(sparse.note_ids, allowed(None))
            else:
                generation.default_mask = _derived_mask(sparse, generation.mask_base, allowed, targets)
            generation.mask_base = None
        return generation.default_mask


def _derived_mask(
    sparse: SparseIndex,
    base: tuple[np.ndarray, np.ndarray, np.ndarray],
    allowed: Callable[[np.ndarray | None], np.ndarray],
    targets: Callable[[], np.ndarray],
) -> np.ndarray:
    """The default mask of a derived generation from the previous one's: a kept row's own columns (its
    frontmatter's ``superseded_by``, ``status``) are those of the same stored row, so only three kinds of row
    can differ from the previous mask and are asked again: the added segments' rows, the rows the previous
    mask left out (a ``supersedes`` edge to them may be gone) and the notes a ``supersedes`` edge names now."""
    prev, row_map, added = base
    kept = row_map >= 0
    mask = np.ones(sparse.n_docs, dtype=bool)
    mask[row_map[kept]] = prev[kept]
    named = sparse.positions(np.asarray(targets(), dtype=np.int64))
    ask = np.unique(np.concatenate((added, row_map[kept & ~prev], named[named >= 0])))
    ids = np.asarray(sparse.note_ids, dtype=np.int64)[ask]
    mask[ask] = np.isin(ids, allowed(ids))
    return mask
