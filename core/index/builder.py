"""Build the derived index of a vault and publish it as a new immutable generation.

    scan -> plan (diff against the active generation) -> working DB (a copy of the active
    generation, or a fresh one) -> delete changed/removed notes, add changed/new ones ->
    re-resolve links -> validate -> source unchanged? -> generations.publish

Unchanged notes (same content hash) keep their rows, chunks, term vectors and dense
vectors because the working database starts as a byte copy of the verified active
generation. ``in_place=True`` applies the same plan to one writable ``index.db`` in a
single transaction instead (the ``legacy_db`` layout).

Changed notes are read, parsed, chunked and counted by ``core.index.ingest.prepared_notes`` - in
forked worker processes when there are many - while this process gives them ids, maps
their words to FTS5 terms and writes the rows (``core.index.ingest.NoteWriter``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from core import generations as gen
from core.errors import IntegrityError, SourceChangedError, ValidationError
from core.index.ingest import NoteWriter, default_workers, delete_notes, prepared_notes, read_source, recompute_edges
from core.index.schema import SCHEMA_VERSION, atomic, create_schema, get_meta, set_meta
from core.ranking.analysis import analyzer_for, check_tokenizer
from core.ranking.chunk_vectors import compute_chunk_vectors, store_chunk_vectors
from core.ranking.sparse import compute_sparse, store_sparse
from core.vault.chunking import CHUNKER_VERSION
from core.vault.scan import MAX_NOTE_BYTES, ScannedFile, ScanResult, scan_vault

DEFAULT_TOKENIZER = "porter unicode61 remove_diacritics 2"
# A file whose mtime is this close to the previous build's scan may have changed within
# the same timestamp tick; it is re-hashed instead of trusted by (mtime, size).
_RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class IndexConfig:
    """Everything that shapes the index. Chunker and tokenizer are part of its identity."""

    chunk_size: int = 600
    chunk_overlap: int = 60
    tokenizer: str = DEFAULT_TOKENIZER
    max_note_bytes: int = MAX_NOTE_BYTES

    def __post_init__(self) -> None:
        check_tokenizer(self.tokenizer)

    @property
    def chunker(self) -> str:
        return f"{CHUNKER_VERSION}:{self.chunk_size}:{self.chunk_overlap}"

    def identity(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "chunker": self.chunker, "tokenizer": self.tokenizer}


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
    links: int = 0
    unresolved_links: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Plan:
    scan: ScanResult
    scan_started_ns: int
    unchanged: dict[str, int]  # rel_path -> note id (or -1 for skipped files)
    changed: list[tuple[ScannedFile, bytes | None, str | None]]  # file, content, sha256 (None: not read yet)
    changed_ids: list[int]  # base note ids of modified notes
    removed_ids: list[int]
    removed_skipped: list[str]
    added: int = 0

    @property
    def up_to_date(self) -> bool:
        return not (self.changed or self.changed_ids or self.removed_ids or self.removed_skipped)


@dataclass
class _Run:
    """One build: what it was asked to do, and its timings so far."""

    vault: Path
    layout: gen.IndexLayout
    config: IndexConfig
    progress: bool
    workers: int | None
    started: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)

    def lap(self, name: str, since: float) -> float:
        """Record the seconds since ``since`` as timing ``name``; return now."""
        now = time.perf_counter()
        self.timings[name] = now - since
        return now


def _open_working(path: Path, *, in_place: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    if in_place:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA synchronous=FULL")
    else:  # a staging file is thrown away on any failure: no need for a durable journal
        conn.execute("PRAGMA journal_mode=MEMORY")
        conn.execute("PRAGMA synchronous=OFF")
    return conn


def _base_rows(conn: sqlite3.Connection | None) -> tuple[dict[str, tuple], dict[str, tuple], dict[str, Any]]:
    if conn is None:
        return {}, {}, {}
    notes = {r[0]: r[1:] for r in conn.execute("SELECT rel_path, id, content_sha256, mtime_ns, size FROM notes")}
    skipped = {
        r[0]: (-1, *r[1:]) for r in conn.execute("SELECT rel_path, content_sha256, mtime_ns, size FROM skipped_files")
    }
    return notes, skipped, get_meta(conn)


def _plan(scan: ScanResult, scan_started_ns: int, base: sqlite3.Connection | None) -> _Plan:
    notes, skipped, meta = _base_rows(base)
    racy_after = int(meta.get("scan_started_ns", 0)) - _RACY_NS
    plan = _Plan(scan, scan_started_ns, {}, [], [], [], [])
    seen = set()
    for f in scan.files:
        seen.add(f.rel_path)
        old = notes.get(f.rel_path) or skipped.get(f.rel_path)
        if old is None:  # new: read and hashed where it is parsed (perhaps in a worker process)
            plan.changed.append((f, None, None))
            plan.added += 1
            continue
        if old[2] == f.mtime_ns and old[3] == f.size and f.mtime_ns < racy_after:
            plan.unchanged[f.rel_path] = old[0]
            continue
        data, sha = read_source(f.rel_path, f.path)
        if old[1] == sha:
            plan.unchanged[f.rel_path] = old[0]  # touched, content identical: keep
            continue
        plan.changed.append((f, data, sha))
        if old[0] >= 0:
            plan.changed_ids.append(old[0])
        else:
            plan.removed_skipped.append(f.rel_path)
    plan.removed_ids = [v[0] for k, v in notes.items() if k not in seen]
    plan.removed_skipped += [k for k in skipped if k not in seen]
    return plan


def _apply(conn: sqlite3.Connection, plan: _Plan, run: _Run) -> dict[str, int]:
    """Apply the plan inside the caller's transaction."""
    delete_notes(conn, plan.changed_ids + plan.removed_ids)
    conn.executemany("DELETE FROM skipped_files WHERE rel_path = ?", [(p,) for p in plan.removed_skipped])
    items = [(f.rel_path, str(f.path), data, sha, f.mtime_ns, f.size) for f, data, sha in plan.changed]
    workers = default_workers(len(items)) if run.workers is None else run.workers
    writer = NoteWriter(conn, analyzer_for(run.config.tokenizer))
    first_new_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM notes").fetchone()[0]
    with (
        prepared_notes(
            items, chunk_size=run.config.chunk_size, chunk_overlap=run.config.chunk_overlap, workers=workers
        ) as batches,
        tqdm(total=len(items), desc="indexing", unit="note", disable=not run.progress) as bar,
    ):
        for batch in batches:
            writer.add_batch(batch)
            bar.update(len(batch.notes))
    writer.flush()
    conn.execute("DELETE FROM build_problems")
    conn.executemany(
        "INSERT INTO build_problems(path, reason, detail) VALUES (?, ?, ?)",
        [(p.path, p.reason, p.detail) for p in plan.scan.problems],
    )
    links, unresolved = recompute_edges(conn, new_from_id=first_new_id)
    return {"links": links, "unresolved_links": unresolved}


def snapshot_hash(conn: sqlite3.Connection) -> str:
    """SHA-256 over the sorted (rel_path, content sha256) of every source file read."""
    h = hashlib.sha256()
    rows = conn.execute(
        "SELECT rel_path, content_sha256 FROM notes UNION ALL "
        "SELECT rel_path, content_sha256 FROM skipped_files ORDER BY 1"
    )
    for rel, sha in rows:
        h.update(f"{rel}\0{sha}\n".encode())
    return h.hexdigest()


def all_problems(conn: sqlite3.Connection) -> list[dict[str, str]]:
    """Every current problem: scan problems, skipped files, per-note parse problems."""
    rows = conn.execute(
        "SELECT path, reason, detail FROM build_problems "
        "UNION ALL SELECT rel_path, reason, detail FROM skipped_files "
        "UNION ALL SELECT n.rel_path, p.reason, p.detail FROM note_problems p JOIN notes n ON n.id = p.note_id "
        "ORDER BY 1, 2"
    )
    return [{"path": p, "reason": r, "detail": d} for p, r, d in rows]


def _validate(conn: sqlite3.Connection, scan: ScanResult) -> None:
    """Exact source coverage and consistent counts; collects every problem, raises once."""
    found: list[str] = []
    indexed = {r[0] for r in conn.execute("SELECT rel_path FROM notes UNION ALL SELECT rel_path FROM skipped_files")}
    expected = {f.rel_path for f in scan.files}
    if indexed != expected:
        found.append(f"coverage: missing {sorted(expected - indexed)[:5]}, extra {sorted(indexed - expected)[:5]}")
    checks = {
        "notes vs notes_fts": "SELECT (SELECT count(*) FROM notes) - (SELECT count(*) FROM notes_fts)",
        "notes vs note_terms": "SELECT (SELECT count(*) FROM notes) - (SELECT count(*) FROM note_terms)",
        "notes vs chunk_terms": "SELECT (SELECT count(*) FROM notes) - (SELECT count(*) FROM chunk_terms)",
        "chunk_terms vs chunks": "SELECT (SELECT count(*) FROM chunks) - "
        "(SELECT coalesce(sum(length(lengths)), 0) / 4 FROM chunk_terms)",
        "notes without chunks": "SELECT count(*) FROM notes WHERE id NOT IN (SELECT note_id FROM chunks)",
        "orphan chunks": "SELECT count(*) FROM chunks WHERE note_id NOT IN (SELECT id FROM notes)",
        "orphan vectors": "SELECT count(*) FROM chunk_vectors WHERE chunk_id NOT IN (SELECT id FROM chunks)",
    }
    for name, sql in checks.items():
        n = conn.execute(sql).fetchone()[0]
        if n:
            found.append(f"{name}: {n}")
    meta = get_meta(conn)
    if conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] and not meta.get("dense_model"):
        found.append("dense manifest: vectors without a model identity")
    if found:
        raise ValidationError("the staged index failed validation: " + "; ".join(found), problems=found)


def _check_source_unchanged(vault: Path, index_dir: Path, scan: ScanResult, max_bytes: int) -> None:
    again = scan_vault(vault, index_dir=index_dir, max_bytes=max_bytes)
    before = {f.rel_path: (f.mtime_ns, f.size) for f in scan.files}
    after = {f.rel_path: (f.mtime_ns, f.size) for f in again.files}
    if before != after:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        raise SourceChangedError(
            f"{len(changed)} file(s) changed during the build, e.g. {changed[:3]}", paths=changed[:20]
        )


@dataclass(frozen=True)
class _Base:
    """Where a build starts: the active generation (publish swaps the pointer from it) and, when
    that generation verifies and has this build's identity, the copy to carry notes over from."""

    active_id: str | None
    carry: gen.ResolvedIndex | None
    rebuild_reason: str | None


def _open_base(layout: gen.IndexLayout, config: IndexConfig) -> _Base:
    try:
        record = gen.active_record(layout)
    except IntegrityError as exc:
        return _Base(None, None, f"active_generation_rejected:{exc.reason}")
    if record is None:
        return _Base(None, None, "no_active_generation")
    try:
        base = gen.resolve(layout)
    except IntegrityError as exc:  # a broken base is not carried over; the new build is complete on its own
        return _Base(record["generation_id"], None, f"active_generation_rejected:{exc.reason}")
    conn = gen.connect_readonly(base)
    try:
        meta = get_meta(conn)
    finally:
        conn.close()
    if any(meta.get(k) != v for k, v in config.identity().items()):
        return _Base(base.generation_id, None, "index_identity_changed")
    return _Base(base.generation_id, base, None)


def _report(
    conn: sqlite3.Connection,
    plan: _Plan,
    run: _Run,
    *,
    kind: str,
    generation_id: str | None,
    up_to_date: bool,
    rebuild_reason: str | None,
    extra: dict[str, int],
) -> BuildReport:
    notes = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return BuildReport(
        generation_id=generation_id,
        index_kind=kind,
        notes=notes,
        chunks=chunks,
        reused=len(plan.unchanged),
        changed=len(plan.changed),
        added=plan.added,
        removed=len(plan.removed_ids) + len(plan.removed_skipped),
        problems=all_problems(conn),
        seconds=round(time.perf_counter() - run.started, 4),
        up_to_date=up_to_date,
        full_rebuild_reason=rebuild_reason,
        timings={k: round(v, 4) for k, v in run.timings.items()},
        **extra,
    )


def _stage(conn: sqlite3.Connection, plan: _Plan, run: _Run) -> dict[str, int]:
    """Apply the plan, stamp meta, validate, and check that the source did not move."""
    t = time.perf_counter()
    with atomic(conn):
        extra = _apply(conn, plan, run)
        set_meta(
            conn,
            {
                **run.config.identity(),
                "scan_started_ns": plan.scan_started_ns,
                "max_note_bytes": run.config.max_note_bytes,
                "source_snapshot_hash": snapshot_hash(conn),
                "built_at": time.time(),
            },
        )
    with atomic(conn):  # the term-major arrays readers load in one query (core.ranking.stored)
        sparse = compute_sparse(conn)
        store_sparse(conn, sparse)
        store_chunk_vectors(conn, compute_chunk_vectors(conn, sparse))
    t = run.lap("write", t)
    _validate(conn, plan.scan)
    _check_source_unchanged(run.vault, run.layout.index_dir, plan.scan, run.config.max_note_bytes)
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
) -> BuildReport:
    """Index ``vault`` and publish a verified generation (or update ``index.db`` in place).

    An unchanged vault publishes nothing and reports ``up_to_date=True``. ``workers`` is the
    number of processes that parse notes (``None``: all cores, up to 4, for a large batch of
    changed notes where fork is available; 1: in this process). It changes speed only,
    never the index.
    """
    vault = Path(vault).resolve()
    layout = gen.layout_for(vault, index_dir)
    run = _Run(vault, layout, config or IndexConfig(), progress, workers)
    gen.ensure_layout(layout)
    with gen.build_lock(layout, wait_seconds=wait_seconds):
        t = time.perf_counter()
        scan_started_ns = time.time_ns()
        scan = scan_vault(vault, index_dir=layout.index_dir, max_bytes=run.config.max_note_bytes)
        run.lap("scan", t)
        if in_place:
            return _build_in_place(run, scan, scan_started_ns)
        return _build_generation(run, scan, scan_started_ns, keep=keep, on_step=on_step)


def _build_generation(
    run: _Run, scan: ScanResult, scan_started_ns: int, *, keep: int, on_step: Callable[[str], None] | None
) -> BuildReport:
    """Plan against the verified active generation; stage a copy of it; publish the result."""
    t = time.perf_counter()
    start = _open_base(run.layout, run.config)
    base = start.carry
    base_conn = gen.connect_readonly(base) if base else None
    try:
        plan = _plan(scan, scan_started_ns, base_conn)
        run.lap("plan", t)
        if base is not None and base_conn is not None and plan.up_to_date:
            return _report(
                base_conn,
                plan,
                run,
                kind="immutable_generation",
                generation_id=base.generation_id,
                up_to_date=True,
                rebuild_reason=None,
                extra={},
            )
    finally:
        if base_conn is not None:
            base_conn.close()
    staging = gen.new_staging_path(run.layout)
    try:
        if base is not None:
            gen.copy_base(base, staging)
        conn = _open_working(staging, in_place=False)
        try:
            if base is None:
                create_schema(conn, run.config.tokenizer)
            extra = _stage(conn, plan, run)
            record = _record(conn, run.config, run.timings)
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
        t = time.perf_counter()
        published = gen.publish(run.layout, staging, record, expected_base=start.active_id, keep=keep, on_step=on_step)
        run.lap("publish", t)
    finally:
        staging.unlink(missing_ok=True)
    conn = gen.connect_readonly(published)
    try:
        return _report(
            conn,
            plan,
            run,
            kind="immutable_generation",
            generation_id=published.generation_id,
            up_to_date=False,
            rebuild_reason=start.rebuild_reason,
            extra=extra,
        )
    finally:
        conn.close()


def _record(conn: sqlite3.Connection, config: IndexConfig, timings: dict[str, float]) -> gen.GenerationRecord:
    meta = get_meta(conn)

    def count(sql: str) -> int:
        return int(conn.execute(sql).fetchone()[0])

    dense_model = meta.get("dense_model")
    return gen.GenerationRecord(
        source_snapshot_hash=meta["source_snapshot_hash"],
        notes=count("SELECT count(*) FROM notes"),
        chunks=count("SELECT count(*) FROM chunks"),
        dense_chunks=count("SELECT count(*) FROM chunk_vectors"),
        chunker=config.chunker,
        tokenizer=config.tokenizer,
        timings=dict(timings),
        problems=[{"path": p["path"], "reason": p["reason"]} for p in all_problems(conn)],
        dense_model=None if dense_model is None else json.dumps(dense_model, sort_keys=True),
    )


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


def _build_in_place(run: _Run, scan: ScanResult, scan_started_ns: int) -> BuildReport:
    """The single-file ``legacy_db`` layout: index.db updated in one transaction, or, when it
    must be built from scratch, built beside it and renamed over it, so a failed build never
    leaves a half-built or empty index.db behind."""
    path = run.layout.legacy_path
    rebuild_reason = _legacy_rebuild_reason(path, run.config)
    if rebuild_reason is None:
        conn = _open_working(path, in_place=True)
        try:
            plan = _plan(scan, scan_started_ns, conn)
            if plan.up_to_date:
                return _report(
                    conn,
                    plan,
                    run,
                    kind="legacy_db",
                    generation_id=None,
                    up_to_date=True,
                    rebuild_reason=None,
                    extra={},
                )
            with atomic(conn):
                extra = _stage(conn, plan, run)
            return _report(
                conn,
                plan,
                run,
                kind="legacy_db",
                generation_id=None,
                up_to_date=False,
                rebuild_reason=None,
                extra=extra,
            )
        finally:
            conn.close()
    fresh = path.with_name(path.name + ".building")
    fresh.unlink(missing_ok=True)
    try:
        conn = _open_working(fresh, in_place=True)
        try:
            create_schema(conn, run.config.tokenizer)
            plan = _plan(scan, scan_started_ns, None)
            with atomic(conn):
                extra = _stage(conn, plan, run)
            report = _report(
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
