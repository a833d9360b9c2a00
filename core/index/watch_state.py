"""What a running watcher (``core.build.watch``) tells other processes: it holds a ``flock`` on the
index directory itself for as long as it runs (no lock file that could be unlinked) and publishes
its view and last failure in ``watch.json``."""

from __future__ import annotations

import json
import os
import stat
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WATCH_FILE = "watch.json"
WATCH_CLOCK = "watch.clock"  # 8 bytes: the wall-clock time every change before which reached the watcher
_CLOCK = struct.Struct("<d")


# past two event lags and this margin a reader stops waiting for the watcher and walks the vault
# (``watch_fallback: "watcher_not_caught_up"``): on a loaded machine a watchfiles step can take longer
CATCH_UP_MARGIN_SECONDS = 0.1


@dataclass(frozen=True)
class WatchView:
    """What a running watcher knows, as freshness needs it (made by ``core.build.watch``).

    ``baseline`` is the generation the watcher's last successful build left active; ``pending``
    the note paths with events that no successful build started after them has covered;
    ``since`` maps the few generations the watcher built before ``baseline`` to the paths that
    changed between each and ``baseline``; ``rescan`` says a folder or the ignore file changed
    (or too many paths to list), which only a walk can resolve.
    """

    baseline: str | None
    pending: tuple[str, ...] = ()
    since: tuple[tuple[str, tuple[str, ...]], ...] = ()
    rescan: bool = False
    building: bool = False
    event_lag_ms: int = 0

    @property
    def catch_up_seconds(self) -> float:
        """The longest a reader waits for the watcher to catch up (two event lags and a margin)."""
        return 2 * self.event_lag_ms / 1000 + CATCH_UP_MARGIN_SECONDS

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "pending": list(self.pending),
            "since": [[gid, list(paths)] for gid, paths in self.since],
            "rescan": self.rescan,
            "building": self.building,
            "event_lag_ms": self.event_lag_ms,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WatchView:
        return cls(
            baseline=data.get("baseline"),
            pending=tuple(str(p) for p in data.get("pending") or ()),
            since=tuple((str(g), tuple(str(p) for p in ps)) for g, ps in data.get("since") or ()),
            rescan=bool(data.get("rescan")),
            building=bool(data.get("building")),
            event_lag_ms=int(data.get("event_lag_ms") or 0),
        )

    def changed_since(self, generation_id: str | None) -> tuple[tuple[str, ...] | None, str | None]:
        """(paths that may differ from ``generation_id``, None) or (None, why only a walk can say)."""
        if self.rescan:
            return None, "folder_or_ignore_file_changed"
        if generation_id is None or self.baseline is None:
            return None, "generation_unknown_to_watcher"
        if generation_id == self.baseline:
            return self.pending, None
        for gid, paths in self.since:
            if gid == generation_id:
                return tuple(sorted({*paths, *self.pending})), None
        return None, "generation_unknown_to_watcher"


@dataclass(frozen=True)
class BuildOutcome:
    ok: bool
    at: float
    generation_id: str | None = None
    up_to_date: bool = False
    reason: str | None = None
    message: str | None = None
    changed_paths: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_dict(self, limit: int | None = 20) -> dict[str, Any]:
        """As ``status`` and ``watch.json`` show it (``limit``: changed paths listed, None: all)."""
        return {
            "ok": self.ok,
            "at": self.at,
            "generation_id": self.generation_id,
            "up_to_date": self.up_to_date,
            "reason": self.reason,
            "message": self.message,
            "changed_paths": list(self.changed_paths[:limit]),
            "seconds": round(self.seconds, 3),
        }


def write_state(index_dir: Path, state: dict[str, Any]) -> None:
    """Atomically replace ``watch.json`` (a reader sees the old or the new file, never half). The
    index dir is never created here (it may be inside a vault that was moved or deleted)."""
    fd, tmp = tempfile.mkstemp(prefix=".watch-", suffix=".json", dir=index_dir)
    try:
        os.fchmod(fd, 0o644)  # readable by whoever may read the index (mkstemp makes it private)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1)
        os.replace(tmp, index_dir / WATCH_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_state(index_dir: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((index_dir / WATCH_FILE).read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None


def _read_watch_state(index_dir: Path) -> dict[str, Any] | None:
    """``watch.json`` as a dict; None when absent; ``{"unreadable": message}`` when torn or foreign."""
    try:
        state = json.loads((index_dir / WATCH_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"unreadable": str(exc)}
    return state if isinstance(state, dict) else {"unreadable": "watch.json does not hold an object"}


def _failure_of(state: dict[str, Any] | None, served_created_at: float) -> dict[str, Any] | None:
    if state is None:
        return None
    if "unreadable" in state:  # a torn or foreign file: said, never ignored
        return {"reason": "watch_state_unreadable", "message": state["unreadable"], "at": None}
    failure = state.get("last_failure")
    if not isinstance(failure, dict) or float(failure.get("at") or 0.0) < served_created_at:
        return None
    return failure


def last_build_failure(
    index_dir: Path, served_created_at: float, sees: Callable[[str], bool] | None = None
) -> dict[str, Any] | None:
    """The watcher's last failed build, when it is newer than the served generation, as a caller
    that ``sees`` only some paths may see it (``core.index.freshness_visible.sees_in``; None: all)."""
    from core.index.freshness_visible import build_for

    return build_for(_failure_of(_read_watch_state(index_dir), served_created_at), sees)


def _open_dir(index_dir: Path) -> int:
    return os.open(index_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))


def _file_id(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of a folder, None when it is gone or not a folder."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def lock_watch(index_dir: Path, wait_seconds: float = 1.0) -> int:
    """Take the exclusive watch lock of ``index_dir``: a ``flock`` on the index directory itself,
    so no file that can be unlinked holds it. Returns the descriptor (closing it releases the lock);
    ``WatchRunningError`` when another watcher holds it."""
    import fcntl

    from core.errors import WatchRunningError

    fd = _open_dir(index_dir)
    deadline = time.monotonic() + wait_seconds  # a reader's shared lock lasts microseconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise WatchRunningError(
                    f"another watcher keeps {index_dir} published", index_dir=str(index_dir)
                ) from None
            time.sleep(0.01)


def open_clock(index_dir: Path) -> int:
    """The watcher's clock file (created empty: no time caught up yet), open for ``write_clock``."""
    fd = os.open(index_dir / WATCH_CLOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    os.ftruncate(fd, 0)
    return fd


def write_clock(fd: int, caught_up: float) -> None:
    os.pwrite(fd, _CLOCK.pack(caught_up), 0)  # 8 bytes in one page: a reader sees old or new


def read_clock(index_dir: Path) -> float:
    """The running watcher's caught-up time (0.0 when it cannot be read: nothing is proven)."""
    try:
        fd = os.open(index_dir / WATCH_CLOCK, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return 0.0
    try:
        data = os.pread(fd, _CLOCK.size, 0)
    finally:
        os.close(fd)
    return float(_CLOCK.unpack(data)[0]) if len(data) == _CLOCK.size else 0.0


def wait_clock(index_dir: Path, since: float, timeout: float) -> bool:
    """Wait (at most ``timeout`` s, polling) until another process's watcher caught up with ``since``."""
    deadline = time.monotonic() + timeout
    while read_clock(index_dir) < since:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def watcher_running(index_dir: Path) -> bool:
    """Does a process hold the watch lock of ``index_dir`` (a watcher runs for this index)?"""
    import fcntl

    try:
        fd = _open_dir(index_dir)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we took
    return False
