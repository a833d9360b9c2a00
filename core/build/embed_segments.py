"""``--embed-only`` on a generation of several parts: vectors added per segment, newest first (issue 29).

A segment is immutable, so "adding vectors" publishes a NEW version of it: a verified byte copy of the
segment (same notes, same ids, same term dictionary) with the batch's vectors inserted and its meta
``dense_model`` stamped, in place of the old one in a new manifest; every other segment and every
tombstone is shared by hash (a tombstone lists note ids and statistics over its segment's own term ids,
which the copy keeps, so it is re-pointed at the new version unchanged). So an embed after a one-note
edit writes the small newest segment again, never the text of the segments already complete.

- The segment embedded next is the newest one with a live chunk (a chunk of a note its tombstone does
  not list) without a vector; the newest segment is also rewritten when its stamp is not the model's
  (it carries the generation-level meta a search reads the model from).
- One call of :func:`segment_batch` embeds at most one batch of one segment and publishes it (the
  caller's bound: ``publish_every`` chunks or ``publish_seconds``), so an interrupt keeps every
  published batch, as on the one-segment path.
- A change of model is not done here: the old vectors must all go at once (``core.build.embed``
  rewrites the generation as one segment, dropping them), never mixed with new ones.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from core.build.lock import new_staging_path
from core.build.publish_segments import PlannedPart, publish_segments
from core.dense import META_KEY, identity_key, stored_identity
from core.index import pinned
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, ResolvedPart
from core.index.segmented import dead_ids_of
from core.index.tables import segments as seg
from core.index.tables.connection import set_journal_mode
from core.index.tables.meta import get_meta
from core.index.verify import connect_readonly

Embed = Callable[[sqlite3.Connection, tuple[int, ...]], tuple[list[int], np.ndarray]]
Write = Callable[[sqlite3.Connection, list[int], np.ndarray], None]


def per_segment(base: ResolvedIndex, identity: dict) -> bool:
    """True when ``base`` is a generation of several parts whose vectors (if any) are of ``identity``."""
    if base.kind != "immutable_generation" or len(base.parts) < 2:
        return False
    conn = connect_readonly(base)
    try:
        found = stored_identity(get_meta(conn).get(META_KEY))
    finally:
        conn.close()
    return found is None or identity_key(found) == identity_key(identity)


@dataclass(frozen=True)
class Batch:
    """What one batch embedded: the segment's position, the chunk ids and their vectors."""

    index: int
    ids: list[int]
    vectors: np.ndarray


def _embed_newest(base: ResolvedIndex, identity: str, embed: Embed) -> Batch | None:
    """Embed one batch of the newest segment with live chunks to embed (or a stale stamp); None: all done."""
    segments = [p for p in base.parts if p.kind == "segment"]
    dead = {p.segment: dead_ids_of(p, base.generation_id) for p in base.parts if p.kind == "tombstone"}
    for index in range(len(segments) - 1, -1, -1):
        conn = pinned.connect_pinned(segments[index].pinned, base.generation_id)
        try:
            ids, vectors = embed(conn, dead.get(segments[index].sha256, ()))
            stamp = stored_identity(get_meta(conn).get(META_KEY))
        finally:
            conn.close()
        stale = index == len(segments) - 1 and (stamp is None or identity_key(stamp) != identity)
        if ids or stale:
            return Batch(index, ids, vectors)
    return None


def _planned(base: ResolvedIndex) -> tuple[list[PlannedPart], list[PlannedPart], dict]:
    """Every part of ``base`` as shared (by hash), and its manifest."""
    doc = json.loads(base.path.read_bytes())
    counts = {d["sha256"]: d for d in doc["segments"]}
    segments = [p for p in base.parts if p.kind == "segment"]
    planned = [
        PlannedPart(
            "segment", sha256=p.sha256, size=p.size, notes=p.notes,
            chunks=int(counts[p.sha256].get("chunks", 0)), dense_chunks=int(counts[p.sha256].get("dense_chunks", 0)),
        )
        for p in segments
    ]  # fmt: skip
    index = {p.sha256: i for i, p in enumerate(segments)}
    tombstones = [
        PlannedPart("tombstone", sha256=p.sha256, size=p.size, notes=p.notes, segment=index[p.segment or ""])
        for p in base.parts
        if p.kind == "tombstone"
    ]
    return planned, tombstones, doc


def _new_version(
    part: ResolvedPart, base: ResolvedIndex, layout: IndexLayout, batch: Batch, write: Write
) -> PlannedPart:
    """The staged new version of ``part``: its verified bytes with the batch's vectors written in."""
    staged = new_staging_path(layout)
    try:
        part.pinned.copy_to(
            staged, expected_sha256=part.sha256, expected_size=part.size, generation_id=base.generation_id
        )
        work = sqlite3.connect(staged, isolation_level=None)
        try:
            set_journal_mode(work, "MEMORY")
            write(work, batch.ids, batch.vectors)
            counts = seg.segment_counts(work)
            set_journal_mode(work, "DELETE")
        finally:
            work.close()
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return PlannedPart(
        "segment", staged, notes=counts["notes"], chunks=counts["chunks"], dense_chunks=counts["dense_chunks"]
    )


def segment_batch(
    layout: IndexLayout,
    base: ResolvedIndex,
    identity: str,
    embed: Embed,
    write: Write,
    record: Callable[[sqlite3.Connection], GenerationRecord],
    keep: int,
) -> tuple[str, int] | None:
    """Embed one batch of ``base``'s newest incomplete segment (``embed(conn, dead note ids)``), write it into
    a new version of that segment (``write(conn, ids, vectors)``) and publish the generation with it in the
    old one's place; (published generation id, chunks embedded), or None when every segment is complete.
    ``identity``: the model's identity key; ``record(conn)``: the generation record read on ``base``."""
    batch = _embed_newest(base, identity, embed)
    if batch is None:
        return None
    conn = connect_readonly(base)
    try:
        before = record(conn)
    finally:
        conn.close()
    segments, tombstones, doc = _planned(base)
    parts = [p for p in base.parts if p.kind == "segment"]
    segments[batch.index] = _new_version(parts[batch.index], base, layout, batch, write)
    staged = segments[batch.index].staged
    try:
        published = publish_segments(
            layout, segments, tombstones,
            replace(before, dense_chunks=before.dense_chunks + len(batch.ids), schema_version=doc["schema"],
                    analysis=doc["analysis"]),
            next_ids=(int(doc["next_note_id"]), int(doc["next_chunk_id"])), expected_base=base.generation_id, keep=keep,
        )  # fmt: skip
    finally:
        if staged is not None:
            staged.unlink(missing_ok=True)
    assert published.generation_id is not None  # a published generation always has its id
    return published.generation_id, len(batch.ids)
