"""The generation database's schema: its version, and its DDL assembled from the table modules.

Each table's DDL lives with its queries in ``core.index.tables`` (one module per table); this
module says which tables a generation has, in which order they are created, and which version
that schema is. The index is derived from the vault, so a schema version mismatch means "delete
and rebuild", never a migration.
"""

from __future__ import annotations

import sqlite3

from core.index.tables.connection import run_statements
from core.index.tables.meta import set_meta

SCHEMA_VERSION = 28


def schema_ddl(tokenizer: str) -> tuple[str, ...]:
    """Every statement that creates a generation's tables and indexes, in order."""
    # imported here: a reader that only compares SCHEMA_VERSION loads no write-only table module
    from core.index.tables import (
        chunk_vectors,
        chunks,
        git_dates,
        links,
        meta,
        names,
        notes,
        notes_fts,
        problems,
        skipped_files,
        tags,
        term_major,
        text_blocks,
    )

    return (
        meta.DDL_META,
        notes.DDL_NOTES,
        tags.DDL_NOTE_TAGS,
        names.DDL_NOTE_NAMES,
        problems.DDL_NOTE_PROBLEMS,
        chunks.DDL_HEADINGS,
        chunks.DDL_CHUNK_ROWS,
        chunks.DDL_CHUNKS,
        notes_fts.ddl_notes_fts(tokenizer),
        notes_fts.DDL_NOTES_FTS_CONFIG,
        text_blocks.DDL_NOTE_TEXT,
        text_blocks.DDL_TEXT_BLOCKS,
        text_blocks.DDL_TEXT_DICT,
        term_major.DDL_TERM_MAJOR,
        links.DDL_LINKS,
        links.DDL_EDGES,
        links.DDL_LINK_KEYS,
        links.DDL_TARGET_KEYS,
        chunk_vectors.DDL_CHUNK_VECTORS,
        skipped_files.DDL_SKIPPED,
        problems.DDL_BUILD_PROBLEMS,
        git_dates.DDL_GIT_DATES,
        *notes.INDEXES,
        *links.INDEXES,
        *tags.INDEXES,
        *names.INDEXES,
        *problems.INDEXES,
    )


def create_schema(conn: sqlite3.Connection, tokenizer: str) -> None:
    run_statements(conn, schema_ddl(tokenizer))
    set_meta(conn, {"schema_version": SCHEMA_VERSION, "tokenizer": tokenizer})
