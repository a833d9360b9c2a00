"""Verified serving of an index: ``resolve`` (verify + cache), ``verify_full``, the read-only connection.

``resolve`` verifies the active generation: the state row, its manifest (hashed, matched with the row)
and every part the manifest names (size, and SHA-256 unless a per-part record vouches: ``core.index.parts``),
and caches that verified identity by file fingerprint: in process (``VERIFY_STATS`` counts part hashes
and hits), and across processes through the verification record beside ``state.db``. Any mismatch
fails closed with a typed ``IntegrityError``; there is never a fallback to an older generation. A
part is served as the very inode that was checked (``core.index.pinned``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.errors import (
    BuildError,
    GenerationMissingError,
    IndexBusyError,
    IndexMissingError,
    IntegrityError,
    LegacyInterruptedError,
    SqliteIntegrityError,
)
from core.index import pinned
from core.index import state as gstate
from core.index.debris import debris
from core.index.layout import IndexLayout, ResolvedIndex, ResolvedPart
from core.index.manifest import Manifest
from core.index.parts import is_racy, part_problems, pin_parts, read_manifest, record_body, recorded_parts, vouched
from core.index.tables.connection import integrity_lines, read_header

HASH_BLOCK = 1 << 20
VERIFY_CACHE_MAX = 64  # index dirs whose verified identity (and open descriptor) a process keeps


# --- reading a resolved index -----------------------------------------------------------------------------


def hash_file(path: Path) -> tuple[str, int]:
    """SHA-256 hex digest and byte count of ``path``, streamed in 1 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    size = 0
    buffer = bytearray(HASH_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            digest.update(view[:count])
            size += count
    return digest.hexdigest(), size


def _readonly_uri(path: Path, *, immutable: bool) -> str:
    return f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def connect_readonly(resolved: ResolvedIndex, *, any_thread: bool = False) -> sqlite3.Connection:
    """Open a resolved index read-only. A generation is opened as the very inode ``resolve`` hashed
    (``immutable=1``, checked by device and inode: ``core.index.pinned``); legacy is ``mode=ro`` by path.
    ``any_thread``: a generation connection other threads may use (the caller serialises them).

    The file is read once on open, so a generation removed since it was verified, or a legacy
    index left with a hot journal by a killed ``--in-place`` build, is a typed error here rather
    than an ``sqlite3.OperationalError`` at the first query.
    """
    if resolved.kind == "immutable_generation" and resolved.pinned is None:
        raise BuildError("a generation is served only through resolve() or publish() (no verified descriptor)")
    try:
        if resolved.kind == "immutable_generation" and len(resolved.parts) > 1:
            from core.index.segmented import connect_segments  # only a generation of several parts needs it

            conn = connect_segments(resolved, any_thread=any_thread)
        elif resolved.kind == "immutable_generation":
            assert resolved.pinned is not None
            conn = pinned.connect_pinned(resolved.pinned, resolved.generation_id, any_thread=any_thread)
        else:
            conn = sqlite3.connect(_readonly_uri(resolved.path, immutable=False), uri=True)
        try:
            read_header(conn)
        except BaseException:
            conn.close()
            raise
    except sqlite3.DatabaseError as exc:
        raise _open_error(resolved, exc) from exc
    return conn


def _open_error(resolved: ResolvedIndex, exc: sqlite3.DatabaseError) -> IntegrityError | IndexBusyError:
    path = resolved.pinned.path if resolved.pinned is not None else resolved.path
    evidence = {"path": str(path), "generation_id": resolved.generation_id}
    name = getattr(exc, "sqlite_errorname", None)
    if not path.exists():
        return GenerationMissingError(f"index file {path} vanished after it was verified", **evidence)
    if name in gstate.BUSY_ERRORS:  # a live --in-place build holds the lock: busy, not broken
        return IndexBusyError(f"index file {resolved.path} is locked by a writer: {exc}", **evidence, sqlite_error=name)
    if resolved.kind == "legacy_db" and Path(f"{resolved.path}-journal").exists():
        return LegacyInterruptedError(
            f"legacy index {resolved.path} has a hot journal from an interrupted --in-place build ({exc})",
            **evidence,
            sqlite_error=name,
        )
    return SqliteIntegrityError(f"index file {resolved.path} cannot be opened: {exc}", **evidence, sqlite_error=name)


def copy_base(resolved: ResolvedIndex, dest: Path) -> None:
    """Copy a verified generation's one segment to ``dest`` (a builder's or embedder's base), hashing while
    copying: a copy that is not the part's SHA-256 and size raises a typed ``IntegrityError`` and is deleted."""
    if resolved.pinned is None or len(resolved.parts) != 1:
        raise BuildError("a base generation is copied only after resolve() (no verified descriptor)")
    part = resolved.parts[0]
    part.pinned.copy_to(
        dest, expected_sha256=part.sha256, expected_size=part.size, generation_id=resolved.generation_id
    )
    with _CACHE_LOCK:
        VERIFY_STATS["full_hashes"] += 1


def pinned_integrity_lines(pin: pinned.PinnedFile, generation_id: str | None) -> list[str]:
    """``PRAGMA integrity_check`` of the pinned file itself: its problem lines ([] when ok); a file
    SQLite cannot read at all is one line saying so (verify collects it, publish refuses it)."""
    try:
        conn = pinned.connect_pinned(pin, generation_id)
        try:
            return integrity_lines(conn)
        finally:
            conn.close()
    except SqliteIntegrityError as exc:
        return list(exc.evidence["actual"])
    except sqlite3.DatabaseError as exc:
        return [f"not a readable SQLite database: {exc}"]


def _integrity_problems(path: Path, *, immutable: bool) -> list[str]:
    """Every line ``PRAGMA integrity_check`` reports for ``path`` (empty when it says ``ok``)."""
    try:
        conn = sqlite3.connect(_readonly_uri(path, immutable=immutable), uri=True)
        try:
            return integrity_lines(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [f"not a readable SQLite database: {exc}"]


# --- verification, the in-process cache and the verification record ------------------------------------

VERIFY_STATS: dict[str, int] = {
    "full_hashes": 0,
    "cache_hits": 0,
    "record_hits": 0,
    "record_writes": 0,
    "record_write_errors": 0,
}
_VERIFY_CACHE: dict[str, tuple[tuple[Any, ...], ResolvedIndex]] = {}
_CACHE_LOCK = threading.Lock()


def clear_verify_cache() -> None:
    """Forget every verified identity and reset ``VERIFY_STATS`` (for tests and benchmarks)."""
    from core.index.segmented import forget_tombstones  # a tombstone's ids are read once per process

    forget_tombstones()
    with _CACHE_LOCK:
        _VERIFY_CACHE.clear()
        VERIFY_STATS.update(dict.fromkeys(VERIFY_STATS, 0))


def invalidate(layout: IndexLayout) -> None:
    with _CACHE_LOCK:
        _VERIFY_CACHE.pop(str(layout.index_dir), None)


def _stat_sig(path: Path) -> tuple[int, ...] | None:
    """(dev, ino, size, mtime_ns, ctime_ns) of ``path``; ``None`` when absent (absence is a value too)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _state_fingerprint(layout: IndexLayout) -> tuple[Any, ...]:
    """Stat of state.db and its -wal/-shm/-journal siblings, plus SQLite's header change counter
    (bytes 24..28, bumped by every commit in rollback mode) which survives coarse timestamps."""
    state = layout.state_path
    sigs = tuple(_stat_sig(Path(f"{state}{suffix}")) for suffix in ("", "-wal", "-shm", "-journal"))
    return (*sigs, _change_counter(state, sigs[0]))


# state path -> (descriptor, dev, ino), kept open: closing ANY descriptor of a SQLite file drops every
# POSIX lock this process holds on it, a publish's in another thread included (other processes would
# then roll its journal back as hot). A descriptor is closed only once its inode is no longer the state.
_STATE_FDS: dict[str, tuple[int, int, int]] = {}


def _change_counter(state: Path, sig: tuple[int, ...] | None) -> bytes | None:
    """Bytes 24..28 of the state DB (SQLite's change counter), read through a descriptor kept open."""
    if sig is None:
        return None
    key = str(state)
    with _CACHE_LOCK:
        found = _STATE_FDS.get(key)
        if found is None or found[1:] != sig[:2]:
            try:
                fd = os.open(state, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return None
            st = os.fstat(fd)
            if found is not None and found[1:] != (st.st_dev, st.st_ino):
                os.close(found[0])  # an inode that is no longer the state: its locks concern nobody
            elif found is not None:  # replaced and back between two stats: keep the one already open
                os.close(fd)
                fd = found[0]
            _STATE_FDS.pop(key, None)
            while len(_STATE_FDS) >= VERIFY_CACHE_MAX:  # bounded, the least recently opened first
                os.close(_STATE_FDS.pop(next(iter(_STATE_FDS)))[0])
            _STATE_FDS[key] = found = (fd, st.st_dev, st.st_ino)
        return os.pread(found[0], 4, 24)


def resolved_generation(layout: IndexLayout, record: dict[str, Any], parts: list[ResolvedPart]) -> ResolvedIndex:
    """A generation verified as ``record`` (its manifest) and ``parts``; served through its one segment."""
    return ResolvedIndex(
        kind="immutable_generation",
        path=layout.manifests_dir / record["file_name"],
        generation_id=record["generation_id"],
        sha256=record["sha256"],
        size=record["size"],
        source_snapshot_hash=record["source_snapshot_hash"],
        created_at=record["created_at"],
        layout=layout,
        record=record,
        pinned=parts[0].pinned if parts else None,
        parts=tuple(parts),
    )


def _write_record(layout: IndexLayout, body: dict[str, Any] | None) -> None:
    """Leave the verification record for later processes. A reader that may not write the index dir
    (read-only mount, other owner) still serves; the failure is counted in ``VERIFY_STATS``."""
    if body is None:
        return
    try:
        gstate.write_verification(layout, body)
    except OSError:
        with _CACHE_LOCK:
            VERIFY_STATS["record_write_errors"] += 1
        return
    with _CACHE_LOCK:
        VERIFY_STATS["record_writes"] += 1


def remember_parts(layout: IndexLayout, parts: list[ResolvedPart]) -> None:
    """Record parts this process has just hashed itself (a publisher), so the next process need not."""
    _write_record(layout, record_body(layout, recorded_parts(layout), parts, time.time_ns()))


def _check_parts(
    parts: list[ResolvedPart], gid: str, recorded: dict[str, list[int]], now_ns: int
) -> tuple[list[IntegrityError], int]:
    """(every problem of every part, how many parts were hashed): a part is hashed unless vouched for."""
    problems: list[IntegrityError] = []
    hashed = 0
    for part in parts:
        hash_it = not vouched(recorded, part, now_ns)
        problems += part_problems(part, gid, hash_it=hash_it)
        hashed += hash_it
    with _CACHE_LOCK:
        VERIFY_STATS["full_hashes"] += hashed
    return problems, hashed


def _combined(problems: list[IntegrityError], *, listed: bool = False) -> IntegrityError:
    """One error of the first problem's type carrying every problem as evidence (``listed``: even one)."""
    first = problems[0]
    if len(problems) == 1 and not listed:
        return first
    return type(first)(
        "; ".join(p.message for p in problems), **first.evidence, problems=[p.to_dict() for p in problems]
    )


def _legacy(layout: IndexLayout) -> ResolvedIndex:
    """The single-file legacy index, served only when no generation state exists."""
    try:
        st = os.stat(layout.legacy_path)
    except FileNotFoundError:
        raise IndexMissingError(
            f"no index in {layout.index_dir}",
            path=str(layout.index_dir),
            hint=f"build one with: vaultsearch index {layout.vault}",
        ) from None
    return ResolvedIndex(
        kind="legacy_db",
        path=layout.legacy_path,
        generation_id=None,
        sha256=None,
        size=st.st_size,
        source_snapshot_hash=None,
        created_at=st.st_mtime,
        layout=layout,
        record={},
    )


# A test seam: called after the manifest was read and before its parts are pinned (the window in which
# a publish and its part removal can overtake a reader). None in production.
AFTER_MANIFEST_HOOK: Callable[[IndexLayout, dict[str, Any]], None] | None = None
RESOLVE_TRIES = 3  # publishes that may overtake one reader before it gives up (each is a newer generation)


def _active_id(layout: IndexLayout) -> str:
    return str(gstate.with_state(layout, lambda conn: gstate.active_row(layout, conn))["generation_id"])


def _open_active(layout: IndexLayout) -> tuple[dict[str, Any], Manifest, list[ResolvedPart]]:
    """The active row, its verified manifest and every part pinned. A manifest or part gone between
    reading the state and opening it means a newer publish removed it: the ACTIVE generation is resolved
    again (never an older one); when the state still names the same generation, the loss is the error."""
    for attempt in range(RESOLVE_TRIES):
        record = gstate.with_state(layout, lambda conn: gstate.active_row(layout, conn))
        gid = record["generation_id"]
        try:
            manifest, _pin = read_manifest(layout, record)
            if AFTER_MANIFEST_HOOK is not None:
                AFTER_MANIFEST_HOOK(layout, record)
            return record, manifest, pin_parts(layout, manifest, gid)
        except GenerationMissingError:
            if attempt + 1 == RESOLVE_TRIES or _active_id(layout) == gid:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def resolve(layout: IndexLayout) -> ResolvedIndex:
    """The reader path: the verified active generation (or the legacy index when no state exists).

    The manifest is pinned, hashed and matched with the state row; each part is pinned, its size checked
    and its SHA-256 computed unless the verification record vouches for that part's exact file. Parts are
    served through the descriptors that were checked (``connect_readonly``). A verified identity is reused
    without any hash while the fingerprint of the state DB (with its siblings), the manifest and every part
    is unchanged. Any mismatch, or any change seen during verification, raises a typed ``IntegrityError``;
    an older generation is never served instead. A generation of several segments (manifest format 2) is
    served through one connection (``core.index.segmented``).
    """
    key = str(layout.index_dir)
    state = _state_fingerprint(layout)
    with _CACHE_LOCK:
        cached = _VERIFY_CACHE.get(key)
    if cached is not None and cached[1].layout == layout and state + _files_sig(cached[1]) == cached[0]:
        with _CACHE_LOCK:
            VERIFY_STATS["cache_hits"] += 1
        return cached[1]
    if state[0] is None:
        return _legacy(layout)
    record, manifest, parts = _open_active(layout)
    gid = record["generation_id"]
    started_ns = time.time_ns()
    recorded = recorded_parts(layout)
    problems, hashed = _check_parts(parts, gid, recorded, started_ns)
    if problems:
        raise _combined(problems)
    for part in parts:
        part.pinned.check_unchanged(gid)
    resolved = resolved_generation(layout, record, parts)
    sigs = tuple(p.pinned.sig for p in parts)
    after = _state_fingerprint(layout) + _files_sig(resolved)
    if after == state + (_stat_sig(resolved.path), *sigs) and not any(is_racy(sig, started_ns) for sig in sigs):
        with _CACHE_LOCK:
            _VERIFY_CACHE.pop(key, None)
            while len(_VERIFY_CACHE) >= VERIFY_CACHE_MAX:  # each entry holds open descriptors: bounded
                _VERIFY_CACHE.pop(next(iter(_VERIFY_CACHE)))
            _VERIFY_CACHE[key] = (after, resolved)
            if not hashed:
                VERIFY_STATS["record_hits"] += 1
        _write_record(layout, record_body(layout, recorded, parts, started_ns))
    return resolved


def _files_sig(resolved: ResolvedIndex) -> tuple[Any, ...]:
    """Stat fingerprints of a generation's manifest and parts, as named now."""
    return (_stat_sig(resolved.path), *(_stat_sig(p.path) for p in resolved.parts))


def verify_full(layout: IndexLayout) -> dict[str, Any]:
    """Uncached check of the active index: state consistency, the manifest's SHA-256, and for EVERY part
    its size, SHA-256 and ``PRAGMA integrity_check``, each part listed in the report.

    Collects every problem and raises once (the first problem's type, all of them in ``problems``).
    Files no generation needs (``core.index.debris``) are reported as ``orphans``, not failures.
    """
    if not layout.state_path.exists():
        return _verify_legacy(layout)
    state = _state_fingerprint(layout)
    record, manifest, parts = _open_active(layout)
    gid = record["generation_id"]
    started_ns = time.time_ns()
    problems, _ = _check_parts(parts, gid, {}, started_ns)
    listed = []
    for part in parts:
        lines = pinned_integrity_lines(part.pinned, gid)
        if lines:
            problems.append(
                SqliteIntegrityError(
                    f"part {part.path} fails integrity_check", path=str(part.path), expected="ok", actual=lines
                )
            )
        listed.append({"kind": part.kind, "path": str(part.path), "sha256": part.sha256, "size": part.size})
    if problems:
        raise _combined(problems, listed=True)
    resolved = resolved_generation(layout, record, parts)
    for part in parts:
        part.pinned.check_unchanged(gid)
    if _state_fingerprint(layout) == state:
        _write_record(layout, record_body(layout, recorded_parts(layout), parts, started_ns))
    return {
        "kind": "immutable_generation",
        "path": str(resolved.path),
        "generation_id": gid,
        "sha256": resolved.sha256,
        "size": resolved.size,
        "manifest": {"path": str(resolved.path), "sha256": resolved.sha256, "size": resolved.size},
        "parts": listed,
        "checks": ["state", "manifest_sha256", "exists", "size", "sha256", "integrity_check"],
        "orphans": [str(p) for p in debris(layout, time.time())],
    }


def _verify_legacy(layout: IndexLayout) -> dict[str, Any]:
    legacy = _legacy(layout)
    lines = _integrity_problems(legacy.path, immutable=False)
    if lines:
        raise SqliteIntegrityError(
            f"legacy index {legacy.path} fails integrity_check", path=str(legacy.path), expected="ok", actual=lines
        )
    return {
        "kind": "legacy_db",
        "path": str(legacy.path),
        "size": legacy.size,
        "generation_id": None,
        "sha256": None,
        "checks": ["integrity_check"],
        "orphans": [],
    }
