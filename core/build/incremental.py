"""The incremental segment writer on the edit path (issue 29, storage step 3).

A build on a generation (one segment or several) still applies its plan to a scratch working database
(``scratch_base``: a byte copy of a one-segment base, or the live rows of every segment written as one,
without ranking arrays and with FTS5 rows only for the notes the build deletes) so that planning, link
resolution and validation run unchanged; no whole-generation array is computed (the builder decides
the refusal first), and the build's working term vectors (TEMP tables, core.build.forward_rows) hold
only the notes it writes: a scratch stores none, a segment stores its postings once. What it PUBLISHES
is only the delta (``delta_parts``, its segment's vectors the build's working rows):

- one new segment with the changed notes (re-inserted with their OLD note ids: an edge into one does not
  change) and the new ones (ids from the base manifest's ``next_note_id`` / ``next_chunk_id``,
  ``first_ids``; every chunk id new), carrying the generation-level tables (meta, skipped files, problems);
- per base segment that lost notes, a tombstone listing ALL its dead ids (its previous tombstone's too): an
  edited note's id is then dead in its old segment and live in the new one (``core.index.segmented``);
- the unchanged segments and tombstones listed again by hash (shared, not copied).

The delta is not taken (``None``, with the reason; the builder then publishes the whole scratch as ONE
segment, after ``complete_scratch`` gives it every note's vectors (the others' derived from the base
segments' arrays), and the report's ``rebuild_reason`` says why) when a carried-over note's rows changed too:
its resolved edges (``edge_changes``: a content-only edit changes none, since the note keeps its id; an add,
delete, rename or aliases change can re-resolve other notes' links) or its mtime (``plan.touched``).
A delta that would pass ``MAX_SEGMENTS`` segments merges the smallest base segments into one
(``core.build.merge_write.fit_segment_limit``; the report's ``segment_limit_merge`` says which).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.build.forward_rows import Forward, complete_working, working_forward
from core.build.lock import new_staging_path
from core.build.merge_write import fit_segment_limit
from core.build.plan import BuildPlan
from core.build.publish_segments import PlannedPart
from core.build.segment_writer import SegmentSource, write_segment, write_tombstone_counted
from core.errors import ValidationError
from core.index.layout import IndexLayout, ResolvedIndex, ResolvedPart
from core.index.tables import segments as seg
from core.index.tables.checks import inconsistencies
from core.index.tables.connection import atomic
from core.index.verify import connect_readonly, copy_base

LINKS_CHANGED = "incremental_links_changed"
TOUCHED = "incremental_touched_notes"
SEGMENT_LIMIT = "incremental_segment_limit"
PART_REPLACED = "incremental_part_replaced"


@dataclass(frozen=True)
class Delta:
    """What an incremental build publishes: every segment and tombstone of the new generation."""

    segments: list[PlannedPart]
    tombstones: list[PlannedPart]
    next_ids: tuple[int, int]
    merged: str | None = None  # the smallest segments merged to stay within MAX_SEGMENTS (SEGMENT_LIMIT)
    # per new tombstone: how its statistics were counted (core.build.tomb_stats: "verified", or why from the
    # segment's whole arrays)
    tombstone_counts: tuple[str, ...] = ()
    tombstone_whole: int = 0  # dead notes whose statistics were counted from their segment's whole arrays


def tombstone_extra(delta: Delta) -> dict[str, int]:
    """The build report's count of dead notes a tombstone counted from its segment's whole arrays (not
    O(dead note): core.build.tomb_stats), when there are any."""
    return {"tombstone_whole_notes": delta.tombstone_whole} if delta.tombstone_whole else {}


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _segments(base: ResolvedIndex) -> list[ResolvedPart]:
    return [p for p in base.parts if p.kind == "segment"]


def _dead_of(base: ResolvedIndex) -> dict[str, list[int]]:
    """Segment SHA-256 -> the note ids its tombstone lists."""
    out: dict[str, list[int]] = {}
    for part in base.parts:
        if part.kind == "tombstone" and part.segment is not None:
            conn = _ro(part.path)
            try:
                out[part.segment] = seg.dead_note_ids(conn)
            finally:
                conn.close()
    return out


def _tombstone_paths(base: ResolvedIndex) -> dict[str, Path]:
    """Segment SHA-256 -> the path of its tombstone in ``base`` (what a new one for it builds on)."""
    return {p.segment: p.path for p in base.parts if p.kind == "tombstone" and p.segment is not None}


def _note_ids(path: Path) -> list[int]:
    conn = _ro(path)
    try:
        return seg.segment_note_ids(conn)
    finally:
        conn.close()


def _manifest(base: ResolvedIndex) -> dict:
    doc: dict = json.loads(base.path.read_bytes())
    return doc


def first_ids(base: ResolvedIndex) -> tuple[int, int]:
    """(next note id, next chunk id) above every id of the base's segments, dead ones included."""
    doc = _manifest(base)
    if "next_note_id" in doc:
        return int(doc["next_note_id"]), int(doc["next_chunk_id"])
    conn = _ro(_segments(base)[0].path)
    try:
        return seg.next_ids(conn)
    finally:
        conn.close()


def unmatched_edges(conn: sqlite3.Connection) -> int:
    """How many live links have no edge on a generation connection (0 for every generation a build
    published; the split path leaves out edges to dead notes): such a base is rebuilt whole."""
    links, edges = seg.live_links_and_edges(conn)
    return links - edges


def scratch_base(base: ResolvedIndex, dest: Path, tokenizer: str, *, gone: Collection[int] | None = None) -> bool:
    """The working database of a build on ``base``: a verified copy of its one segment, or every segment's
    live notes written as one. ``gone`` (a build's changed and removed note ids: it publishes a delta unless
    refused, and the delta's segment gets its own arrays and FTS5 rows): that one written without ranking
    arrays or term vectors and with FTS5 rows only for those notes (what the build's deletes need). Returns
    whether the database is complete; the build's own is published only after ``complete_scratch``."""
    if len(base.parts) == 1:
        copy_base(base, dest)
        return True
    dead = _dead_of(base)
    segments = _segments(base)
    sources = []
    for part in segments:
        dropped = set(dead.get(part.sha256, ()))
        sources.append(SegmentSource(part.path, [i for i in _note_ids(part.path) if i not in dropped]))
    write_segment(
        dest, sources, tokenizer=tokenizer, generation_from=segments[-1].path, arrays=gone is None, texts=gone
    )
    return gone is None


def complete_scratch(conn: sqlite3.Connection, base: ResolvedIndex, *, texts: bool) -> None:
    """What a staged working database lacks to be published whole (its arrays: then
    ``core.build.staged.whole_database``): every note's term vectors (the build wrote those of its own
    notes only; the others' from the base segments' arrays) and, ``texts`` (``scratch_base`` left them
    incomplete), every note's FTS5 rows."""
    built = {nid for nid, _, _ in working_forward(conn).notes}
    wanted = set(seg.segment_note_ids(conn)) - built
    with atomic(conn):
        if len(base.parts) == 1:  # the scratch is the base's byte copy: its arrays are the base's
            complete_working(conn, [(conn, wanted)])
        else:
            _complete_from_segments(conn, base, wanted)
        if texts:
            seg.reindex_stored_texts(conn)


def _complete_from_segments(conn: sqlite3.Connection, base: ResolvedIndex, wanted: set[int]) -> None:
    dead = _dead_of(base)
    sources, opened = [], []
    try:
        for part in _segments(base):
            opened.append(_ro(part.path))
            live = wanted.intersection(_note_ids(part.path)).difference(dead.get(part.sha256, ()))
            sources.append((opened[-1], live))
        complete_working(conn, sources)
    finally:
        for source in opened:
            source.close()


def _edges_by_src(conn: sqlite3.Connection, below: int) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for row in seg.edges_below(conn, below):
        out.setdefault(row[0], []).append(row[1:])
    return out


def edge_changes(base_conn: sqlite3.Connection, scratch: sqlite3.Connection, first_new: int, gone: set[int]) -> int:
    """How many carried-over notes (ids below ``first_new``, not in ``gone``) have other resolved edges in
    ``scratch`` than in the base."""
    before = _edges_by_src(base_conn, first_new)
    after = _edges_by_src(scratch, first_new)
    return sum(1 for src in set(before) | set(after) if src not in gone and before.get(src) != after.get(src))


def refusal(base: ResolvedIndex, plan: BuildPlan, links_changed: int) -> tuple[str, str] | None:
    """Why this build cannot publish a delta (reason, detail), or None when it can."""
    if links_changed:
        return LINKS_CHANGED, f"{links_changed} unchanged notes have other resolved edges"
    if plan.touched:
        return TOUCHED, f"{len(plan.touched)} notes with a new mtime and the same content"
    return None  # past MAX_SEGMENTS: ``delta_parts`` merges the smallest segments (merge_write.fit_segment_limit)


def same_inode(part: ResolvedPart) -> bool:
    """The part's path still names the inode that was verified (read by path when shared)."""
    try:
        st = os.stat(part.path)
    except OSError:
        return False
    return part.pinned is not None and (st.st_dev, st.st_ino) == tuple(part.pinned.inode)


def refusal_for(
    base: ResolvedIndex, scratch: sqlite3.Connection, plan: BuildPlan, first_new: int
) -> tuple[str, str] | None:
    """``refusal`` of the staged ``scratch`` against the verified ``base``; a base whose part paths no longer
    name the verified files (replaced since ``resolve``) is not shared: its scratch copy, made from the
    verified descriptor, is published as one segment."""
    replaced = [p.path.name for p in base.parts if not same_inode(p)]
    if replaced:
        return PART_REPLACED, f"{len(replaced)} parts replaced since verification: {replaced[:3]}"
    base_conn = connect_readonly(base)
    try:
        gone = set(plan.changed_ids + plan.removed_ids)
        return refusal(base, plan, edge_changes(base_conn, scratch, first_new, gone))
    finally:
        base_conn.close()


def _kept_parts(base: ResolvedIndex, new_dead: dict[str, list[int]]) -> tuple[list[PlannedPart], list[PlannedPart]]:
    """The base's segments (shared by hash) and the tombstones of those that lose no note now."""
    docs = {d["sha256"]: d for d in _manifest(base).get("segments", [])}
    segments = []
    for part in _segments(base):
        doc = docs.get(part.sha256, {})
        segments.append(
            PlannedPart(
                "segment", sha256=part.sha256, size=part.size, notes=part.notes,
                chunks=int(doc.get("chunks", 0)), dense_chunks=int(doc.get("dense_chunks", 0)),
            )
        )  # fmt: skip
    index = {p.sha256: i for i, p in enumerate(_segments(base))}
    tombstones = [
        PlannedPart("tombstone", sha256=p.sha256, size=p.size, notes=p.notes, segment=index[p.segment])
        for p in base.parts
        if p.kind == "tombstone" and p.segment is not None and p.segment not in new_dead
    ]
    return segments, tombstones


def _new_dead(base: ResolvedIndex, gone: Sequence[int]) -> dict[str, list[int]]:
    """Segment SHA-256 -> ALL its dead ids, for each segment holding one of ``gone`` live (an edited note's
    id is in its older segments too, dead there already)."""
    wanted = set(gone)
    old = _dead_of(base)
    out = {}
    for part in _segments(base):
        here = wanted.intersection(_note_ids(part.path)).difference(old.get(part.sha256, ())) if wanted else set()
        if here:
            out[part.sha256] = sorted(here | set(old.get(part.sha256, ())))
    return out


def _check_segment(path: Path) -> None:
    """The new segment's per-note tables agree (``core.index.tables.checks``: the counts the builder checks on a
    whole database, here over the changed notes only)."""
    conn = _ro(path)
    try:
        found = inconsistencies(conn, working=False)  # its vectors are checked by its writer's arrays
    finally:
        conn.close()
    if found:
        raise ValidationError("the staged delta segment failed validation: " + "; ".join(found), problems=found)


def delta_parts(
    layout: IndexLayout,
    base: ResolvedIndex,
    scratch: Path,
    plan: BuildPlan,
    first_new: int,
    tokenizer: str,
    forward: Forward,
) -> Delta:
    """Stage the new segment (the notes of ``scratch`` with ids from ``first_new`` or re-inserted with their
    ids, ``plan.changed_ids``; their term vectors ``forward``, the build's working rows: a scratch stores
    none) and tombstones; list the rest."""
    conn = _ro(scratch)
    try:
        new_ids = seg.note_ids_from(conn, first_new, plan.changed_ids)
        tops = seg.next_ids(conn)
    finally:
        conn.close()
    base_next = first_ids(base)
    next_ids = (max(base_next[0], tops[0]), max(base_next[1], tops[1]))
    new_dead = _new_dead(base, plan.changed_ids + plan.removed_ids)
    segments, tombstones = _kept_parts(base, new_dead)
    staged = new_staging_path(layout)
    made = [staged]
    try:
        counts = write_segment(
            staged,
            [SegmentSource(scratch, new_ids, forward)],
            tokenizer=tokenizer,
            generation_from=scratch,
            compact=True,
        )
        _check_segment(staged)
        index = {p.sha256: i for i, p in enumerate(segments)}
        previous = _tombstone_paths(base)
        how: list[str] = []
        whole = 0
        for part in _segments(base):
            ids = new_dead.get(part.sha256)
            if ids:
                made.append(new_staging_path(layout))
                written = write_tombstone_counted(made[-1], part.path, ids, previous.get(part.sha256))
                how, whole = how + written.how, whole + written.whole
                tombstones.append(PlannedPart("tombstone", made[-1], notes=len(ids), segment=index[part.sha256]))
    except BaseException:
        for path in made:  # nothing staged outlives a failed build
            path.unlink(missing_ok=True)
        raise
    segments.append(
        PlannedPart(
            "segment", staged, notes=counts["notes"], chunks=counts["chunks"],
            dense_chunks=counts.get("dense_chunks", 0),
        )
    )  # fmt: skip
    segments, tombstones, merged = fit_segment_limit(
        layout, base, segments, tombstones, {**_dead_of(base), **new_dead}, tokenizer
    )
    return Delta(segments, tombstones, next_ids, merged, tuple(how), whole)
