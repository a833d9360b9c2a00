"""What a build is asked to do (``BuildRun``) and what changed since the active generation (``BuildPlan``).

The plan compares a fresh scan with the base: a file the source vouches for (``NoteSource.trusted``:
same stat and older than the previous scan, or not in git's diff) is kept unread; the others are
read and kept when their content hash is the base's; new files are read where they are parsed.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.build.source import NoteSource, Read
from core.index.layout import IndexLayout
from core.index.settings import IndexConfig
from core.index.tables.meta import get_meta
from core.index.tables.notes import note_file_rows
from core.index.tables.skipped_files import skipped_file_rows
from core.vault.problems import Problem
from core.vault.scan import ScanResult


@dataclass
class BuildPlan:
    scan: ScanResult
    scan_started_ns: int
    unchanged: dict[str, int]  # rel_path -> note id (or -1 for skipped files)
    changed: list[Read]  # file, content (or a git BlobRef), sha256 (None: not read yet)
    changed_ids: list[int]  # base note ids of modified notes
    removed_ids: list[int]
    removed_skipped: list[str]
    added: int = 0
    unreadable: list[Problem] = field(default_factory=list)  # scanned files that could not be read
    touched: list[tuple[int, int]] = field(default_factory=list)  # (mtime_ns, note id): same content, new mtime
    # the paths of the base's notes a build on the base carries over without writing them into its working
    # database (``core.build.delta_stage``: it holds only the changes); None: the working database holds all
    base_paths: set[str] | None = None

    @property
    def up_to_date(self) -> bool:
        return not (self.changed or self.changed_ids or self.removed_ids or self.removed_skipped or self.touched)


@dataclass
class BuildRun:
    """One build: what it was asked to do, and its timings so far."""

    vault: Path
    layout: IndexLayout
    config: IndexConfig
    progress: bool
    workers: int | None
    source: NoteSource
    source_may_change: bool = False  # a file changed during the build is kept as read (no source_changed)
    started: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)  # index-level problems (e.g. a recovered state DB)
    first_ids: tuple[int, int] | None = None  # (note id, chunk id) new rows start at least from (a segmented base)

    @property
    def root(self) -> str:
        """The vault's real path: every note is read inside it."""
        return os.path.realpath(self.vault)

    def lap(self, name: str, since: float) -> float:
        """Record the seconds since ``since`` as timing ``name``; return now."""
        now = time.perf_counter()
        self.timings[name] = now - since
        return now


def _base_rows(conn: sqlite3.Connection | None) -> tuple[dict[str, tuple], dict[str, tuple], dict[str, Any]]:
    if conn is None:
        return {}, {}, {}
    notes = {r[0]: r[1:] for r in note_file_rows(conn)}
    skipped = {r[0]: (-1, *r[1:]) for r in skipped_file_rows(conn)}
    return notes, skipped, get_meta(conn)


def plan_build(
    scan: ScanResult, scan_started_ns: int, base: sqlite3.Connection | None, source: NoteSource
) -> BuildPlan:
    """What changed since ``base``: files the source vouches for are kept unread; the others are
    read and kept when their content hash is the base's; new files are read where they are parsed."""
    notes, skipped, meta = _base_rows(base)
    known = {**skipped, **notes}
    trusted = source.trusted(scan.files, known, meta)
    plan = BuildPlan(scan, scan_started_ns, {}, [], [], [], [])
    to_read = [f for f in scan.files if f.rel_path in known and f.rel_path not in trusted]
    new = [f for f in scan.files if f.rel_path not in known]
    plan.unchanged = {f.rel_path: known[f.rel_path][0] for f in scan.files if f.rel_path in trusted}
    for f, data, sha in source.read(to_read, defer=False):
        old = known[f.rel_path]
        if old[1] == sha:
            plan.unchanged[f.rel_path] = old[0]  # touched, content identical: keep
            if old[0] >= 0 and old[2] != f.mtime_ns:
                plan.touched.append((f.mtime_ns, old[0]))  # mtime is a date field: keep it true
            continue
        plan.changed.append((f, data, sha))
        if old[0] >= 0:
            plan.changed_ids.append(old[0])
        else:
            plan.removed_skipped.append(f.rel_path)
    plan.changed += source.read(new, defer=True)
    plan.changed.sort(key=lambda item: item[0].rel_path)  # scan order: note ids do not depend on the source
    plan.added = len(new)
    seen = {f.rel_path for f in scan.files}
    plan.removed_ids = [v[0] for k, v in notes.items() if k not in seen]
    plan.removed_skipped += [k for k in skipped if k not in seen]
    return plan
