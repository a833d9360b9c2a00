"""Stage and publish a build on a generation with a working database of its changes only (issue 29: an edit's
work and bytes written proportional to the change, not to the vault).

``core.build.builder`` used to stage every build on a base on a scratch copy of the WHOLE base
(``core.build.incremental.scratch_base``: ~50 MiB written for a one-note edit of SciFact), then extract the
delta from it. Here the working database is created empty and receives only what the delta segment carries:
the generation-level tables (meta, skipped files, build problems, git dates: copied from the base's newest
segment, ``core.index.tables.segments.GENERATION_TABLES``) and the changed and new notes, written by the same
code (``core.build.apply.write_changed``: an edited note keeps its id). What needs the rest of the vault reads
the verified base read-only (``core.build.base_view.BaseView``, the changed and removed notes left out):

- the replaced notes' names and ids (what links may have resolved to);
- link resolution (``core.build.link_graph.resolve_on_base``): the written notes' links against the base's
  live notes and the new ones; the carried-over links a new or gone name could change are resolved again in
  memory (``moved_on_base``);
- the racy rows and the source snapshot hash (over the carried-over notes' rows and the written ones: the
  hash a cold build of the same files stores), and the coverage ``validate`` checks;
- the generation record's counts and problems.

A carried-over note whose resolved edges the build moves (an add a dangling link now names, a delete or
rename of a note it links to, an aliases change) or whose mtime moved (a touch: same bytes) is re-published
in the delta like a changed note (``relink``): read again from the vault (its content must still be the base's),
written at its kept id with its base vectors, its links resolved with the others', its old copy tombstoned.
The delta so grows with the notes the change affects, not with the vault.

A build this cannot stage (``whole_base_reason`` before staging: a git source, a base part replaced since
verification; ``NotADelta`` after ingest: the rare link cases, more than ``RELINK_SHARE`` of the carried-over
notes to re-publish (a hub renamed), or one of them changed since the scan) is staged on the whole base as
before (its report's ``whole_base_reason`` says why), and publishes a delta or one segment.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace

from core.build import incremental
from core.build.apply import write_changed, write_relinked
from core.build.base_view import BaseView
from core.build.forward_rows import create_working, working_forward
from core.build.ingest import NoteWriter
from core.build.link_graph import ReplacedNote, moved_on_base, resolve_on_base
from core.build.lock import new_staging_path
from core.build.plan import BuildPlan, BuildRun
from core.build.publish_segments import publish_segments
from core.build.racy import racy_of, settle_racy_rows
from core.build.report import generation_record
from core.build.segment_writer import SMALL_PAGE
from core.build.source import BaseStats, Read, base_rows
from core.build.staged import snapshot_of, stamp_meta
from core.errors import GenerationChangedError, Sha256MismatchError
from core.index.layout import GenerationRecord, ResolvedIndex
from core.index.pinned import FD_DIR, sig_of
from core.index.schema import create_schema
from core.index.tables import segments as seg
from core.index.tables.chunk_vectors import chunks_by_position, insert_vectors
from core.index.tables.connection import atomic, set_journal_mode, set_page_size, set_working_mode
from core.index.tables.problems import all_problems
from core.index.tables.skipped_files import delete_skipped, source_stats

GIT_SOURCE = "whole_base_git_source"
TOUCHED = "whole_base_touched_notes"
PART_REPLACED = "whole_base_part_replaced"
LINKS = "whole_base_links_change"
RELINK_CHANGED = "whole_base_relinked_note_changed"  # a note to re-publish changed since the scan (rare)
RELINK_SHARE = 0.25  # more carried-over notes than this share to re-publish: staged on the whole base
RELINK_FLOOR = 32  # ... unless no more than this many
SMALL_CHANGE = 256  # notes: a working database of at most this many changes has SQLite pages of SMALL_PAGE


class NotADelta(Exception):
    """This build's changes cannot be staged on their own (``reason``: why); the builder stages it on the whole
    base instead. Never leaves ``core.build.builder``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def whole_base_reason(base: ResolvedIndex, plan: BuildPlan, run: BuildRun) -> str | None:
    """Why a build on ``base`` is staged on the whole base (None: on its changes only), decided before staging."""
    if run.source.kind != "worktree":  # its finish() dates every note of the working database
        return f"{GIT_SOURCE}: git dates are brought to the commit over every note"
    replaced = [p.path.name for p in base.parts if not incremental.same_inode(p)]
    if replaced:
        return f"{PART_REPLACED}: {len(replaced)} parts replaced since verification: {replaced[:3]}"
    return None


def _check_base(base: ResolvedIndex) -> None:
    """After staging, before publishing: every base part the delta shares or read is still the verified file.
    A path that names another inode now: ``NotADelta`` (the whole-base path copies the verified descriptor); a
    verified inode changed in place (its stat moved) is hashed again, and one that is not its SHA-256 raises
    (a doctored base is never laundered into the delta)."""
    for part in base.parts:
        if not incremental.same_inode(part):
            raise NotADelta(f"{PART_REPLACED}: {part.path.name} replaced since verification")
        pin = part.pinned
        if sig_of(os.fstat(pin.fd)) != pin.sig:
            sha, size = pin.digest()
            if (sha, size) != (part.sha256, part.size):
                raise Sha256MismatchError(
                    f"base part {part.path} changed since verification: SHA-256 {sha} ({size} bytes), "
                    f"the manifest says {part.sha256} ({part.size} bytes)",
                    path=str(part.path),
                    generation_id=base.generation_id,
                    expected=part.sha256,
                    actual=sha,
                )


def _copy_generation_tables(conn: sqlite3.Connection, base: ResolvedIndex) -> None:
    """The base's generation-level tables, from its newest segment (the one ``core.index.segmented`` reads)."""
    newest = [p for p in base.parts if p.kind == "segment"][-1]
    if not incremental.same_inode(newest):  # its verified inode has no name left to open it by
        raise NotADelta(f"{PART_REPLACED}: {newest.path.name} replaced since verification")
    path = FD_DIR / str(newest.pinned.fd) if FD_DIR.is_dir() else newest.path  # the verified inode
    seg.attach(conn, f"file:{path}?mode=ro&immutable=1", "src")
    try:
        with atomic(conn):
            seg.copy_generation_tables(conn, meta_only=False)
    finally:
        seg.detach(conn, "src")


def _base_view(base: ResolvedIndex, plan: BuildPlan) -> BaseView:
    """The base without the plan's changed and removed notes; a part that is not the verified file any more
    (replaced, or changed in place: ``GenerationChangedError``) sends the build to the whole-base path, which
    copies the verified descriptor and hashes what it copies."""
    try:
        return BaseView(base, plan.changed_ids + plan.removed_ids, plan.base)
    except GenerationChangedError as exc:
        raise NotADelta(f"{PART_REPLACED}: {exc}") from exc


def _relink_set(
    conn: sqlite3.Connection,
    view: BaseView,
    plan: BuildPlan,
    replaced: list[ReplacedNote],
    writer: NoteWriter,
    first: int,
) -> list[int]:
    """The carried-over notes the delta re-publishes: those whose resolved edges the build's notes move
    (``moved_on_base``) and those only touched (a new mtime). Raises ``NotADelta`` for the rare cases and when
    they are many (more than ``RELINK_SHARE`` of the carried-over notes, at least ``RELINK_FLOOR``)."""
    moved = moved_on_base(conn, view, new_from_id=first, replaced=replaced, kept=writer.kept)
    if isinstance(moved, str):
        raise NotADelta(f"{LINKS}: {moved}")
    ids = sorted(set(moved).union(nid for _, nid in plan.touched))
    if not ids:
        return []
    carried = view.counts()[0]
    if len(ids) > max(RELINK_FLOOR, int(carried * RELINK_SHARE)):
        if moved:
            raise NotADelta(
                f"{LINKS}: {len(moved)} unchanged notes have other resolved edges "
                f"({len(ids)} to re-publish of {carried} carried over: more than {RELINK_SHARE:.0%})"
            )
        raise NotADelta(f"{TOUCHED}: {len(ids)} notes with a new mtime and the same content of {carried}")
    return ids


def _reread(view: BaseView, plan: BuildPlan, run: BuildRun, ids: list[int]) -> tuple[list[Read], dict[str, int]]:
    """The files of the carried-over notes ``ids`` read again ((file, bytes, sha256), rel_path -> id): each as
    the scan listed it (its mtime), with the content the base holds. One that changed since (or cannot be read
    now) is carried over as the base holds it, as any file changed during a build: ``NotADelta``."""
    rows = view.file_rows(ids)
    by_path = {f.rel_path: f for f in plan.scan.files}
    files = [by_path[rows[nid][0]] for nid in ids if nid in rows and rows[nid][0] in by_path]
    if len(files) != len(ids):
        raise NotADelta(f"{RELINK_CHANGED}: {len(ids) - len(files)} notes to re-publish not in the scan")
    reads = run.source.read(files, defer=False)
    base_sha = {rel: sha for rel, sha in rows.values()}
    changed = [f.rel_path for f, _, sha in reads if sha is None or sha != base_sha[f.rel_path]]
    if changed:
        raise NotADelta(f"{RELINK_CHANGED}: {len(changed)} notes to re-publish changed since the scan: {changed[:3]}")
    return reads, {rows[nid][0]: nid for nid in ids}


def _carry_vectors(conn: sqlite3.Connection, view: BaseView, ids: list[int]) -> int:
    """The base's dense vectors of the re-published notes' chunks onto their new chunk rows; how many. A note
    re-published holds the content the base holds (``_reread`` checks its SHA-256), so a chunk at the same
    ord and the same offsets of its body is the same text (chunk rows store no digest of their text)."""
    found = {(nid, ord_, start, end): vector for nid, ord_, start, end, vector in view.vectors(ids)}
    if not found:
        return 0
    rows = [
        (cid, found[key])
        for cid, *position in chunks_by_position(conn, json.dumps(ids))
        if (key := tuple(position)) in found
    ]
    insert_vectors(conn, rows)
    return len(rows)


def relink(
    conn: sqlite3.Connection,
    view: BaseView,
    plan: BuildPlan,
    run: BuildRun,
    written: tuple[NoteWriter, int, list[ReplacedNote]],
) -> tuple[list[int], list[ReplacedNote]]:
    """Re-publish in the delta, at their kept ids, the carried-over notes whose edges or mtime the build moves
    (``_relink_set``): read again from the vault like changed notes, their base copies left out of ``view``
    (the delta tombstones them); their base vectors carried. ``written``: (the writer of the plan's notes, the
    first new id, the notes it replaced). (their ids, them as the base holds them)."""
    writer, first, replaced = written
    ids = _relink_set(conn, view, plan, replaced, writer, first)
    if not ids:
        return [], []
    reads, keep = _reread(view, plan, run, ids)
    missing = write_relinked(conn, writer, run, reads, keep)
    if missing:
        raise NotADelta(f"{RELINK_CHANGED}: notes {missing[:3]} did not read back as notes")
    _carry_vectors(conn, view, ids)
    return ids, view.leave_out(ids)


def stage_changes(
    conn: sqlite3.Connection,
    view: BaseView,
    plan: BuildPlan,
    run: BuildRun,
    validate: Callable[[sqlite3.Connection, BuildPlan], None],
) -> tuple[dict[str, int], list[int]]:
    """Write the plan's changes into the empty working database ``conn`` (schema and generation tables made),
    and the carried-over notes whose edges or mtime they move (``relink``), stamp its meta, validate; (the
    report's extra counts, the re-published notes' ids). Raises ``NotADelta`` when those cannot be
    re-published (the rare cases, or too many)."""
    t = time.perf_counter()
    with atomic(conn):
        create_working(conn)  # the delta's term vectors: TEMP tables, never stored
        replaced = view.replaced()
        delete_skipped(conn, plan.removed_skipped)
        writer, first_new_id = write_changed(conn, plan, run, replaced)
        started = time.perf_counter()
        relinked, again = relink(conn, view, plan, run, (writer, first_new_id, replaced))
        run.timings["relink"] = time.perf_counter() - started  # part of "write"
        started = time.perf_counter()
        links = resolve_on_base(
            conn, view, new_from_id=first_new_id, replaced=replaced + again, kept=writer.kept
        )  # fmt: skip
        run.timings["links"] = time.perf_counter() - started  # part of "write"
        if isinstance(links, str):
            raise NotADelta(f"{LINKS}: {links}")
        run.source.finish(conn)
        carried = view.carried_stats()
        rows = sorted(carried + list(source_stats(conn)))
        scan_ns = settle_racy_rows(racy_of(rows, plan.scan_started_ns), run.root, plan.scan_started_ns)
        stamp_meta(conn, run, scan_ns, snapshot_of((row[0], row[1]) for row in rows))
    t = run.lap("write", t)
    plan.base_paths = {row[0] for row in carried}
    validate(conn, plan)
    if not run.source_may_change:
        run.source.check_unchanged(plan.scan, plan.read, plan.gone_paths)
    run.lap("validate", t)
    extra = {"links": links[0], "unresolved_links": links[1]}
    return (extra | {"relinked_notes": len(relinked)}) if relinked else extra, relinked


def _record(conn: sqlite3.Connection, view: BaseView, run: BuildRun) -> GenerationRecord:
    """The generation record of the base's carried-over notes and the working database's."""
    record = generation_record(conn, run.config, run.timings)
    notes, chunks, dense = view.counts()
    problems = sorted(all_problems(conn) + view.note_problems(), key=lambda p: (p["path"], p["reason"]))
    return replace(
        record,
        notes=record.notes + notes,
        chunks=record.chunks + chunks,
        dense_chunks=record.dense_chunks + dense,
        problems=[{"path": p["path"], "reason": p["reason"]} for p in problems],
    )


def publish_changes(
    run: BuildRun,
    active_id: str | None,
    base: ResolvedIndex,
    plan: BuildPlan,
    *,
    keep: int,
    on_step: Callable[[str], None] | None,
    hook: Callable[[sqlite3.Connection], int] | None,
    validate: Callable[[sqlite3.Connection, BuildPlan], None],
) -> tuple[ResolvedIndex, dict[str, int], tuple[str, str] | None]:
    """Stage the plan's changes on their own, run the hook, publish the delta (``incremental.delta_parts``);
    (published, extra, the segment-limit merge if one was needed). Raises ``NotADelta`` (nothing published)."""
    staging = new_staging_path(run.layout)
    run.first_ids = incremental.first_ids(base)
    try:
        conn = sqlite3.connect(staging, isolation_level=None)
        try:
            if len(plan.changed) <= SMALL_CHANGE:  # ~40 tables and indexes take a page each at least
                set_page_size(conn, SMALL_PAGE)
            set_working_mode(conn, durable=False)  # a staging file is thrown away on any failure
            create_schema(conn, run.config.tokenizer)
            _copy_generation_tables(conn, base)
            with _base_view(base, plan) as view:
                extra, relinked = stage_changes(conn, view, plan, run, validate)
                next_base = BaseStats([*view.carried_rows(), *base_rows(conn)]) if run.known is not None else None
                if hook is not None:
                    t = time.perf_counter()
                    extra["embedded"] = hook(conn)
                    run.lap("embed", t)
                record = _record(conn, view, run)
            _check_base(base)
            built = working_forward(conn)  # the delta's vectors
            set_journal_mode(conn, "DELETE")
        finally:
            conn.close()
        t = time.perf_counter()
        delta = incremental.delta_parts(
            run.layout,
            base,
            staging,
            replace(plan, changed_ids=plan.changed_ids + relinked),
            run.first_ids[0],
            run.config.tokenizer,
            built,
        )  # fmt: skip  (the re-published notes' ids: in the segment, tombstoned in the base like changed ones)
        extra.update(incremental.tombstone_extra(delta))
        published = publish_segments(
            run.layout, delta.segments, delta.tombstones, record, next_ids=delta.next_ids,
            expected_base=active_id, keep=keep, on_step=on_step,
        )  # fmt: skip
        run.lap("publish", t)
    finally:
        staging.unlink(missing_ok=True)
    run.next_base = next_base  # the published generation's rows: the carried-over notes' and the delta's
    merged = None if delta.merged is None else (incremental.SEGMENT_LIMIT, delta.merged)
    return published, extra, merged
