"""Reading a generation of several segments through ONE SQLite connection (issue 29, step 2a).

The first (oldest) segment is the connection's ``main`` database, opened pinned; every other segment is
ATTACHed as ``s1`` .. ``s10`` through its own pinned descriptor (read-only, ``immutable=1``, checked by
device and inode: ``core.index.pinned.attach_pinned``). SQLite 3.40 allows 10 attached databases, so a
generation has at most ``MAX_SEGMENTS`` = 11 segments.

Each tombstone part (a small SQLite file: ``dead(note_id)``, and the deleted notes' per-class statistics
for the ranking arrays) is read through its pinned descriptor (once per process: its ids are keyed by its SHA-256); its note ids, and the ids of those
notes' chunks, go into ``temp.vs_dead`` / ``temp.vs_dead_chunks`` with the segment's position: dead sets are
PER SEGMENT, since an edited note keeps its id (dead in its older segment, live in a newer one; at most one
live row per id, checked for the dead ids). Then a TEMP VIEW named like every
per-note table (``core.index.tables.segments.PER_NOTE_TABLES``, where all this SQL lives) unions that table over the segments, each without its own dead rows
(an edge's destination is dropped only when no segment holds it live, ``temp.vs_gone``):
SQLite resolves an unqualified name in ``temp`` first, so the read path's SQL runs unchanged (``links``
and ``edges``, whose rowids the read path uses, get a ``rowid`` column unique across segments). The
generation-level tables (``GENERATION_TABLES``: meta, settings, skipped files, build problems, git dates)
are carried by the NEWEST segment and viewed from it. ``temp.vs_segments`` lists the schemas in manifest
order: FTS5 ``MATCH`` cannot run through a view, so ``core.index.tables.notes_fts`` matches per schema and
drops the rowids dead in that schema; counts (``count_notes``, ``count_chunks``, ``count_vectors``) are taken per segment
minus the dead rows it holds, not through the views. Read path: stdlib, the error types and ``core.index`` only.
"""

from __future__ import annotations

import sqlite3
import threading

from core.errors import BuildError
from core.index import pinned
from core.index.layout import ResolvedIndex, ResolvedPart
from core.index.tables.segments import dead_note_ids, federate


def schema_names(count: int) -> list[str]:
    """The schema of each segment on a generation connection, manifest order."""
    return ["main"] + [f"s{i}" for i in range(1, count)]


# tombstone SHA-256 -> the note ids it lists: a part is named by the hash of its bytes and read only after
# it was verified, so its ids never change; a connect then reads no tombstone again (11 of them: 12 ms).
_DEAD: dict[str, tuple[int, ...]] = {}
_DEAD_LOCK = threading.Lock()
DEAD_CACHE_MAX = 256


def forget_tombstones() -> None:
    """Drop the tombstones' ids read so far (``core.index.verify.clear_verify_cache``: tests, benchmarks)."""
    with _DEAD_LOCK:
        _DEAD.clear()


def dead_ids_of(part: ResolvedPart, generation_id: str | None) -> tuple[int, ...]:
    """The note ids a verified, pinned tombstone part lists (its ``dead`` table)."""
    with _DEAD_LOCK:
        found = _DEAD.get(part.sha256)
    if found is not None:
        return found
    conn = pinned.connect_pinned(part.pinned, generation_id)
    try:
        ids = tuple(dead_note_ids(conn))
    finally:
        conn.close()
    with _DEAD_LOCK:
        while len(_DEAD) >= DEAD_CACHE_MAX:
            _DEAD.pop(next(iter(_DEAD)))
        _DEAD[part.sha256] = ids
    return ids


def connect_segments(resolved: ResolvedIndex, *, any_thread: bool = False) -> sqlite3.Connection:
    """A connection serving every segment of ``resolved`` with its tombstones applied (see module doc)."""
    segments = [p for p in resolved.parts if p.kind == "segment"]
    if not segments or any(p.pinned is None for p in resolved.parts):
        raise BuildError("a generation is served only through resolve() or publish() (no verified descriptor)")
    gid = resolved.generation_id
    dead = {p.segment: dead_ids_of(p, gid) for p in resolved.parts if p.kind == "tombstone"}
    conn = pinned.connect_pinned(segments[0].pinned, gid, any_thread=any_thread)
    try:
        schemas = schema_names(len(segments))
        pinned.attach_pinned(conn, [(p.pinned, s) for p, s in zip(segments[1:], schemas[1:], strict=True)], gid)
        federate(conn, schemas, [s.sha256 for s in segments], [list(dead.get(s.sha256, ())) for s in segments])
    except BaseException:
        conn.close()
        raise
    return conn
