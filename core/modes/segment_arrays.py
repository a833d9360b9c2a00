"""The ranking arrays of a generation of several segments (issue 29): each segment's SparseIndex and
ChunkVectors loaded once and cached per segment SHA-256, its postings read a piece at a time (a reader
switching to a generation that adds one small segment loads only that one), and a view over them with the
tombstones' rows hidden (core.ranking.segment_view: per note and per term, never per posting), so a new
process's first search reads what its query needs, as on one segment. ``generation_sparse`` is the one
function the modes' context (core.modes.context) and a multi-segment connection call with the (segment,
tombstone) list of a resolved generation; one segment without a tombstone is today's path.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.errors import IntegrityError
from core.index import pinned
from core.index.layout import ResolvedIndex, ResolvedPart
from core.index.tables.notes import note_ids_by_path, rel_path_of
from core.index.tables.segments import DeadStatistics, dead_statistics
from core.ranking import segment_view, segments, stored
from core.ranking.chunk_vectors import ChunkVectors, load_chunk_vectors
from core.ranking.sparse import GenerationCache, SparseIndex, load_sparse


@dataclass(frozen=True)
class SegmentSource:
    """One verified segment of a resolved generation and its tombstone (the note ids it marks dead)."""

    sha256: str
    connect: Callable[[], sqlite3.Connection]  # a read-only connection to the verified segment
    dead: tuple[int, ...] = ()
    stored: Callable[[], DeadStatistics | None] | None = None  # its tombstone's stored statistics
    # a connection usable from any thread that stays open with the arrays (their pieces read as queries
    # need them, core.ranking.stored); None: the arrays are read whole
    shared: Callable[[], sqlite3.Connection] | None = None
    size: int = 0  # the segment file's bytes: a small one is read whole (no connection kept open for it)


# A segment file of at most this many bytes is read whole and its connection closed: an edit's delta segment
# holds a few notes, and a connection kept open per small segment costs a new process more than its pieces.
WHOLE_SEGMENT_BYTES = 2 * 1024 * 1024


class StoredPaths(Sequence[str]):
    """A large segment's row -> path, read from the segment as asked (one look-up by note id each, kept) or
    all at once when iterated: the view of a generation whose other segments hold a few notes orders their
    rows among this one's by bisection (core.ranking.segment_view), where reading 100,000 paths cost a new
    process 0.07-0.09 s."""

    lazy = True

    def __init__(self, reader: stored.Reader, note_ids: np.ndarray) -> None:
        self._reader, self._ids = reader, note_ids
        self._known: dict[int, str] = {}
        self._all: list[str] | None = None

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    def __getitem__(self, row: int) -> str:  # type: ignore[override]
        if self._all is not None:
            return self._all[row]
        found = self._known.get(row)
        if found is None:
            found = self._reader.call(rel_path_of, int(self._ids[row]))
            if found is None:
                raise IntegrityError(f"a segment's row {row} names note {int(self._ids[row])}, which it lacks")
            self._known[row] = found
        return found

    def __iter__(self) -> Iterator[str]:
        if self._all is None:
            by_id = {i: p for p, i in self._reader.call(note_ids_by_path).items()}
            self._all = [by_id[int(i)] for i in self._ids]
        return iter(self._all)


def _open(source: SegmentSource) -> tuple[sqlite3.Connection, stored.Reader | None]:
    """A connection to read ``source``'s arrays with, and the reader its pieces are read through later (None:
    read whole, the connection closed by the caller): one connection either way."""
    if source.shared is None or source.size <= WHOLE_SEGMENT_BYTES:
        return source.connect(), None
    conn = source.shared()
    return conn, stored.Reader(conn)  # it stays open with the arrays (closed with the last one using it)


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
    """A generation's view of its segments (core.ranking.segment_view), what it was built from, and its chunk
    vectors and default filters' mask once a query asked for them."""

    parts: tuple[tuple[str, frozenset[int]], ...]  # (segment SHA-256, its dead note ids), manifest order
    view: segment_view.View
    chunks: ChunkVectors | None = None
    default_mask: np.ndarray | None = None  # the default filters' mask over its rows, once a search asked
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


SEGMENT_CACHE = SegmentCache()
COMBINED_CACHE = GenerationCache()  # a generation's view of its segments (core.ranking.segment_view)


def _segment(source: SegmentSource) -> segments.Segment:
    def load() -> segments.Segment:
        conn, reader = _open(source)
        try:
            sparse = load_sparse(conn, reader=reader)
            if reader is not None:  # a large segment: its paths read as the view asks (a few, by bisection)
                return segments.Segment(source.sha256, sparse, StoredPaths(reader, np.asarray(sparse.note_ids)))
            by_id = {i: p for p, i in note_ids_by_path(conn).items()}
            return segments.Segment(source.sha256, sparse, [by_id[int(i)] for i in sparse.note_ids])
        finally:
            if reader is None:
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

    def opener(part: ResolvedPart, any_thread: bool = False) -> Callable[[], sqlite3.Connection]:
        return lambda: pinned.connect_pinned(part.pinned, resolved.generation_id, any_thread=any_thread)

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
            p.sha256,
            opener(p),
            dead.get(p.sha256, ()),
            statistics(stones[p.sha256]) if p.sha256 in stones else None,
            opener(p, any_thread=True),
            p.size,
        )
        for p in segs
    ]


def generation_sparse(
    sources: Sequence[SegmentSource], owner: str, key: tuple, today: Callable[[], SparseIndex]
) -> SparseIndex:
    """The SparseIndex the modes rank the generation ``key`` (of the index dir ``owner``) with: ``today()``
    (the single segment's stored arrays, read a piece at a time) for one segment without a tombstone, else
    the view of its segments (cached per generation; each segment's arrays per SHA-256): the unrestricted
    caller's, every class but the dead rows'."""
    if _single(sources):
        return today()
    return _generation(sources, owner, key).view.live


def _generation(sources: Sequence[SegmentSource], owner: str, key: tuple) -> Generation:
    return COMBINED_CACHE.get(owner, key, lambda: _view(sources))


def _tombstone(source: SegmentSource, seg: segments.Segment) -> segments.Tombstone | None:
    return tombstone_of(seg, source.dead, None if source.stored is None or not source.dead else source.stored())


def _view(sources: Sequence[SegmentSource]) -> Generation:
    """The generation of ``sources``: a view of its segments (each one's arrays loaded once per SHA-256, so
    a reader switching to a generation that adds a segment loads that one only) with its tombstones' rows
    hidden. Nothing per posting is built: a query reads its terms' postings from the segments."""
    parts = tuple((s.sha256, frozenset(s.dead)) for s in sources)
    segs = [_segment(s) for s in sources]
    tombs = [_tombstone(s, seg) for s, seg in zip(sources, segs)]
    return Generation(parts, segment_view.view(list(zip(segs, tombs))))


def generation_chunks(
    sources: Sequence[SegmentSource], owner: str, key: tuple, today: Callable[[], ChunkVectors]
) -> ChunkVectors:
    """The chunk vectors of ``generation_sparse``'s index: ``today()`` for one segment without a tombstone,
    else each segment's (cached by SHA-256) combined over the view's rows, seen as its unrestricted caller
    sees them (the dead rows' chunks never scored, statistics over the live notes), once per generation."""
    if _single(sources):
        return today()
    generation = _generation(sources, owner, key)

    def chunks_of(source: SegmentSource) -> ChunkVectors:
        def load() -> ChunkVectors:
            conn, reader = _open(source)
            try:  # the postings read a piece at a time, as the segment's sparse arrays are
                return load_chunk_vectors(conn, _segment(source).sparse, reader=reader)
            finally:
                if reader is None:
                    conn.close()

        found = SEGMENT_CACHE.get(("chunks", source.sha256), load)
        assert isinstance(found, ChunkVectors)
        return found

    with generation.lock:  # computed once per generation, whoever asks first
        if generation.chunks is None:
            generation.chunks = segment_view.view_chunks(generation.view, [chunks_of(s) for s in sources])
        return generation.chunks


def generation_default_mask(
    sources: Sequence[SegmentSource], owner: str, key: tuple, refused: Callable[[], np.ndarray]
) -> np.ndarray | None:
    """The default filters' mask (``Filters()``: what ``default_filter_mask`` stores for one segment) over the
    rows of ``generation_sparse``'s view; None for one segment without a tombstone (its stored mask serves).
    ``refused()``: the ids of the live notes the default filters leave out (SQL: a few, the superseded), so
    the mask is every live row but theirs (a dead row's id is negative: no note's). Once per generation."""
    if _single(sources):
        return None
    generation = _generation(sources, owner, key)
    with generation.lock:
        if generation.default_mask is None:
            ids = generation.view.live.note_ids
            generation.default_mask = (ids >= 0) & ~np.isin(ids, refused())
        return generation.default_mask
