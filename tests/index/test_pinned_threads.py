"""Issue 28 case 7: a connect to a verified generation is never refused because ANOTHER thread
closed a descriptor of the same inode meanwhile (its number reused by SQLite's open looked like
an old descriptor, so the sound index was refused with ``generation_changed``).

The close is injected at the connect's first checkpoint (the snapshot of open descriptors) from a
second thread; every descriptor of a generation inode is closed under the connect lock, so that
close waits for the connect instead of freeing a number under it.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core import generations as gen
from core.index import parts, pinned
from core.index.layout import IndexLayout
from tests.index.test_generations import publish_db


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IndexLayout:
    (tmp_path / "vault").mkdir()
    gen.clear_verify_cache()
    monkeypatch.setattr(parts, "RACY_WINDOW_NS", 0)
    return gen.layout_for(tmp_path / "vault")


@pytest.fixture
def fill_fd_gaps() -> Iterator[Callable[[], None]]:
    """Call it to take every free descriptor number below the highest open one, so that a number
    freed afterwards is the one the next open gets (what makes the reuse deterministic)."""
    fillers: list[int] = []

    def fill() -> None:
        gc.collect()
        top = max(int(name) for name in os.listdir("/proc/self/fd"))
        while (fd := os.open(os.devnull, os.O_RDONLY)) < top:
            fillers.append(fd)
        os.close(fd)

    yield fill
    for fd in fillers:
        os.close(fd)


def _close_during_connect(monkeypatch: pytest.MonkeyPatch, close: Callable[[], None]) -> list[threading.Thread]:
    """At the connect's first descriptor snapshot, run ``close`` in another thread and give it up to
    half a second to finish (with the fix it cannot finish before the connect does)."""
    real = pinned._open_files
    started: list[threading.Thread] = []

    def snapshot() -> set[tuple[int, int, int]]:
        found = real()
        if not started:
            closer = threading.Thread(target=close)
            started.append(closer)
            closer.start()
            closer.join(timeout=0.5)
        return found

    monkeypatch.setattr(pinned, "_open_files", snapshot)
    return started


def test_connection_closed_by_another_thread_during_a_connect_is_not_a_refusal(
    layout: IndexLayout, monkeypatch: pytest.MonkeyPatch, fill_fd_gaps: Callable[[], None]
) -> None:
    publish_db(layout, "a")
    resolved = gen.resolve(layout)
    assert resolved.pinned is not None
    fill_fd_gaps()
    other = pinned.connect_pinned(resolved.pinned, resolved.generation_id, any_thread=True)
    started = _close_during_connect(monkeypatch, other.close)
    conn = pinned.connect_pinned(resolved.pinned, resolved.generation_id)  # raised generation_changed
    try:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 20
    finally:
        conn.close()
        started[0].join()
    with pytest.raises(sqlite3.ProgrammingError):  # the other thread's close did happen, after the connect
        other.execute("SELECT 1")


def test_pinned_descriptor_released_by_another_thread_during_a_connect_is_not_a_refusal(
    layout: IndexLayout, monkeypatch: pytest.MonkeyPatch, fill_fd_gaps: Callable[[], None]
) -> None:
    publish_db(layout, "a")
    resolved = gen.resolve(layout)
    assert resolved.pinned is not None
    fill_fd_gaps()
    second = [
        pinned.pin(resolved.pinned.path, resolved.generation_id, resolved.sha256)
    ]  # another pin of the same inode

    def release() -> None:
        second.clear()  # the last reference goes: its descriptor is closed
        gc.collect()

    started = _close_during_connect(monkeypatch, release)
    conn = pinned.connect_pinned(resolved.pinned, resolved.generation_id)
    conn.close()
    started[0].join()


def test_a_plain_descriptor_of_the_inode_closed_during_a_connect_is_not_a_refusal(
    layout: IndexLayout, monkeypatch: pytest.MonkeyPatch, fill_fd_gaps: Callable[[], None]
) -> None:
    """A descriptor of the same inode that this module does not own (a builder's connection to the
    generation it just published, an attached base) closed during a connect, its number then reused
    by SQLite's open: the connect is tried again and succeeds (the soak's and the threads test's
    residual ``generation_changed`` under load), while a file that really is another inode is still
    refused (``test_verified_serving``)."""
    publish_db(layout, "a")
    resolved = gen.resolve(layout)
    assert resolved.pinned is not None
    fill_fd_gaps()
    foreign = [os.open(resolved.pinned.path, os.O_RDONLY)]
    started = _close_during_connect(monkeypatch, lambda: os.close(foreign.pop()))
    conn = pinned.connect_pinned(resolved.pinned, resolved.generation_id)  # raised generation_changed
    try:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 20
    finally:
        conn.close()
        started[0].join()
    assert not foreign


def test_threads_searching_while_a_writer_publishes_never_fail(tmp_path: Path) -> None:
    """4 threads x 40 searches while another thread edits a note and publishes 8 generations: every
    search answers from a verified generation, none fails (the load test of the issue, bounded)."""
    from core.build.builder import build_index
    from core.searcher import search_vault
    from tests.conftest import note, write_vault

    vault = write_vault(tmp_path / "vault", {f"n{i}.md": note(f"Note {i}", "alpha beta") for i in range(10)})
    build_index(vault)
    errors: list[BaseException] = []
    answered = [0]
    done = threading.Event()

    def writer() -> None:
        try:
            for round_ in range(8):
                (vault / "n0.md").write_text(note("Note 0", f"alpha round {round_}"), encoding="utf-8")
                build_index(vault)
        except BaseException as exc:  # counted, never lost in a thread
            errors.append(exc)
        finally:
            done.set()

    def reader() -> None:
        for _ in range(40):
            try:
                got = search_vault(vault, "alpha", 20, "fts", freshness=False)
                assert len(got) == 10
                answered[0] += 1
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=writer), *(threading.Thread(target=reader) for _ in range(4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and answered[0] == 160 and done.is_set()


def test_a_resolve_never_drops_the_lock_of_a_publish_in_another_thread(tmp_path: Path) -> None:
    """Closing ANY descriptor of a file drops every POSIX lock the process holds on it: a resolve that
    opened and closed state.db to read its change counter dropped the lock of a publish running in
    the watcher thread, and the other processes' readers rolled its journal back as hot
    (SQLITE_IOERR_DELETE_NOENT, ``state_corrupt``, in the soak)."""
    import subprocess
    import sys

    from core.build.builder import build_index
    from tests.conftest import note, write_vault

    vault = write_vault(tmp_path / "vault", {"a.md": note("A", "alpha")})
    build_index(vault)
    layout = gen.layout_for(vault)
    publisher = sqlite3.connect(layout.state_path, isolation_level=None)
    publisher.execute("BEGIN IMMEDIATE")  # what a publish holds while it writes
    try:
        gen.clear_verify_cache()
        gen.resolve(layout)  # reads the state's fingerprint
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys; sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)"
                ".execute('BEGIN IMMEDIATE')",
                str(layout.state_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        publisher.execute("ROLLBACK")
        publisher.close()
    assert probe.returncode != 0 and "locked" in probe.stderr  # another process still sees the lock
