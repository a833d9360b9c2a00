"""Settle racy rows before a publish, so that a vault copied, unpacked or checked out just before its
build is not reported stale by every search after it.

A row whose mtime lies within ``RACY_NS`` of the build's scan (or later) is never trusted by its stat:
a write in the same timestamp tick as the read would leave the stat unchanged (git's "racy git"
problem). Freshness therefore hashes such rows on every check, at most ``HASH_BUDGET`` of them, and
counts the rest as modified unverified. After ``cp -r``, ``git clone`` or an unzip every row is racy,
and since an unchanged vault publishes nothing new, the first generation's scan time stayed racy for
ever: a fresh copy of Dendron's docs said "756 modified" on every search.

So when a build holds more racy rows than freshness can hash, it waits out the racy window (at most
``RACY_NS``), then checks each racy file again, stat and content: when every one still matches its
row, the generation records the time of that check as its scan time (any later write has a later
mtime, so it is seen), and no row is racy any more. A file that moved meanwhile leaves the scan time
as it was: the row stays racy, hashed by freshness and by the next build, never trusted.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable

from core.index import freshness_walk
from core.index.freshness_walk import RACY_NS
from core.index.tables.skipped_files import source_stats
from core.vault.scan import read_file


def racy_rows(conn: sqlite3.Connection, scan_started_ns: int) -> list[tuple[str, str, int, int]]:
    """(rel_path, content sha256, mtime_ns, size) of the staged rows freshness would not trust by stat."""
    return racy_of(source_stats(conn), scan_started_ns)


def racy_of(rows: Iterable[tuple[str, str, int, int]], scan_started_ns: int) -> list[tuple[str, str, int, int]]:
    """The rows of ``rows`` (``source_stats``) freshness would not trust by stat."""
    cutoff = scan_started_ns - RACY_NS
    return [row for row in rows if row[2] >= cutoff]


def _still(root: str, row: tuple[str, str, int, int]) -> bool:
    """The file of ``row`` has the row's stat and content, before and after it is read."""
    rel, sha, mtime_ns, size = row
    path = os.path.join(root, rel)
    try:
        before = os.stat(path, follow_symlinks=False)
        if (before.st_mtime_ns, before.st_size) != (mtime_ns, size):
            return False
        data_sha = read_file(path, root=root)[1]
        after = os.stat(path, follow_symlinks=False)
    except OSError:  # gone, unreadable or refused: not settled (the next build sees what it is)
        return False
    return data_sha == sha and (after.st_mtime_ns, after.st_size) == (mtime_ns, size)


def settle_racy(conn: sqlite3.Connection, root: str, scan_started_ns: int) -> int:
    """The scan time the generation records: ``scan_started_ns``, or, when more rows are racy than
    freshness hashes per check, the time after the racy window at which every racy row was found
    unchanged (stat and content). Waits at most ``RACY_NS``; a future mtime never settles."""
    return settle_racy_rows(racy_rows(conn, scan_started_ns), root, scan_started_ns)


def settle_racy_rows(racy: list[tuple[str, str, int, int]], root: str, scan_started_ns: int) -> int:
    """``settle_racy`` of the racy rows ``racy`` (``racy_of``: a build on a base gives its carried-over rows
    and its own, not a whole working database)."""
    if len(racy) <= freshness_walk.HASH_BUDGET:
        return scan_started_ns
    newest = max(row[2] for row in racy)
    wait_ns = newest + RACY_NS + 1 - time.time_ns()
    if wait_ns > RACY_NS + 1:  # an mtime in the future: it stays racy (hashed, never trusted)
        return scan_started_ns
    if wait_ns > 0:
        time.sleep(wait_ns / 1e9)
    settled_ns = time.time_ns()
    if all(_still(root, row) for row in racy):
        return settled_ns
    return scan_started_ns
