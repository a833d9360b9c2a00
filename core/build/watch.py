"""``vaultsearch watch VAULT`` and the servers' ``--watch``: rebuild and publish when notes change.

Two threads. The event thread drains ``watchfiles`` (debounced batches of file changes) all
the time, builds included, and records each changed note path as *pending*. The build thread
(the caller of :meth:`Watcher.run`) runs an incremental ``build_index`` with the configuration
of the active generation whenever something is pending, which publishes a new generation;
readers move to it on their next call. Changes made during a build stay pending and are
built next (a burst of edits during a long build is one more build, not one each). A build
looks again only at the pending paths, on what the last one listed and published
(``core.build.known``); after such builds the vault is walked once when quiet.

What the watcher knows is what freshness serves (``core.index.freshness``, ``source: "watch"``):
the generation its last successful build left active (the *baseline*) and the pending paths,
kept in memory for this process and in ``<index_dir>/watch.json`` for others, while the watcher
holds a ``flock`` on the index directory itself (a second watcher of one index is refused:
``watch_already_running``, even when files in it were deleted). A path stops being pending
once a build that *started after its event* succeeds (and hashed it: ``rehash``). Freshness
waits until the watcher caught up with a search (``wait_caught_up``, ``watch.clock``). The
watch is armed before the first build, so the baseline covers every change. A vault (or index dir) moved, deleted or
replaced stops the watcher with ``vault_missing`` (``index_dir_inaccessible``): it never recreates one.

Events that say more than one path changed make the next freshness check walk the vault
until a build covers them (``rescan``): a folder created, moved or deleted (a folder that held
notes is found in the baseline generation), the ignore file, or more pending paths than
``PENDING_MAX``.

A failed build keeps the old generation serving and its paths pending (stale, with the
failure's stable ``reason``, message and time in ``watch.json``, where ``status`` and every
search's freshness find it); it is retried after a back-off (2 s, doubling to a minute) or at
the next change. Only build errors (``VaultSearchError``) and I/O errors are caught and
recorded; anything else stops the watcher. Every ``CONFIRM_SECONDS`` of quiet the watcher
checks that the active generation is still its own; one published by someone else (an
``index`` or ``embed`` run) is confirmed by a build (usually up to date) before the watcher
answers freshness for it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from core.build.idle_merge import IdleMerger
from core.build.known import KnownVault
from core.build.lock import ensure_layout
from core.build.watch_paths import RESCAN, holds_notes_under, relevant_path
from core.errors import IndexDirInaccessibleError, VaultMissingError, VaultSearchError
from core.index.freshness import forget_walks, register_watcher, unregister_watcher
from core.index.freshness_visible import Sees, build_for
from core.index.layout import layout_for
from core.index.settings import config_of_active
from core.index.state import active_record
from core.index.watch_state import BuildOutcome, WatchView, _file_id, lock_watch, open_clock, write_clock, write_state

DEFAULT_DEBOUNCE_MS = 200
STEP_MS = 20  # watchfiles yields a batch after this long without a new change (and, idle, every step)
PENDING_MAX = 2_000  # more pending paths than this: freshness walks (``rescan``) until a build covers them
HISTORY = 4  # older generations the watcher still answers freshness for (a search that raced a publish)
CONFIRM_SECONDS = 2.0
RETRY_MIN_SECONDS, RETRY_MAX_SECONDS = 2.0, 60.0
ARM_TIMEOUT_SECONDS = 60.0


def _undecodable_event(exc: RuntimeError) -> bool:
    """watchfiles gives up a whole batch of events when one path in it is not valid UTF-8
    (``WatchfilesRustInternalError``, a ``RuntimeError`` whose message is its only mark)."""
    return type(exc).__name__ == "WatchfilesRustInternalError" and "decode path" in str(exc)


class Watcher:
    """Watches one vault and keeps its index published. ``run`` blocks; ``start`` runs it in a thread."""

    def __init__(
        self,
        vault: Path,
        *,
        index_dir: Path | None = None,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        on_build: Callable[[BuildOutcome], None] | None = None,
        keep: int = 2,
        lock_wait: float = 30.0,
        on_publish: Callable[[], None] | None = None,
    ) -> None:
        self.vault = Path(vault).resolve()
        self.layout = layout_for(self.vault, index_dir)
        self.index_dir_arg = index_dir
        self.debounce_ms = debounce_ms
        self.on_build = on_build
        self.on_publish = on_publish  # called inside the build, right after the active pointer moved
        self.keep = keep
        self.lock_wait = lock_wait
        self.stop_event = threading.Event()
        self.ready = threading.Event()  # set once the watch is armed and the first build ran
        self.builds = 0
        self.last: BuildOutcome | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._pending: dict[str, float] = {}  # rel path (or RESCAN) -> monotonic time its event arrived
        self._baseline: str | None = None
        self._since: list[tuple[str, set[str] | None]] = []  # older generation -> paths changed since (None: unknown)
        self._building_since: float | None = None  # monotonic start of the running build
        self._armed = threading.Event()
        self._event_error: BaseException | None = None
        self._retry_at: float | None = None
        self._failures = 0
        self._lock_fd: int | None = None
        self._clock_fd: int | None = None  # <index_dir>/watch.clock: the caught-up time, for other processes
        self._caught_up = 0.0  # wall clock: every change made before it is pending or built
        self._published = False  # the running build's new generation is active (set at its retention step)
        self._save_lock = threading.Lock()  # one snapshot-and-write at a time: watch.json never goes back
        self._started_at = time.time()
        self._last_failure: dict[str, Any] | None = None
        self._identity: tuple[tuple[int, int] | None, tuple[int, int] | None] | None = None  # (vault, index dir)
        self.error: BaseException | None = None  # what stopped a watcher run by ``start``
        self.idle = IdleMerger(self)  # merges by the policy when quiet (core.build.idle_merge)
        self.known = KnownVault()  # what the last build listed and published (core.build.known)

    # ------------------------------------------------------------ what freshness sees

    def view(self) -> WatchView | None:
        """What freshness serves from this watcher (None until armed and built, and once stopped)."""
        with self._cond:
            if not self._armed.is_set() or self._baseline is None or self.stop_event.is_set():
                return None
            pending = sorted(p for p in self._pending if p != RESCAN)
            return WatchView(
                baseline=self._baseline,
                pending=tuple(pending),
                since=tuple((gid, tuple(sorted(paths))) for gid, paths in self._since if paths is not None),
                rescan=RESCAN in self._pending,
                building=self._building_since is not None,
                event_lag_ms=self.debounce_ms + STEP_MS,
            )

    def state(self, sees: Sees | None = None) -> dict[str, Any]:
        """What ``status`` shows about the watcher; to a caller that ``sees`` only some paths (see
        ``core.index.freshness_visible``), pending paths, changed paths and failures of those only."""
        with self._cond:
            pending = list(self._pending)
            last = self.last.to_dict(limit=None) if self.last else None
            failure = self._last_failure
        if sees is not None:  # outside the lock: the test reads the index and the notes
            pending = [p for p in pending if p != RESCAN and sees(p)]
        with self._cond:
            return {
                "enabled": True,
                "builds": self.builds,
                "started_at": self._started_at,
                "armed": self._armed.is_set(),
                "generation_id": self._baseline,
                "pending": len(pending),
                "building": self._building_since is not None,
                "last_build": build_for(last, sees),
                **({"stopped": getattr(self.error, "reason", type(self.error).__name__)} if self.error else {}),
                **({"last_failure": build_for(failure, sees)} if failure else {}),
            }

    def _save(self) -> None:
        """Mirror the state to ``watch.json`` for other processes (raises the typed error of a vault or index dir that went)."""
        if self._lock_fd is None:
            return  # only the watcher holding the lock speaks for the index
        gone = self._gone()
        if gone is not None:
            raise gone
        with self._save_lock:
            view = self.view()
            state = {**self.state(), "pid": os.getpid(), "view": view.to_dict() if view is not None else None}
            try:
                write_state(self.layout.index_dir, state)
            except OSError as exc:  # the folder may go between the check above and the write
                if (gone := self._gone()) is None:
                    raise
                raise gone from exc

    # ------------------------------------------------------------ one build
    def build_once(self, changed: Iterable[str] = ()) -> BuildOutcome:
        """An incremental build + publish; a failure is recorded, the old generation keeps serving.

        Pending paths whose events arrived before the build started are covered by its success."""
        from core.build.builder import build_index

        t = time.perf_counter()
        at = time.time()
        with self._cond:
            started = time.monotonic()
            self._building_since = started
            paths = tuple(sorted({*changed, *(p for p in self._pending if p != RESCAN)}))
            if RESCAN in self._pending:
                self.known.clear()  # only a walk can say what changed
        self._published = False
        try:
            report = build_index(
                self.vault,
                index_dir=self.index_dir_arg,
                config=config_of_active(self.layout),
                keep=self.keep,
                wait_seconds=self.lock_wait,
                on_step=lambda name: self._step(name, started),
                source_may_change=True,  # what changes meanwhile is pending: built next, never a failed build
                rehash=paths,  # a path seen changing is hashed, never trusted by its (mtime, size)
                known=self.known,  # the last build's scan and rows: only ``paths`` are looked at again
            )
            outcome = BuildOutcome(
                True, at, report.generation_id, report.up_to_date, changed_paths=paths, seconds=time.perf_counter() - t
            )
            if not self._published:
                self._covered(started, report.generation_id)
        except VaultSearchError as exc:
            outcome = BuildOutcome(False, at, None, False, exc.reason, exc.message, paths, time.perf_counter() - t)
        except OSError as exc:
            outcome = BuildOutcome(False, at, None, False, "os_error", str(exc), paths, time.perf_counter() - t)
        with self._cond:
            self._building_since = None
            self.builds += 1
            self.last = outcome
            if outcome.ok:
                self._last_failure, self._failures, self._retry_at = None, 0, None
            else:
                self._last_failure = outcome.to_dict(limit=None)  # every path: a caller sees its visible ones
                self._failures += 1
                self._retry_at = time.monotonic() + min(
                    RETRY_MAX_SECONDS, RETRY_MIN_SECONDS * 2 ** (self._failures - 1)
                )
        self._save()
        if self.on_build is not None:
            self.on_build(outcome)
        return outcome

    def _covered(self, started: float, generation_id: str | None) -> None:
        """A build that started at ``started`` left ``generation_id`` active: it covers every event before."""
        with self._cond:
            done = {p for p, t in self._pending.items() if t <= started}
            for p in done:
                del self._pending[p]
            paths = None if RESCAN in done else done
            if generation_id != self._baseline:
                if self._baseline is not None:
                    self._since.append((self._baseline, set()))
                self._since = [
                    (
                        gid,
                        None if seen is None or paths is None or len(seen) + len(paths) > PENDING_MAX else seen | paths,
                    )
                    for gid, seen in self._since[-HISTORY:]
                    if gid != generation_id
                ]
                self._baseline = generation_id
        self._save()

    def _step(self, name: str, started: float) -> None:
        if name == "retention":  # the first step after the state commit: the new generation is active
            record = active_record(self.layout)
            self._published = True
            self._covered(started, record["generation_id"] if record else None)
            if self.on_publish is not None:
                self.on_publish()

    # ------------------------------------------------------------ events

    def _holds_notes_under(self, rel: str) -> bool:
        return holds_notes_under(self.layout, rel)

    def _relevant(self, path: str) -> str | None:
        return relevant_path(self.vault, self.layout, path, self._holds_notes_under)

    def _note_changes(self, changes: Iterable[tuple[Any, str]]) -> None:
        now = time.monotonic()
        found = {rel for _, path in changes if (rel := self._relevant(path)) is not None}
        if not found:
            return
        forget_walks(self.layout.index_dir)  # a change this process saw: no walk from before answers
        with self._cond:
            for rel in found:
                self._pending[rel] = now
            if len(self._pending) > PENDING_MAX:
                self._pending[RESCAN] = now
            self._retry_at = None  # a new change: build now, not after the back-off
            self._cond.notify_all()
        self._save()

    def _events(self) -> None:
        from watchfiles import watch

        rescan = False
        try:
            while True:
                batches = watch(
                    self.vault,
                    watch_filter=None,  # every path: the scanner, not watchfiles' defaults, says what a note is
                    debounce=self.debounce_ms,
                    step=STEP_MS,
                    stop_event=self.stop_event,
                    yield_on_timeout=True,  # the first (maybe empty) batch says the watch is armed
                    rust_timeout=1,  # idle, a call returns after one step: the caught-up time moves on every step
                )
                try:
                    while True:
                        began = time.time()  # every change before this is in the next batch, or an earlier one
                        changes = next(batches, None)
                        if changes is None:
                            return
                        self._armed.set()  # every change from here on reaches us
                        if rescan:  # the batch lost to an undecodable name: only a walk can say what it held
                            rescan = False
                            self._note_rescan()
                        if changes:
                            self._note_changes(changes)
                        self._caught_up_to(began)
                except RuntimeError as exc:
                    if not _undecodable_event(exc):
                        raise
                    rescan = True  # watch again; once armed, a build walks the vault (it reports the name)
        except BaseException as exc:  # recorded for the build thread, which stops the watcher with it
            self._event_error = exc
        finally:
            with self._cond:
                self._cond.notify_all()

    def _note_rescan(self) -> None:
        with self._cond:
            self._pending[RESCAN] = time.monotonic()
            self._retry_at = None
            self._cond.notify_all()
        self._save()

    def _caught_up_to(self, began: float) -> None:
        """Every change made before ``began`` (wall clock) is pending or built: say so, here and in
        the clock file other processes read."""
        with self._cond:  # _release closes the clock under this lock too: never a reused descriptor
            self._caught_up = began
            self._cond.notify_all()
            if self._clock_fd is not None:
                write_clock(self._clock_fd, began)

    def wait_caught_up(self, since: float, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every change made before ``since`` reached the watcher."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._caught_up < since:
                left = deadline - time.monotonic()
                if left <= 0 or self.stop_event.is_set():
                    return False
                self._cond.wait(left)
        return True

    # ------------------------------------------------------------ the loop

    def _claim(self) -> None:
        """Hold the watch lock of the index dir for as long as the watcher runs (a second watcher is refused)."""
        if self._lock_fd is not None:
            return
        ensure_layout(self.layout)
        self._lock_fd = lock_watch(self.layout.index_dir)
        self._clock_fd = open_clock(self.layout.index_dir)
        self._identity = (_file_id(self.vault), _file_id(self.layout.index_dir))
        self._save()  # no view yet: what a watcher that died left in watch.json is trusted no more

    def _gone(self) -> VaultSearchError | None:
        """The typed error when the vault or the index dir is no longer the folder the watcher
        claimed (moved, deleted or replaced): the watcher stops, it never recreates either."""
        if self._identity is None:
            return None
        vault, index_dir = self._identity
        if _file_id(self.vault) != vault:
            return VaultMissingError(f"the watched vault {self.vault} was moved or deleted", vault=str(self.vault))
        if _file_id(self.layout.index_dir) != index_dir:
            return IndexDirInaccessibleError(
                f"the index directory {self.layout.index_dir} was moved or deleted while watched",
                index_dir=str(self.layout.index_dir),
            )
        return None

    def _release(self) -> None:
        with self._cond:
            if self._clock_fd is not None:
                os.close(self._clock_fd)
                self._clock_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _next_build(self) -> bool:
        """Wait until a build is due (True) or the watcher stops (False)."""
        next_confirm = time.monotonic() + CONFIRM_SECONDS
        while True:
            gone = self._gone()
            with self._cond:
                if gone is not None and self._event_error is None:
                    self._event_error = gone
                if self.stop_event.is_set() or self._event_error is not None:
                    return False
                now = time.monotonic()
                if self._pending and (self._retry_at is None or now >= self._retry_at):
                    return True
                confirm = now >= next_confirm and self._retry_at is None
                if not confirm:
                    wake = min(next_confirm, self._retry_at or next_confirm)
                    self._cond.wait(max(0.01, min(0.5, wake - now)))
                    continue
            next_confirm = time.monotonic() + CONFIRM_SECONDS
            if self._foreign():  # outside the lock: freshness never waits on state.db
                return True
            self._walk_once()
            self.idle.tick()  # never on the edit path: only when nothing is pending

    def _walk_once(self) -> None:
        """After builds that trusted the events, walk once when quiet (``KnownVault.missed``): a missed event is
        built. A walk that fails (the index or the vault cannot be read) leaves it to a full build, which reports."""
        if not self.known.trusted:
            return
        try:
            missed = self.known.missed(self.vault, self.layout, self._pending_paths)
        except (VaultSearchError, OSError):
            self.known.clear()
            missed = [RESCAN]
        if missed:
            self._note_rescan()

    def _pending_paths(self) -> set[str]:
        with self._cond:
            return set(self._pending)

    def _foreign(self) -> bool:
        """Is the active generation one this watcher did not build (an ``index``/``embed`` run)?"""
        try:
            record = active_record(self.layout)
        except VaultSearchError:
            return False
        return record is not None and record.get("generation_id") != self._baseline

    def run(self) -> None:
        """Arm the watch, build once (this build is the baseline), then build whenever changes are
        pending, until ``stop``."""
        self._claim()
        register_watcher(self.layout.index_dir, self)
        events = threading.Thread(target=self._events, name="vaultsearch-watch-events", daemon=True)
        events.start()
        try:
            while not self._armed.wait(0.1):
                if self._event_error is not None or not events.is_alive():
                    break
                if self.stop_event.is_set():
                    return
            if self._event_error is not None:
                raise self._event_error
            self.build_once()
            self.ready.set()
            while self._next_build():
                self.build_once()
            if self._event_error is not None:
                raise self._gone() or self._event_error
        finally:
            self.stop_event.set()
            events.join(5.0)
            unregister_watcher(self.layout.index_dir, self)
            try:
                if self._gone() is None:
                    self._save()  # armed no more: readers in other processes stop trusting the file
            finally:
                self._release()

    def start(self) -> threading.Thread:
        """Run in a daemon thread (for the servers); ``ready`` is set after the first build.
        Raises ``WatchRunningError`` here, before any thread, when another watcher holds the index."""
        self._claim()
        self._thread = threading.Thread(target=self._run_recorded, name="vaultsearch-watch", daemon=True)
        self._thread.start()
        return self._thread

    def _run_recorded(self) -> None:
        """``run`` in the watcher's thread: what stops it is kept in ``error`` (and shown by ``state``)."""
        try:
            self.run()
        except BaseException as exc:  # recorded, not lost in a thread: status shows it
            self.error = exc

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
