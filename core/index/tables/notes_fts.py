"""``notes_fts``: the FTS5 table over notes (rowid = note id), one row per note, and the readers and
writers of the one stored copy of those texts (``note_text`` and its blocks: ``text_blocks``).

It indexes exactly the texts a note's sparse term vector counts (its names: title, file name and
aliases; description, tags, its headings, its body). The tokenizer is part of the index identity.

``notes_fts`` is contentless (``content=''``): FTS5 keeps its inverted index and no copy of the
text. The texts are stored once, compressed in blocks of several notes (``core.index.tables.text_blocks``;
every reader of a note's text reads them here). SQLite 3.40 has no ``contentless_delete``: a note's FTS5
row is removed by the ``'delete'`` command with its original texts, read back from ``note_text``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from core.errors import IntegrityError
from core.index.tables import text_blocks
from core.index.tables.connection import dead_in, segment_schemas

# FTS5 columns of notes_fts, in order: one row per note holding exactly the texts its
# sparse term vector counts (its names: title, file name and aliases; description, tags, its
# headings, its body).
FTS_COLUMNS = ("title", "description", "tags", "headings", "body")

_BODY = FTS_COLUMNS.index("body")

SQL_INSERT_FTS = f"INSERT INTO notes_fts(rowid, {', '.join(FTS_COLUMNS)}) VALUES (?{', ?' * len(FTS_COLUMNS)})"
SQL_DELETE_FTS = (
    f"INSERT INTO notes_fts(notes_fts, rowid, {', '.join(FTS_COLUMNS)}) VALUES ('delete', ?{', ?' * len(FTS_COLUMNS)})"
)


def ddl_notes_fts(tokenizer: str) -> str:
    """FTS5 over notes; rowid = notes.id. The tokenizer is part of the index identity.

    One row per note rather than per chunk: the body is stored and tokenised once (no
    chunk overlaps), a phrase or NEAR never breaks at a chunk boundary, and FTS5's
    per-row cost is paid 3,000 times rather than 90,000 on the PowerShell docs. A chunk
    is an offset range into its note's ``body`` cell (``note_bodies``).

    FTS5 flushes its pending terms as a new b-tree segment whenever they pass ``hashsize`` (1 MB by default)
    and merges those segments as it goes; a larger one (``FTS_HASHSIZE``) writes a build's index in a few
    large segments, what ``optimize`` would leave (SciFact 4.29 -> 4.12 MB of ``notes_fts_data``) without
    its rewrite. Measured and left out: ``optimize`` at the end of a build (SciFact 4.29 -> 4.12 MB,
    PowerShell docs 9.88 -> 9.65 MB of ``notes_fts_data``, for 1.1-1.6 s more per build); ``columnsize=0`` (drops
    ``notes_fts_docsize``, 0.08 MB on SciFact, but a contentless table without it cannot be counted:
    the consistency check ``notes vs notes_fts`` counts its rows).
    """
    if "'" in tokenizer:
        raise ValueError(f"invalid tokenizer spec: {tokenizer!r}")
    cols = ", ".join(FTS_COLUMNS)
    return f"CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5({cols}, content='', tokenize='{tokenizer}')"


# bytes of pending terms FTS5 holds in memory before it flushes them as a segment (its default: 1 MB); a
# setting kept in ``notes_fts_config``, so every connection writing the segment uses it
FTS_HASHSIZE = 16 * 2**20
DDL_NOTES_FTS_CONFIG = f"INSERT INTO notes_fts(notes_fts, rank) VALUES ('hashsize', {FTS_HASHSIZE})"


def insert_fts_rows(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(note id, its block's id, start, size, *the texts of FTS_COLUMNS) per note: indexed by FTS5, their
    cells' places in ``note_text`` (the blocks: ``insert_text_blocks``; the build's workers compress the
    cells and pack them)."""
    conn.executemany(SQL_INSERT_FTS, ((r[0], *r[4:]) for r in rows))
    conn.executemany("INSERT INTO note_text(note_id, block, start, size) VALUES (?, ?, ?, ?)", (r[:4] for r in rows))


def insert_text_blocks(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(id, bytes) per block of ``text_blocks``."""
    conn.executemany("INSERT INTO text_blocks(id, data) VALUES (?, ?)", rows)


def delete_fts_rows(conn: sqlite3.Connection) -> None:
    """Remove the FTS5 rows and stored texts of the notes listed in ``temp.gone`` (core.index.tables.notes):
    FTS5's 'delete' command with each note's stored texts. A block that held one of them is written again
    with the cells of its other notes only, so that no deleted note's text stays behind."""
    gone = [
        int(r[0]) for r in conn.execute("SELECT note_id FROM note_text WHERE note_id IN (SELECT id FROM temp.gone)")
    ]
    texts = stored_texts(conn, gone)
    conn.executemany(SQL_DELETE_FTS, ((nid, *texts[nid]) for nid in gone))
    blocks = "SELECT block FROM note_text WHERE note_id IN (SELECT id FROM temp.gone)"
    others = conn.execute(
        f"SELECT n.note_id, n.start, n.size, b.data FROM note_text n JOIN text_blocks b ON b.id = n.block "
        f"WHERE n.block IN ({blocks}) AND n.note_id NOT IN (SELECT id FROM temp.gone) ORDER BY n.note_id"
    ).fetchall()
    cells = text_blocks.cells_of(others)
    conn.execute(f"DELETE FROM text_blocks WHERE id IN ({blocks})")
    conn.execute("DELETE FROM note_text WHERE note_id IN (SELECT id FROM temp.gone)")
    conn.executemany("DELETE FROM note_text WHERE note_id = ?", ((r[0],) for r in others))
    text_blocks.write_packed(conn, list(cells), text_blocks.pack(cells.values()))


def note_bodies(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, str]:
    """note id -> its body (the ``body`` text of ``note_text``): a chunk's text is ``body[start:end]``.

    Read once per note and sliced in Python (a note's text is one compressed cell).
    """
    return {nid: texts[_BODY] for nid, texts in stored_texts(conn, note_ids).items()}


def stored_texts(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, tuple[str, ...]]:
    """note id -> its texts (FTS_COLUMNS order), read in batches of 500 ids (through a generation's
    connection, from the segment that holds each live: its block ids are that segment's own)."""
    ids = sorted(set(note_ids))
    out: dict[int, tuple[str, ...]] = {}
    if not ids:
        return out
    dicts = text_blocks.text_dicts(conn)
    schemas = segment_schemas(conn)
    for at in range(0, len(ids), 500):
        part = ids[at : at + 500]
        if schemas is None:
            cells = _cells(conn, "main", part, "")
        else:
            cells = {}
            for pos, schema in enumerate(schemas):
                cells.update(_cells(conn, schema, part, f"AND note_id NOT IN ({dead_in(pos)})"))
        out.update((nid, text_blocks.decode_cell(nid, cell, dicts, len(FTS_COLUMNS))) for nid, cell in cells.items())
    return out


def _cells(conn: sqlite3.Connection, schema: str, note_ids: list[int], live: str) -> dict[int, bytes]:
    """The cells of ``note_ids`` that segment ``schema`` holds (``live``: its dead ones left out), each block
    read once."""
    marks = ", ".join("?" * len(note_ids))
    places = conn.execute(
        f"SELECT note_id, block, start, size FROM {schema}.note_text WHERE note_id IN ({marks}) {live}", note_ids
    ).fetchall()
    if not places:
        return {}
    wanted = sorted({p[1] for p in places})
    blocks = dict(
        conn.execute(f"SELECT id, data FROM {schema}.text_blocks WHERE id IN ({', '.join('?' * len(wanted))})", wanted)
    )
    missing = [p[0] for p in places if p[1] not in blocks]
    if missing:
        raise IntegrityError(f"note_text of note {missing[0]} names a block that is not stored", note_id=missing[0])
    return text_blocks.cells_of((nid, start, size, blocks[block]) for nid, block, start, size in places)


def note_texts(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, str]:
    """note id -> the texts of all its FTS_COLUMNS, one per line (a phrase looked up as a substring)."""
    return {nid: "\n".join(texts) for nid, texts in stored_texts(conn, note_ids).items()}


def matching_rowids(conn: sqlite3.Connection, expression: str) -> list[tuple[int]]:
    """The note ids (as rows) an FTS5 ``MATCH`` expression finds, every note considered (every live note
    of every segment: a generation of several segments matches per segment and drops the rowids THAT segment
    holds dead; an edited note keeps its id, dead in an older segment and live in a newer one)."""
    schemas = segment_schemas(conn)
    if schemas is None:
        return conn.execute("SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?", (expression,)).fetchall()
    out: list[tuple[int]] = []
    for pos, schema in enumerate(schemas):
        sql = f"SELECT rowid FROM {schema}.notes_fts WHERE notes_fts MATCH ? AND rowid NOT IN ({dead_in(pos)})"
        out += conn.execute(sql, (expression,)).fetchall()
    return out


def matching_note_ids(conn: sqlite3.Connection, expression: str, clause: str, values: Sequence[object]) -> list[int]:
    """Ids, ascending, of the notes the condition (over ``notes n``) allows that the FTS5 expression
    finds; an invalid expression raises ``sqlite3.OperationalError``."""
    schemas = segment_schemas(conn)
    if schemas is None:
        sql = (
            f"SELECT n.id FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid "
            f"WHERE notes_fts MATCH ? AND {clause} ORDER BY n.id"
        )
        return [r[0] for r in conn.execute(sql, [expression, *values])]
    ids: list[int] = []
    for pos, schema in enumerate(schemas):  # the notes view holds the id live, maybe from another segment
        sql = (
            f"SELECT n.id FROM {schema}.notes_fts f JOIN notes n ON n.id = f.rowid "
            f"WHERE f.notes_fts MATCH ? AND f.rowid NOT IN ({dead_in(pos)}) AND {clause}"
        )
        ids += [r[0] for r in conn.execute(sql, [expression, *values])]
    return sorted(ids)
