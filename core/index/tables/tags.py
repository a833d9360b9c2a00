"""``note_tags``: (tag, note) pairs, keyed by tag so a tag's subtree is a key range (``core.ranking.filters``)."""

from __future__ import annotations

import sqlite3

DDL_NOTE_TAGS = """
CREATE TABLE IF NOT EXISTS note_tags (
    tag     TEXT NOT NULL,
    note_id INTEGER NOT NULL,
    PRIMARY KEY (tag, note_id)
) WITHOUT ROWID"""
INDEXES = ("CREATE INDEX IF NOT EXISTS note_tags_by_note ON note_tags(note_id)",)


def insert_tags(conn: sqlite3.Connection, rows: list[tuple[str, int]]) -> None:
    """(tag, note id) pairs."""
    conn.executemany("INSERT INTO note_tags(tag, note_id) VALUES (?, ?)", rows)
