"""``note_problems`` (per note, carried over with it) and ``build_problems`` (of the scan and the build)."""

from __future__ import annotations

import sqlite3

DDL_NOTE_PROBLEMS = """
CREATE TABLE IF NOT EXISTS note_problems (
    note_id INTEGER NOT NULL,
    reason  TEXT NOT NULL,
    detail  TEXT NOT NULL
)"""

DDL_BUILD_PROBLEMS = """
CREATE TABLE IF NOT EXISTS build_problems (
    path   TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL
)"""
INDEXES = ("CREATE INDEX IF NOT EXISTS note_problems_by_note ON note_problems(note_id)",)


def insert_note_problems(conn: sqlite3.Connection, rows: list[tuple[int, str, str]]) -> None:
    """(note id, reason, detail) per problem."""
    conn.executemany("INSERT INTO note_problems(note_id, reason, detail) VALUES (?, ?, ?)", rows)


def replace_build_problems(conn: sqlite3.Connection, rows: list[tuple[str, str, str]]) -> None:
    """The build's problems, (path, reason, detail) each, instead of the previous build's."""
    conn.execute("DELETE FROM build_problems")
    conn.executemany("INSERT INTO build_problems(path, reason, detail) VALUES (?, ?, ?)", rows)


def all_problems(conn: sqlite3.Connection) -> list[dict[str, str]]:
    """Every current problem: scan problems, skipped files, per-note parse problems."""
    rows = conn.execute(
        "SELECT path, reason, detail FROM build_problems "
        "UNION ALL SELECT rel_path, reason, detail FROM skipped_files "
        "UNION ALL SELECT n.rel_path, p.reason, p.detail FROM note_problems p JOIN notes n ON n.id = p.note_id "
        "ORDER BY 1, 2"
    )
    return [{"path": p, "reason": r, "detail": d} for p, r, d in rows]


def note_problems_except(conn: sqlite3.Connection, note_ids_json: str) -> list[dict[str, str]]:
    """The per-note problems (``all_problems``' third part) of every note but those whose ids the bound JSON
    array holds: what a build on a base carries over (``core.build.base_view``)."""
    rows = conn.execute(
        "SELECT n.rel_path, p.reason, p.detail FROM note_problems p JOIN notes n ON n.id = p.note_id "
        "WHERE p.note_id NOT IN (SELECT value FROM json_each(?))",
        (note_ids_json,),
    )
    return [{"path": p, "reason": r, "detail": d} for p, r, d in rows]
