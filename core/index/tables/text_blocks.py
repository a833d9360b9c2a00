"""``note_text`` and ``text_blocks``: the one stored copy of the notes' texts, a zstd cell per note, the
cells of several notes stored back to back in one block; and ``text_dict``, the dictionary a segment's cells
are compressed with.

A note's *record* is its texts of ``notes_fts.FTS_COLUMNS``: each text's UTF-8 length (uint32
little-endian), then the texts' UTF-8 bytes one after another. Its *cell* is that record as one zstd
frame (with its content's checksum). Cells are stored in note order in blocks closed at BLOCK_BYTES
(``text_blocks.data``), and ``note_text`` says where a note's cell lies in its block (``block``, ``start``,
``size``); a note is read by decompressing its own cell only.

Why blocks and not a row per cell: a cell of 1.5-4 KB left the rest of its 4 KB SQLite page unused. The
synthetic 10k vault (36.9 MiB of Markdown): ``note_text`` took 21.17 MB on disk for 16.08 MB of cells; in
blocks of 32 KB, 16.38 MB. Measured and left out: one stream per block of 32 KB of records (15.79 MB with
zlib: the records compress a little better together) made a note's read inflate its block up to the note,
2.1x the time of inflating its cell (10 notes' texts: 1.3 against 0.6 ms), on every search's snippets.

A segment may hold one dictionary (``text_dict``, at most ``DICT_BYTES``: zstd's, trained on the segment's
notes, ``core.build.text_dict``). Each cell stays readable alone: its frame names its dictionary by id
(``text_dicts`` maps that to the bytes); a cell without one decodes without. A cell copied into another
segment keeps its bytes when that segment has its dictionary (or it has none); else it is compressed
again (``core.index.tables.segments.copy_note_texts``). zstd: ``core.index.tables.zstd_frames``.
"""

from __future__ import annotations

import sqlite3
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from core.errors import IntegrityError
from core.index.tables.zstd_frames import compressor, one_frame, zstd

T = TypeVar("T")

DDL_NOTE_TEXT = """
CREATE TABLE IF NOT EXISTS note_text (
    note_id INTEGER PRIMARY KEY,
    block   INTEGER NOT NULL,
    start   INTEGER NOT NULL,
    size    INTEGER NOT NULL
)"""
DDL_TEXT_BLOCKS = """
CREATE TABLE IF NOT EXISTS text_blocks (
    id   INTEGER PRIMARY KEY,
    data BLOB NOT NULL
)"""
DDL_TEXT_DICT = """
CREATE TABLE IF NOT EXISTS text_dict (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    data BLOB NOT NULL
)"""
# bytes of cells a block is closed at (a longer cell is a block alone). Synthetic 10k vault, ``note_text`` +
# ``text_blocks`` on disk and 10 random notes' texts read: 16 KB 16.54 MB 0.54 ms, 32 KB 16.38 MB 0.61 ms,
# 64 KB 16.32 MB 0.75 ms (SQLite leaves part of a page unused per blob: fewer, longer blobs waste less; a
# longer blob takes longer to read).
BLOCK_BYTES = 32768
# zstd level 3 without a dictionary (a segment of a few notes), 6 with one. Against zlib (level 4 with a
# 32 KB dictionary of frequent words and trigrams, before schema 27), the cells and the dictionary of the
# PowerShell docs: 8.88 -> 7.40 MB, compressed in 0.50 s instead of 0.65 s and read back in 0.12 s instead of
# 0.16 s; Dendron docs 0.82 -> 0.72 MB. Level 9: 3% smaller, twice the time.
_LEVEL = 3
_DICT_LEVEL = 6
DICT_BYTES = 65536  # the largest dictionary a segment trains (``core.build.text_dict``)
TextDicts = dict[int, tuple[bytes, ...]]  # zstd dictionary id -> the dictionaries with that id


def _record(texts: Sequence[str], columns: int) -> bytes:
    if len(texts) != columns:
        raise ValueError(f"{len(texts)} texts for {columns} columns")
    parts = [t.encode("utf-8") for t in texts]
    return struct.pack(f"<{columns}I", *map(len, parts)) + b"".join(parts)


# A compressor with the dictionary loaded, kept per dictionary (loading one costs more than compressing a short
# note), each used under its lock (a compressor keeps state between calls); a dictionary digested for reading
_COMPRESSORS: dict[bytes, tuple[zstd.ZstdCompressor, threading.Lock]] = {}
_DIGESTED: dict[bytes, tuple[zstd.ZstdDict, int]] = {}
_PRIMED_MAX = 16  # a generation's segments' dictionaries (at most 11), and a build's
_CACHE_LOCK = threading.Lock()
# every cell carries its content's checksum: a dictionary another one's id names is told apart by it
_OPTIONS: dict[int, int] = {zstd.CompressionParameter.checksum_flag: 1}


def _kept(cache: dict[bytes, T], zdict: bytes, make: Callable[[], T]) -> T:
    with _CACHE_LOCK:
        found = cache.get(zdict)
        if found is None:
            while len(cache) >= _PRIMED_MAX:
                cache.pop(next(iter(cache)))
            found = cache[zdict] = make()
        return found


def encode_cell(texts: Sequence[str], columns: int, zdict: bytes | None) -> bytes:
    """A note's cell: the record of its ``columns`` texts as one zstd frame, with the segment's dictionary
    if any."""
    raw = _record(texts, columns)
    if not zdict:
        return zstd.compress(raw, options={**_OPTIONS, zstd.CompressionParameter.compression_level: _LEVEL})
    comp, lock = _kept(
        _COMPRESSORS, zdict, lambda: (compressor(_DICT_LEVEL, checksum=True, zdict=zdict), threading.Lock())
    )
    with lock:
        return comp.compress(raw, mode=zstd.ZstdCompressor.FLUSH_FRAME)


def decode_cell(note_id: int, cell: bytes, dicts: TextDicts, columns: int) -> tuple[str, ...]:
    """The texts of a note's cell; a cell that does not decode is an IntegrityError naming the note."""
    try:
        raw = _inflate(cell, dicts)
        sizes = struct.unpack_from(f"<{columns}I", raw)
        at = 4 * columns
        if at + sum(sizes) != len(raw):
            raise ValueError(f"{len(raw)} bytes for texts of {sizes}")
        out = []
        for size in sizes:
            out.append(raw[at : at + size].decode("utf-8"))
            at += size
    except (zstd.ZstdError, struct.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise IntegrityError(f"note_text of note {note_id} does not decode: {exc}", note_id=note_id) from exc
    return tuple(out)


# ---------------------------------------------------------------- blocks


@dataclass
class Packed:
    """Cells stored back to back in blocks: ``blocks`` (their bytes) and, per cell in input order,
    ``places`` (its block's index in ``blocks``, start, size)."""

    blocks: list[bytes] = field(default_factory=list)
    places: list[tuple[int, int, int]] = field(default_factory=list)


def pack(cells: Iterable[bytes], block_bytes: int = BLOCK_BYTES) -> Packed:
    """``cells`` stored in order in blocks closed at ``block_bytes`` bytes."""
    out, filled = Packed(), 0
    pending: list[bytes] = []
    for cell in cells:
        out.places.append((len(out.blocks), filled, len(cell)))
        pending.append(cell)
        filled += len(cell)
        if filled >= block_bytes:
            out.blocks.append(b"".join(pending))
            pending, filled = [], 0
    if pending:
        out.blocks.append(b"".join(pending))
    return out


def next_block_id(conn: sqlite3.Connection) -> int:
    """The id after the last block of ``main``."""
    return int(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM main.text_blocks").fetchone()[0])


def write_packed(conn: sqlite3.Connection, note_ids: Sequence[int], packed: Packed) -> None:
    """Insert ``packed`` (the cells of ``note_ids``, in that order) into ``main``, its blocks numbered after
    the ones there."""
    first = next_block_id(conn)
    conn.executemany(
        "INSERT INTO main.text_blocks(id, data) VALUES (?, ?)", ((first + i, b) for i, b in enumerate(packed.blocks))
    )
    conn.executemany(
        "INSERT INTO main.note_text(note_id, block, start, size) VALUES (?, ?, ?, ?)",
        ((nid, first + b, start, size) for nid, (b, start, size) in zip(note_ids, packed.places, strict=True)),
    )


def cells_of(rows: Iterable[tuple[int, int, int, bytes]]) -> dict[int, bytes]:
    """note id -> its cell, from rows of (note id, start, size, its block's bytes); a cell its block does not
    hold is an IntegrityError."""
    out: dict[int, bytes] = {}
    for nid, start, size, data in rows:
        if start < 0 or size <= 0 or start + size > len(data):
            raise IntegrityError(
                f"note_text of note {nid} does not decode: bytes {start}+{size} of a block of {len(data)}",
                note_id=nid,
            )
        out[nid] = bytes(data[start : start + size])
    return out


# ---------------------------------------------------------------- dictionaries


def cell_dict_id(cell: bytes) -> int | None:
    """The id of the dictionary a cell was compressed with (None: none); a cell that is no zstd frame is an
    ``zstd.ZstdError``."""
    return zstd.get_frame_info(cell).dictionary_id or None


def text_dicts(conn: sqlite3.Connection) -> TextDicts:
    """The dictionaries of the segment (or, through the generation's view, of every segment) by Adler-32."""
    return _dicts(conn.execute("SELECT data FROM text_dict"))


def text_dicts_of(conn: sqlite3.Connection, schema: str) -> TextDicts:
    """The dictionary of the segment attached as ``schema``, by Adler-32."""
    if not schema.isidentifier():
        raise ValueError(f"not a schema name: {schema!r}")
    return _dicts(conn.execute(f"SELECT data FROM {schema}.text_dict"))


def _dicts(rows: Iterable[tuple[bytes]]) -> TextDicts:
    out: dict[int, tuple[bytes, ...]] = {}
    for (data,) in rows:
        key = dict_id(bytes(data))
        found = out.get(key, ())
        if data not in found:
            out[key] = (*found, bytes(data))
    return out


def train_dictionary(samples: Sequence[bytes], size: int) -> bytes:
    """A zstd dictionary of at most ``size`` bytes trained on ``samples``; b"" when zstd's trainer refuses them
    (too few, too alike: "Src size is incorrect"), and the cells are then compressed without one."""
    try:
        return zstd.train_dict(samples, size).dict_content
    except zstd.ZstdError:
        return b""


def dict_id(data: bytes) -> int:
    """A stored dictionary's id (the one its cells' frames name); bytes that are no zstd dictionary are an
    IntegrityError."""
    try:
        return zstd.ZstdDict(data).dict_id
    except ValueError as exc:
        raise IntegrityError(f"a stored text dictionary of {len(data)} bytes does not load: {exc}") from exc


def stored_text_dict(conn: sqlite3.Connection) -> bytes | None:
    """The dictionary of the segment ``conn``'s main database is (None: it has none)."""
    row = conn.execute("SELECT data FROM main.text_dict").fetchone()
    return None if row is None else bytes(row[0])


def store_text_dict(conn: sqlite3.Connection, data: bytes) -> None:
    """Store the dictionary of the segment ``conn``'s main database is (it has none yet)."""
    conn.execute("INSERT INTO main.text_dict(id, data) VALUES (1, ?)", (data,))


def _inflate(cell: bytes, dicts: TextDicts) -> bytes:
    """A cell's bytes; a dictionary whose id another shares is told apart by the cell's checksum."""
    wanted = cell_dict_id(cell)
    if wanted is None:
        return _inflate_with(cell, None)
    candidates = dicts.get(wanted, ())
    if not candidates:
        raise zstd.ZstdError(f"its dictionary (id {wanted:#010x}) is not stored")
    for zdict in candidates[:-1]:
        try:
            return _inflate_with(cell, zdict)
        except zstd.ZstdError:
            continue  # another dictionary of the same id: the last one's error is raised below
    return _inflate_with(cell, candidates[-1])


def _inflate_with(cell: bytes, zdict: bytes | None) -> bytes:
    """One frame's bytes (a frame after it, or a frame cut short, is an error)."""
    digested = None if zdict is None else _kept(_DIGESTED, zdict, lambda: zstd.ZstdDict(zdict).as_digested_dict)
    return one_frame(cell, digested)
