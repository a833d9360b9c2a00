"""What a watcher's last build knew about the vault, so that the next build costs what changed (issue 29).

A build compares a scan of the whole vault with the base's row of every source file (``BaseStats``): at 100k
notes the walk (one ``stat`` per note) and the base's rows cost 0.8 s of a 1.2 s one-note build. A watcher
knows both already: the scan its last build listed and the rows of the generation that build published (the
carried-over rows and the ones it wrote: ``delta_stage``), and the events name every path changed since.
``KnownVault`` holds them for the next build, which then looks at the changed paths only
(``core.vault.scan_paths.rescan_paths``, by the walk's rules) and plans against the kept rows.

When it is used, and when not:

- only on the generation it describes: the build's verified base must be that generation (another process's
  ``index`` moved the active pointer, a failed build, a settings change: a full walk and the base's rows);
- only for a working tree without symlinks and without folders it could not list (``rescan_paths`` says);
- never when an event only a walk can resolve is pending (a folder, the ignore file, more than the watcher
  keeps, an undecodable name): the watcher clears it then;
- a build that failed leaves it empty (taken at its start); one that published the whole base as one segment
  (rare on a watcher's edit) reads the rows it published once.

Events can be missed where a watch cannot see (an overflowing kernel queue, a folder over the watch limit):
after builds that trusted them, the watcher walks the vault once when it is next quiet (``missed``; an event
arriving stops the walk, tried again at the next quiet moment) and asks for a full build when the walk
disagrees with what it knows. A missed change is thus never kept for longer than one quiet period, as
freshness (which trusts the same events) already assumes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from core.build.source import BaseStats
from core.index.layout import IndexLayout
from core.index.settings import config_of_active
from core.vault.scan import ScannedFile, ScanResult, WalkStopped, scan_vault


@dataclass(frozen=True)
class Known:
    generation_id: str
    scan: ScanResult  # the vault as the build that published the generation listed it
    stats: BaseStats  # the generation's row of every source file
    # the scanned paths whose row is missing or holds another (mtime, size) (a file that could not be read):
    # every other file matches its row, so the next build compares only these, the changed and the racy ones
    odd: frozenset[str] = frozenset()


def odd_files(read: Iterable[ScannedFile], stats: BaseStats) -> frozenset[str]:
    """The paths of ``read`` (the files a build compared or read: the only ones whose rows it may have left
    unlike their stat) without a row of the same (mtime, size) in ``stats``."""
    rows = stats.rows
    return frozenset(
        f.rel_path for f in read if (row := rows.get(f.rel_path)) is None or (row[3], row[4]) != (f.mtime_ns, f.size)
    )


class KnownVault:
    """The watcher's ``Known``, taken by a build (so that a failed one leaves nothing) and set by a build that
    published a delta, or found the vault up to date. ``trusted``: builds since the last walk used events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: Known | None = None
        self.trusted = False

    def take(self, generation_id: str | None) -> Known | None:
        """What is known of ``generation_id`` (None: nothing, or another generation); empty afterwards."""
        with self._lock:
            known, self._known = self._known, None
        return known if known is not None and known.generation_id == generation_id else None

    def keep(self, known: Known | None, *, trusted: bool) -> None:
        with self._lock:
            self._known = known
            self.trusted = self.trusted or trusted

    def rekey(self, before: str | None, after: str | None) -> None:
        """A merge published ``after`` from ``before`` with the same live notes, rows and ids
        (``core.build.merge_write``): what is known of ``before`` holds for ``after``."""
        with self._lock:
            known = self._known
            if known is not None and after is not None and known.generation_id == before:
                self._known = Known(after, known.scan, known.stats, known.odd)

    def clear(self) -> None:
        """Forget what is known: the next build walks (and owes no quiet walk)."""
        with self._lock:
            self._known, self.trusted = None, False

    def peek(self) -> Known | None:
        with self._lock:
            return self._known

    def missed(self, vault: Path, layout: IndexLayout, pending: Callable[[], set[str]]) -> list[str] | None:
        """Walk the vault as a build would (the active generation's settings): the paths it lists otherwise
        than what is known, outside ``pending()`` (asked after the walk: an event of a change made during
        it is pending by then, or the path is listed here, and a full build covers it either way). None: an
        event arrived during the walk, which was given up between two folders (an edit never waits for it;
        ``trusted`` stays set, so the next quiet moment walks again)."""
        config = config_of_active(layout)
        try:
            walked = scan_vault(
                vault, index_dir=layout.index_dir, max_bytes=config.max_note_bytes,
                include_dot_paths=config.include_dot_paths, stop=lambda: bool(pending()),
            )  # fmt: skip
        except WalkStopped:
            return None
        return self.differs(walked, pending())

    def differs(self, walked: ScanResult, pending: set[str]) -> list[str]:
        """The paths a walk of the vault lists otherwise than what is known (outside ``pending``, whose
        events a build covers anyway); ``trusted`` is reset: the walk vouched for the rest."""
        with self._lock:
            known, self.trusted = self._known, False
        if known is None:
            return []
        mine = {f.rel_path: f for f in known.scan.files}
        theirs = {f.rel_path: f for f in walked.files}
        paths = {p for p in mine.keys() | theirs.keys() if mine.get(p) != theirs.get(p)}
        problems = {(p.path, p.reason) for p in known.scan.problems} ^ {(p.path, p.reason) for p in walked.problems}
        paths.update(path for path, _ in problems)
        return sorted(paths - pending)
