"""Is the served generation behind the vault? The ``freshness`` object of every search response.

A fast stat walk (``core.vault.scan.scan_vault``: one ``scandir`` per folder, nothing opened)
is compared with the (path, mtime_ns, size) rows of the served generation. A file whose stat
differs is hashed (at most ``HASH_BUDGET`` of them) so that a touched-but-identical file is
not reported. The cost is bounded twice:

- a scan result is reused for ``window_seconds`` (default 2 s) per process, per index
  directory and generation: a burst of searches pays for one walk;
- an index of more than ``max_notes`` notes (default 20,000) is not walked at all: the
  response says ``checked: false, reason: "vault_too_large"`` instead of implying fresh.

Classification-safe: with visible classifications given, a removed or modified note counts
only when its indexed classification is visible, and an added or modified file only when the
classification in its current frontmatter is visible (each changed file is parsed once per
version, then remembered); hidden notes leave no count or path.

The watcher (``core.index.watch``) records a failed build in ``<index_dir>/watch.json``; a
failure newer than the served generation shows here as ``last_build_failure``.

This module is on the read path: the scan and the note parser are imported inside functions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.index.layout import ResolvedIndex

DEFAULT_WINDOW_SECONDS = 2.0
DEFAULT_MAX_NOTES = 20_000
HASH_BUDGET = 256  # stat-changed files hashed per scan; beyond it a stat change counts as modified
SAMPLE_PATHS = 5
WATCH_FILE = "watch.json"


@dataclass(frozen=True)
class FreshnessOptions:
    """How a search checks freshness: ``enabled=False`` says ``checked: false`` (reason ``disabled``)."""

    enabled: bool = True
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    max_notes: int = DEFAULT_MAX_NOTES


@dataclass(frozen=True)
class _Known:
    """The served generation's source rows: rel_path -> (sha256, mtime_ns, size, classification)."""

    rows: dict[str, tuple[str, int, int, str | None]]
    max_note_bytes: int | None


@dataclass(frozen=True)
class _Diff:
    at: float  # epoch seconds the walk started
    added: tuple[str, ...]
    modified: tuple[str, ...]
    removed: tuple[str, ...]
    hashed: int
    unverified: int  # stat changes beyond the hash budget, counted as modified


_LOCK = threading.Lock()
_KNOWN: dict[str, tuple[str, _Known]] = {}  # index_dir -> (generation sha256, rows); no note text
_DIFFS: dict[tuple[str, str | None], _Diff] = {}  # (index_dir, generation sha256) -> last walk


def clear_cache() -> None:
    """Forget every cached walk and generation row set (tests; a long-lived process never needs it)."""
    with _LOCK:
        _KNOWN.clear()
        _DIFFS.clear()
        _LEVELS.clear()


def _known(resolved: ResolvedIndex, conn: sqlite3.Connection) -> _Known:
    key = str(resolved.layout.index_dir)
    with _LOCK:
        hit = _KNOWN.get(key)
    if hit is not None and hit[0] == resolved.sha256 and resolved.kind != "legacy_db":
        return hit[1]
    rows: dict[str, tuple[str, int, int, str | None]] = {
        r[0]: (r[1], r[2], r[3], r[4])
        for r in conn.execute(
            "SELECT rel_path, content_sha256, mtime_ns, size, lower(classification) FROM notes "
            "UNION ALL SELECT rel_path, content_sha256, mtime_ns, size, NULL FROM skipped_files"
        )
    }
    limit = conn.execute("SELECT value FROM meta WHERE key = 'max_note_bytes'").fetchone()
    known = _Known(rows, int(json.loads(limit[0])) if limit else None)
    if resolved.kind != "legacy_db":
        with _LOCK:
            _KNOWN[key] = (resolved.sha256 or "", known)
    return known


def _walk(resolved: ResolvedIndex, known: _Known) -> _Diff:
    """Stat-walk the vault and diff it against the generation (hashing stat-changed files)."""
    from core.vault.scan import MAX_NOTE_BYTES, read_file, scan_vault

    started = time.time()
    root = os.path.realpath(resolved.layout.vault)
    scan = scan_vault(
        resolved.layout.vault, index_dir=resolved.layout.index_dir, max_bytes=known.max_note_bytes or MAX_NOTE_BYTES
    )
    added, modified = [], []
    hashed = unverified = 0
    for f in scan.files:
        old = known.rows.get(f.rel_path)
        if old is None:
            added.append(f.rel_path)
        elif (old[1], old[2]) != (f.mtime_ns, f.size):
            if hashed >= HASH_BUDGET:
                unverified += 1
                modified.append(f.rel_path)
                continue
            hashed += 1
            try:
                changed = read_file(f.path, root=root)[1] != old[0]
            except FileNotFoundError:  # deleted between the walk and the read: it is removed
                continue
            except OSError:  # unreadable or refused (not a regular file, leaves the vault): changed
                changed = True
            if changed:
                modified.append(f.rel_path)
    seen = {f.rel_path for f in scan.files}
    removed = tuple(sorted(k for k in known.rows if k not in seen))
    return _Diff(started, tuple(added), tuple(modified), removed, hashed, unverified)


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


def _visible(diff: _Diff, known: _Known, vault: Path, classifications: tuple[str, ...] | None) -> _Diff:
    """The diff restricted to what a caller with ``classifications`` may know exists."""
    if classifications is None:
        return diff
    from core.ranking.filters import UNCLASSIFIED

    visible = frozenset(c.lower() for c in classifications)

    def indexed_visible(path: str) -> bool:
        return (known.rows[path][3] or UNCLASSIFIED) in visible

    return _Diff(
        diff.at,
        tuple(p for p in diff.added if _visible_now(vault, p, visible)),
        tuple(p for p in diff.modified if indexed_visible(p) and _visible_now(vault, p, visible)),
        tuple(p for p in diff.removed if indexed_visible(p)),
        diff.hashed,
        diff.unverified,
    )


def last_build_failure(index_dir: Path, served_created_at: float) -> dict[str, Any] | None:
    """The watcher's last failed build, when it is newer than the served generation."""
    try:
        state = json.loads((index_dir / WATCH_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # a torn or foreign file: said, never ignored
        return {"reason": "watch_state_unreadable", "message": str(exc), "at": None}
    failure = state.get("last_failure") if isinstance(state, dict) else None
    if not isinstance(failure, dict) or float(failure.get("at") or 0.0) < served_created_at:
        return None
    return failure


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def unchecked(reason: str, **detail: Any) -> dict[str, Any]:
    """The freshness object of a response whose vault was not checked (never implied fresh)."""
    return {"checked": False, "reason": reason, "stale": None, **detail}


def check_freshness(
    resolved: ResolvedIndex,
    conn: sqlite3.Connection,
    *,
    options: FreshnessOptions | None = None,
    classifications: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The freshness object for a response served from ``resolved`` (see the module docstring)."""
    options = options or FreshnessOptions()
    failure = last_build_failure(resolved.layout.index_dir, resolved.created_at)
    extra = {"last_build_failure": failure} if failure else {}
    if not options.enabled:
        return unchecked("disabled", **extra)
    meta_source = conn.execute("SELECT value FROM meta WHERE key = 'source'").fetchone()
    if meta_source and json.loads(meta_source[0]) == "git":
        return _git_freshness(resolved, conn, classifications, extra)
    notes = resolved.record.get("notes")  # from the state row: an oversized index costs no row scan
    if not isinstance(notes, int):
        notes = int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])
    if notes > options.max_notes:
        return unchecked("vault_too_large", notes=notes, max_notes=options.max_notes, **extra)
    known = _known(resolved, conn)
    key = (str(resolved.layout.index_dir), resolved.sha256)
    now = time.time()
    with _LOCK:
        diff = _DIFFS.get(key)
    reused = diff is not None and now - diff.at <= options.window_seconds
    if diff is None or not reused:
        diff = _walk(resolved, known)
        with _LOCK:
            _DIFFS[key] = diff
    seen = _visible(diff, known, resolved.layout.vault, classifications)
    changed = [*seen.modified, *seen.added, *seen.removed]
    return {
        "checked": True,
        "checked_at": _iso(diff.at),
        "scan_age_seconds": round(max(0.0, now - diff.at), 3),
        "reused_scan": reused,
        "window_seconds": options.window_seconds,
        "stale": bool(changed),
        "added": len(seen.added),
        "modified": len(seen.modified),
        "removed": len(seen.removed),
        "sample_paths": changed[:SAMPLE_PATHS],
        "modified_unverified": seen.unverified,
        **extra,
    }


def _git_freshness(
    resolved: ResolvedIndex, conn: sqlite3.Connection, classifications: tuple[str, ...] | None, extra: dict[str, Any]
) -> dict[str, Any]:
    """A git-sourced generation is a view of a commit: fresh while its watermark is what the
    revision resolves to (``core.index.gitstatus``). Uncommitted edits are not staleness (they
    are not indexed by design); a restricted caller sees changed paths of visible notes only."""
    from core.index.gitstatus import git_freshness
    from core.index.schema import get_meta

    now = time.time()
    info = git_freshness(resolved.layout.vault, get_meta(conn), index_dir=resolved.layout.index_dir, uncommitted=False)
    assert info is not None  # the meta says git
    changed = info["changed"]
    if classifications is not None:
        from core.ranking.filters import UNCLASSIFIED

        visible = frozenset(c.lower() for c in classifications)
        known = _known(resolved, conn).rows
        keep = {p for p, row in known.items() if (row[3] or UNCLASSIFIED) in visible}
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
