"""Writing merged segments (issue 29, "Merges"), shared by ``core.build.optimize`` (``index --optimize``, the
idle watcher) and ``core.build.incremental`` (a delta that would pass ``MAX_SEGMENTS``).

``write_live`` stages one segment of the LIVE notes of some segments (their dead ids left out: rows copied,
no note parsed again; note and chunk ids kept, so results are identical). ``fit_segment_limit`` is the
incremental builder's hook: when a delta's parts would list more than ``MAX_SEGMENTS`` segments, the
smallest base segments (``core.build.merge.fit_merges``) are merged into one in place of the newest of
them and their tombstones dropped, instead of publishing every note as one segment.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from core.build.lock import new_staging_path
from core.build.merge import SegmentInfo, fit_merges
from core.build.publish_segments import PlannedPart
from core.build.segment_writer import SegmentSource, write_segment
from core.index.layout import IndexLayout, ResolvedIndex
from core.index.manifest import MAX_SEGMENTS
from core.index.tables import segments as seg


def _note_ids(path: Path) -> list[int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return seg.segment_note_ids(conn)
    finally:
        conn.close()


def write_live(
    layout: IndexLayout,
    members: Sequence[tuple[Path, Collection[int]]],
    *,
    tokenizer: str,
    generation_from: Path | None,
) -> PlannedPart:
    """Stage one segment of the live notes of ``members`` ((segment path, its dead note ids), oldest first:
    the first one's dictionary is kept); ``generation_from``: the segment whose generation-level tables it
    carries (the newest of a generation), if it is one of them."""
    sources = []
    for path, dead in members:
        gone = set(dead)
        sources.append(SegmentSource(path, [n for n in _note_ids(path) if n not in gone]))
    staged = new_staging_path(layout)
    try:
        # no ``dead``: a live note's edges point at live notes (a build whose edges moved publishes no delta),
        # and a dead id may live on in another segment (an edited note that keeps its id)
        counts = write_segment(staged, sources, tokenizer=tokenizer, generation_from=generation_from)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return PlannedPart(
        "segment", staged, notes=counts["notes"], chunks=counts["chunks"], dense_chunks=counts.get("dense_chunks", 0)
    )


def _infos(segments: Sequence[PlannedPart], tombstones: Sequence[PlannedPart], count: int) -> list[SegmentInfo]:
    dead = {t.segment: t.notes for t in tombstones}
    return [
        SegmentInfo(live=p.notes - dead.get(i, 0), dead=dead.get(i, 0), size=p.size)
        for i, p in enumerate(segments[:count])
    ]


def fit_segment_limit(
    layout: IndexLayout,
    base: ResolvedIndex,
    segments: list[PlannedPart],
    tombstones: list[PlannedPart],
    dead: Mapping[str, Collection[int]],
    tokenizer: str,
) -> tuple[list[PlannedPart], list[PlannedPart], str | None]:
    """A delta's ``segments`` (the base's, by hash, then the new ones) and ``tombstones`` (by segment index)
    fitted under ``MAX_SEGMENTS``: the smallest base segments written as one of their live notes (``dead``:
    segment SHA-256 -> ALL its dead ids, this build's too), their tombstones dropped (a staged one removed).
    (segments, tombstones, what was merged or None). On failure every staged part is removed."""
    if len(segments) <= MAX_SEGMENTS:
        return segments, tombstones, None
    base_segments = [p for p in base.parts if p.kind == "segment"]
    count = len(base_segments)
    try:
        members = fit_merges(_infos(segments, tombstones, count), adding=len(segments) - count)[0].members
        merged = write_live(
            layout,
            [(base_segments[i].path, dead.get(base_segments[i].sha256, ())) for i in members],
            tokenizer=tokenizer,
            generation_from=None,  # the delta's new segment carries the generation-level tables
        )
    except BaseException:
        for part in segments + tombstones:
            if part.staged is not None:
                part.staged.unlink(missing_ok=True)
        raise
    out: list[PlannedPart] = []
    where: dict[int, int] = {}
    for i, part in enumerate(segments):
        if i == max(members):
            out.append(merged)
        elif i in members:
            continue
        else:
            out.append(part)
        where[i] = len(out) - 1
    stones = []
    for stone in tombstones:
        if stone.segment in members:
            if stone.staged is not None:
                stone.staged.unlink(missing_ok=True)
            continue
        stones.append(replace(stone, segment=where[stone.segment or 0]))
    label = (
        f"{len(segments)} segments > {MAX_SEGMENTS}: the smallest, {list(members)}, merged into one (merge.fit_merges)"
    )
    return out, stones, label
