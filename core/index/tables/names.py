"""``note_names``: every name a reader knows a note by, as a lookup key, and the rule that named it.

One row per (note, name key). ``ord`` 0 is the name the note is shown by (its ``notes.title``);
``rule`` says where a name came from (``core.vault.notes.NAME_RULES``: frontmatter title, H1
heading, folder of an index note, file name, alias, abbreviation). A query that is exactly one of
a note's names finds it here (``named_note_ids``); ``vaultsearch status`` counts the rules.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

DDL_NOTE_NAMES = """
CREATE TABLE IF NOT EXISTS note_names (
    name_key TEXT NOT NULL,
    note_id  INTEGER NOT NULL,
    rule     TEXT NOT NULL,
    ord      INTEGER NOT NULL,
    PRIMARY KEY (name_key, note_id)
) WITHOUT ROWID"""
# No index by note: a segment is never edited (a note's removal is a tombstone), a copy and the generation's
# view read the whole table, and the working database of a build deletes in one scan per table (SciFact: 0.7 MB).
INDEXES: tuple[str, ...] = ()


def insert_names(conn: sqlite3.Connection, rows: list[tuple[str, int, str, int]]) -> None:
    """(name key, note id, rule, ord) rows."""
    conn.executemany("INSERT INTO note_names(name_key, note_id, rule, ord) VALUES (?, ?, ?, ?)", rows)


# A folder's name is a name a query can be exactly only where it is the note's title: a docs site's
# folder slugs repeat across sections (``statements/async_function`` and ``operators/async_function``),
# its titles tell the pages apart ("async function", "async function expression").
SQL_NAMED = "SELECT note_id FROM note_names WHERE name_key = ? AND (rule != 'folder' OR ord = 0)"


def named_note_ids(conn: sqlite3.Connection, name_key: str) -> list[int]:
    """The ids of the notes one of whose names has this key (a folder's name: only as their title)."""
    return [r[0] for r in conn.execute(SQL_NAMED, (name_key,))]


_NOTES = "(?1 IS NULL OR note_id IN (SELECT value FROM json_each(?1)))"
SQL_SHOWN_RULES = f"SELECT rule, count(*) FROM note_names WHERE ord = 0 AND {_NOTES} GROUP BY rule ORDER BY rule"
SQL_NAME_RULES = f"SELECT rule, count(DISTINCT note_id) FROM note_names WHERE {_NOTES} GROUP BY rule ORDER BY rule"


def name_rule_counts(conn: sqlite3.Connection, note_ids: Sequence[int] | None = None) -> dict[str, dict[str, int]]:
    """``{"shown": {rule: notes shown by a name of that rule}, "names": {rule: notes with a name of that
    rule}}`` over every note, or over ``note_ids`` only."""
    ids = None if note_ids is None else json.dumps(sorted(note_ids))
    shown = conn.execute(SQL_SHOWN_RULES, (ids,)).fetchall()
    names = conn.execute(SQL_NAME_RULES, (ids,)).fetchall()
    return {"shown": dict(shown), "names": dict(names)}
