"""Prepare a build's changed notes in batches, in process or in forked worker processes that read,
parse and count (``core.build.ingest.prepare_notes``) while the builder process writes rows.
(``multiprocessing`` is imported only where a pool is asked for: an edit's few notes never fork.)"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from core.build import ingest
from core.build.bounds import die_with_parent
from core.build.ingest import NoteFile, PreparedBatch, forget_word_tables

POOL_MIN_NOTES = 1000  # fewer notes than this are prepared in process: forking would not pay off
_PREPARE_BATCH = 64  # notes per prepare_notes call (per worker task)


def _worker_init() -> None:
    """Start a forked worker with no word tables of its parent's, that dies with its parent.

    It holds no build lock (``core.generations`` closes inherited lock descriptors after every
    fork), reads notes without blocking (``read_file``), and is killed by the kernel when the
    builder dies, so a killed builder never leaves an orphan behind.
    """
    forget_word_tables()
    die_with_parent()


def default_workers(n_notes: int) -> int:
    """Worker processes for preparing ``n_notes``: 1 (in process) for small batches or without fork."""
    if n_notes < POOL_MIN_NOTES:
        return 1
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


@contextmanager
def prepared_notes(
    items: Sequence[NoteFile],
    *,
    chunk_size: int,
    chunk_overlap: int,
    workers: int,
    root: str,
    language: str = "en",
    max_bytes: int | None = None,
    zdict: bytes | None = None,
) -> Iterator[Iterator[PreparedBatch]]:
    """``prepare_notes`` over ``items`` in batches, in order: in process, or in ``workers`` forked processes.

    The workers are forked on entry (fork, not spawn, keeps the start cheap); they read, parse
    and count, and never touch a database. Pass ``workers=1`` where forking is unwelcome.
    """
    build = uuid.uuid4().hex
    prepare = partial(
        ingest.prepare_notes,  # looked up per build: a test may replace it
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        build=build,
        root=root,
        language=language,
        max_bytes=max_bytes,
        zdict=zdict,
    )
    batches = [items[i : i + _PREPARE_BATCH] for i in range(0, len(items), _PREPARE_BATCH)]
    try:
        if workers <= 1:
            yield map(prepare, batches)
            return
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(workers, initializer=_worker_init) as pool:
            yield pool.imap(prepare, batches)
    finally:
        forget_word_tables(build)
