"""``git_dates``: rel_path -> the newest commit that changed / added the path, for a git-sourced index;
and the notes' ``git_date`` / ``git_created`` set from it (``core.build.gitbuild``)."""

from __future__ import annotations

import sqlite3

DDL_GIT_DATES = """
CREATE TABLE IF NOT EXISTS git_dates (
    rel_path TEXT PRIMARY KEY,
    last_ct  INTEGER NOT NULL,
    added_ct INTEGER
) WITHOUT ROWID"""

SQL_DATES_CLEAR = "DELETE FROM git_dates"
SQL_DATES_READ = "SELECT rel_path, last_ct, added_ct FROM git_dates"
SQL_DATES_UPSERT = "INSERT OR REPLACE INTO git_dates(rel_path, last_ct, added_ct) VALUES (?, ?, ?)"
# Note dates follow the table; a path the history does not name (cannot happen outside a broken
# repository) keeps NULL.
# mtime_ns of a git-sourced file is its last commit time, so that a carried-over row and one read
# again from the same commit are identical.
SQL_NOTES_DATES = (
    "UPDATE notes SET git_date = strftime('%Y-%m-%dT%H:%M:%S+00:00', d.last_ct, 'unixepoch'), "
    "git_created = CASE WHEN d.added_ct IS NULL THEN NULL "
    "ELSE strftime('%Y-%m-%dT%H:%M:%S+00:00', d.added_ct, 'unixepoch') END, mtime_ns = d.last_ct * 1000000000 "
    "FROM git_dates d WHERE d.rel_path = notes.rel_path"
)
SQL_SKIPPED_DATES = "UPDATE skipped_files SET mtime_ns = d.last_ct * 1000000000 FROM git_dates d WHERE d.rel_path = skipped_files.rel_path"


def stored_dates(conn: sqlite3.Connection) -> dict[str, tuple[int, int | None]]:
    """rel_path -> (last commit time, time of the commit that added it or None)."""
    return {p: (last, added) for p, last, added in conn.execute(SQL_DATES_READ)}


def store_dates(conn: sqlite3.Connection, rows: list[tuple[str, int, int | None]]) -> None:
    """Replace the dates with ``rows`` (path, last, added) and set every note's git dates (and every file's
    mtime_ns) from them."""
    conn.execute(SQL_DATES_CLEAR)
    conn.executemany(SQL_DATES_UPSERT, rows)
    conn.execute("UPDATE notes SET git_date = NULL, git_created = NULL")
    conn.execute(SQL_NOTES_DATES)
    conn.execute(SQL_SKIPPED_DATES)


def forget_dates(conn: sqlite3.Connection) -> None:
    """Git dates belong to a git-sourced index: an index of the working tree drops them."""
    conn.execute("UPDATE notes SET git_date = NULL, git_created = NULL WHERE git_date IS NOT NULL")
    conn.execute("DELETE FROM git_dates")
