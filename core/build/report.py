"""What a build tells its caller (``BuildReport``), read from the database it built or kept."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from core.build.plan import BuildPlan, BuildRun
from core.index.layout import GenerationRecord
from core.index.settings import IndexConfig
from core.index.tables.chunk_vectors import count_vectors
from core.index.tables.chunks import count_chunks
from core.index.tables.links import edge_counts
from core.index.tables.meta import get_meta, meta_value
from core.index.tables.notes import count_notes
from core.index.tables.problems import all_problems


@dataclass(frozen=True)
class BuildReport:
    generation_id: str | None
    index_kind: str
    notes: int
    chunks: int
    reused: int
    changed: int
    added: int
    removed: int
    problems: list[dict[str, str]]
    seconds: float
    up_to_date: bool
    full_rebuild_reason: str | None = None
    full_rebuild_detail: str | None = None  # what changed, e.g. "tokenizer: 'a' -> 'b'"
    # why a build on a generation published ONE segment of every note instead of a delta (no note re-parsed;
    # core.build.incremental), e.g. "incremental_links_changed: 3 unchanged notes have other resolved edges"
    one_segment_reason: str | None = None
    # a delta that would pass MAX_SEGMENTS: which base segments were merged (core.build.merge_write)
    segment_limit_merge: str | None = None
    # why a build on a generation staged on a working copy of the whole base (writes O(base)) instead of on a
    # database of its changes only (core.build.delta_stage), e.g. "whole_base_git_source: ..."; None: it did not
    whole_base_reason: str | None = None
    # dead notes whose tombstone statistics were counted from their segment's whole arrays instead of their own
    # verified postings (core.build.tomb_stats: a note that did not verify, or whose postings cost as much)
    tombstone_whole_notes: int = 0
    # carried-over notes a delta re-published at their ids because the build moved their resolved edges (an add,
    # delete, rename or aliases change of a note they link to) or their mtime (a touch): core.build.delta_stage
    relinked_notes: int = 0
    new_problems: list[dict[str, str]] = field(default_factory=list)  # problems of the notes this build read
    settings: dict[str, Any] = field(default_factory=dict)  # the settings this build used
    links: int = 0
    unresolved_links: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    embedded: int = 0  # chunks embedded into this same generation (``index --embed`` of a small change)
    watermark: str | None = None  # the commit a git-sourced index is a view of (None: the working tree)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_report(
    conn: sqlite3.Connection,
    plan: BuildPlan,
    run: BuildRun,
    *,
    kind: str,
    generation_id: str | None,
    up_to_date: bool,
    rebuild_reason: str | None,
    extra: dict[str, int],
    rebuild_detail: str | None = None,
) -> BuildReport:
    notes = count_notes(conn)
    chunks = count_chunks(conn)
    if not extra:  # nothing was rebuilt: the links are the index's
        links, unresolved = edge_counts(conn)
        extra = {"links": links, "unresolved_links": unresolved}
    problems = all_problems(conn)
    read = {f.rel_path for f, _, _ in plan.changed}
    scan_problems = {(p.path, p.reason) for p in plan.scan.problems}
    return BuildReport(
        generation_id=generation_id,
        index_kind=kind,
        notes=notes,
        chunks=chunks,
        reused=plan.reused,
        changed=len(plan.changed),
        added=plan.added,
        removed=len(plan.removed_ids) + len(plan.removed_skipped),
        problems=problems,
        new_problems=[p for p in problems if p["path"] in read or (p["path"], p["reason"]) in scan_problems]
        if not up_to_date
        else [],
        settings=run.config.settings(),
        seconds=round(time.perf_counter() - run.started, 4),
        up_to_date=up_to_date,
        full_rebuild_reason=rebuild_reason,
        full_rebuild_detail=rebuild_detail,
        timings={k: round(v, 4) for k, v in run.timings.items()},
        watermark=meta_value(conn, "git_commit"),
        one_segment_reason=None,  # core.build.builder sets it
        segment_limit_merge=None,
        whole_base_reason=None,
        **extra,
    )


def generation_record(conn: sqlite3.Connection, config: IndexConfig, timings: dict[str, float]) -> GenerationRecord:
    meta = get_meta(conn)
    dense_model = meta.get("dense_model")
    return GenerationRecord(
        source_snapshot_hash=meta["source_snapshot_hash"],
        notes=count_notes(conn),
        chunks=count_chunks(conn),
        dense_chunks=count_vectors(conn),
        chunker=config.chunker,
        tokenizer=config.tokenizer,
        timings=dict(timings),
        problems=[{"path": p["path"], "reason": p["reason"]} for p in all_problems(conn)],
        dense_model=None if dense_model is None else json.dumps(dense_model, sort_keys=True),
        schema_version=meta.get("schema_version"),
        analysis=config.identity(),
    )
