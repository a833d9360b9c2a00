"""Is the served generation behind the vault? The ``freshness`` object of every search response.

Every answer says where it comes from (``source``) and, when the vault was not checked, why
(``checked: false`` with a ``reason``): unchecked is said, never implied.

``source: "watch"``: a watcher (``core.build.watch``: ``vaultsearch watch``, or a server's
``--watch``) runs for this index directory, in this process or in another one (it holds the
watch lock of the index directory and publishes what it knows in ``watch.json``). It has seen
every change since the generation it last built, so the answer is a lookup of the few paths
with events that no successful build has covered yet, each hashed against the served
generation's row (the watcher saw it change: its stat is not trusted): exact and nearly free at
any vault size. The watcher is trusted only once it has *caught up* with the search: every
change made before the search started has reached it (its event thread records the time each
``watchfiles`` call began; a batch holds every change made before that; in another process the
time is read from ``watch.clock``). A search waits for that (the rest of one ``watchfiles``
call and one more: 40-80 ms measured, idle; at most ``catch_up_seconds``), else the stat walk
answers with ``watch_fallback: "watcher_not_caught_up"``. It answers for the generations it
built; for another one (published by someone else, or replaced while this search ran), or
while a folder or the ignore file changed (only a walk can say what that did), the stat walk
answers and ``watch_fallback`` says why.

``source: "stat_walk"``: one ``os.scandir`` per folder and one ``DirEntry.stat`` per note,
compared with the (path, mtime_ns, size) rows of the served generation; a file whose stat
differs, or whose row's mtime is racy or in the future (``RACY_NS``, the builder's rule), is
hashed (at most ``HASH_BUDGET`` per walk) so that a touched-but-identical file is not reported.
The walk applies the scanner's rules (``core.vault.scan``: dot paths, the ignore file, the index
dir, symlinks, the size limit). Its cost is linear in the vault (about 4-5 µs a note, see
docs/benchmarks.md) and bounded twice:

- a walk that took ``REUSE_MIN_WALK_SECONDS`` (0.1 s, ~20k notes) or more is reused for
  ``window_seconds`` (default 2 s) per process, index directory and generation, while every
  folder it listed keeps its mtime and no watcher of this process saw a change: a burst of
  searches pays for one walk (``reused_scan``, ``scan_age_seconds``); a cheaper walk is never
  reused, so an edit is said at the next search;
- a walk that runs longer than ``walk_budget_seconds`` (default 1 s) is abandoned and the
  response says ``checked: false, reason: "walk_over_budget"`` (with the budget and how many
  files it got through); the process then does not try again for
  ``OVER_BUDGET_RETRY_SECONDS``. ``max_notes`` (off by default) is an optional count cap:
  ``reason: "vault_too_large"``.

Classification-safe (``core.index.freshness_visible``): a caller with visible classifications is
told what the same vault without its hidden notes would tell it: a note that became visible
is added, one that became hidden is removed, a skipped or unreadable file never counts, and no
count (``modified_unverified``, the walk's file counts) or path of a hidden note is said.

A failed watch build (recorded in ``watch.json``) newer than the served generation shows as
``last_build_failure`` (to a restricted caller: its visible paths and a generic message); with a
watcher, the paths that build did not cover stay stale.

This module is on the read path: the scan and the note parser are imported inside functions.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.index.freshness_visible import Sees, build_for, caller_sees, clear_levels, row_level, visible_diff
from core.index.freshness_walk import (
    RACY_NS,
    Row,
    _Diff,
    _diff_paths,
    _fast_walk,
    _Known,
    _OverBudget,
    _verify,
    folders_unchanged,
)
from core.index.layout import ResolvedIndex
from core.index.tables.meta import meta_value
from core.index.tables.notes import count_notes, note_classifications
from core.index.tables.skipped_files import classified_source_stats_of, source_mtime_sizes
from core.index.watch_state import WatchView, _failure_of, _read_watch_state, wait_clock, watcher_running

DEFAULT_WINDOW_SECONDS = 2.0
DEFAULT_WALK_BUDGET_SECONDS = 1.0
OVER_BUDGET_RETRY_SECONDS = 60.0  # an abandoned walk is not retried sooner (a search never pays twice a minute)
SAMPLE_PATHS = 5
REUSE_MIN_WALK_SECONDS = 0.1  # a walk cheaper than this is never reused: the next search walks again


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


_LOCK = threading.Lock()
_KNOWN: dict[str, tuple[str, _Known]] = {}  # index_dir -> (generation sha256, rows); no note text
_DIFFS: dict[tuple[str, str | None], _Diff] = {}  # (index_dir, generation sha256) -> last walk
_WATCHERS: dict[str, _Watching] = {}  # index_dir -> the watcher of this process


class _Watching(Protocol):
    def view(self) -> WatchView | None: ...

    def wait_caught_up(self, since: float, timeout: float) -> bool: ...


def clear_cache() -> None:
    """Forget every cached walk and generation row set (tests; a long-lived process never needs it)."""
    with _LOCK:
        _KNOWN.clear()
        _DIFFS.clear()
    clear_levels()


def forget_walks(index_dir: Path) -> None:
    """A change this process saw (a watcher's event): no walk of ``index_dir`` from before it is reused."""
    with _LOCK:
        for key in [k for k in _DIFFS if k[0] == str(index_dir)]:
            del _DIFFS[key]


def register_watcher(index_dir: Path, watcher: _Watching) -> None:
    """A watcher of this process answers freshness for ``index_dir`` (its ``view`` is None while it cannot)."""
    with _LOCK:
        _WATCHERS[str(index_dir)] = watcher


def unregister_watcher(index_dir: Path, watcher: _Watching) -> None:
    with _LOCK:
        if _WATCHERS.get(str(index_dir)) is watcher:
            del _WATCHERS[str(index_dir)]


def _settings(conn: sqlite3.Connection) -> tuple[int | None, bool, int]:
    """(size limit, dot paths, racy_after): a row whose mtime is at or past ``racy_after`` (within
    the build's racy window of its scan, or later: a future mtime) is hashed, never trusted by stat,
    the rule the builder applies (``RACY_NS``)."""
    limit = meta_value(conn, "max_note_bytes")
    settings = meta_value(conn, "settings")
    dot_paths = isinstance(settings, dict) and settings.get("include_dot_paths")
    scan_ns = meta_value(conn, "scan_started_ns")
    racy_after = (int(scan_ns) if isinstance(scan_ns, int) else time.time_ns()) - RACY_NS
    return (None if limit is None else int(limit)), bool(dot_paths), racy_after


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
        added, changed, seen, folders = _fast_walk(
            vault, index_dir, known, max_bytes, None if budget is None else t + budget
        )
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
        len(unverified),
        None,
        time.perf_counter() - t,
        rows=rows,
        unverified_paths=frozenset(unverified),
        folders=tuple(folders),
    )


# ---------------------------------------------------------------- the watcher's state


def _caught_up_view(index_dir: Path, since: float) -> tuple[WatchView | None, str | None]:
    """The view of the watcher of this index (this process's, else a running one's ``watch.json``),
    once it has caught up with every change made before ``since``; (None, why) when it did not
    within its bound (``catch_up_seconds``), (None, None) when no watcher answers."""
    with _LOCK:
        local = _WATCHERS.get(str(index_dir))
    if local is not None:
        view = local.view()
        if view is None:
            return None, None
        if not local.wait_caught_up(since, view.catch_up_seconds):
            return None, "watcher_not_caught_up"
        return local.view(), None
    view = _file_view(index_dir)
    if view is None:
        return None, None
    if not wait_clock(index_dir, since, view.catch_up_seconds):
        return None, "watcher_not_caught_up"
    return _file_view(index_dir), None  # what it recorded up to then


def _file_view(index_dir: Path) -> WatchView | None:
    state = _read_watch_state(index_dir)
    view = state.get("view") if state is not None else None
    if not isinstance(view, dict) or not watcher_running(index_dir):
        return None
    return WatchView.from_dict(view)


def _rows_of(conn: sqlite3.Connection, paths: tuple[str, ...]) -> dict[str, Row]:
    """The generation's source rows of ``paths`` (those it holds; a skipped file's level is None)."""
    return {r[0]: (r[1], r[2], r[3], row_level(r[4], r[5])) for r in classified_source_stats_of(conn, paths)}


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
    since = time.time()  # every change made before the search is what it must account for
    options = options or FreshnessOptions()
    index_dir, vault = resolved.layout.index_dir, resolved.layout.vault
    sees = caller_sees(lambda paths: _rows_of(conn, paths), vault, classifications)
    if not options.enabled:
        return unchecked("disabled", **_failure(resolved, sees))
    if meta_value(conn, "source") == "git":
        return _git_freshness(resolved, conn, classifications, _failure(resolved, sees))
    view, fallback = _caught_up_view(index_dir, since)
    extra = _failure(resolved, sees)  # read after the watcher caught up: a failure before the search shows
    if view is not None:
        paths, fallback = view.changed_since(resolved.generation_id)
        if paths is not None:
            return _watch_freshness(resolved, conn, view, paths, classifications, sees, extra)
    out = _walk_freshness(resolved, conn, options, classifications, extra)
    return {**out, "watch_fallback": fallback} if fallback else out


def _failure(resolved: ResolvedIndex, sees: Sees | None) -> dict[str, Any]:
    """``last_build_failure`` (the watcher's, newer than the served generation) as the caller may see it."""
    failure = build_for(_failure_of(_read_watch_state(resolved.layout.index_dir), resolved.created_at), sees)
    return {"last_build_failure": failure} if failure else {}


def _watch_freshness(
    resolved: ResolvedIndex,
    conn: sqlite3.Connection,
    view: WatchView,
    paths: tuple[str, ...],
    classifications: tuple[str, ...] | None,
    sees: Sees | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    rows = _rows_of(conn, paths) if paths else {}
    vault = resolved.layout.vault
    diff = _diff_paths(vault, rows, paths)
    seen = visible_diff(diff, vault, classifications, diff.unverified_paths)
    pending = bool(view.pending) or view.building if sees is None else any(sees(p) for p in view.pending)
    return {
        "checked": True,
        "source": "watch",
        "checked_at": _iso(diff.at),
        "event_lag_ms": view.event_lag_ms,
        "pending_build": pending,
        **_counts(seen),
        **extra,
    }


def _reusable(diff: _Diff | None, options: FreshnessOptions, now: float) -> tuple[bool, float]:
    """(may ``diff`` answer this search, for how long it may be reused). A walk is reused only when
    it was expensive (``REUSE_MIN_WALK_SECONDS``), within the window, and while every folder it
    listed is unchanged; an abandoned walk is not retried for a minute (unless given more time)."""
    if diff is None:
        return False, options.window_seconds
    if diff.over_budget is not None:
        budget = options.walk_budget_seconds
        more_time = budget is None or (diff.budget is not None and budget > diff.budget)
        reuse_for = -1.0 if more_time else max(options.window_seconds, OVER_BUDGET_RETRY_SECONDS)
        return now - diff.at <= reuse_for, reuse_for
    reuse_for = options.window_seconds if diff.seconds >= REUSE_MIN_WALK_SECONDS else -1.0
    return now - diff.at <= reuse_for and folders_unchanged(diff.folders), reuse_for


def _walk_freshness(
    resolved: ResolvedIndex,
    conn: sqlite3.Connection,
    options: FreshnessOptions,
    classifications: tuple[str, ...] | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    restricted = classifications is not None  # file counts over every note are not said to it
    if options.max_notes is not None:
        notes = resolved.record.get("notes")  # from the state row: an oversized index costs no row scan
        if not isinstance(notes, int):
            notes = count_notes(conn)
        if notes > options.max_notes:
            counts = {} if restricted else {"notes": notes, "max_notes": options.max_notes}
            return unchecked("vault_too_large", source="stat_walk", **counts, **extra)
    key = (str(resolved.layout.index_dir), resolved.sha256)
    now = time.time()
    with _LOCK:
        diff = _DIFFS.get(key)
    reused, reuse_for = _reusable(diff, options, now)
    known = _known(resolved, conn)
    if diff is None or not reused:
        diff = _walk(resolved, conn, known, options.walk_budget_seconds)
        with _LOCK:
            _DIFFS[key] = diff
    if diff.over_budget is not None:
        counts = {} if restricted else {"walked_files": diff.over_budget, "notes": len(known.rows)}
        return unchecked(
            "walk_over_budget",
            source="stat_walk",
            walk_budget_seconds=options.walk_budget_seconds,
            **counts,
            checked_at=_iso(diff.at),
            retry_after_seconds=round(max(0.0, diff.at + reuse_for - now), 3) if reused else reuse_for,
            **extra,
        )
    seen = visible_diff(diff, resolved.layout.vault, classifications, diff.unverified_paths)
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
