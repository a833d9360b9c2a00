"""``vaultsearch watch VAULT`` and the servers' ``--watch``: rebuild and publish when notes change.

``watchfiles`` reports batches of file changes (debounced: a burst of edits is one batch);
each batch that touches a note (``*.md``) or the ignore file runs an incremental
``build_index`` with the configuration of the active generation, which publishes a new
generation. Readers move to it on their next call (``generations.resolve`` sees the new state).

A failed build keeps the old generation serving: the failure (its stable ``reason``, message
and time) is written to ``<index_dir>/watch.json``, where ``status`` and every search's
``freshness`` find it (:func:`core.index.freshness.last_build_failure`). The next successful
build clears it. Only build errors (``VaultSearchError``) and I/O errors are caught, and each
is recorded; anything else stops the watcher.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import generations as gen
from core.errors import VaultSearchError
from core.index.freshness import WATCH_FILE

DEFAULT_DEBOUNCE_MS = 200
IGNORE_FILE = ".vaultsearchignore"


@dataclass(frozen=True)
class BuildOutcome:
    ok: bool
    at: float
    generation_id: str | None = None
    up_to_date: bool = False
    reason: str | None = None
    message: str | None = None
    changed_paths: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "at": self.at,
            "generation_id": self.generation_id,
            "up_to_date": self.up_to_date,
            "reason": self.reason,
            "message": self.message,
            "changed_paths": list(self.changed_paths[:20]),
            "seconds": round(self.seconds, 3),
        }


def _write_state(index_dir: Path, state: dict[str, Any]) -> None:
    """Atomically replace ``watch.json`` (a reader sees the old or the new file, never half)."""
    index_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".watch-", suffix=".json", dir=index_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=2)
        os.replace(tmp, index_dir / WATCH_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_state(index_dir: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((index_dir / WATCH_FILE).read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None


def _config_of_active(layout: gen.IndexLayout) -> Any:
    """The IndexConfig the active generation was built with (so a watch build never re-chunks it all)."""
    from core.index.builder import IndexConfig
    from core.index.schema import get_meta

    try:
        resolved = gen.resolve(layout)
    except VaultSearchError:
        return IndexConfig()
    conn = gen.connect_readonly(resolved)
    try:
        meta = get_meta(conn)
    finally:
        conn.close()
    kw: dict[str, Any] = {}
    if isinstance(meta.get("tokenizer"), str):
        kw["tokenizer"] = meta["tokenizer"]
    parts = str(meta.get("chunker") or "").split(":")
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        kw["chunk_size"], kw["chunk_overlap"] = int(parts[1]), int(parts[2])
    return IndexConfig(**kw)


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
        self.layout = gen.layout_for(self.vault, index_dir)
        self.index_dir_arg = index_dir
        self.debounce_ms = debounce_ms
        self.on_build = on_build
        self.on_publish = on_publish  # called inside the build, right after the active pointer moved
        self.keep = keep
        self.lock_wait = lock_wait
        self.stop_event = threading.Event()
        self.ready = threading.Event()  # set once the first build ran and the watch is armed
        self.builds = 0
        self.last: BuildOutcome | None = None
        self._thread: threading.Thread | None = None
        self._state: dict[str, Any] = {
            "pid": os.getpid(),
            "started_at": time.time(),
            "armed": False,
            "last_build": None,
        }

    # ------------------------------------------------------------ one build

    def build_once(self, changed: Iterable[str] = ()) -> BuildOutcome:
        """An incremental build + publish; a failure is recorded, the old generation keeps serving."""
        from core.index.builder import build_index

        t = time.perf_counter()
        at = time.time()
        paths = tuple(sorted(changed))
        try:
            report = build_index(
                self.vault,
                index_dir=self.index_dir_arg,
                config=_config_of_active(self.layout),
                keep=self.keep,
                wait_seconds=self.lock_wait,
                on_step=self._step,
            )
            outcome = BuildOutcome(
                True, at, report.generation_id, report.up_to_date, changed_paths=paths, seconds=time.perf_counter() - t
            )
        except VaultSearchError as exc:
            outcome = BuildOutcome(False, at, None, False, exc.reason, exc.message, paths, time.perf_counter() - t)
        except OSError as exc:
            outcome = BuildOutcome(False, at, None, False, "os_error", str(exc), paths, time.perf_counter() - t)
        self.builds += 1
        self.last = outcome
        self._state["last_build"] = outcome.to_dict()
        if outcome.ok:
            self._state.pop("last_failure", None)
        else:
            self._state["last_failure"] = outcome.to_dict()
        _write_state(self.layout.index_dir, self._state)
        if self.on_build is not None:
            self.on_build(outcome)
        return outcome

    def _step(self, name: str) -> None:
        if name == "retention" and self.on_publish is not None:  # the first step after the state commit
            self.on_publish()

    # ------------------------------------------------------------ the loop

    def _relevant(self, path: str) -> str | None:
        """The vault-relative path of a change worth a build (a note or the ignore file), else None."""
        p = Path(path)
        try:
            rel = p.resolve().relative_to(self.vault) if p.is_absolute() else p
        except ValueError:
            try:
                rel = p.relative_to(self.vault)
            except ValueError:
                return None
        if p.is_relative_to(self.layout.index_dir) or any(
            part in (".git", ".obsidian", ".trash") for part in rel.parts
        ):
            return None
        if rel.name == IGNORE_FILE or rel.suffix.lower() == ".md":
            return rel.as_posix()
        return None

    def run(self) -> None:
        """Build once (serve at once), arm the watch, catch up on what changed meanwhile, then
        rebuild after every debounced batch of note changes until ``stop``."""
        from watchfiles import watch

        self.build_once()
        armed = False
        for changes in watch(
            self.vault,
            debounce=self.debounce_ms,
            step=50,
            stop_event=self.stop_event,
            yield_on_timeout=True,  # the first (maybe empty) batch says the watch is armed
            rust_timeout=300,
        ):
            changed = {rel for _, path in changes if (rel := self._relevant(path)) is not None}
            if not armed:  # changes between the first build and arming are caught up here
                armed = True
                self._state["armed"] = True
                self.build_once(changed)
                self.ready.set()
            elif changed:
                self.build_once(changed)

    def start(self) -> threading.Thread:
        """Run in a daemon thread (for the servers); ``ready`` is set after the first build."""
        self._thread = threading.Thread(target=self.run, name="vaultsearch-watch", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def state(self) -> dict[str, Any]:
        """What ``status`` shows about the watcher."""
        return {"enabled": True, "builds": self.builds, **{k: v for k, v in self._state.items() if k != "pid"}}
