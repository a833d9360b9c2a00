"""What a running watcher (``core.index.watch``) tells other processes: it holds a ``flock`` on the
index directory itself for as long as it runs (no lock file that could be unlinked) and publishes
its view and last failure in ``watch.json``."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WATCH_FILE = "watch.json"


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "at": self.at,
            "generation_id": self.generation_id,
            "up_to_date": self.up_to_date,
            "reason": self.reason,
            "message": self.message,
            "changed_paths": list(self.changed_paths[:20]),
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


def last_build_failure(index_dir: Path, served_created_at: float) -> dict[str, Any] | None:
    """The watcher's last failed build, when it is newer than the served generation."""
    return _failure_of(_read_watch_state(index_dir), served_created_at)


def _open_dir(index_dir: Path) -> int:
    return os.open(index_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))


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
