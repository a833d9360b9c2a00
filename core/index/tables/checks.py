"""The cross-table consistency of a staged index: each check is a count that must be 0."""

from __future__ import annotations

import sqlite3

PATHS_HELD_TWICE = "paths held by two notes"
CHECKS = {
    # rel_path has no UNIQUE index (core.index.tables.notes): grouped along notes_stat, whose first column it is
    PATHS_HELD_TWICE: "SELECT count(*) FROM (SELECT 1 FROM notes GROUP BY rel_path HAVING count(*) > 1)",
    "notes vs notes_fts": "SELECT (SELECT count(*) FROM notes) - (SELECT count(*) FROM notes_fts)",
    "notes vs note_text": "SELECT (SELECT count(*) FROM notes) - (SELECT count(*) FROM note_text)",
    "note texts without their block": "SELECT count(*) FROM note_text WHERE block NOT IN (SELECT id FROM text_blocks)",
    # a block no note names holds no live note's text: a deleted note's, kept (core.index.tables.text_blocks)
    "text blocks no note names": "SELECT count(*) FROM text_blocks WHERE id NOT IN (SELECT block FROM note_text)",
    "notes without chunks": "SELECT count(*) FROM notes WHERE id NOT IN (SELECT note_id FROM chunks)",
    "chunks without a heading path": "SELECT count(*) FROM chunks WHERE heading_path IS NULL",
    "orphan chunks": "SELECT count(*) FROM chunks WHERE note_id NOT IN (SELECT id FROM notes)",
    "orphan vectors": "SELECT count(*) FROM chunk_vectors WHERE chunk_id NOT IN (SELECT id FROM chunks)",
}
# a writer's working term vectors (TEMP tables of its connection, core.index.tables.terms: a stored file has none)
WORKING_CHECKS = {
    "notes vs note_terms": "SELECT (SELECT count(*) FROM notes) - (SELECT count(*) FROM note_terms)",
    "notes vs chunk_terms": "SELECT (SELECT count(*) FROM notes) - (SELECT count(*) FROM chunk_terms)",
    "chunk_terms vs chunks": "SELECT (SELECT count(*) FROM chunks) - "
    "(SELECT coalesce(sum(n_chunks), 0) FROM chunk_terms)",
}


def failing(conn: sqlite3.Connection, names: tuple[str, ...], checks: dict[str, str] = CHECKS) -> list[str]:
    """``"<check>: <count>"`` of each of the ``checks`` named in ``names`` that is not 0, in that order."""
    counts = ((name, conn.execute(checks[name]).fetchone()[0]) for name in names)
    return [f"{name}: {n}" for name, n in counts if n]


def inconsistencies(conn: sqlite3.Connection, *, working: bool = True) -> list[str]:
    """``failing`` of every check, in CHECKS order, then (``working``: a writer's connection) WORKING_CHECKS'."""
    every = {**CHECKS, **(WORKING_CHECKS if working else {})}
    return failing(conn, tuple(every), every)
