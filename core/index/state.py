"""The generation-state database: which generations exist and which one is active.

A small SQLite file (``state.db``) beside ``manifests/`` and ``segments/``; a row names its
generation's manifest (``core.index.manifest``). What its rows mean lives here (its
tables and statements are ``core.index.tables.state_db``); ``core.build.publish`` and
``core.index.verify`` publish and verify through these functions. The first state
DB is built whole in ``staging/`` and renamed into place, so ``state.db`` either does not
exist or holds a complete schema with an active generation.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import BuildLockedError, IndexBusyError, SchemaMismatchError, StateCorruptError, VaultMismatchError
from core.index.layout import vault_identity
from core.index.tables import state_db
from core.index.tables.connection import atomic, set_journal_mode, set_page_size, table_names

if TYPE_CHECKING:
    from core.index.layout import GenerationRecord, IndexLayout

# The timing key of a generation's record that holds its embed call's chunks per second (core.build.embed).
EMBED_RATE_KEY = "embed_chunks_per_s"

STATE_TIMEOUT_S = 10.0
# The state DB runs in journal_mode=DELETE, not WAL: a WAL reader writes the -shm file on every open, while
# in rollback mode a reader only takes shared locks and never writes. So the state file's stat fingerprint
# changes only when a publish commits, which is what makes the verified-identity cache below sound.
# 2: meta holds 'vault_identity' (which vault this index is of: core.index.layout.vault_identity).
# 3: a generation is a manifest of content-addressed segments (file_name/sha256/size are the manifest's,
#    removed_at starts the part grace period); a state of schema 2 names one-file generations/<gid>.db.
STATE_SCHEMA_VERSION = 3
# a few rows in 3 tables and their indexes, each a page at least: 24 KB in 4 KB pages, 7 KB in 1 KB pages
STATE_PAGE = 1024
ONE_FILE_STATE_VERSION = "2"  # the format before manifests: rebuilt whole by the next build
BUSY_ERRORS = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY"})


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (a rename is durable only once its directory is synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- reading the state database ---------------------------------------------------------------------------


def state_error(layout: IndexLayout, message: str, **evidence: Any) -> StateCorruptError:
    return StateCorruptError(
        f"generation state {layout.state_path} is unusable: {message}",
        path=str(layout.state_path),
        **evidence,
        hint=f"run: vaultsearch index {layout.vault} (the build moves the unusable state.db of {layout.index_dir}"
        " aside and rebuilds the derived index)",
    )


def open_state(layout: IndexLayout) -> sqlite3.Connection:
    """Open the existing state DB (never creates it). ``mode=rw`` so that SQLite can roll back a hot
    journal left by a publisher that died mid-transaction; otherwise a reader writes nothing."""
    uri = f"{layout.state_path.resolve().as_uri()}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=STATE_TIMEOUT_S)
    conn.row_factory = sqlite3.Row
    return conn


def check_state_schema(layout: IndexLayout, conn: sqlite3.Connection) -> None:
    tables = table_names(conn)
    missing = [name for name in state_db.STATE_TABLES if name not in tables]
    if missing:
        raise state_error(layout, f"missing tables {missing}", missing_tables=missing)
    version = state_db.state_version(conn)
    if version != str(STATE_SCHEMA_VERSION):
        older = " (one-file generations, before manifests)" if version == ONE_FILE_STATE_VERSION else ""
        raise SchemaMismatchError(
            f"generation state schema {version!r}{older} is not {STATE_SCHEMA_VERSION}",
            path=str(layout.state_path),
            expected=STATE_SCHEMA_VERSION,
            actual=version,
            hint=f"rebuild with: vaultsearch index {layout.vault} (the build replaces the index of {layout.index_dir})",
        )


def check_vault_identity(layout: IndexLayout, conn: sqlite3.Connection) -> None:
    """The state names the vault it indexes: another vault's index is never served or built upon."""
    expected, actual = vault_identity(layout), state_db.state_vault(conn)
    if actual != expected:
        raise VaultMismatchError(
            f"index directory {layout.index_dir} holds the index of another vault ({actual}), not of "
            f"{layout.vault} ({expected})",
            index_dir=str(layout.index_dir),
            expected=expected,
            actual=actual,
        )


def decode_row(layout: IndexLayout, row: sqlite3.Row) -> dict[str, Any]:
    record = dict(row)
    try:
        record["timings"] = json.loads(record["timings"])
        record["problems"] = json.loads(record["problems"])
    except json.JSONDecodeError as exc:
        raise state_error(layout, f"generation {record['generation_id']} has invalid JSON: {exc}") from exc
    return record


def active_row(layout: IndexLayout, conn: sqlite3.Connection) -> dict[str, Any]:
    """The active generation's row, checked for consistency with the pointer (no file access)."""
    check_state_schema(layout, conn)
    check_vault_identity(layout, conn)
    pointer = state_db.active_id(conn)
    if pointer is None:
        raise state_error(layout, "no active generation pointer")
    row = state_db.generation_row(conn, pointer)
    if row is None:
        raise state_error(layout, f"active pointer names unknown generation {pointer!r}", active=pointer)
    record = decode_row(layout, row)
    if record["status"] != "ready":
        raise state_error(layout, f"active generation {pointer} is marked {record['status']}", active=pointer)
    if record["file_name"] != f"{record['sha256']}.json":
        raise state_error(
            layout,
            f"generation {pointer} names file {record['file_name']!r}",
            active=pointer,
            file_name=record["file_name"],
        )
    return record


def with_state(layout: IndexLayout, read: Callable[[sqlite3.Connection], Any]) -> Any:
    """Run ``read`` on the state DB; SQLite failures become ``StateCorruptError`` (fail closed)."""
    try:
        conn = open_state(layout)
        try:
            return read(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        name = getattr(exc, "sqlite_errorname", None)
        if name in BUSY_ERRORS:  # a lock someone holds is not corruption: say so, advise a retry
            raise IndexBusyError(
                f"generation state {layout.state_path} is locked by another process: {exc}",
                path=str(layout.state_path),
                sqlite_error=name,
            ) from exc
        raise state_error(layout, str(exc), sqlite_error=name) from exc


def active_record(layout: IndexLayout) -> dict[str, Any] | None:
    """The active generation's state row WITHOUT hashing (for ``status`` and the builder's base id);
    ``None`` when no generation state exists. Carry data over only from a ``resolve``d (verified) index."""
    if not layout.state_path.exists():
        return None
    return with_state(layout, lambda conn: active_row(layout, conn))


def list_generations(layout: IndexLayout) -> list[dict[str, Any]]:
    """Every generation row, newest first, each with ``active`` (bool) added; ``[]`` without state."""
    if not layout.state_path.exists():
        return []

    def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
        active_id = active_row(layout, conn)["generation_id"]
        rows = [decode_row(layout, row) for row in state_db.generation_rows(conn)]
        return [{**row, "active": row["generation_id"] == active_id} for row in rows]

    return with_state(layout, read)


def check_base(actual: str | None, expected: str | None) -> None:
    if actual != expected:
        raise BuildLockedError(
            f"another build published first (active is {actual}, this build started from {expected})",
            expected=expected,
            actual=actual,
        )


def record_row(
    record: GenerationRecord, gid: str, manifest_sha256: str, manifest_size: int, created_at: float
) -> dict[str, Any]:
    """The state row of a generation: its manifest's name, SHA-256 and size, and the build's counts."""
    return {
        "generation_id": gid,
        "file_name": f"{manifest_sha256}.json",
        "sha256": manifest_sha256,
        "size": manifest_size,
        "source_snapshot_hash": record.source_snapshot_hash,
        "notes": record.notes,
        "chunks": record.chunks,
        "dense_chunks": record.dense_chunks,
        "chunker": record.chunker,
        "tokenizer": record.tokenizer,
        "dense_model": record.dense_model,
        "timings": json.dumps(record.timings, sort_keys=True),
        "problems": json.dumps(record.problems, sort_keys=True),
        "created_at": created_at,
    }


def commit_state(layout: IndexLayout, row: dict[str, Any], expected_base: str | None) -> None:
    """Insert the generation row and flip the active pointer in one transaction (compare-and-swap).

    The very first state DB is built whole in staging/ and renamed into place, so state.db either
    does not exist or holds a complete schema with an active generation.
    """

    def swap(conn: sqlite3.Connection) -> None:
        with atomic(conn):
            check_base(state_db.active_id(conn), expected_base)
            state_db.insert_generation(conn, row)
            state_db.set_active(conn, row["generation_id"])

    def checked_swap(conn: sqlite3.Connection) -> None:
        check_state_schema(layout, conn)
        check_vault_identity(layout, conn)
        swap(conn)

    if layout.state_path.exists():
        with_state(layout, checked_swap)
        return
    check_base(None, expected_base)
    temp = layout.staging_dir / f"state-{os.urandom(16).hex()}.db.tmp"
    try:
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            set_page_size(conn, STATE_PAGE)
            set_journal_mode(conn, "DELETE")
            state_db.create_state(conn, STATE_SCHEMA_VERSION, vault_identity(layout))
            swap(conn)
        finally:
            conn.close()
        fsync_path(temp)
        os.replace(temp, layout.state_path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_path(layout.index_dir)


def move_aside_unusable_state(layout: IndexLayout) -> tuple[str, str, str] | None:
    """Under the build lock: a corrupt state DB (or one of another schema) is moved aside, so that this
    build starts a fresh one; returns the problem to report. Until then readers fail closed on it. A
    state DB that is locked (``IndexBusyError``) or of another vault (``VaultMismatchError``) is left
    alone and the error raised: neither is corruption."""
    if not layout.state_path.exists():
        return None
    try:
        with_state(layout, lambda conn: active_row(layout, conn))
        return None
    except SchemaMismatchError as exc:
        if exc.evidence.get("actual") == ONE_FILE_STATE_VERSION:
            why = "index_format_changed: one-file generations are replaced by manifests of segments"
        else:
            why = f"{exc.reason}: {exc.message}"
    except StateCorruptError as exc:
        why = f"{exc.reason}: {exc.message}"
    stamp = time.time_ns()
    aside = layout.index_dir / f"state.db.corrupt-{stamp}"
    journal = Path(f"{layout.state_path}-journal")
    if journal.exists():
        os.replace(journal, layout.index_dir / f"state.db-journal.corrupt-{stamp}")
    os.replace(layout.state_path, aside)
    fsync_path(layout.index_dir)
    return ("state.db", "state_recovered", f"{why}; moved aside to {aside.name}, index rebuilt")


def mark_removed(layout: IndexLayout, generation_ids: list[str], removed_at: float) -> None:
    """Mark generations removed at ``removed_at`` (their manifests and parts outlive it by a grace period)."""

    def mark(conn: sqlite3.Connection) -> None:
        with atomic(conn):
            for gid in generation_ids:
                state_db.mark_removed(conn, gid, removed_at)

    with_state(layout, mark)


# --- the verification record (verified.json beside state.db) ---------------------------------------------
# Written by a process that hashed the active generation, read by later processes to skip that hash while
# every fingerprint it names is unchanged (generations.resolve decides; docs/architecture.md, threat model).

RECORD_NAME = "verified.json"
RECORD_FORMAT = 2  # 2: one entry per part, keyed by the part's SHA-256 (core.index.parts)
RECORD_MAX_BYTES = 1 << 16


def record_path(layout: IndexLayout) -> Path:
    return layout.index_dir / RECORD_NAME


def _record_digest(body: dict[str, Any]) -> str:
    import hashlib  # only where a record is read or written, not on import

    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_verification(layout: IndexLayout) -> tuple[dict[str, Any] | None, str]:
    """(body, status) of the verification record; status is ``ok``, ``absent``, ``not_a_file`` or ``invalid``
    (unparsable, truncated, another format, or a body that does not match its own digest): anything but
    ``ok`` means hash again. Opened non-blocking and checked to be a regular file (a FIFO never hangs)."""
    try:
        fd = os.open(record_path(layout), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, "absent"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not_a_file"
        raw = os.read(fd, RECORD_MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None, "invalid"
    body = doc.get("body") if isinstance(doc, dict) else None
    if not isinstance(body, dict) or doc.get("format") != RECORD_FORMAT or doc.get("digest") != _record_digest(body):
        return None, "invalid"
    return body, "ok"


def write_verification(layout: IndexLayout, body: dict[str, Any]) -> None:
    """Replace the verification record atomically (a unique temp file, then ``os.replace``): concurrent
    writers each leave a whole record, the last rename wins, and a reader never sees a partial one."""
    doc = json.dumps({"format": RECORD_FORMAT, "body": body, "digest": _record_digest(body)}, sort_keys=True)
    temp = layout.index_dir / f".verified-{os.getpid()}-{os.urandom(16).hex()}.tmp"
    try:
        with open(temp, "x", encoding="utf-8") as handle:
            handle.write(doc)
        os.replace(temp, record_path(layout))
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def stale_record_temps(layout: IndexLayout, older_than: float) -> list[Path]:
    """Temp files of record writers that died before their rename, last modified before ``older_than``
    (seconds since the epoch; reaped under the build lock). A live reader renames or removes its temp
    at any moment, so one that vanishes between listing and ``stat`` is simply not stale."""
    if not layout.index_dir.is_dir():
        return []
    stale = []
    for path in sorted(layout.index_dir.glob(".verified-*.tmp")):
        try:
            modified = path.stat().st_mtime
        except FileNotFoundError:
            continue
        if modified < older_than:
            stale.append(path)
    return stale
