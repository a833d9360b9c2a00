"""The watcher's background merges (issue 29, "Merges": the watcher when idle, never on the edit path).

``IdleMerger.tick`` runs in the watcher's build thread between builds (``Watcher._next_build``, at each
quiet check): when nothing is pending, the last build succeeded and ended at least ``IDLE_SECONDS`` ago, and
the active generation is one it has not looked at yet, it merges by the policy (``core.build.optimize``).
The lock is not waited for: a build or ``index`` run holding it wins and the merge is dropped (``last``
says ``build_locked``; the next quiet check tries again). A merge publishes a generation with the same
live notes: the watcher's baseline moves to it with no pending path covered (an edit that arrived during
the merge stays pending and is built next), and ``on_publish`` tells the servers' readers.
"""

from __future__ import annotations

import time
from typing import Any

from core.build.optimize import DROPPED, MERGED, MergeReport, optimize_index
from core.errors import VaultSearchError

IDLE_SECONDS = 10.0  # quiet after the last build before a merge (a burst of edits is never interrupted)


class IdleMerger:
    """Merges one watcher's index when it is idle (see module doc)."""

    def __init__(self, watcher: Any, idle_seconds: float = IDLE_SECONDS) -> None:
        self.watcher = watcher  # a core.build.watch.Watcher (not imported: watch imports this module)
        self.idle_seconds = idle_seconds
        self.checked: str | None = None  # the generation last looked at: not looked at again
        self.last: MergeReport | None = None
        self.failure: str | None = None  # the reason of the last merge that raised a build error
        self.merges = 0

    def _due(self) -> bool:
        w = self.watcher
        with w._cond:
            if w._pending or w._retry_at is not None or w._baseline is None or w._baseline == self.checked:
                return False
            last = w.last
        if last is None or not last.ok:
            return False
        return time.time() - (last.at + last.seconds) >= self.idle_seconds

    def tick(self) -> MergeReport | None:
        """Merge if due (the report), else None."""
        if not self._due():
            return None
        w = self.watcher
        baseline = w._baseline
        try:
            report = optimize_index(w.vault, index_dir=w.index_dir_arg, keep=w.keep, wait_seconds=0.0)
        except (VaultSearchError, OSError) as exc:  # recorded; the watcher goes on serving the unmerged generation
            self.failure, self.checked = getattr(exc, "reason", "os_error"), baseline
            return None
        self.last, self.failure = report, None
        if report.outcome == DROPPED:
            return report  # not marked checked: the next quiet check tries again
        self.checked = report.generation_after
        if report.outcome == MERGED:
            self.merges += 1
            w.known.rekey(report.generation_before, report.generation_after)
            w._covered(float("-inf"), report.generation_after)  # same live notes: no pending path covered
            if w.on_publish is not None:
                w.on_publish()
        return report
