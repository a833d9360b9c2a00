"""What a running watcher (``core.index.watch``) tells other processes: it holds ``<index_dir>/watch.lock``
for as long as it runs and publishes its view and last failure in ``watch.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

WATCH_FILE = "watch.json"
WATCH_LOCK = "watch.lock"  # held (flock) by a running watcher for as long as it runs


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


def watcher_running(index_dir: Path) -> bool:
    """Does a process hold ``<index_dir>/watch.lock`` (a watcher runs for this index)?"""
    import fcntl

    try:
        fd = os.open(index_dir / WATCH_LOCK, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we took
    return False
