"""``notes_fts``: the FTS5 table over notes (rowid = note id), one row per note, and ``note_text``,
the one stored copy of those texts.

It indexes exactly the texts a note's sparse term vector counts (its names: title, file name and
aliases; description, tags, its headings, its body). The tokenizer is part of the index identity.

``notes_fts`` is contentless (``content=''``): FTS5 keeps its inverted index and no copy of the
text. The texts are stored once, zlib-compressed per note, in ``note_text`` (every reader of a
note's text reads them here). SQLite 3.40 has no ``contentless_delete``: a note's FTS5 row is
removed by the ``'delete'`` command with its original texts, read back from ``note_text``.

A segment may hold one preset dictionary (``text_dict``, at most 32 KB: the segment's frequent words
and word trigrams, ``core.build.text_dict``) its cells are compressed with: each cell stays readable
alone (zlib's header names its dictionary by Adler-32, ``text_dicts`` maps that to the bytes; a cell
without one decodes without). ``note_text`` on disk, per-note zlib -> with the dictionary: SciFact (7.9 MB
of Markdown; FTS5's own copy took 9.9 MB) 4.51 -> 3.45 MB, PowerShell docs 12.99 -> 10.79 MB, Dendron
1.17 -> 0.95 MB, the multilingual MDN vault as one vault 14.35 -> 11.99 MB.
"""

from __future__ import annotations

import sqlite3
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from core.errors import IntegrityError
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

# A note's texts of FTS_COLUMNS: zlib of (each text's UTF-8 length, uint32 little-endian, then the
# texts' UTF-8 bytes one after another).
DDL_NOTE_TEXT = """
CREATE TABLE IF NOT EXISTS note_text (
    note_id INTEGER PRIMARY KEY,
    data    BLOB NOT NULL
)"""
DDL_TEXT_DICT = """
CREATE TABLE IF NOT EXISTS text_dict (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    data BLOB NOT NULL
)"""
_HEADER = struct.Struct(f"<{len(FTS_COLUMNS)}I")
# zlib level 1 without a dictionary: level 6 is 3% (SciFact) to 13% (PowerShell docs) smaller and takes
# 1.1 to 2.2 times as long. With one, level 4 (compressed bytes, CPU seconds of the whole vault): SciFact
# 3.41 MB 0.71 s at level 1, 3.10 MB 0.78 s at 4, 2.98 MB 1.09 s at 6; PowerShell docs 10.23 MB 0.77 s,
# 8.84 MB 1.13 s, 8.38 MB 1.99 s (without a dictionary, level 1: 3.96 MB 0.34 s, 11.3 MB 0.54 s).
_LEVEL = 1
_DICT_LEVEL = 4
DICT_BYTES = 32768  # zlib's window: a longer dictionary's start is never reached
_FDICT = 0x20  # zlib header: a preset dictionary, its Adler-32 in the next 4 bytes (RFC 1950)
TextDicts = dict[int, tuple[bytes, ...]]  # Adler-32 -> the dictionaries with that checksum


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


def encode_texts(texts: Sequence[str], zdict: bytes | None = None) -> bytes:
    """The ``note_text`` cell of a note's texts (FTS_COLUMNS order), with the segment's dictionary if any."""
    parts = [t.encode("utf-8") for t in texts]
    raw = _HEADER.pack(*map(len, parts)) + b"".join(parts)
    if not zdict:
        return zlib.compress(raw, _LEVEL)
    comp = _primed(
        _COMPRESSORS, zdict, lambda: zlib.compressobj(_DICT_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS, zdict=zdict)
    )
    return comp.compress(raw) + comp.flush()


# A compressor / decompressor with the dictionary loaded, copied per cell: loading it costs more than
# compressing a short note (SciFact, level 4: 0.84 s for every cell loading it, 0.43 s copying one).
_COMPRESSORS: dict[bytes, Any] = {}
_DECOMPRESSORS: dict[bytes, Any] = {}
_PRIMED_MAX = 16  # a generation's segments' dictionaries (at most 11), and a build's


def _primed(cache: dict[bytes, Any], zdict: bytes, make: Callable[[], Any]) -> Any:
    found = cache.get(zdict)
    if found is None:
        while len(cache) >= _PRIMED_MAX:
            cache.pop(next(iter(cache)))
        found = cache[zdict] = make()
    return found.copy()


def cell_dict_id(data: bytes) -> int | None:
    """The Adler-32 of the dictionary a cell was compressed with (None: none)."""
    if len(data) >= 6 and data[1] & _FDICT:
        return int.from_bytes(data[2:6], "big")
    return None


def text_dicts(conn: sqlite3.Connection) -> TextDicts:
    """The dictionaries of the segment (or, through the generation's view, of every segment) by Adler-32."""
    out: dict[int, tuple[bytes, ...]] = {}
    for (data,) in conn.execute("SELECT data FROM text_dict"):
        found = out.get(zlib.adler32(data), ())
        if data not in found:
            out[zlib.adler32(data)] = (*found, data)
    return out


def stored_text_dict(conn: sqlite3.Connection) -> bytes | None:
    """The dictionary of the segment ``conn``'s main database is (None: it has none)."""
    row = conn.execute("SELECT data FROM main.text_dict").fetchone()
    return None if row is None else bytes(row[0])


def store_text_dict(conn: sqlite3.Connection, data: bytes) -> None:
    """Store the dictionary of the segment ``conn``'s main database is (it has none yet)."""
    conn.execute("INSERT INTO main.text_dict(id, data) VALUES (1, ?)", (data,))


def _inflate(data: bytes, dicts: TextDicts) -> bytes:
    """A cell's bytes; a dictionary whose Adler-32 another shares is told apart by the output's checksum."""
    wanted = cell_dict_id(data)
    if wanted is None:
        return zlib.decompress(data)
    candidates = dicts.get(wanted, ())
    if not candidates:
        raise ValueError(f"its dictionary (Adler-32 {wanted:#010x}) is not stored")
    for zdict in candidates[:-1]:
        try:
            return _inflate_with(data, zdict)
        except zlib.error:
            continue  # another dictionary of the same Adler-32: the last one's error is raised below
    return _inflate_with(data, candidates[-1])


def _inflate_with(data: bytes, zdict: bytes) -> bytes:
    inflater = _primed(_DECOMPRESSORS, zdict, lambda: zlib.decompressobj(zlib.MAX_WBITS, zdict=zdict))
    raw = inflater.decompress(data)
    if not inflater.eof or inflater.unused_data:
        raise zlib.error("truncated or trailing data")
    return raw


def decode_texts(note_id: int, data: bytes, dicts: TextDicts | None = None) -> tuple[str, ...]:
    """The texts (FTS_COLUMNS order) of a ``note_text`` cell; a cell that does not decode is an IntegrityError."""
    try:
        raw = _inflate(data, dicts or {})
        sizes = _HEADER.unpack_from(raw)
        if _HEADER.size + sum(sizes) != len(raw):
            raise ValueError(f"{len(raw)} bytes for texts of {sizes}")
        out, at = [], _HEADER.size
        for size in sizes:
            out.append(raw[at : at + size].decode("utf-8"))
            at += size
    except (zlib.error, struct.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise IntegrityError(f"note_text of note {note_id} does not decode: {exc}", note_id=note_id) from exc
    return tuple(out)


def insert_fts_rows(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """(note id, ``encode_texts`` of its texts, *the texts of FTS_COLUMNS) per note: indexed by FTS5 and stored
    once in ``note_text`` (the build's workers compress the texts, beside the rest of a note's preparing)."""
    conn.executemany(SQL_INSERT_FTS, ((r[0], *r[2:]) for r in rows))
    conn.executemany("INSERT INTO note_text(note_id, data) VALUES (?, ?)", ((r[0], r[1]) for r in rows))


def delete_fts_rows(conn: sqlite3.Connection) -> None:
    """Remove the FTS5 rows and stored texts of the notes listed in ``temp.gone`` (core.index.tables.notes):
    FTS5's 'delete' command with each note's stored texts."""
    rows = conn.execute("SELECT note_id, data FROM note_text WHERE note_id IN (SELECT id FROM temp.gone)").fetchall()
    dicts = text_dicts(conn)
    conn.executemany(SQL_DELETE_FTS, ((nid, *decode_texts(nid, data, dicts)) for nid, data in rows))
    conn.execute("DELETE FROM note_text WHERE note_id IN (SELECT id FROM temp.gone)")


def note_bodies(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, str]:
    """note id -> its body (the ``body`` text of ``note_text``): a chunk's text is ``body[start:end]``.

    Read once per note and sliced in Python (a note's text is one compressed cell).
    """
    return {nid: texts[_BODY] for nid, texts in stored_texts(conn, note_ids).items()}


def stored_texts(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, tuple[str, ...]]:
    """note id -> its texts (FTS_COLUMNS order), read in batches of 500 ids."""
    ids = sorted(set(note_ids))
    out: dict[int, tuple[str, ...]] = {}
    dicts = text_dicts(conn) if ids else {}
    for at in range(0, len(ids), 500):
        part = ids[at : at + 500]
        rows = conn.execute(
            f"SELECT note_id, data FROM note_text WHERE note_id IN ({', '.join('?' * len(part))})", part
        )
        out.update((nid, decode_texts(nid, data, dicts)) for nid, data in rows)
    return out


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
