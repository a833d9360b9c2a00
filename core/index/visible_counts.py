"""The notes, chunks and vectors a caller's classifications let it see in a generation (``status``), counted per
segment: each segment's count of every row it holds is kept by its SHA-256 (a segment is immutable), and the
rows it holds dead are counted again each time (a few index look-ups). At 100k notes in 8 segments, the joins
through the federated views took 2 s a ``status`` call; a new generation now costs its new segment's rows.

The condition must read a note's own row only (the visible classifications): a subquery would read the
generation's views, which the next generation changes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial

from core.index.tables.chunk_vectors import count_segment_vectors, count_visible_vectors
from core.index.tables.chunks import count_segment_chunks, count_visible_chunks
from core.index.tables.connection import segment_parts
from core.index.tables.notes import count_segment_notes, count_visible_notes

Counter = Callable[[sqlite3.Connection, str, str, Sequence[object], int | None], int]
COUNTERS: tuple[tuple[str, Counter, Callable[[sqlite3.Connection, str, Sequence[object]], int]], ...] = (
    ("notes", count_segment_notes, count_visible_notes),
    ("chunks", count_segment_chunks, count_visible_chunks),
    ("vectors", count_segment_vectors, count_visible_vectors),
)
_KEPT: OrderedDict[tuple[str, str, str, str], int] = OrderedDict()
_KEPT_SIZE = 256  # (segment, what, condition): a few visible sets of a few generations' segments
_LOCK = threading.Lock()


def segment_count(key: tuple[str, str, str, str], count: Callable[[], int]) -> int:
    """``count()``, kept by ``key`` (segment SHA-256, what is counted, condition, bound values): a segment is
    immutable, so a count over its own rows holds in every generation that lists it."""
    with _LOCK:
        found = _KEPT.get(key)
        if found is not None:
            _KEPT.move_to_end(key)
            return found
    found = count()
    with _LOCK:
        _KEPT[key] = found
        while len(_KEPT) > _KEPT_SIZE:
            _KEPT.popitem(last=False)
    return found


def visible_counts(conn: sqlite3.Connection, clause: str, values: Sequence[object]) -> tuple[int, int, int]:
    """(notes, chunks, vectors) of the live notes the condition (over ``notes n``) allows."""
    parts = segment_parts(conn)
    if parts is None:
        notes, chunks, vectors = (whole(conn, clause, values) for _, _, whole in COUNTERS)
        return notes, chunks, vectors
    bound = json.dumps(list(values), default=str)
    totals = []
    for what, count, _ in COUNTERS:
        total = 0
        for pos, (schema, sha) in enumerate(parts):
            total += segment_count((sha, what, clause, bound), partial(count, conn, schema, clause, values, None))
            total -= count(conn, schema, clause, values, pos)
        totals.append(total)
    return totals[0], totals[1], totals[2]
