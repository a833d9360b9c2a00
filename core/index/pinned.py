"""Serve the bytes that were hashed: one open descriptor per verified generation file.

``resolve`` opens a generation file once (``pin``), hashes THAT descriptor and keeps it open
for as long as the verified identity lives. SQLite then opens the same inode through
``/proc/self/fd/N`` (Linux); since SQLite resolves that magic link to a path name, the
connection is checked afterwards: one of the descriptors SQLite opened must be the pinned
(device, inode), else ``GenerationChangedError``. Where ``/proc/self/fd`` does not exist the
fallback opens the path and checks that the path names the pinned inode before and after the
open (a narrower, documented window: docs/architecture.md, threat model).

Every open AND every close of a descriptor of a generation file in this process happens under
``_OPEN_LOCK``: the descriptors that appear during a connect are SQLite's own, and no other thread
can free a descriptor number of the same inode under a connect (SQLite's open would reuse it, the
new descriptor would look old, and a sound index would be refused: issue 28 case 7). A pinned
descriptor released, or a connection garbage-collected, while the lock is busy (possibly by the
very thread that drops it) is parked in ``_PENDING`` and closed by the next holder of the lock;
``PinnedConnection.close`` waits for the lock. Read path only: stdlib imports.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from core.errors import (
    GenerationChangedError,
    GenerationMissingError,
    Sha256MismatchError,
    SizeMismatchError,
    SqliteIntegrityError,
)
from core.index.tables.connection import probe_schema
from core.index.tables.segments import attach, detach

HASH_BLOCK = 1 << 20
FD_DIR = Path("/proc/self/fd")
_OPEN_LOCK = threading.Lock()
_PENDING: list[int | sqlite3.Connection] = []  # closes that wait for _OPEN_LOCK (descriptors, connections)
_PENDING_LOCK = threading.Lock()
Sig = tuple[int, int, int, int, int]  # (dev, ino, size, mtime_ns, ctime_ns)


def sig_of(st: os.stat_result) -> Sig:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _drain() -> None:
    """Close what waited for the lock (the caller holds ``_OPEN_LOCK``)."""
    with _PENDING_LOCK:
        waiting = _PENDING[:]
        _PENDING.clear()
    for item in waiting:
        if isinstance(item, int):
            os.close(item)
    waiting.clear()  # the last reference of a parked connection: SQLite closes it here, under the lock


@contextmanager
def _exclusive() -> Iterator[None]:
    """Hold ``_OPEN_LOCK``; close what waited for it on the way in and out."""
    with _OPEN_LOCK:
        _drain()
        try:
            yield
        finally:
            _drain()


def _close_later(item: int | sqlite3.Connection) -> None:
    """Park a close and run it now if the lock is free; else the lock's holder runs it (a blocking
    wait could deadlock: the holder may be this thread, collecting garbage during a connect)."""
    with _PENDING_LOCK:
        _PENDING.append(item)
    if _OPEN_LOCK.acquire(blocking=False):
        try:
            _drain()
        finally:
            _OPEN_LOCK.release()


class PinnedConnection(sqlite3.Connection):
    """A connection to a pinned generation whose descriptor is closed under ``_OPEN_LOCK``."""

    _closed = False

    def close(self) -> None:
        with _exclusive():
            self._closed = True
            super().close()

    def _close_own(self) -> None:
        """Close from inside this module, which already holds the lock."""
        self._closed = True
        super().close()

    def __del__(self) -> None:
        if not self._closed:
            self._closed = True
            _close_later(self)  # kept alive in _PENDING until the lock's holder drops it


class PinnedFile:
    """A read-only descriptor of one generation file, closed when the last reference goes away."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.sig: Sig = sig_of(os.fstat(fd))
        self._finalizer = weakref.finalize(self, _close_later, fd)

    @property
    def inode(self) -> tuple[int, int]:
        return self.sig[0], self.sig[1]

    def refresh(self) -> None:
        """Take the stat again after our own metadata change (``fchmod`` moves ctime)."""
        self.sig = sig_of(os.fstat(self.fd))

    def moved_to(self, path: Path, generation_id: str | None) -> None:
        """After our own rename: ``path`` must name this inode with the same size and mtime (rename may
        move ctime), else ``GenerationChangedError``."""
        st = os.stat(path)
        if sig_of(st)[:4] != self.sig[:4] or sig_of(os.fstat(self.fd))[:4] != self.sig[:4]:
            raise GenerationChangedError(
                f"{path} is not the file that was hashed", path=str(path), generation_id=generation_id
            )
        self.path = path
        self.refresh()

    def close(self) -> None:
        self._finalizer()

    def check_unchanged(self, generation_id: str | None) -> None:
        """Raise ``GenerationChangedError`` unless the descriptor's stat is what it was when pinned
        and the path still names this inode (a rewrite, an append or a replacement meanwhile)."""
        now = sig_of(os.fstat(self.fd))
        try:
            named: Sig | None = sig_of(os.stat(self.path))
        except FileNotFoundError:
            named = None
        if now != self.sig or named != self.sig:
            raise GenerationChangedError(
                f"generation file {self.path} changed while it was being verified or opened",
                path=str(self.path),
                generation_id=generation_id,
                expected=list(self.sig),
                actual=list(now) if now != self.sig else (list(named) if named else None),
            )

    def digest(self) -> tuple[str, int]:
        """SHA-256 and byte count of the pinned inode, read with ``pread`` (no shared file offset)."""
        return _copy_hash(self.fd, None)

    def copy_to(self, dest: Path, *, expected_sha256: str, expected_size: int, generation_id: str | None) -> None:
        """Copy the pinned inode to a new file ``dest``, hashing while copying; a copy whose SHA-256 or
        size is not the recorded one is deleted and raises (a doctored base is never laundered). The hash
        covers exactly the bytes written, so a change to the source during the copy cannot slip through."""
        try:
            with open(dest, "xb") as out:
                sha, size = _copy_hash(self.fd, out.fileno())
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
        if (sha, size) != (expected_sha256, expected_size):
            dest.unlink(missing_ok=True)
            cls = SizeMismatchError if size != expected_size else Sha256MismatchError
            raise cls(
                f"base generation {self.path} copied as SHA-256 {sha} ({size} bytes), state says "
                f"{expected_sha256} ({expected_size} bytes)",
                path=str(self.path),
                generation_id=generation_id,
                expected=expected_sha256 if cls is Sha256MismatchError else expected_size,
                actual=sha if cls is Sha256MismatchError else size,
            )


def _copy_hash(src: int, dst: int | None) -> tuple[str, int]:
    import hashlib  # on first hash only: a process served by the verification record never needs it

    digest = hashlib.sha256()
    buffer = bytearray(HASH_BLOCK)
    view = memoryview(buffer)
    offset = 0
    while count := os.preadv(src, [buffer], offset):
        digest.update(view[:count])
        if dst is not None:
            written = 0
            while written < count:
                written += os.write(dst, view[written:count])
        offset += count
    return digest.hexdigest(), offset


def pin(path: Path, generation_id: str | None, expected_sha256: str | None) -> PinnedFile:
    """Open ``path`` read-only and pin its inode; a missing file is ``GenerationMissingError``."""
    with _exclusive():
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise GenerationMissingError(
                f"generation file {path} is missing",
                path=str(path),
                generation_id=generation_id,
                expected=expected_sha256,
                actual=None,
            ) from None
        try:
            return PinnedFile(path, fd)
        except BaseException:
            os.close(fd)
            raise


def _open_files() -> set[tuple[int, int, int]]:
    """(fd, dev, ino) of every open descriptor; the one ``listdir`` used itself is closed by then and
    drops out (``fstat`` fails), so a descriptor SQLite later opens under that number counts as new."""
    found = set()
    for name in os.listdir(FD_DIR):
        try:
            st = os.fstat(int(name))
        except OSError:
            continue
        found.add((int(name), st.st_dev, st.st_ino))
    return found


def _changed(pinned: PinnedFile, generation_id: str | None, why: str) -> GenerationChangedError:
    return GenerationChangedError(
        f"generation file {pinned.path}: {why}; the verified file is not what SQLite would serve",
        path=str(pinned.path),
        generation_id=generation_id,
        expected=list(pinned.inode),
    )


def _unreadable(pinned: PinnedFile, generation_id: str | None, exc: sqlite3.DatabaseError) -> SqliteIntegrityError:
    return SqliteIntegrityError(
        f"generation file {pinned.path} is not a readable SQLite database: {exc}",
        path=str(pinned.path),
        generation_id=generation_id,
        expected="ok",
        actual=[f"not a readable SQLite database: {exc}"],
    )


def _before_open(pinned: PinnedFile, generation_id: str | None, use_fd: bool) -> tuple[set[tuple[int, int, int]], bool]:
    """(the open descriptors before SQLite opens the pinned inode; whether another descriptor of that
    inode was open, which a reused number can explain). Without /proc/self/fd: the path is checked."""
    before = _open_files() if use_fd else set()
    return before, _ambiguous(pinned, generation_id, use_fd, before)


def _ambiguous(pinned: PinnedFile, generation_id: str | None, use_fd: bool, before: set[tuple[int, int, int]]) -> bool:
    """Whether another descriptor of the pinned inode is open (a reused number can explain a refusal);
    without /proc/self/fd the path is checked now."""
    if not use_fd:
        pinned.check_unchanged(generation_id)
    return any((dev, ino) == pinned.inode and fd != pinned.fd for fd, dev, ino in before)


def _opened_pinned(
    pinned: PinnedFile, generation_id: str | None, use_fd: bool, before: set[tuple[int, int, int]]
) -> bool:
    """A descriptor SQLite opened since ``before`` is the pinned inode, not rewritten in place since."""
    return _seen_pinned(pinned, generation_id, use_fd, _open_files() - before if use_fd else set())


def _seen_pinned(
    pinned: PinnedFile, generation_id: str | None, use_fd: bool, opened: set[tuple[int, int, int]]
) -> bool:
    """``opened`` (descriptors SQLite opened) holds the pinned inode, not rewritten in place since; without
    /proc/self/fd the path is checked instead."""
    if not use_fd:
        pinned.check_unchanged(generation_id)
        return True
    same = any((dev, ino) == pinned.inode for _, dev, ino in opened)
    return same and sig_of(os.fstat(pinned.fd)) == pinned.sig


CONNECT_TRIES = 4  # a refusal that another descriptor of the same inode may explain is tried again


def connect_pinned(pinned: PinnedFile, generation_id: str | None, *, any_thread: bool = False) -> sqlite3.Connection:
    """A read-only, immutable SQLite connection to the pinned inode (checked by device and inode);
    ``any_thread``: usable from other threads than this one (the caller serialises its use).

    The check needs a descriptor of the pinned inode that was not open before the connect. A
    descriptor of the same inode that this module does not own (a builder's connection to the
    generation it just published) may be closed during the connect and its number reused by
    SQLite's open, which then looks old: when such a descriptor existed, the connect is tried again
    (``CONNECT_TRIES``); a refusal stands only when no other descriptor can explain it, or every try
    was refused."""
    for _ in range(CONNECT_TRIES - 1):
        conn, ambiguous = _connect_once(pinned, generation_id, any_thread)
        if conn is not None:
            return conn
        if not ambiguous:
            break
    conn, _ = _connect_once(pinned, generation_id, any_thread)
    if conn is None:
        raise _changed(pinned, generation_id, "SQLite opened another inode than the one verified")
    return conn


def _connect_once(
    pinned: PinnedFile, generation_id: str | None, any_thread: bool
) -> tuple[sqlite3.Connection | None, bool]:
    """(the checked connection, or None when SQLite's descriptor was not seen to be the pinned inode;
    whether another descriptor of that inode was open, which a reused number can explain)."""
    use_fd = FD_DIR.is_dir()
    target = f"{FD_DIR}/{pinned.fd}" if use_fd else str(pinned.path.resolve())
    with _exclusive():
        before, ambiguous = _before_open(pinned, generation_id, use_fd)
        try:
            conn = sqlite3.connect(
                f"file:{target}?mode=ro&immutable=1",
                uri=True,
                check_same_thread=not any_thread,
                factory=PinnedConnection,
            )
        except sqlite3.OperationalError as exc:  # the inode's name is gone: nothing left to open by name
            raise _changed(pinned, generation_id, f"cannot be opened ({exc})") from exc
        try:
            probe_schema(conn)
            same = _opened_pinned(pinned, generation_id, use_fd, before)
        except sqlite3.DatabaseError as exc:
            conn._close_own()
            raise _unreadable(pinned, generation_id, exc) from exc
        except BaseException:
            conn._close_own()
            raise
        if not same:
            conn._close_own()
    return (conn, ambiguous) if same else (None, ambiguous)


def attach_pinned(conn: sqlite3.Connection, parts: Sequence[tuple[PinnedFile, str]], generation_id: str | None) -> None:
    """ATTACH each pinned inode to ``conn`` under its schema name (read-only, immutable), checked like
    ``connect_pinned`` but with one look at the open descriptors for all of them: each must be among the
    descriptors SQLite opened during the ATTACHes (device, inode; not rewritten since), else all are
    detached again and ``GenerationChangedError`` names the first that was not. ``conn`` must have been
    opened with URI filenames (``connect_pinned`` does)."""
    use_fd = FD_DIR.is_dir()
    wrong: PinnedFile | None = None
    for _ in range(CONNECT_TRIES):
        with _exclusive():
            before = _open_files() if use_fd else set()
            ambiguous = [_ambiguous(pin, generation_id, use_fd, before) for pin, _ in parts]
            for pin, schema in parts:
                target = f"{FD_DIR}/{pin.fd}" if use_fd else str(pin.path.resolve())
                try:
                    attach(conn, f"file:{target}?mode=ro&immutable=1", schema)
                except sqlite3.DatabaseError as exc:
                    raise _unreadable(pin, generation_id, exc) from exc
            opened = _open_files() - before if use_fd else set()
            wrong = next((pin for pin, _ in parts if not _seen_pinned(pin, generation_id, use_fd, opened)), None)
            if wrong is None:
                return
            for _, schema in parts:
                detach(conn, schema)
        if not any(ambiguous):
            break
    assert wrong is not None
    raise _changed(wrong, generation_id, "SQLite attached another inode than the one verified")
