"""What a build is asked to do (``BuildRun``) and what changed since the active generation (``BuildPlan``).

The plan compares a fresh scan with the base: a file the source vouches for (``NoteSource.unvouched``
leaves it out: same stat and older than the previous scan, or not in git's diff) is kept unread; the
others are read and kept when their content hash is the base's; new files are read where they are parsed.

At 100k notes an edit's plan is O(vault) only in one query and one pass over the scan: the base's row of every
source file (``BaseStats``: path, id, content hash, mtime, size; a covering index of each segment) by path, the
scan's stat looked up in it, the unvouched files' rows too; the base's paths are listed only when a file was
removed (the base holds more source files than the scan matched). A build staged on its changes takes the
carried-over notes' rows from the same ``BaseStats`` (``BuildPlan.base``): the base's rows are read once.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from core.build.source import BaseStats, NoteSource, Read, base_rows
from core.index.layout import IndexLayout
from core.index.settings import IndexConfig
from core.index.tables.meta import get_meta
from core.vault.problems import Problem
from core.vault.scan import ScannedFile, ScanResult

if TYPE_CHECKING:
    from core.build.known import KnownVault


@dataclass
class BuildPlan:
    scan: ScanResult
    scan_started_ns: int
    reused: int  # scanned files carried over: vouched for by the source, or read and found unchanged
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
    # what the re-check before publishing looks at (``NoteSource.check_unchanged``): every file the build read
    # or hashed (the unvouched ones, new ones included), and the paths of the files it removed
    read: list[ScannedFile] = field(default_factory=list)
    gone_paths: list[str] = field(default_factory=list)
    base: BaseStats = field(default_factory=BaseStats)  # the base's rows, read once (empty: no base)

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
    known: KnownVault | None = None  # what a watcher keeps of the vault between builds (``core.build.known``)
    next_base: BaseStats | None = None  # the published delta's generation's rows (asked for by ``known``)

    @property
    def root(self) -> str:
        """The vault's real path: every note is read inside it."""
        return os.path.realpath(self.vault)

    def lap(self, name: str, since: float) -> float:
        """Record the seconds since ``since`` as timing ``name``; return now."""
        now = time.perf_counter()
        self.timings[name] = now - since
        return now


def _removed(stats: BaseStats, scan: ScanResult, plan: BuildPlan) -> None:
    """The base's source files the scan no longer lists, into ``plan`` (sorted by path)."""
    gone = sorted(stats.paths.difference(f.rel_path for f in scan.files))
    plan.gone_paths = gone
    for rel, note_id, *_ in (stats.rows[rel] for rel in gone):
        if note_id >= 0:
            plan.removed_ids.append(note_id)
        else:
            plan.removed_skipped.append(rel)


def plan_build(
    scan: ScanResult,
    scan_started_ns: int,
    base: sqlite3.Connection | None,
    source: NoteSource,
    stats: BaseStats | None = None,
) -> BuildPlan:
    """What changed since ``base``: files the source vouches for are kept unread; the others are
    read and kept when their content hash is the base's; new files are read where they are parsed.
    ``stats``: the base's rows when the caller knows them (``core.build.known``), else read here."""
    if stats is None:
        stats = BaseStats(base_rows(base) if base is not None else ())
    unvouched = source.unvouched(scan.files, stats, get_meta(base) if base is not None else {})
    known = {f.rel_path: stats.rows[f.rel_path][1:] for f in unvouched if f.rel_path in stats.rows}
    plan = BuildPlan(scan, scan_started_ns, len(scan.files) - len(unvouched), [], [], [], [], base=stats)
    to_read = [f for f in unvouched if f.rel_path in known]
    new = [f for f in unvouched if f.rel_path not in known]
    plan.read = unvouched
    for f, data, sha in source.read(to_read, defer=False):
        old = known[f.rel_path]
        if old[1] == sha:
            plan.reused += 1  # touched, content identical: keep
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
    if len(stats) > len(scan.files) - len(new):  # the base holds files the scan lost
        _removed(stats, scan, plan)
    return plan
