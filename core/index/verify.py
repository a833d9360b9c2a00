"""Verified serving of an index: ``resolve`` (verify + cache), ``verify_full``, the read-only connection.

``resolve`` verifies the active generation (state row, existence, size, SHA-256) and caches that
verified identity by file fingerprint: in process (``VERIFY_STATS`` counts hashes and hits), and
across processes through the verification record beside ``state.db``. Any mismatch fails closed
with a typed ``IntegrityError``; there is never a fallback to an older generation. A generation
is served as the very inode that was hashed (``core.index.pinned``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from core.errors import (
    BuildError,
    GenerationMissingError,
    IndexBusyError,
    IndexMissingError,
    IntegrityError,
    LegacyInterruptedError,
    Sha256MismatchError,
    SizeMismatchError,
    SqliteIntegrityError,
)
from core.index import pinned
from core.index import state as gstate
from core.index.layout import IndexLayout, ResolvedIndex
from core.index.ownership import is_generation_file, is_staging_file
from core.index.state import list_generations
from core.index.tables.connection import integrity_lines, read_header

HASH_BLOCK = 1 << 20
# A file changed within this window of its verification may change again in the same timestamp tick
# without altering its stat fingerprint (the "racy git" problem), so such a verification is not cached.
RACY_WINDOW_NS = 50_000_000
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
        if resolved.kind == "immutable_generation":
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
    evidence = {"path": str(resolved.path), "generation_id": resolved.generation_id}
    name = getattr(exc, "sqlite_errorname", None)
    if not resolved.path.exists():
        return GenerationMissingError(f"index file {resolved.path} vanished after it was verified", **evidence)
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
    """Copy a verified generation to ``dest`` (a builder's or embedder's base), hashing while copying: a
    copy that is not the recorded SHA-256 and size raises a typed ``IntegrityError`` and is deleted."""
    if resolved.pinned is None:
        raise BuildError("a base generation is copied only after resolve() (no verified descriptor)")
    resolved.pinned.copy_to(
        dest, expected_sha256=resolved.sha256, expected_size=resolved.size, generation_id=resolved.generation_id
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


def _is_racy(sig: tuple[int, ...] | None, now_ns: int) -> bool:
    """True when a file changed so recently that a further change could keep the same timestamps."""
    return sig is None or now_ns - max(sig[3], sig[4]) < RACY_WINDOW_NS


def resolved_generation(
    layout: IndexLayout, record: dict[str, Any], pin: pinned.PinnedFile | None = None
) -> ResolvedIndex:
    return ResolvedIndex(
        kind="immutable_generation",
        path=layout.generations_dir / record["file_name"],
        generation_id=record["generation_id"],
        sha256=record["sha256"],
        size=record["size"],
        source_snapshot_hash=record["source_snapshot_hash"],
        created_at=record["created_at"],
        layout=layout,
        record=record,
        pinned=pin,
    )


def _record_body(layout: IndexLayout, state: tuple[Any, ...], record: dict[str, Any], sig: tuple) -> dict[str, Any]:
    """What a verification record vouches for: exactly the fingerprints the in-process cache trusts."""
    return {
        "index_dir": str(layout.index_dir),
        "state": [s.hex() if isinstance(s, bytes) else (list(s) if s is not None else None) for s in state],
        "generation_id": record["generation_id"],
        "file_name": record["file_name"],
        "sha256": record["sha256"],
        "size": record["size"],
        "file": list(sig),
    }


def _record_vouches(layout: IndexLayout, expected: dict[str, Any]) -> bool:
    body, _status = gstate.read_verification(layout)
    if body is None:
        return False
    return {key: body.get(key) for key in expected} == expected


def _write_record(layout: IndexLayout, body: dict[str, Any]) -> None:
    """Leave the verification record for later processes. A reader that may not write the index dir
    (read-only mount, other owner) still serves; the failure is counted in ``VERIFY_STATS``."""
    try:
        gstate.write_verification(layout, body)
    except OSError:
        with _CACHE_LOCK:
            VERIFY_STATS["record_write_errors"] += 1
        return
    with _CACHE_LOCK:
        VERIFY_STATS["record_writes"] += 1


def _file_problems(pin: pinned.PinnedFile, record: dict[str, Any], *, hash_it: bool = True) -> list[IntegrityError]:
    """Size, then SHA-256 of the pinned generation file against its state row; every problem found.
    The descriptor must be unchanged afterwards (else ``GenerationChangedError``, raised, not collected)."""
    gid, expected_sha, expected_size = record["generation_id"], record["sha256"], record["size"]
    path = pin.path
    problems: list[IntegrityError] = []
    if pin.sig[2] != expected_size:
        problems.append(
            SizeMismatchError(
                f"generation file {path} has {pin.sig[2]} bytes, state says {expected_size}",
                path=str(path),
                generation_id=gid,
                expected=expected_size,
                actual=pin.sig[2],
            )
        )
    if hash_it:
        actual_sha, _ = pin.digest()
        with _CACHE_LOCK:
            VERIFY_STATS["full_hashes"] += 1
        pin.check_unchanged(gid)
        if actual_sha != expected_sha:
            problems.append(
                Sha256MismatchError(
                    f"generation file {path} has SHA-256 {actual_sha}, state says {expected_sha}",
                    path=str(path),
                    generation_id=gid,
                    expected=expected_sha,
                    actual=actual_sha,
                )
            )
    return problems


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


def _active(layout: IndexLayout) -> tuple[dict[str, Any], pinned.PinnedFile]:
    record = gstate.with_state(layout, lambda conn: gstate.active_row(layout, conn))
    path = layout.generations_dir / record["file_name"]
    return record, pinned.pin(path, record["generation_id"], record["sha256"])


def resolve(layout: IndexLayout) -> ResolvedIndex:
    """The reader path: the verified active generation (or the legacy index when no state exists).

    The file is opened once and that descriptor is hashed and served (``connect_readonly``). A verified
    identity is reused without hashing while the fingerprint of the state DB (with its siblings) and of the
    generation file is unchanged: in process from a cache, across processes from the verification record.
    Any mismatch, or any change seen during verification, raises a typed ``IntegrityError``; an older
    generation is never served instead.
    """
    key = str(layout.index_dir)
    state = _state_fingerprint(layout)
    with _CACHE_LOCK:
        cached = _VERIFY_CACHE.get(key)
    if cached is not None and cached[1].layout == layout and state + (_stat_sig(cached[1].path),) == cached[0]:
        with _CACHE_LOCK:
            VERIFY_STATS["cache_hits"] += 1
        return cached[1]
    if state[0] is None:
        return _legacy(layout)
    record, pin = _active(layout)
    started_ns = time.time_ns()
    body = _record_body(layout, state, record, pin.sig)
    vouched = not _is_racy(pin.sig, started_ns) and _record_vouches(layout, body)
    problems = _file_problems(pin, record, hash_it=not vouched)
    if problems:
        raise problems[0]
    pin.check_unchanged(record["generation_id"])
    resolved = resolved_generation(layout, record, pin)
    after = _state_fingerprint(layout) + (pin.sig,)
    if after == state + (pin.sig,) and not _is_racy(pin.sig, started_ns):
        with _CACHE_LOCK:
            _VERIFY_CACHE.pop(key, None)
            while len(_VERIFY_CACHE) >= VERIFY_CACHE_MAX:  # each entry holds an open descriptor: bounded
                _VERIFY_CACHE.pop(next(iter(_VERIFY_CACHE)))
            _VERIFY_CACHE[key] = (after, resolved)
            if vouched:
                VERIFY_STATS["record_hits"] += 1
        if not vouched:
            _write_record(layout, body)
    return resolved


def debris(layout: IndexLayout, ready: set[str]) -> list[Path]:
    """Files no state row serves: everything in staging/, and generations/ files not named by a ready row."""
    found: list[Path] = []
    if layout.staging_dir.is_dir():  # only files named as we name them: a foreign file is never ours to delete
        found = [p for p in sorted(layout.staging_dir.iterdir()) if is_staging_file(p.name) and _plain_file(p)]
    if layout.generations_dir.is_dir():
        found += [
            p
            for p in sorted(layout.generations_dir.iterdir())
            if is_generation_file(p.name) and p.name not in ready and _plain_file(p)
        ]
    return found


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def ready_files(layout: IndexLayout) -> set[str]:
    return {row["file_name"] for row in list_generations(layout) if row["status"] == "ready"}


def verify_full(layout: IndexLayout) -> dict[str, Any]:
    """Uncached check of the active index: state consistency, size, SHA-256 and ``PRAGMA integrity_check``.

    Collects every problem and raises once (the first problem's type, all of them in ``problems``).
    Orphan files are reported as information, not failures.
    """
    if not layout.state_path.exists():
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
    state = _state_fingerprint(layout)
    record, pin = _active(layout)
    started_ns = time.time_ns()
    resolved = resolved_generation(layout, record, pin)
    problems = _file_problems(pin, record)
    lines = pinned_integrity_lines(pin, record["generation_id"])
    if lines:
        problems.append(
            SqliteIntegrityError(
                f"generation file {resolved.path} fails integrity_check",
                path=str(resolved.path),
                expected="ok",
                actual=lines,
            )
        )
    if problems:
        first = problems[0]
        raise type(first)(
            "; ".join(p.message for p in problems), **first.evidence, problems=[p.to_dict() for p in problems]
        )
    pin.check_unchanged(record["generation_id"])
    if _state_fingerprint(layout) == state and not _is_racy(pin.sig, started_ns):
        _write_record(layout, _record_body(layout, state, record, pin.sig))
    orphans = [str(p) for p in debris(layout, ready_files(layout))]
    return {
        "kind": "immutable_generation",
        "path": str(resolved.path),
        "generation_id": resolved.generation_id,
        "sha256": resolved.sha256,
        "size": resolved.size,
        "checks": ["state", "exists", "size", "sha256", "integrity_check"],
        "orphans": orphans,
    }
