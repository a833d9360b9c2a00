"""Build the derived index of a vault and publish it as a new immutable generation.

    scan -> plan (diff against the active generation) -> working DB (a copy of the active
    generation, or a fresh one) -> delete changed/removed notes, add changed/new ones ->
    re-resolve links -> validate -> source unchanged? -> generations.publish

Unchanged notes (same content hash) keep their rows, chunks, term vectors and dense vectors because the
working database starts as a copy of the verified active generation (``core.build.incremental``: a
byte copy of one segment, or every segment's live notes written as one); what is published is only the
delta (a new segment of the changed notes, tombstones, the unchanged parts shared), or, when it is
refused (``BuildReport.one_segment_reason``), the whole working database as one segment. ``in_place=True`` applies the same plan to one writable ``index.db`` in a
single transaction instead (the ``legacy_db`` layout).

Changed notes are read, parsed and counted by ``prepare_pool.prepared_notes`` (in forked workers when there are
many) while this process gives them ids, maps words to FTS5 terms and writes rows (``ingest.NoteWriter``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.build import delta_stage, incremental
from core.build.apply import write_changed
from core.build.faults import build_io_errors
from core.build.forward_rows import Forward, create_working, load_working, working_forward
from core.build.known import Known, KnownVault, odd_files
from core.build.link_graph import recompute_edges, replaced_notes
from core.build.lock import build_lock, ensure_layout, new_staging_path
from core.build.plan import BuildPlan, BuildRun, plan_build
from core.build.publish import publish, start_build
from core.build.publish_segments import publish_segments
from core.build.racy import settle_racy
from core.build.report import BuildReport, build_report, generation_record
from core.build.segment_writer import whole_page_size
from core.build.source import BaseStats, NoteSource, WorkingTreeSource, base_rows, resolve_settings
from core.build.source import stored_settings as stored_source_settings
from core.build.staged import snapshot_hash, stamp_meta, whole_database
from core.build.staged import validate as _validate  # a name tests wrap
from core.errors import IntegrityError, UsageError
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, layout_for
from core.index.ownership import check_vault
from core.index.schema import create_schema
from core.index.settings import DEFAULT_TOKENIZER, IndexConfig, resolve_config  # noqa: F401 (public API)
from core.index.state import active_record
from core.index.tables.connection import atomic, set_journal_mode, set_page_size, set_working_mode
from core.index.tables.meta import get_meta
from core.index.tables.notes import delete_notes, touch_notes
from core.index.tables.skipped_files import count_sources, delete_skipped
from core.index.verify import connect_readonly, resolve
from core.vault.problems import Problem
from core.vault.scan import ScanResult
from core.vault.scan_paths import rescan_paths


def _open_working(path: Path, *, in_place: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    set_working_mode(conn, durable=in_place)  # a staging file is thrown away on any failure
    return conn


def _apply(conn: sqlite3.Connection, plan: BuildPlan, run: BuildRun) -> dict[str, int]:
    """Apply the plan inside the caller's transaction."""
    replaced = replaced_notes(conn, plan.changed_ids + plan.removed_ids)  # what links may have resolved to
    delete_notes(conn, plan.changed_ids + plan.removed_ids)
    touch_notes(conn, plan.touched)
    delete_skipped(conn, plan.removed_skipped)
    writer, first_new_id = write_changed(conn, plan, run, replaced)
    started = time.perf_counter()
    links, unresolved = recompute_edges(conn, new_from_id=first_new_id, replaced=replaced, kept=writer.kept)
    run.timings["links"] = time.perf_counter() - started  # part of "write"
    return {"links": links, "unresolved_links": unresolved}


@dataclass(frozen=True)
class _Base:
    """Where a build starts: the active generation (publish swaps the pointer from it) and, when
    that generation verifies and has this build's identity, the copy to carry notes over from."""

    active_id: str | None
    carry: ResolvedIndex | None
    rebuild_reason: str | None
    rebuild_detail: str | None = None


FORMAT_CHANGED = "index_format_changed"  # core.index.state.move_aside_unusable_state: a one-file index


def _open_base(layout: IndexLayout, config: IndexConfig, recovered: tuple[str, str, str] | None) -> _Base:
    if recovered is not None and recovered[2].startswith(FORMAT_CHANGED):
        return _Base(None, None, FORMAT_CHANGED, recovered[2])  # an index of the one-file format: all rebuilt
    try:
        record = active_record(layout)
    except IntegrityError as exc:
        return _Base(None, None, f"active_generation_rejected:{exc.reason}")
    if record is None:
        return _Base(None, None, "no_active_generation")
    try:
        base = resolve(layout)
    except IntegrityError as exc:  # a broken base is not carried over; the new build is complete on its own
        return _Base(record["generation_id"], None, f"active_generation_rejected:{exc.reason}")
    conn = connect_readonly(base)
    try:
        meta = get_meta(conn)
        unmatched = incremental.unmatched_edges(conn)
    finally:
        conn.close()
    if unmatched:  # edges to a dead note left out (the split path): not carried over
        return _Base(base.generation_id, None, "multi_part_base", f"{unmatched} links without their edge")
    changed = {k: (meta.get(k), v) for k, v in config.identity().items() if meta.get(k) != v}
    if changed:
        detail = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
        return _Base(base.generation_id, None, "index_identity_changed", detail)
    return _Base(base.generation_id, base, None)


def _stage(conn: sqlite3.Connection, plan: BuildPlan, run: BuildRun, *, whole: bool = True) -> dict[str, int]:
    """Apply the plan, stamp meta, validate, and check that the source did not move. ``whole=False`` (a build on
    a base, which publishes a delta unless refused): no array work and no whole-database table counts here
    (``_publish_staged`` does both only for a one-segment fallback)."""
    t = time.perf_counter()
    with atomic(conn):
        # the term vectors the arrays are computed from, TEMP tables never stored: every note's (a build on a
        # base: only the notes it writes, ``incremental.complete_scratch`` adds the rest if it is refused)
        load_working(conn) if whole else create_working(conn)
        extra = _apply(conn, plan, run)
        run.source.finish(conn)
        scan_ns = (
            plan.scan_started_ns if run.source.kind != "worktree" else settle_racy(conn, run.root, plan.scan_started_ns)
        )
        stamp_meta(conn, run, scan_ns, snapshot_hash(conn))
    if whole:
        whole_database(conn)
    t = run.lap("write", t)
    _validate(conn, plan)
    if not run.source_may_change:
        run.source.check_unchanged(plan.scan, plan.read, plan.gone_paths)
    run.lap("validate", t)
    return extra


def build_index(
    vault: Path,
    *,
    index_dir: Path | None = None,
    config: IndexConfig | None = None,
    in_place: bool = False,
    progress: bool = False,
    keep: int = 2,
    wait_seconds: float = 0.0,
    on_step: Callable[[str], None] | None = None,
    workers: int | None = None,
    source: str | None = None,
    rev: str | None = None,
    before_publish: Callable[[sqlite3.Connection], int] | None = None,
    changes: Mapping[str, Any] | None = None,
    source_may_change: bool = False,
    rehash: Collection[str] = (),
    known: KnownVault | None = None,
) -> BuildReport:
    """Index ``vault`` and publish a verified generation (or update ``index.db`` in place).

    Settings: ``config`` as given; without it, the settings the active generation was built with (else the
    defaults) with ``changes`` applied (``IndexConfig`` field -> value; None keeps the stored value). A changed
    tokenizer or chunking rebuilds every note (the report's ``full_rebuild_reason``/``full_rebuild_detail``
    say so). The vault must be an existing folder (``VaultPathError``): it is never created.

    An unchanged vault publishes nothing and reports ``up_to_date=True``. ``workers`` is the number of processes
    that parse notes (``None``: all cores, up to 4, for a large batch of changed notes where fork is available; 1:
    in this process). It changes speed only, never the index. ``source`` is ``"worktree"`` or ``"git"`` (notes
    from the commit ``rev``, default ``HEAD``); ``None`` keeps what the active index was built from.
    ``before_publish`` runs on the staged, validated database just before it is recorded and published
    (``core.build.build_embed`` embeds a small change's chunks there: text and vectors arrive in one
    generation); it returns how many chunks it embedded.
    ``source_may_change=True`` (the watcher, which rebuilds whatever changes next) publishes the notes as they
    were read even when a file changed during the build, instead of failing with ``source_changed``. ``rehash``:
    paths known to have changed (the watcher's events), read and hashed even when their (mtime, size) matches the
    base index. ``known``: what the watcher kept of its last build (``core.build.known``); a build on the
    generation it describes looks at the ``rehash`` paths only, not a walk, and keeps it for the next.
    """
    vault, layout, config, (chosen, chosen_rev) = _requested(vault, index_dir, config, changes, source, rev, in_place)
    ensure_layout(layout)  # refuses an index dir that is not ours before anything is written
    with build_lock(layout, wait_seconds=wait_seconds), build_io_errors(layout):
        recovered = None if in_place else start_build(layout)  # unusable state aside, expired parts gone
        t = time.perf_counter()
        src = _make_source(vault, layout.index_dir, config, chosen, chosen_rev, rehash)
        run = BuildRun(vault, layout, config, progress, workers, src, source_may_change, known=known)
        if recovered is not None:
            run.problems.append(Problem(*recovered))
        start = None if in_place else _open_base(layout, config, recovered)
        if start is not None and start.carry is not None:
            current = _current_report(run, start.carry)
            if current is not None:
                return current
        scan_started_ns = time.time_ns()
        listed = _scan(run, start.carry if start is not None else None)
        run.lap("scan", t)
        if start is None:
            return _build_in_place(run, listed[0], scan_started_ns)
        return _build_generation(run, start, listed, scan_started_ns, keep=keep, on_step=on_step, hook=before_publish)


def _scan(run: BuildRun, base: ResolvedIndex | None) -> tuple[ScanResult, BaseStats | None]:
    """The vault's scan, and the base's rows when the watcher knows them: its last build's scan brought up to
    date at the changed paths (``rescan_paths``), else a walk (and the rows read by the plan)."""
    held = run.known.take(base.generation_id if base is not None else None) if run.known is not None else None
    if held is not None and isinstance(run.source, WorkingTreeSource):
        config = run.config
        patched = rescan_paths(
            run.vault, held.scan, run.source.rehash, index_dir=run.layout.index_dir,
            max_bytes=config.max_note_bytes, include_dot_paths=config.include_dot_paths,
        )  # fmt: skip
        if patched is not None:
            run.timings["known_paths"] = len(run.source.rehash)
            run.source.among = held.odd  # the only files besides those and the racy ones whose rows may differ
            return patched, held.stats
    return run.source.scan(), None


def _remember(
    run: BuildRun, generation_id: str | None, plan: BuildPlan, stats: BaseStats | None, trusted: bool
) -> None:
    """Keep what this build knows of the vault for the watcher's next build (``core.build.known``)."""
    if run.known is not None and stats is not None and generation_id is not None:
        run.known.keep(Known(generation_id, plan.scan, stats, odd_files(plan.read, stats)), trusted=trusted)


def _requested(
    vault: Path,
    index_dir: Path | None,
    config: IndexConfig | None,
    changes: Mapping[str, Any] | None,
    source: str | None,
    rev: str | None,
    in_place: bool,
) -> tuple[Path, IndexLayout, IndexConfig, tuple[str, str | None]]:
    """(vault, layout, settings, (source, revision)) of a build, checked before anything is created."""
    check_vault(Path(vault))  # never created: a missing vault is a usage error, not an empty index
    vault = Path(vault).resolve()
    layout = layout_for(vault, index_dir)
    if config is not None and changes:
        raise UsageError("give config or changes, not both")
    config = config or resolve_config(layout, changes)
    chosen, chosen_rev = resolve_settings(source, rev, stored_source_settings(layout, in_place=in_place))
    if chosen == "git":
        from core.vault.gitsource import discover

        discover(vault)  # not a repository: fail before anything is created
    return vault, layout, config, (chosen, chosen_rev)


def _up_to_date_report(
    conn: sqlite3.Connection, plan: BuildPlan, run: BuildRun, generation_id: str | None
) -> BuildReport:
    """The report of a build that publishes nothing: the active generation ``generation_id`` is current."""
    return build_report(
        conn, plan, run, kind="immutable_generation", generation_id=generation_id, up_to_date=True,
        rebuild_reason=None, extra={},
    )  # fmt: skip


def _current_report(run: BuildRun, base: ResolvedIndex) -> BuildReport | None:
    """The up-to-date report when the source says the base is what it would build (git: the
    watermark is the resolved commit), without listing anything; None otherwise."""
    conn = connect_readonly(base)
    try:
        meta = get_meta(conn)
        if not run.source.is_current(meta) or meta.get("settings") != run.config.settings():
            return None  # a moved watermark, or a setting changed on the command line: build
        plan = BuildPlan(ScanResult([], []), 0, count_sources(conn), [], [], [], [])
        return _up_to_date_report(conn, plan, run, base.generation_id)
    finally:
        conn.close()


def _settings_kept(conn: sqlite3.Connection, source: NoteSource) -> bool:
    """True when the index already records this source's settings (a new commit with the same
    tree still publishes: its watermark and dates move on)."""
    meta = get_meta(conn)
    return all(meta.get(k) == v for k, v in source.settings().items())


def _build_generation(
    run: BuildRun,
    start: _Base,
    listed: tuple[ScanResult, BaseStats | None],
    scan_started_ns: int,
    *,
    keep: int,
    on_step: Callable[[str], None] | None,
    hook: Callable[[sqlite3.Connection], int] | None = None,
) -> BuildReport:
    """Plan against the verified active generation; stage the changes (or a copy of it); publish the result."""
    t = time.perf_counter()
    base = start.carry
    scan, stats = listed
    base_conn = connect_readonly(base) if base else None
    try:
        plan = plan_build(scan, scan_started_ns, base_conn, run.source, stats)
        run.lap("plan", t)
        if base is not None and base_conn is not None and plan.up_to_date and _settings_kept(base_conn, run.source):
            _remember(run, base.generation_id, plan, plan.base, stats is not None)
            return _up_to_date_report(base_conn, plan, run, base.generation_id)
    finally:
        if base_conn is not None:
            base_conn.close()
    done, whole = None, None
    if start.carry is not None:  # staged on the build's changes only where it can (O(change): core.build.delta_stage)
        whole = delta_stage.whole_base_reason(start.carry, plan, run)
        try:
            done = None if whole is not None else delta_stage.publish_changes(
                run, start.active_id, start.carry, plan, keep=keep, on_step=on_step, hook=hook, validate=_validate
            )  # fmt: skip
        except delta_stage.NotADelta as exc:  # nothing was published: staged on the whole base instead
            whole, plan.base_paths = exc.reason, None
    published, extra, refused = done or _publish_staged(run, start, plan, keep=keep, on_step=on_step, hook=hook)
    conn = connect_readonly(published)
    try:
        if run.known is not None:  # a whole publish (rare on a watcher's build) reads the rows it wrote once
            rows = run.next_base if done is not None else BaseStats(base_rows(conn))
            _remember(run, published.generation_id, plan, rows, stats is not None)
        report = build_report(
            conn, plan, run, kind="immutable_generation", generation_id=published.generation_id, up_to_date=False,
            rebuild_reason=start.rebuild_reason, rebuild_detail=start.rebuild_detail, extra=extra,
        )  # fmt: skip
    finally:
        conn.close()
    report = replace(report, whole_base_reason=whole)
    if refused is not None and refused[0] == incremental.SEGMENT_LIMIT:  # a delta, the smallest segments merged
        return replace(report, segment_limit_merge=f"{refused[0]}: {refused[1]}")
    return report if refused is None else replace(report, one_segment_reason=f"{refused[0]}: {refused[1]}")


def _publish_delta(
    run: BuildRun,
    start: _Base,
    base: ResolvedIndex,
    staging: Path,
    plan: BuildPlan,
    record: GenerationRecord,
    built: Forward,
    extra: dict[str, int],
    keep: int,
    on_step: Callable[[str], None] | None,
) -> tuple[ResolvedIndex, tuple[str, str] | None]:
    """Publish the delta of a build staged on a scratch copy of ``base`` (``core.build.incremental``); (published,
    the segment-limit merge if one was needed). ``extra`` gets the tombstones' whole-array count, if any."""
    assert run.first_ids is not None  # the caller checked
    delta = incremental.delta_parts(run.layout, base, staging, plan, run.first_ids[0], run.config.tokenizer, built)
    extra.update(incremental.tombstone_extra(delta))
    published = publish_segments(
        run.layout, delta.segments, delta.tombstones, record, next_ids=delta.next_ids,
        expected_base=start.active_id, keep=keep, on_step=on_step,
    )  # fmt: skip
    return published, None if delta.merged is None else (incremental.SEGMENT_LIMIT, delta.merged)


def _publish_staged(
    run: BuildRun,
    start: _Base,
    plan: BuildPlan,
    *,
    keep: int,
    on_step: Callable[[str], None] | None,
    hook: Callable[[sqlite3.Connection], int] | None,
) -> tuple[ResolvedIndex, dict[str, int], tuple[str, str] | None]:
    """Stage the plan on a scratch copy of the base (or a new database), run the hook, publish the delta
    (``core.build.incremental``) or, without a base or when the delta is refused, the whole staged database
    as one segment; (published, extra, why the delta was refused)."""
    base = start.carry
    staging = new_staging_path(run.layout)
    refused: tuple[str, str] | None = None
    try:
        complete = True
        if base is not None:
            t = time.perf_counter()
            gone = plan.changed_ids + plan.removed_ids
            complete = incremental.scratch_base(base, staging, run.config.tokenizer, gone=gone)
            run.first_ids = incremental.first_ids(base)
            run.lap("scratch", t)  # the working database: O(base) (a byte copy, or every segment's live rows)
        conn = _open_working(staging, in_place=False)
        try:
            if base is None:
                page = whole_page_size(sum(read[0].size for read in plan.changed))
                if page is not None:
                    set_page_size(conn, page)
                create_schema(conn, run.config.tokenizer)
            extra = _stage(conn, plan, run, whole=base is None)
            if hook is not None:
                t = time.perf_counter()
                extra["embedded"] = hook(conn)
                run.lap("embed", t)
            if base is not None and run.first_ids is not None:
                refused = incremental.refusal_for(base, conn, plan, run.first_ids[0])
                if refused is not None:  # the whole scratch is published: its FTS5 rows, arrays and counts
                    t = time.perf_counter()
                    incremental.complete_scratch(conn, base, texts=not complete)
                    whole_database(conn)
                    run.lap("one_segment_arrays", t)
            record = generation_record(conn, run.config, run.timings)
            built = working_forward(conn) if base is not None and refused is None else None  # the delta's vectors
            set_journal_mode(conn, "DELETE")
        finally:
            conn.close()
        t = time.perf_counter()
        if base is not None and run.first_ids is not None and built is not None:
            published, refused = _publish_delta(run, start, base, staging, plan, record, built, extra, keep, on_step)
        else:
            published = publish(run.layout, staging, record, expected_base=start.active_id, keep=keep, on_step=on_step)
        run.lap("publish", t)
    finally:
        staging.unlink(missing_ok=True)
    return published, extra, refused


def _legacy_rebuild_reason(path: Path, config: IndexConfig) -> str | None:
    """Why index.db cannot be updated in place (None: it can)."""
    if not path.exists():
        return "no_index"
    conn = sqlite3.connect(path)
    try:
        meta = get_meta(conn)
    except sqlite3.DatabaseError:
        return "legacy_index_unreadable"
    finally:
        conn.close()
    return "index_identity_changed" if any(meta.get(k) != v for k, v in config.identity().items()) else None


def _build_in_place(run: BuildRun, scan: ScanResult, scan_started_ns: int) -> BuildReport:
    """The single-file ``legacy_db`` layout: index.db updated in one transaction, or, when it
    must be built from scratch, built beside it and renamed over it, so a failed build never
    leaves a half-built or empty index.db behind."""
    path = run.layout.legacy_path
    rebuild_reason = _legacy_rebuild_reason(path, run.config)
    if rebuild_reason is None:
        conn = _open_working(path, in_place=True)
        try:
            plan = plan_build(scan, scan_started_ns, conn, run.source)
            up_to_date = plan.up_to_date and _settings_kept(conn, run.source)
            extra: dict[str, Any] = {}
            if not up_to_date:
                with atomic(conn):
                    extra = _stage(conn, plan, run)
            return build_report(
                conn, plan, run, kind="legacy_db", generation_id=None, up_to_date=up_to_date, rebuild_reason=None,
                extra=extra,
            )  # fmt: skip
        finally:
            conn.close()
    fresh = path.with_name(path.name + ".building")
    fresh.unlink(missing_ok=True)
    try:
        conn = _open_working(fresh, in_place=True)
        try:
            create_schema(conn, run.config.tokenizer)
            plan = plan_build(scan, scan_started_ns, None, run.source)
            with atomic(conn):
                extra = _stage(conn, plan, run)
            report = build_report(
                conn,
                plan,
                run,
                kind="legacy_db",
                generation_id=None,
                up_to_date=False,
                rebuild_reason=rebuild_reason,
                extra=extra,
            )
        finally:
            conn.close()
        os.replace(fresh, path)
    finally:
        fresh.unlink(missing_ok=True)
    return report


def _make_source(
    vault: Path, index_dir: Path, config: IndexConfig, source: str, rev: str | None, rehash: Collection[str] = ()
) -> NoteSource:
    if source == "git":
        from core.build.gitbuild import GitSource  # only git-sourced builds need it

        return GitSource(
            vault, index_dir, config.max_note_bytes, rev or "HEAD", include_dot_paths=config.include_dot_paths
        )
    return WorkingTreeSource(
        vault, index_dir, config.max_note_bytes, include_dot_paths=config.include_dot_paths, rehash=rehash
    )
