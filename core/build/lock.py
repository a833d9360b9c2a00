"""The build lock of an index directory, and the staging paths only its holder may create.

``build_lock`` holds an exclusive ``flock`` on ``build.lock`` for a whole build (or embed); the
kernel drops it when the holder dies, so a crash never wedges it. Publishing reaps every staging
file, which is safe only because staging files are created under the lock (``new_staging_path``).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.errors import BuildError, BuildLockedError, IndexDirInaccessibleError
from core.index.layout import IndexLayout
from core.index.ownership import prepare_index_dir

LOCK_POLL_S = 0.05


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


def require_lock(layout: IndexLayout) -> None:
    """Raise ``BuildError`` unless this process holds ``build_lock(layout)``."""
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
    """A fresh, unused path under ``staging/`` for the builder's database (same filesystem as segments/).

    Requires ``build_lock``: publish reaps every staging file, which is safe only if staging files are
    created under the lock, so that no other live builder can own one.
    """
    require_lock(layout)
    layout.staging_dir.mkdir(parents=True, exist_ok=True)
    return layout.staging_dir / f"{os.urandom(16).hex()}.db.tmp"
