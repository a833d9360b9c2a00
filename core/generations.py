"""Immutable index generations: layout, build lock, publish, verify, retain, reap.

A build writes a database under ``staging/``; ``publish`` checks it, fsyncs it, moves it
to ``generations/<generation_id>.db`` and then flips the active pointer in the small
generation-state database in ONE transaction. Readers call ``resolve``, which verifies the
active generation (state row, existence, size, SHA-256) and caches that verified identity
by file fingerprint. Any mismatch fails closed with a typed ``IntegrityError``; there is
never a fallback to an older generation. Publish steps (``PUBLISH_STEPS``) each call an
``on_step`` hook first, so tests can crash the process at every checkpoint.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.errors import (
    BuildError,
    BuildLockedError,
    GenerationMissingError,
    IndexBusyError,
    IndexDirInaccessibleError,
    IndexMissingError,
    IntegrityError,
    LegacyInterruptedError,
    Sha256MismatchError,
    SizeMismatchError,
    SqliteIntegrityError,
    UsageError,
    ValidationError,
)
from core.index import pinned
from core.index import state as gstate
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex
from core.index.layout import layout_for as layout_for  # the public entry: where an index lives
from core.index.ownership import is_generation_file, is_staging_file, prepare_index_dir
from core.index.schema import atomic  # noqa: F401  (re-exported: the one transaction primitive)
from core.index.state import STATE_SCHEMA_VERSION, active_record, list_generations  # noqa: F401 (public API)

PUBLISH_STEPS = ("integrity_check", "fsync", "hash", "rename", "state_commit", "retention", "reap")
HASH_BLOCK = 1 << 20
# A file changed within this window of its verification may change again in the same timestamp tick
# without altering its stat fingerprint (the "racy git" problem), so such a verification is not cached.
RACY_WINDOW_NS = 50_000_000
LOCK_POLL_S = 0.05
RECORD_TEMP_AGE_S = 60.0
VERIFY_CACHE_MAX = 64  # index dirs whose verified identity (and open descriptor) a process keeps


# --- layout and lock --------------------------------------------------------------------------------------


def ensure_layout(layout: IndexLayout) -> None:
    """Claim the index directory (refused unless it is ours: ``core.index.ownership``), create its
    folders and a ``.gitignore`` of ``*`` inside it so the index is never committed."""
    prepare_index_dir(layout)
    gitignore = layout.index_dir / ".gitignore"
    try:
        if not gitignore.exists():
            gitignore.write_text("*\n", encoding="utf-8")
    except OSError as exc:
        raise IndexDirInaccessibleError(
            f"index directory {layout.index_dir} cannot be written: {exc.strerror}",
            index_dir=str(layout.index_dir),
            errno=exc.errno,
        ) from None


_HELD_LOCKS: set[str] = set()
_HELD_LOCK_FDS: set[int] = set()


def _drop_inherited_locks() -> None:
    """In a forked child (a parse worker): close the build-lock descriptors it inherited. The parent's
    lock stays held (flock belongs to the open file description), but a child that outlives a killed
    builder no longer keeps the lock, so the next build is not blocked by an orphan."""
    for fd in list(_HELD_LOCK_FDS):
        try:
            os.close(fd)
        except OSError:
            pass  # already closed in this child: nothing to release
    _HELD_LOCK_FDS.clear()
    _HELD_LOCKS.clear()


os.register_at_fork(after_in_child=_drop_inherited_locks)


@contextmanager
def build_lock(layout: IndexLayout, *, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the exclusive build lock (``flock`` on ``build.lock``) for the duration of a build.

    Polls a non-blocking ``LOCK_EX`` for up to ``wait_seconds``; then raises ``BuildLockedError``
    naming the lock file. The kernel drops the lock when the holder dies, so a crash never wedges it.
    """
    ensure_layout(layout)
    try:
        fd = os.open(layout.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise IndexDirInaccessibleError(
            f"build lock {layout.lock_path} cannot be opened: {exc.strerror}",
            index_dir=str(layout.index_dir),
            errno=exc.errno,
        ) from None
    _HELD_LOCK_FDS.add(fd)
    try:
        _acquire_flock(fd, layout.lock_path, wait_seconds)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _HELD_LOCKS.add(str(layout.lock_path))
        try:
            yield
        finally:
            _HELD_LOCKS.discard(str(layout.lock_path))
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        _HELD_LOCK_FDS.discard(fd)
        os.close(fd)


def _require_lock(layout: IndexLayout) -> None:
    if str(layout.lock_path) not in _HELD_LOCKS:
        raise BuildError("staging and publishing must run inside build_lock(layout)", lock=str(layout.lock_path))


def _acquire_flock(fd: int, lock_path: Path, wait_seconds: float) -> None:
    deadline = time.monotonic() + max(wait_seconds, 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or None
                raise BuildLockedError(
                    f"another build holds the lock {lock_path}",
                    lock=str(lock_path),
                    holder_pid=holder,
                    waited_seconds=wait_seconds,
                ) from None
            time.sleep(LOCK_POLL_S)


def new_staging_path(layout: IndexLayout) -> Path:
    """A fresh, unused path under ``staging/`` for the builder's database (same filesystem as generations).

    Requires ``build_lock``: publish reaps every staging file, which is safe only if staging files are
    created under the lock, so that no other live builder can own one.
    """
    _require_lock(layout)
    layout.staging_dir.mkdir(parents=True, exist_ok=True)
    return layout.staging_dir / f"{os.urandom(16).hex()}.db.tmp"


# --- small primitives -------------------------------------------------------------------------------------


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
            conn.execute("PRAGMA schema_version").fetchone()
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


def _pinned_integrity_lines(pin: pinned.PinnedFile, generation_id: str | None) -> list[str]:
    """``PRAGMA integrity_check`` of the pinned file itself: its problem lines ([] when ok); a file
    SQLite cannot read at all is one line saying so (verify collects it, publish refuses it)."""
    try:
        conn = pinned.connect_pinned(pin, generation_id)
        try:
            return _integrity_lines(conn)
        finally:
            conn.close()
    except SqliteIntegrityError as exc:
        return list(exc.evidence["actual"])
    except sqlite3.DatabaseError as exc:
        return [f"not a readable SQLite database: {exc}"]


def _integrity_lines(conn: sqlite3.Connection) -> list[str]:
    rows = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    return [] if rows == ["ok"] else rows


def _integrity_problems(path: Path, *, immutable: bool) -> list[str]:
    """Every line ``PRAGMA integrity_check`` reports for ``path`` (empty when it says ``ok``)."""
    try:
        conn = sqlite3.connect(_readonly_uri(path, immutable=immutable), uri=True)
        try:
            return _integrity_lines(conn)
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


def _invalidate(layout: IndexLayout) -> None:
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
    try:
        with open(state, "rb") as handle:
            counter = handle.read(28)[24:28]
    except FileNotFoundError:
        counter = None
    return (*sigs, counter)


def _is_racy(sig: tuple[int, ...] | None, now_ns: int) -> bool:
    """True when a file changed so recently that a further change could keep the same timestamps."""
    return sig is None or now_ns - max(sig[3], sig[4]) < RACY_WINDOW_NS


def _resolved(layout: IndexLayout, record: dict[str, Any], pin: pinned.PinnedFile | None = None) -> ResolvedIndex:
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
    resolved = _resolved(layout, record, pin)
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


def _debris(layout: IndexLayout, ready_files: set[str]) -> list[Path]:
    """Files no state row serves: everything in staging/, and generations/ files not named by a ready row."""
    found: list[Path] = []
    if layout.staging_dir.is_dir():  # only files named as we name them: a foreign file is never ours to delete
        found = [p for p in sorted(layout.staging_dir.iterdir()) if is_staging_file(p.name) and _plain_file(p)]
    if layout.generations_dir.is_dir():
        found += [
            p
            for p in sorted(layout.generations_dir.iterdir())
            if is_generation_file(p.name) and p.name not in ready_files and _plain_file(p)
        ]
    return found


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _ready_files(layout: IndexLayout) -> set[str]:
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
    resolved = _resolved(layout, record, pin)
    problems = _file_problems(pin, record)
    lines = _pinned_integrity_lines(pin, record["generation_id"])
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
    orphans = [str(p) for p in _debris(layout, _ready_files(layout))]
    return {
        "kind": "immutable_generation",
        "path": str(resolved.path),
        "generation_id": resolved.generation_id,
        "sha256": resolved.sha256,
        "size": resolved.size,
        "checks": ["state", "exists", "size", "sha256", "integrity_check"],
        "orphans": orphans,
    }


# --- publish ----------------------------------------------------------------------------------------------


def _validate_staged(layout: IndexLayout, staged: Path) -> pinned.PinnedFile:
    """The staged file lives in staging/, is complete (no -wal/-journal beside it) and passes integrity_check.
    Returns it pinned: the inode that was checked is the one fsynced, hashed and renamed."""
    problems = []
    if staged.resolve().parent != layout.staging_dir.resolve():
        problems.append(f"{staged} is not in {layout.staging_dir} (rename must stay on one filesystem)")
    if not staged.is_file():
        problems.append(f"{staged} does not exist")
    problems += [
        f"{staged}{s} exists: close the build connection (and checkpoint its WAL) before publishing"
        for s in ("-wal", "-journal")
        if Path(f"{staged}{s}").exists()
    ]
    if problems:
        raise ValidationError(
            "staged database cannot be published: " + "; ".join(problems), path=str(staged), problems=problems
        )
    pin = pinned.pin(staged, None, None)
    lines = _pinned_integrity_lines(pin, None)
    if lines:
        raise SqliteIntegrityError(
            f"staged database {staged} fails integrity_check", path=str(staged), expected="ok", actual=lines
        )
    return pin


def _generation_id(sha256: str, created_at: float, taken: set[str]) -> str:
    """``g<UTC yyyymmddTHHMMSS>-<sha256[:12]>``; the second is bumped if that id was ever used."""
    offset = 0
    while True:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(created_at + offset))
        candidate = f"g{stamp}-{sha256[:12]}"
        if candidate not in taken:
            return candidate
        offset += 1


def _taken_ids(layout: IndexLayout) -> set[str]:
    names = {p.stem for p in layout.generations_dir.glob("*.db")}
    return names | {row["generation_id"] for row in list_generations(layout)}


def _discard_unpublished(layout: IndexLayout, staged: Path, final: Path | None, gid: str | None) -> None:
    """After a failed publish, remove our staged/renamed file unless the state already names it.
    A staged path outside staging/ is not ours to delete."""
    if staged.resolve().parent == layout.staging_dir.resolve():
        staged.unlink(missing_ok=True)
    if final is not None and final.exists():
        if gid not in {row["generation_id"] for row in list_generations(layout)}:
            final.unlink()


def _apply_retention(layout: IndexLayout, keep: int) -> list[str]:
    """Mark all but the newest ``keep`` ready generations (and never the active one) removed, then delete
    their files. Rows go first: a crash in between leaves only orphan files, which ``_reap`` removes."""
    rows = [row for row in list_generations(layout) if row["status"] == "ready"]
    doomed = [row for row in rows[keep:] if not row["active"]]

    gstate.mark_removed(layout, [row["generation_id"] for row in doomed])
    for row in doomed:
        if is_generation_file(row["file_name"]):  # a state row never makes us delete a file we did not name
            (layout.generations_dir / row["file_name"]).unlink(missing_ok=True)
    return [row["generation_id"] for row in doomed]


def _reap(layout: IndexLayout) -> list[Path]:
    """Delete debris: every staging file and every generations/ file no ready row names. Safe only under
    ``build_lock``, since staging files are created under it (``new_staging_path`` checks)."""
    debris = _debris(layout, _ready_files(layout))
    cutoff = time.time() - RECORD_TEMP_AGE_S  # a younger one may belong to a reader writing it right now
    debris += [p for p in gstate.stale_record_temps(layout) if p.stat().st_mtime < cutoff]
    for path in debris:
        path.unlink(missing_ok=True)
    return debris


def publish(
    layout: IndexLayout,
    staging_path: Path,
    record: GenerationRecord,
    *,
    expected_base: str | None,
    keep: int = 2,
    on_step: Callable[[str], None] | None = None,
) -> ResolvedIndex:
    """Check, fsync, hash and move a staged database into ``generations/``, then flip the active pointer.

    MUST be called while holding ``build_lock(layout)`` (checked): reaping deletes every staging file.
    ``expected_base`` is the active generation id the build started from (``None`` for the first);
    if another build published meanwhile, ``BuildLockedError`` is raised and nothing changes. Each
    step in ``PUBLISH_STEPS`` calls ``on_step(name)`` first (fault injection). Until the state commit,
    any failure leaves the previous generation active and removes our file.
    """
    _require_lock(layout)
    if keep < 1:
        raise UsageError(f"keep must be at least 1, got {keep}", keep=keep)
    step = on_step or (lambda name: None)
    staged, final, gid = Path(staging_path), None, None
    try:
        step("integrity_check")
        pin = _validate_staged(layout, staged)
        step("fsync")
        os.fchmod(pin.fd, 0o444)  # published generations are read-only
        os.fsync(pin.fd)
        pin.refresh()
        step("hash")
        sha256, size = pin.digest()
        pin.check_unchanged(None)
        created_at = time.time()
        gid = _generation_id(sha256, created_at, _taken_ids(layout))
        step("rename")
        final = layout.generations_dir / f"{gid}.db"
        os.replace(staged, final)
        gstate.fsync_path(layout.generations_dir)
        pin.moved_to(final, gid)
        step("state_commit")
        gstate.commit_state(layout, gstate.record_row(record, gid, sha256, size, created_at), expected_base)
    except BaseException:
        _discard_unpublished(layout, staged, final, gid)
        raise
    finally:
        _invalidate(layout)
    step("retention")
    _apply_retention(layout, keep)
    step("reap")
    _reap(layout)
    return _resolved(layout, gstate.with_state(layout, lambda conn: gstate.active_row(layout, conn)), pin)
