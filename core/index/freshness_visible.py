"""What a restricted caller may know of freshness and of the watcher's state (``core.index.freshness``,
``status``): exactly what the same vault without the notes it may not see would report.

A path is *visible* to a caller with classifications ``C`` when its classification in the served
generation is in ``C`` (a deleted note's classification is known from there), or when its
current frontmatter's classification is (each file version parsed once, with the build's
parser, ``core.vault.notes.parse_note``). A file no classification can be read from (unreadable,
binary, a skipped file) is never visible. Against the served generation's view of visible notes:

- added: not indexed as visible, visible now;
- removed: indexed as visible, gone or no longer visible;
- modified: indexed as visible, visible now, other content.

Counts (``modified_unverified``, the walk's file counts) count visible paths only, a failed
build's ``changed_paths`` list visible paths only, and its message (free text that may name
any path) is replaced by a generic one.

On the read path: the note parser is imported inside functions.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.index.freshness_walk import Row, _Diff

_LOCK = threading.Lock()
_LEVELS: dict[tuple[str, int, int], str | None] = {}  # (path, mtime_ns, size) -> current classification
_LEVELS_MAX = 50_000

Sees = Callable[[str], bool]  # may the caller know of this vault-relative path?


def clear_levels() -> None:
    with _LOCK:
        _LEVELS.clear()


def level_now(vault: Path, rel_path: str) -> str | None:
    """The classification in the file's current frontmatter (parsed once per file version), or
    None when none can be read (unreadable, binary, gone): never visible."""
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
    level = None if note is None else (note.classification or UNCLASSIFIED).lower()  # binary: skipped, hidden
    with _LOCK:
        if len(_LEVELS) >= _LEVELS_MAX:
            _LEVELS.clear()
        _LEVELS[key] = level
    return level


def _allowed(classifications: tuple[str, ...]) -> frozenset[str]:
    return frozenset(c.lower() for c in classifications)


def visible_diff(
    diff: _Diff, vault: Path, classifications: tuple[str, ...] | None, unverified: frozenset[str]
) -> _Diff:
    """The diff as the same vault without the caller's hidden notes would give it (module docstring)."""
    if classifications is None:
        return diff
    allowed = _allowed(classifications)

    def was(path: str) -> bool:  # indexed, and visible in the served generation
        row = diff.rows.get(path)
        return row is not None and row[3] in allowed

    def now(path: str) -> bool:
        return level_now(vault, path) in allowed

    added = [p for p in diff.added if now(p)] + [p for p in diff.modified if not was(p) and now(p)]
    removed = [p for p in diff.removed if was(p)] + [p for p in diff.modified if was(p) and not now(p)]
    modified = [p for p in diff.modified if was(p) and now(p)]
    return _Diff(
        diff.at,
        tuple(sorted(added)),
        tuple(sorted(modified)),
        tuple(sorted(removed)),
        diff.hashed,
        sum(1 for p in modified if p in unverified),
        diff.over_budget,
        diff.seconds,
        diff.budget,
        diff.rows,
    )


def row_level(classification: str | None, is_note: int) -> str | None:
    """A source row's level for visibility: a note's lower-cased classification (none set: unclassified),
    None for a skipped file (no classification could be read from it)."""
    from core.ranking.filters import UNCLASSIFIED

    return (classification or UNCLASSIFIED) if is_note else None


def caller_sees(
    rows_of: Callable[[tuple[str, ...]], dict[str, Row]], vault: Path, classifications: tuple[str, ...] | None
) -> Sees | None:
    """The visibility test of one caller (None: unrestricted, every path); ``rows_of`` gives the served
    generation's rows of some paths (its connection must stay open while the test is used)."""
    if classifications is None:
        return None
    allowed = _allowed(classifications)

    def sees(path: str) -> bool:
        row = rows_of((path,)).get(path)
        return (row is not None and row[3] in allowed) or level_now(vault, path) in allowed

    return sees


def sees_in(conn: sqlite3.Connection, vault: Path, classifications: tuple[str, ...] | None) -> Sees | None:
    """``caller_sees`` over the generation open on ``conn`` (for ``status``)."""
    from core.index.tables.skipped_files import classified_source_stats_of

    def rows_of(paths: tuple[str, ...]) -> dict[str, Row]:
        return {r[0]: (r[1], r[2], r[3], row_level(r[4], r[5])) for r in classified_source_stats_of(conn, paths)}

    return caller_sees(rows_of, vault, classifications)


GENERIC_FAILURE = "the watcher's last build failed; its detail is shown to unrestricted callers only"


def build_for(build: dict[str, Any] | None, sees: Sees | None, limit: int = 20) -> dict[str, Any] | None:
    """A watch build's record (``BuildOutcome.to_dict``, a failure's too) as a caller may see it:
    visible changed paths only, and no free-text message for a restricted caller (it may name any path)."""
    if build is None:
        return None
    paths = [str(p) for p in build.get("changed_paths") or ()]
    if sees is None:
        return {**build, "changed_paths": paths[:limit]}
    message = None if build.get("message") is None else GENERIC_FAILURE
    return {**build, "message": message, "changed_paths": [p for p in paths if sees(p)][:limit]}
