"""``skipped_files``: source files that were read but not indexed (binary), so that they count as
"seen" by the staleness scan and the snapshot hash; and the queries over every source file a build
read (``notes`` and ``skipped_files`` together). A file's SHA-256 is stored as its 32 bytes in both tables
(``core.index.tables.notes``); every reader here gives it as the lower-case hex digest."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

DDL_SKIPPED = """
CREATE TABLE IF NOT EXISTS skipped_files (
    rel_path       TEXT PRIMARY KEY,
    content_sha256 BLOB NOT NULL,
    mtime_ns       INTEGER NOT NULL,
    size           INTEGER NOT NULL,
    reason         TEXT NOT NULL,
    detail         TEXT NOT NULL
)"""

# The stat walk's rows of every source file (two columns: reading four of every row costs twice as
# much), and the rest of the rows of the few paths that differ (``{marks}``: one ``?`` per path).
SQL_SOURCE_MTIME_SIZES = (
    "SELECT rel_path, mtime_ns, size FROM notes UNION ALL SELECT rel_path, mtime_ns, size FROM skipped_files"
)
SQL_CLASSIFIED_SOURCE_STATS_OF = (
    "SELECT rel_path, content_sha256, mtime_ns, size, lower(classification), 1 FROM notes "
    "WHERE rel_path IN ({marks}) UNION ALL SELECT rel_path, content_sha256, mtime_ns, size, NULL, 0 "
    "FROM skipped_files WHERE rel_path IN ({marks})"
)
SQL_SOURCE_ROWS_OF = (
    "SELECT rel_path, id, content_sha256, mtime_ns, size FROM notes WHERE rel_path IN ({marks}) "
    "UNION ALL SELECT rel_path, -1, content_sha256, mtime_ns, size FROM skipped_files WHERE rel_path IN ({marks})"
)


def _hex_at(k: int, rows: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
    """``rows`` with the stored SHA-256 bytes at position ``k`` as the hex digest."""
    return ((*r[:k], r[k].hex(), *r[k + 1 :]) for r in rows)


# ---------------------------------------------------------------- skipped_files


def insert_skipped(conn: sqlite3.Connection, rows: list[tuple[str, str, int, int, str, str]]) -> None:
    """(rel_path, sha256, mtime_ns, size, reason, detail) per file; a file skipped before is replaced."""
    conn.executemany(
        "INSERT OR REPLACE INTO skipped_files(rel_path, content_sha256, mtime_ns, size, reason, detail) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        ((rel, bytes.fromhex(sha), *rest) for rel, sha, *rest in rows),
    )


def delete_skipped(conn: sqlite3.Connection, rel_paths: list[str]) -> None:
    conn.executemany("DELETE FROM skipped_files WHERE rel_path = ?", [(p,) for p in rel_paths])


def skipped_file_rows(conn: sqlite3.Connection) -> Iterator[tuple[str, str, int, int]]:
    """(rel_path, sha256, mtime_ns, size) of every skipped file."""
    return _hex_at(1, conn.execute("SELECT rel_path, content_sha256, mtime_ns, size FROM skipped_files"))


def count_skipped(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM skipped_files").fetchone()[0])


# ---------------------------------------------------------------- every source file (notes and skipped files)


def source_hashes(conn: sqlite3.Connection) -> Iterator[tuple[str, str]]:
    """(rel_path, content sha256) of every source file read, by path: what the snapshot hash covers."""
    return _hex_at(
        1,
        conn.execute(
            "SELECT rel_path, content_sha256 FROM notes UNION ALL "
            "SELECT rel_path, content_sha256 FROM skipped_files ORDER BY 1"
        ),
    )


def source_paths(conn: sqlite3.Connection) -> set[str]:
    """The path of every source file read."""
    return {r[0] for r in conn.execute("SELECT rel_path FROM notes UNION ALL SELECT rel_path FROM skipped_files")}


def source_note_ids(conn: sqlite3.Connection) -> dict[str, int]:
    """rel_path -> note id of every source file read (-1 for a skipped file)."""
    return dict(conn.execute("SELECT rel_path, id FROM notes UNION ALL SELECT rel_path, -1 FROM skipped_files"))


def source_stats(conn: sqlite3.Connection) -> Iterator[tuple[str, str, int, int]]:
    """(rel_path, content sha256, mtime_ns, size) of every source file read: what a staleness scan compares."""
    return _hex_at(
        1,
        conn.execute(
            "SELECT rel_path, content_sha256, mtime_ns, size FROM notes "
            "UNION ALL SELECT rel_path, content_sha256, mtime_ns, size FROM skipped_files"
        ),
    )


def source_mtime_sizes(conn: sqlite3.Connection) -> Iterator[tuple[str, int, int]]:
    """(rel_path, mtime_ns, size) of every source file read: what a stat walk compares first."""
    return conn.execute(SQL_SOURCE_MTIME_SIZES)


def classified_source_stats_of(
    conn: sqlite3.Connection, rel_paths: Sequence[str]
) -> Iterator[tuple[str, str, int, int, str | None, int]]:
    """(rel_path, content sha256, mtime_ns, size, lower-cased classification (None: none set), 1 for a
    note and 0 for a skipped file) of those of ``rel_paths`` the generation holds, 500 paths a statement."""
    for at in range(0, len(rel_paths), 500):
        part = list(rel_paths[at : at + 500])
        rows = conn.execute(SQL_CLASSIFIED_SOURCE_STATS_OF.format(marks=",".join("?" * len(part))), [*part, *part])
        yield from _hex_at(1, rows)


def source_rows_of(conn: sqlite3.Connection, rel_paths: Sequence[str]) -> Iterator[tuple[str, int, str, int, int]]:
    """(rel_path, note id (-1 for a skipped file), content sha256, mtime_ns, size) of those of ``rel_paths`` the
    index holds, 500 paths a statement: the whole rows of the few files a build plan does not vouch for by stat."""
    for at in range(0, len(rel_paths), 500):
        part = list(rel_paths[at : at + 500])
        yield from _hex_at(2, conn.execute(SQL_SOURCE_ROWS_OF.format(marks=",".join("?" * len(part))), [*part, *part]))


def count_sources(conn: sqlite3.Connection) -> int:
    """Source files read: notes and skipped files."""
    return int(conn.execute("SELECT (SELECT count(*) FROM notes) + (SELECT count(*) FROM skipped_files)").fetchone()[0])
