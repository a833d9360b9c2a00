"""Merging segments (issue 29, "Merges"): ``vaultsearch index --optimize``, the watcher when idle
(``core.build.idle_merge``) and the incremental builder at the segment limit.

A merge writes each chosen group of segments (``core.build.merge``'s policy) as one new segment of their
LIVE notes (``write_segment``: rows copied, no note parsed again; the tombstones applied, so the group's
tombstones are not listed again) and publishes a generation with the SAME live notes
(``publish_segments``: the merged segments staged, every other segment and its tombstone shared by hash).
The merged segment takes the place of its newest member in the manifest, so the newest segment (which
carries the generation-level tables) stays last. Note and chunk ids are kept, so results are identical:
statistics are exact and ties break on the note's path, never on segment order.

It runs under the build lock with ``expected_base`` = the generation it read: a build that holds the lock or
published first wins, and the merge is dropped with the label ``build_locked`` (the next idle period or
``--optimize`` tries again); nothing it staged outlives it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.build import incremental
from core.build.faults import build_io_errors
from core.build.lock import build_lock, ensure_layout, require_lock
from core.build.merge import Merge, SegmentInfo, choose_merges
from core.build.merge_write import write_live
from core.build.publish_segments import PlannedPart, publish_segments
from core.errors import BuildLockedError, IndexMissingError, UsageError
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, ResolvedPart, layout_for
from core.index.ownership import check_vault
from core.index.tables.meta import get_meta
from core.index.verify import resolve

MERGED = "merged"
NOTHING_DUE = "nothing_to_merge"
DROPPED = "build_locked"  # a build held the lock or published first: it wins, the merge is dropped


@dataclass(frozen=True)
class MergeReport:
    """What a merge did: ``outcome`` is ``merged``, ``nothing_to_merge`` or ``build_locked``."""

    outcome: str
    generation_before: str | None
    generation_after: str | None
    segments_before: int
    segments_after: int
    parts_before: int  # segments and tombstones listed by the manifest
    parts_after: int
    bytes_before: int  # bytes of every listed part
    bytes_after: int
    bytes_written: int  # bytes of the new segments
    live_notes: int
    merges: list[dict[str, Any]] = field(default_factory=list)  # per merge: members, reason, notes, bytes in/out
    seconds: float = 0.0
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _docs(base: ResolvedIndex) -> dict[str, dict[str, Any]]:
    doc = json.loads(base.path.read_bytes())
    return {d["sha256"]: d for d in doc.get("segments", [])}


def _segments(base: ResolvedIndex) -> list[ResolvedPart]:
    return [p for p in base.parts if p.kind == "segment"]


def _stones(base: ResolvedIndex) -> dict[str, ResolvedPart]:
    return {p.segment: p for p in base.parts if p.kind == "tombstone" and p.segment is not None}


def segment_infos(base: ResolvedIndex) -> list[SegmentInfo]:
    """Each segment's live and dead notes and bytes, manifest order (what the policy reads)."""
    stones = _stones(base)
    out = []
    for part in _segments(base):
        dead = stones[part.sha256].notes if part.sha256 in stones else 0
        out.append(SegmentInfo(live=part.notes - dead, dead=dead, size=part.size))
    return out


def _existing(part: ResolvedPart, doc: dict[str, Any]) -> PlannedPart:
    return PlannedPart(
        "segment", sha256=part.sha256, size=part.size, notes=part.notes,
        chunks=int(doc.get("chunks", 0)), dense_chunks=int(doc.get("dense_chunks", 0)),
    )  # fmt: skip


def _write_merged(layout: IndexLayout, base: ResolvedIndex, members: Sequence[int], tokenizer: str) -> PlannedPart:
    """Stage one segment of ``members``' live notes (the newest segment's generation tables if it is one)."""
    segments = _segments(base)
    dead = incremental._dead_of(base)
    newest = len(segments) - 1
    return write_live(
        layout,
        [(segments[i].path, dead.get(segments[i].sha256, ())) for i in members],
        tokenizer=tokenizer,
        generation_from=segments[newest].path if newest in members else None,
    )


def stage_merges(
    layout: IndexLayout, base: ResolvedIndex, merges: Sequence[Merge], tokenizer: str
) -> tuple[list[PlannedPart], list[PlannedPart]]:
    """Under the build lock: (segments, tombstones) of ``base`` after ``merges``, the merged segments staged
    in place of their newest member, every other segment and its tombstone listed by hash."""
    require_lock(layout)
    segments, stones, docs = _segments(base), _stones(base), _docs(base)
    owner = {max(m.members): m for m in merges}
    merged = {i for m in merges for i in m.members}
    out: list[PlannedPart] = []
    tombs: list[PlannedPart] = []
    try:
        for i, part in enumerate(segments):
            if i in owner:
                out.append(_write_merged(layout, base, owner[i].members, tokenizer))
            elif i not in merged:
                out.append(_existing(part, docs.get(part.sha256, {})))
                stone = stones.get(part.sha256)
                if stone is not None:
                    tombs.append(
                        PlannedPart(
                            "tombstone", sha256=stone.sha256, size=stone.size, notes=stone.notes, segment=len(out) - 1
                        )
                    )
    except BaseException:
        for p in out:
            if p.staged is not None:
                p.staged.unlink(missing_ok=True)
        raise
    return out, tombs


def base_record(base: ResolvedIndex, seconds: float) -> GenerationRecord:
    """The state record of ``base`` for a generation with the same live notes (a merge's)."""
    row = base.record
    doc = json.loads(base.path.read_bytes())

    def loaded(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    return GenerationRecord(
        source_snapshot_hash=row["source_snapshot_hash"],
        notes=int(row["notes"]),
        chunks=int(row["chunks"]),
        dense_chunks=int(row["dense_chunks"]),
        chunker=row["chunker"],
        tokenizer=row["tokenizer"],
        timings={**(loaded(row.get("timings")) or {}), "merge": round(seconds, 4)},
        problems=loaded(row.get("problems")) or [],
        dense_model=row.get("dense_model"),
        schema_version=doc.get("schema"),
        analysis=doc.get("analysis") or {},
    )


def _tokenizer(segment: Path) -> str:
    conn = incremental._ro(segment)
    try:
        return str(get_meta(conn)["tokenizer"])
    finally:
        conn.close()


def _bytes(parts: Sequence[Any]) -> int:
    return sum(int(p.size) for p in parts)


def merge_generation(
    layout: IndexLayout,
    base: ResolvedIndex,
    merges: Sequence[Merge],
    *,
    keep: int = 2,
    on_step: Callable[[str], None] | None = None,
    grace_s: float | None = None,
) -> MergeReport:
    """Write and publish ``merges`` of ``base`` (under the build lock; ``base`` resolved under it)."""
    t = time.perf_counter()
    infos = segment_infos(base)
    before: dict[str, Any] = dict(
        generation_before=base.generation_id, segments_before=len(infos), parts_before=len(base.parts),
        bytes_before=_bytes(base.parts), live_notes=sum(s.live for s in infos),
    )  # fmt: skip
    if not merges:
        return MergeReport(
            NOTHING_DUE, generation_after=base.generation_id, segments_after=len(infos),
            parts_after=len(base.parts), bytes_after=_bytes(base.parts), bytes_written=0, **before,
        )  # fmt: skip
    tokenizer = _tokenizer(_segments(base)[-1].path)
    segments, tombs = stage_merges(layout, base, merges, tokenizer)
    fresh = [p.staged.stat().st_size for p in segments if p.staged is not None]
    details = [
        {
            "members": list(m.members), "reason": m.reason,
            "bytes_in": sum(infos[i].size for i in m.members), "bytes_out": size,
        }
        for m, size in zip(sorted(merges, key=lambda m: max(m.members)), fresh, strict=True)
    ]  # fmt: skip
    record = base_record(base, time.perf_counter() - t)
    published = publish_segments(
        layout, segments, tombs, record, next_ids=incremental.first_ids(base),
        expected_base=base.generation_id, keep=keep, on_step=on_step, grace_s=grace_s,
    )  # fmt: skip
    return MergeReport(
        MERGED, generation_after=published.generation_id, segments_after=len(segments),
        parts_after=len(published.parts), bytes_after=_bytes(published.parts), bytes_written=sum(fresh),
        merges=details, seconds=round(time.perf_counter() - t, 4), **before,
    )  # fmt: skip


def optimize_index(
    vault: str | Path,
    *,
    index_dir: str | Path | None = None,
    one_segment: bool = False,
    keep: int = 2,
    wait_seconds: float = 0.0,
    on_step: Callable[[str], None] | None = None,
    grace_s: float | None = None,
) -> MergeReport:
    """Merge the active generation's segments by the policy (``one_segment``: all into one); a build that
    holds the lock past ``wait_seconds`` or publishes first wins, and the report's outcome is
    ``build_locked`` (nothing changed)."""
    check_vault(Path(vault))
    layout = layout_for(Path(vault).resolve(), None if index_dir is None else Path(index_dir))
    ensure_layout(layout)
    try:
        with build_lock(layout, wait_seconds=wait_seconds), build_io_errors(layout):
            base = resolve(layout)
            if base.kind != "immutable_generation":
                raise UsageError(f"--optimize merges the segments of a generation index, not {base.kind}")
            if not base.parts:
                raise IndexMissingError(f"no generation to optimize in {layout.index_dir}")
            merges = choose_merges(segment_infos(base), all_into_one=one_segment)
            return merge_generation(layout, base, merges, keep=keep, on_step=on_step, grace_s=grace_s)
    except BuildLockedError as exc:
        return MergeReport(
            DROPPED, None, None, 0, 0, 0, 0, 0, 0, 0, 0, detail=str(exc),
        )  # fmt: skip
