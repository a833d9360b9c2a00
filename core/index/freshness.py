"""Is the served generation behind the vault? The ``freshness`` object of every search response.

Every answer says where it comes from (``source``) and, when the vault was not checked, why
(``checked: false`` with a ``reason``): unchecked is said, never implied.

``source: "watch"``: a watcher (``core.index.watch``: ``vaultsearch watch``, or a server's
``--watch``) runs for this index directory, in this process or in another one (it holds
the watch lock of the index directory and publishes what it knows in ``watch.json``). It has seen every
change since the generation it last built, so the answer is a lookup of the few paths with
events that no successful build has covered yet (stat, then content hash, against the served
generation's rows): exact and nearly free at any vault size. Changes younger than
``event_lag_ms`` (the watcher's debounce) may not have reached it yet. It answers for the
generations it built; for another one (published by someone else, or replaced while this
search ran), or while a folder or the ignore file changed (only a walk can say what that did),
the stat walk answers and ``watch_fallback`` says why.

``source: "stat_walk"``: one ``os.scandir`` per folder and one ``DirEntry.stat`` per note,
compared with the (path, mtime_ns, size) rows of the served generation; a file whose stat
differs is hashed (at most ``HASH_BUDGET`` per walk) so that a touched-but-identical file is
not reported. The walk applies the scanner's rules (``core.vault.scan``: dot paths, the ignore
file, the index dir, symlinks, the size limit). Its cost is linear in the vault (about 4-5 µs a note,
see docs/benchmarks.md) and bounded twice:

- a walk is reused for ``window_seconds`` (default 2 s) per process, index directory and
  generation: a burst of searches pays for one walk (``reused_scan``, ``scan_age_seconds``);
- a walk that runs longer than ``walk_budget_seconds`` (default 1 s) is abandoned and the
  response says ``checked: false, reason: "walk_over_budget"`` (with the budget and how many
  files it got through); the process then does not try again for
  ``OVER_BUDGET_RETRY_SECONDS``. ``max_notes`` (off by default) is an optional count cap:
  ``reason: "vault_too_large"``.

Classification-safe: with visible classifications given, a removed or modified note counts
only when its indexed classification is visible, and an added or modified file only when the
classification in its current frontmatter is visible (each changed file is parsed once per
version, then remembered); hidden notes leave no count or path.

A failed watch build (recorded in ``watch.json``) newer than the served generation shows as
``last_build_failure``; with a watcher, the paths that build did not cover stay stale.

This module is on the read path: the scan and the note parser are imported inside functions.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.index.freshness_walk import Row, _Diff, _diff_paths, _fast_walk, _Known, _OverBudget, _verify
from core.index.layout import ResolvedIndex
from core.index.tables.meta import meta_value
from core.index.tables.notes import count_notes, note_classifications
from core.index.tables.skipped_files import classified_source_stats_of, source_mtime_sizes
from core.index.watch_state import (
    _failure_of,
    _read_watch_state,
    watcher_running,
)

DEFAULT_WINDOW_SECONDS = 2.0
DEFAULT_WALK_BUDGET_SECONDS = 1.0
OVER_BUDGET_RETRY_SECONDS = 60.0  # an abandoned walk is not retried sooner (a search never pays twice a minute)
SAMPLE_PATHS = 5


@dataclass(frozen=True)
class FreshnessOptions:
    """How a search checks freshness: ``enabled=False`` says ``checked: false`` (reason ``disabled``).

    ``walk_budget_seconds``: the longest a stat walk may take (None: no limit); ``max_notes``: an
    optional cap on the served generation's note count above which no walk is tried (None: none).
    """

    enabled: bool = True
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    walk_budget_seconds: float | None = DEFAULT_WALK_BUDGET_SECONDS
    max_notes: int | None = None


@dataclass(frozen=True)
class WatchView:
    """What a running watcher knows, as freshness needs it (made by ``core.index.watch``).

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


_LOCK = threading.Lock()
_KNOWN: dict[str, tuple[str, _Known]] = {}  # index_dir -> (generation sha256, rows); no note text
_DIFFS: dict[tuple[str, str | None], _Diff] = {}  # (index_dir, generation sha256) -> last walk
_WATCHERS: dict[str, Callable[[], WatchView | None]] = {}  # index_dir -> a watcher of this process


def clear_cache() -> None:
    """Forget every cached walk and generation row set (tests; a long-lived process never needs it)."""
    with _LOCK:
        _KNOWN.clear()
        _DIFFS.clear()
        _LEVELS.clear()


def register_watcher(index_dir: Path, view: Callable[[], WatchView | None]) -> None:
    """A watcher of this process answers freshness for ``index_dir`` (``view`` returns None while it cannot)."""
    with _LOCK:
        _WATCHERS[str(index_dir)] = view


def unregister_watcher(index_dir: Path, view: Callable[[], WatchView | None]) -> None:
    with _LOCK:
        if _WATCHERS.get(str(index_dir)) == view:  # a bound method: equal, not identical, each time
            del _WATCHERS[str(index_dir)]


def _settings(conn: sqlite3.Connection) -> tuple[int | None, bool]:
    limit = meta_value(conn, "max_note_bytes")
    settings = meta_value(conn, "settings")
    dot_paths = isinstance(settings, dict) and settings.get("include_dot_paths")
    return (None if limit is None else int(limit)), bool(dot_paths)


def _known(resolved: ResolvedIndex, conn: sqlite3.Connection) -> _Known:
    key = str(resolved.layout.index_dir)
    with _LOCK:
        hit = _KNOWN.get(key)
    if hit is not None and hit[0] == resolved.sha256 and resolved.kind != "legacy_db":
        return hit[1]
    rows = {r[0]: (r[1], r[2]) for r in source_mtime_sizes(conn)}
    known = _Known(rows, *_settings(conn))
    if resolved.kind != "legacy_db":
        with _LOCK:
            _KNOWN[key] = (resolved.sha256 or "", known)
    return known


def _walk(resolved: ResolvedIndex, conn: sqlite3.Connection, known: _Known, budget: float | None = None) -> _Diff:
    """Stat-walk the vault and diff it against the generation (hashing stat-changed files)."""
    from core.vault.scan import MAX_NOTE_BYTES

    started, t = time.time(), time.perf_counter()
    vault, index_dir = resolved.layout.vault, resolved.layout.index_dir
    max_bytes = known.max_note_bytes or MAX_NOTE_BYTES
    try:
        added, changed, seen = _fast_walk(vault, index_dir, known, max_bytes, None if budget is None else t + budget)
    except _OverBudget as over:
        return _Diff(started, (), (), (), 0, 0, over.walked, time.perf_counter() - t, budget)
    present = len(seen) - len(added)
    removed = () if present == len(known.rows) else tuple(sorted(set(known.rows).difference(seen)))
    rows = _rows_of(conn, (*(rel for rel, _ in changed), *removed))
    modified, hashed, unverified = _verify(os.path.realpath(vault), changed, lambda rel: rows[rel][0])
    return _Diff(
        started,
        tuple(sorted(added)),
        tuple(sorted(modified)),
        removed,
        hashed,
        unverified,
        None,
        time.perf_counter() - t,
        rows=rows,
    )


_LEVELS: dict[tuple[str, int, int], str] = {}  # (path, mtime_ns, size) -> current classification
_LEVELS_MAX = 50_000


def _level_now(vault: Path, rel_path: str) -> str | None:
    """The classification in the file's current frontmatter (parsed once per file version), or
    None when it cannot be read (it then counts as hidden)."""
    from core.ranking.filters import UNCLASSIFIED
    from core.vault.notes import parse_note
    from core.vault.scan import read_file

    path = vault / rel_path
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        with _LOCK:
            if key in _LEVELS:
                return _LEVELS[key]
        data = read_file(path, root=os.path.realpath(vault))[0]  # never a FIFO, never outside the vault
    except OSError:
        return None
    note = parse_note(rel_path, data)
    level = UNCLASSIFIED if note is None else (note.classification or UNCLASSIFIED).lower()  # binary: unclassified
    with _LOCK:
        if len(_LEVELS) >= _LEVELS_MAX:
            _LEVELS.clear()
        _LEVELS[key] = level
    return level


def _visible_now(vault: Path, rel_path: str, visible: frozenset[str]) -> bool:
    """Is the file's current frontmatter classification visible? (unreadable: no)."""
    return _level_now(vault, rel_path) in visible


def _visible(
    diff: _Diff, indexed_level: Callable[[str], str | None], vault: Path, classifications: tuple[str, ...] | None
) -> _Diff:
    """The diff restricted to what a caller with ``classifications`` may know exists."""
    if classifications is None:
        return diff
    from core.ranking.filters import UNCLASSIFIED

    visible = frozenset(c.lower() for c in classifications)

    def indexed_visible(path: str) -> bool:
        return (indexed_level(path) or UNCLASSIFIED) in visible

    return _Diff(
        diff.at,
        tuple(p for p in diff.added if _visible_now(vault, p, visible)),
        tuple(p for p in diff.modified if indexed_visible(p) and _visible_now(vault, p, visible)),
        tuple(p for p in diff.removed if indexed_visible(p)),
        diff.hashed,
        diff.unverified,
        diff.over_budget,
        diff.seconds,
        diff.budget,
        diff.rows,
    )


# ---------------------------------------------------------------- the watcher's state


def _watch_view(index_dir: Path, state: dict[str, Any] | None) -> WatchView | None:
    """The view of a watcher of this process, else of a running watcher's ``watch.json``."""
    with _LOCK:
        local = _WATCHERS.get(str(index_dir))
    if local is not None:
        return local()
    view = state.get("view") if state is not None else None
    if not isinstance(view, dict) or not watcher_running(index_dir):
        return None
    return WatchView.from_dict(view)


def _rows_of(conn: sqlite3.Connection, paths: tuple[str, ...]) -> dict[str, Row]:
    """The generation's source rows of ``paths`` (those it holds)."""
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in classified_source_stats_of(conn, paths)}


# ---------------------------------------------------------------- the response


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def unchecked(reason: str, **detail: Any) -> dict[str, Any]:
    """The freshness object of a response whose vault was not checked (never implied fresh)."""
    return {"checked": False, "reason": reason, "stale": None, **detail}


def _counts(seen: _Diff) -> dict[str, Any]:
    changed = [*seen.modified, *seen.added, *seen.removed]
    return {
        "stale": bool(changed),
        "added": len(seen.added),
        "modified": len(seen.modified),
        "removed": len(seen.removed),
        "sample_paths": changed[:SAMPLE_PATHS],
        "modified_unverified": seen.unverified,
    }


def check_freshness(
    resolved: ResolvedIndex,
    conn: sqlite3.Connection,
    *,
    options: FreshnessOptions | None = None,
    classifications: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The freshness object for a response served from ``resolved`` (see the module docstring)."""
    options = options or FreshnessOptions()
    index_dir = resolved.layout.index_dir
    state = _read_watch_state(index_dir)
    failure = _failure_of(state, resolved.created_at)
    extra = {"last_build_failure": failure} if failure else {}
    if not options.enabled:
        return unchecked("disabled", **extra)
    if meta_value(conn, "source") == "git":
        return _git_freshness(resolved, conn, classifications, extra)
    view = _watch_view(index_dir, state)
    fallback = None
    if view is not None:
        paths, fallback = view.changed_since(resolved.generation_id)
        if paths is not None:
            return _watch_freshness(resolved, conn, view, paths, classifications, extra)
    out = _walk_freshness(resolved, conn, options, classifications, extra)
    return {**out, "watch_fallback": fallback} if fallback else out


def _watch_freshness(
    resolved: ResolvedIndex,
    conn: sqlite3.Connection,
    view: WatchView,
    paths: tuple[str, ...],
    classifications: tuple[str, ...] | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    rows = _rows_of(conn, paths) if paths else {}
    vault = resolved.layout.vault
    diff = _diff_paths(vault, rows, paths)
    seen = _visible(diff, lambda p: diff.rows[p][3], vault, classifications)
    return {
        "checked": True,
        "source": "watch",
        "checked_at": _iso(diff.at),
        "event_lag_ms": view.event_lag_ms,
        "pending_build": bool(view.pending) or view.building,
        **_counts(seen),
        **extra,
    }


def _walk_freshness(
    resolved: ResolvedIndex,
    conn: sqlite3.Connection,
    options: FreshnessOptions,
    classifications: tuple[str, ...] | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    if options.max_notes is not None:
        notes = resolved.record.get("notes")  # from the state row: an oversized index costs no row scan
        if not isinstance(notes, int):
            notes = count_notes(conn)
        if notes > options.max_notes:
            return unchecked("vault_too_large", source="stat_walk", notes=notes, max_notes=options.max_notes, **extra)
    key = (str(resolved.layout.index_dir), resolved.sha256)
    now = time.time()
    with _LOCK:
        diff = _DIFFS.get(key)
    reuse_for = options.window_seconds
    if diff is not None and diff.over_budget is not None:
        budget = options.walk_budget_seconds
        # kept for a minute, unless this caller allows more time than the abandoned walk had
        more_time = budget is None or (diff.budget is not None and budget > diff.budget)
        reuse_for = -1.0 if more_time else max(reuse_for, OVER_BUDGET_RETRY_SECONDS)
    reused = diff is not None and now - diff.at <= reuse_for
    known = _known(resolved, conn)
    if diff is None or not reused:
        diff = _walk(resolved, conn, known, options.walk_budget_seconds)
        with _LOCK:
            _DIFFS[key] = diff
    if diff.over_budget is not None:
        return unchecked(
            "walk_over_budget",
            source="stat_walk",
            walk_budget_seconds=options.walk_budget_seconds,
            walked_files=diff.over_budget,
            notes=len(known.rows),
            checked_at=_iso(diff.at),
            retry_after_seconds=round(max(0.0, diff.at + reuse_for - now), 3) if reused else reuse_for,
            **extra,
        )
    seen = _visible(diff, lambda p: diff.rows[p][3], resolved.layout.vault, classifications)
    return {
        "checked": True,
        "source": "stat_walk",
        "checked_at": _iso(diff.at),
        "scan_age_seconds": round(max(0.0, now - diff.at), 3),
        "reused_scan": reused,
        "window_seconds": options.window_seconds,
        **_counts(seen),
        **extra,
    }


def _git_freshness(
    resolved: ResolvedIndex, conn: sqlite3.Connection, classifications: tuple[str, ...] | None, extra: dict[str, Any]
) -> dict[str, Any]:
    """A git-sourced generation is a view of a commit: fresh while its watermark is what the
    revision resolves to (``core.index.gitstatus``). Uncommitted edits are not staleness (they
    are not indexed by design); a restricted caller sees changed paths of visible notes only."""
    from core.index.gitstatus import git_freshness
    from core.index.tables.meta import get_meta

    now = time.time()
    info = git_freshness(resolved.layout.vault, get_meta(conn), index_dir=resolved.layout.index_dir, uncommitted=False)
    assert info is not None  # the meta says git
    changed = info["changed"]
    if classifications is not None:
        from core.ranking.filters import UNCLASSIFIED

        visible = frozenset(c.lower() for c in classifications)
        levels = note_classifications(conn)
        keep = {p for p, level in levels if (level or UNCLASSIFIED) in visible}
        changed = {k: [p for p in v if p in keep] for k, v in changed.items() if k != "added"} | {"added": []}
    paths = [*changed["modified"], *changed["added"], *changed["removed"]]
    return {
        "checked": True,
        "checked_at": _iso(now),
        "source": "git",
        "watermark": info["watermark"],
        "rev": info["rev"],
        "resolved": info.get("resolved"),
        "commits_since": info.get("commits_since"),
        "stale": not info.get("up_to_date", False),
        "added": len(changed["added"]),
        "modified": len(changed["modified"]),
        "removed": len(changed["removed"]),
        "sample_paths": paths[:SAMPLE_PATHS],
        **extra,
    }
