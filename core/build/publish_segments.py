"""Publishing a generation of several parts (manifest format 2): new segments and tombstones staged in
``staging/``, existing parts shared by name.

The same two-phase order as ``core.build.publish`` (its steps, once per new part, then the manifest's,
then the one state commit): every new part is integrity-checked, made read-only, fsynced, hashed and
renamed to ``segments/<sha256>.seg`` (a tombstone: ``.del``), ``segments/`` fsynced; an existing part
is listed again when its file is still there with the manifest's size (it was verified when the
generation listing it was served). Until the state commit any failure leaves the previous generation
active and removes what this publish created. The builder publishes its deltas through it
(``core.build.incremental``: a new segment, tombstones, the unchanged parts shared), as do the split
path and the tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.build import publish as one
from core.build.lock import new_staging_path, require_lock
from core.build.segment_writer import SegmentSource, write_segment, write_tombstone
from core.errors import GenerationMissingError, UnsupportedIndexFormatError, UsageError
from core.index import debris as debris_rules
from core.index import state as gstate
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, ResolvedPart
from core.index.manifest import MAX_SEGMENTS, manifest_bytes_v2, segment_file_name, tombstone_file_name
from core.index.state import list_generations
from core.index.verify import invalidate, remember_parts, resolve


@dataclass(frozen=True)
class PlannedPart:
    """A part of the generation to publish: a file staged in ``staging/``, or an existing part by hash."""

    kind: str  # 'segment' | 'tombstone'
    staged: Path | None = None  # a new part (None: an existing one, ``sha256`` and ``size``)
    sha256: str | None = None
    size: int = 0
    notes: int = 0  # a segment: its note rows; a tombstone: the note ids it lists
    chunks: int = 0  # a segment: its chunk rows
    dense_chunks: int = 0
    segment: int | None = None  # a tombstone: the index of its segment in the segments list


def stage_split(
    layout: IndexLayout, segment: Path, groups: list[list[int]], dead: set[int], tokenizer: str
) -> tuple[list[PlannedPart], list[PlannedPart], int]:
    """The split path, under the build lock: ``groups`` of ``segment``'s note ids written as staged
    segments (oldest first; the last carries the generation-level tables), a tombstone for each that holds
    some of ``dead``; (segments, tombstones, live notes), ready for ``publish_segments``."""
    require_lock(layout)
    segments, tombstones = [], []
    for i, group in enumerate(groups):
        staged = new_staging_path(layout)
        last = i == len(groups) - 1
        counts = write_segment(
            staged, [SegmentSource(segment, group)], tokenizer=tokenizer, dead=dead,
            generation_from=segment if last else None,
        )  # fmt: skip
        segments.append(PlannedPart("segment", staged, notes=counts["notes"], chunks=counts["chunks"]))
        gone = sorted(dead & set(group))
        if gone:
            stone = new_staging_path(layout)
            write_tombstone(stone, staged, gone)
            tombstones.append(PlannedPart("tombstone", stone, notes=len(gone), segment=i))
    live = sum(len(g) for g in groups) - sum(len(dead & set(g)) for g in groups)
    return segments, tombstones, live


def _existing(layout: IndexLayout, part: PlannedPart) -> tuple[str, int]:
    if part.sha256 is None:
        raise UsageError("an existing part is named by its SHA-256")
    name = tombstone_file_name(part.sha256) if part.kind == "tombstone" else segment_file_name(part.sha256)
    if not one._same_size_file(layout.segments_dir / name, part.size):
        raise GenerationMissingError(
            f"part {layout.segments_dir / name} to share is missing or not {part.size} bytes",
            path=str(layout.segments_dir / name),
            expected=part.sha256,
        )
    return part.sha256, part.size


def _place(
    layout: IndexLayout, parts: list[PlannedPart], step: Callable[[str], None], created: one._Created
) -> tuple[list[tuple[str, int]], list[ResolvedPart]]:
    """(sha256, size) of each part in order, and the new ones as published (for the verification record)."""
    out, fresh = [], []
    for part in parts:
        if part.staged is None:
            out.append(_existing(layout, part))
            continue
        placed = one._publish_part(layout, part.staged, step, created, part.kind)
        out.append((placed.sha256, placed.size))
        if placed.path in created.paths:
            fresh.append(placed)
    return out, fresh


def _manifest_raw(
    record: GenerationRecord,
    segments: list[PlannedPart],
    seg_ids: list[tuple[str, int]],
    tombstones: list[PlannedPart],
    tomb_ids: list[tuple[str, int]],
    next_ids: tuple[int, int],
) -> bytes:
    seg_docs = [
        {"sha256": sha, "size": size, "notes": p.notes, "chunks": p.chunks, "dense_chunks": p.dense_chunks}
        for p, (sha, size) in zip(segments, seg_ids, strict=True)
    ]
    tomb_docs = [
        {"segment": seg_ids[p.segment][0], "sha256": sha, "size": size, "notes": p.notes}
        for p, (sha, size) in sorted(zip(tombstones, tomb_ids, strict=True), key=lambda t: t[0].segment or 0)
        if p.segment is not None
    ]
    return manifest_bytes_v2(
        schema=record.schema_version,
        analysis=record.analysis,
        source={"snapshot_hash": record.source_snapshot_hash},
        segments=seg_docs,
        tombstones=tomb_docs,
        next_note_id=next_ids[0],
        next_chunk_id=next_ids[1],
    )


def _check_plan(segments: list[PlannedPart], tombstones: list[PlannedPart]) -> None:
    if not segments or len(segments) > MAX_SEGMENTS:
        raise UnsupportedIndexFormatError(
            f"a generation has 1 to {MAX_SEGMENTS} segments, not {len(segments)}",
            expected=MAX_SEGMENTS,
            actual=len(segments),
        )
    owners = [t.segment for t in tombstones]
    if any(o is None or not 0 <= o < len(segments) for o in owners) or len(set(owners)) != len(owners):
        raise UsageError(f"each tombstone names one listed segment, at most one per segment: {owners}")


def publish_segments(
    layout: IndexLayout,
    segments: list[PlannedPart],
    tombstones: list[PlannedPart],
    record: GenerationRecord,
    *,
    next_ids: tuple[int, int],
    expected_base: str | None,
    keep: int = 2,
    on_step: Callable[[str], None] | None = None,
    grace_s: float | None = None,
) -> ResolvedIndex:
    """Publish a format 2 generation of ``segments`` (oldest first) and ``tombstones``; ``next_ids`` is
    (next note id, next chunk id). Under ``build_lock`` (checked); ``expected_base`` as ``publish``'s."""
    require_lock(layout)
    _check_plan(segments, tombstones)
    step = on_step or (lambda name: None)
    created = one._Created()
    staged = [p.staged for p in segments + tombstones if p.staged is not None]
    try:
        seg_ids, fresh = _place(layout, segments, step, created)
        tomb_ids, fresh_tombs = _place(layout, tombstones, step, created)
        raw = _manifest_raw(record, segments, seg_ids, tombstones, tomb_ids, next_ids)
        step("manifest_write")
        sha256, size = one.write_manifest(layout, raw, step, created)
        created_at = time.time()
        gid = one._generation_id(sha256, created_at, {row["generation_id"] for row in list_generations(layout)})
        step("state_commit")
        gstate.commit_state(layout, gstate.record_row(record, gid, sha256, size, created_at), expected_base)
    except BaseException:
        for path in staged:
            one._discard_unpublished(layout, path, created)
        raise
    finally:
        invalidate(layout)
    step("retention")
    one._apply_retention(layout, keep)
    step("gc")
    one._collect(layout, debris_rules.GC_GRACE_S if grace_s is None else grace_s)
    if fresh or fresh_tombs:
        remember_parts(layout, fresh + fresh_tombs)
    return resolve(layout)
