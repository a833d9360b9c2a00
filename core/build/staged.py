"""What the builder does to a staged database besides applying its plan (``core.build.builder``): the
source snapshot hash, the ranking arrays over the whole database, the validation, and the progress bar
(tqdm loaded only when shown)."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterable
from itertools import islice
from typing import Any

from core.build.plan import BuildPlan, BuildRun
from core.errors import ValidationError
from core.index.tables.checks import inconsistencies
from core.index.tables.chunk_vectors import count_vectors
from core.index.tables.connection import atomic
from core.index.tables.meta import get_meta, set_meta
from core.index.tables.skipped_files import source_hashes, source_paths
from core.ranking.chunk_vectors import compute_chunk_vectors, store_chunk_vectors
from core.ranking.sparse import compute_sparse, store_sparse


class NoBar:
    """What ``_progress`` gives without a progress bar (tqdm, and the ``importlib.metadata`` it loads: not imported)."""

    def __enter__(self) -> NoBar:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def progress_bar(total: int, shown: bool) -> Any:
    """A tqdm bar over ``total`` notes when ``shown``, else a silent stand-in."""
    if not shown:
        return NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc="indexing", unit="note")


def snapshot_hash(conn: sqlite3.Connection) -> str:
    """SHA-256 over the sorted (rel_path, content sha256) of every source file read."""
    return snapshot_of(source_hashes(conn))


def snapshot_of(rows: Iterable[tuple[str, str]]) -> str:
    """``snapshot_hash`` of (rel_path, content sha256) rows sorted by path (one row per path)."""
    h = hashlib.sha256()
    it = iter(rows)
    while batch := list(islice(it, 4096)):  # a join per batch: one encode and update, not one per row
        h.update("".join([f"{rel}\0{sha}\n" for rel, sha in batch]).encode())
    return h.hexdigest()


def stamp_meta(conn: sqlite3.Connection, run: BuildRun, scan_ns: int, snapshot: str) -> None:
    """The meta a staged database records: the build's identity and settings, scan time and source snapshot."""
    set_meta(
        conn,
        {
            **run.config.identity(),
            **run.source.settings(),
            "settings": run.config.settings(),
            "scan_started_ns": scan_ns,
            "max_note_bytes": run.config.max_note_bytes,
            "source_snapshot_hash": snapshot,
            "built_at": time.time(),
        },
    )


def validate(conn: sqlite3.Connection, plan: BuildPlan) -> None:
    """Exact source coverage (every readable scanned file) and the dense manifest; collects every problem,
    raises once. The per-note tables' counts: ``whole_database`` (a delta checks them on its new segment,
    ``core.build.incremental.delta_parts``: O(change))."""
    found: list[str] = []
    indexed = source_paths(conn) | (plan.base_paths or set())
    expected = {f.rel_path for f in plan.scan.files} - {p.path for p in plan.unreadable}
    if indexed != expected:
        found.append(f"coverage: missing {sorted(expected - indexed)[:5]}, extra {sorted(indexed - expected)[:5]}")
    meta = get_meta(conn)
    if count_vectors(conn) and not meta.get("dense_model"):
        found.append("dense manifest: vectors without a model identity")
    _raise_found(found)


def whole_database(conn: sqlite3.Connection) -> None:
    """What a database published whole needs: the term-major arrays readers load in one query
    (core.ranking.stored) over every note, and consistent counts across its per-note tables."""
    with atomic(conn):
        sparse = compute_sparse(conn)
        store_sparse(conn, sparse)
        store_chunk_vectors(conn, compute_chunk_vectors(conn, sparse))
    _raise_found(inconsistencies(conn))


def _raise_found(found: list[str]) -> None:
    if found:
        raise ValidationError("the staged index failed validation: " + "; ".join(found), problems=found)
