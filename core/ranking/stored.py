"""Term-major arrays stored in the generation (table ``term_major``), read back without rebuilding them.

The builder computes the arrays the sparse loaders hold (``core.ranking.sparse``,
``core.ranking.chunk_vectors``) from the working ``note_terms`` / ``chunk_terms`` (TEMP tables derived from
the previous arrays: core.build.forward_rows) once per build and stores
each as little-endian bytes inside the generation database, so the generation's SHA-256 covers
them like every other row. A reader then loads a group of arrays with ``np.frombuffer`` (read-only
views of the fetched bytes) instead of rebuilding them row by row.

A per-posting array (one value per (term, note) or (term, chunk)) of more than ``PIECE_BYTES``
is stored as a header row ``<group>/<name>`` (its dtype and shape, no bytes) and pieces
``<group>/<name>#000000``, ... of ``PIECE_BYTES`` each (the last one shorter). Given a
``Reader`` (a connection of its own to the same verified file), such an array is a ``StoredArray``:
a query reads the pieces its terms' postings lie in, and keeps them (a long-lived process converges
on the whole array); a new process answering one query reads kilobytes of a 100k-note index, not
its gigabyte of postings. Without a reader (a legacy index.db, the build) it is read whole.

Each piece is a zstd frame of byte planes (level 7): the values' first bytes, then their second bytes, and so
on (a shuffle, as Blosc's): the high bytes of small numbers are runs of zeros that compress to nothing,
where the values' bytes interleaved hide them from the compressor. A piece of an array whose values ascend
within runs (a term's document or chunk rows: ``ascending``) holds the differences of consecutive values
(modulo 2**32) first, so it compresses to about a byte a value. A piece decodes on its own: a query
decompresses the pieces it reads. An int64 array stored whole whose values fit int32 is stored as int32 and
widened back on load (the same values and dtype for every reader). SciFact: the pieced arrays 14.6 MB raw ->
4.16 MB interleaved at zlib level 1 -> 2.92 MB as planes at zlib level 6 (schema 27 and before).

zstd level 7 against zlib level 6 (schema 28), every compressed array of a cold build's segment (bytes;
encoding / decoding seconds): Dendron docs 0.829 -> 0.800 MB (0.09 -> 0.05 / 0.012 -> 0.008 s); SciFact
3.73 -> 3.60 MB (0.37 -> 0.23 / 0.052 -> 0.031 s); PowerShell docs 4.30 -> 4.11 MB (0.44 -> 0.29 / 0.091 ->
0.074 s); synthetic 10k 13.60 -> 13.11 MB (1.21 -> 0.85 / 0.21 -> 0.16 s): smaller, and faster both ways, on
each. Level 6: 1-2% larger, a third faster to encode; 8 and 9: under 1% smaller, twice as slow; 12: 3-9%
smaller, two to three times as slow (a PowerShell cold build 22% longer).

A group is keyed by what its numbers depend on (the ranking parameters), so arrays computed
under other parameters are never served for these; absent a group, the loaders compute the
same arrays from the rows (identical numbers: the same code computes both).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from core.errors import IntegrityError
from core.index.tables import term_major
from core.index.tables.zstd_frames import compressor, one_frame, zstd

T = TypeVar("T")
SEP = "/"  # between a group and an array name; the SQL range of a group relies on it
PIECE = "#"  # between an array name and its piece number
# Bytes of values a piece holds (before compression): a query decompresses the pieces its runs of postings lie
# in. A piece is one row, and a page holds what it can of whole rows: SciFact's term_major as planes took
# 4.42 MB at 16 KiB (0.64 MB of it the free ends of pages), 4.10 MB at 32 KiB, 3.88 MB at 64 KiB; decoding a
# piece of docs, loaded machine: 0.12, 0.22, 0.36 ms. Kept at 16 KiB: a new process's first search pays the
# decode (SciFact, ten dev queries, fts: 0.43 s median at 16 KiB, 0.55 s at 32 KiB; bench_coldstart, one run).
PIECE_BYTES = 16 * 1024
MAX_RUNS = 256  # a gather of more separate runs than this reads the whole array once instead
# A process that has gathered from an array this many times is a long-lived one (a server, an evaluation):
# it reads the whole array once and indexes it directly from then on (a one-shot search stays at its pieces).
WHOLE_AFTER_GATHERS = 16
# the codecs of a piece: its byte planes compressed; its differences' byte planes compressed (the names say
# planes: a segment of an older schema, whose pieces are interleaved, never decodes as planes)
ZSTD, ZSTD_DELTA = "zstd-planes", "zstd-delta-planes"
CODECS = ("", ZSTD, ZSTD_DELTA)  # "": raw little-endian bytes
# An array stored whole of more bytes than this is compressed too (the term dictionary, the vocabulary, the term
# pointers: SciFact 3.8 -> 1.5 MB); loading decompresses it once. 1 KB, not 4 KB (before schema 28): a one-note
# delta segment's arrays are mostly of 1-4 KB (its terms' pointers, ids and document frequencies), and were 17.6
# of the PowerShell docs' 26.6 KB of term_major in a delta stored raw (3.3 KB compressed); an array under 1 KB
# gains a few hundred bytes and costs a decompression at every load.
WHOLE_RAW_BYTES = 1024
_LEVEL = 7  # zstd's (the module docstring: the levels measured)
_LOCAL = threading.local()  # a compressor per thread (one is not safe to share), reused for every piece
_I32 = np.iinfo(np.int32)


def save_group(
    conn: sqlite3.Connection,
    group: str,
    arrays: dict[str, np.ndarray],
    pieced: tuple[str, ...] = (),
    ascending: tuple[str, ...] = (),
) -> None:
    """Replace the arrays of ``group`` (little-endian, C order); those named in ``pieced`` (one-dimensional:
    the per-posting arrays) are stored in compressed pieces when larger than PIECE_BYTES, those also named in
    ``ascending`` (int32, ascending within runs) as differences. Call inside the build's transaction. An
    array is written a piece at a time (no copy of a group: hundreds of MB at 100k notes)."""
    term_major.delete_group(conn, group)
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        little = np.ascontiguousarray(data.astype(data.dtype.newbyteorder("<"), copy=False))
        full = group + SEP + name
        if name in pieced and little.ndim != 1:
            raise ValueError(f"only a one-dimensional array is stored in pieces, not {name} {little.shape}")
        if name not in pieced or little.nbytes <= PIECE_BYTES:
            term_major.insert_rows(conn, [_whole_row(full, little, name in ascending)])
            continue
        codec = ZSTD_DELTA if name in ascending else ZSTD
        if codec == ZSTD_DELTA and little.dtype != np.dtype("<i4"):
            raise ValueError(f"only an int32 array is stored as differences, not {name} {little.dtype}")
        shape = json.dumps({"shape": list(little.shape), "piece_bytes": PIECE_BYTES, "codec": codec})
        term_major.insert_rows(conn, [(full, little.dtype.str, shape, b"")])
        per = PIECE_BYTES // little.dtype.itemsize
        term_major.insert_rows(
            conn,
            (
                (_piece_name(full, k // per), little.dtype.str, "[]", _encode(little[k : k + per], codec))
                for k in range(0, little.shape[0], per)
            ),
        )


def _whole_row(full: str, little: np.ndarray, ascending: bool = False) -> tuple[str, str, str, Any]:
    """The row of an array stored whole: an int64 array whose values fit int32 is stored as int32 (its
    shape then says ``{"shape": ..., "dtype": "<i8"}``, what it is widened back to on load); one of more
    than ``WHOLE_RAW_BYTES`` is compressed (``"codec"``: its differences when ``ascending`` and int32)."""
    spec: dict[str, Any] = {"shape": list(little.shape)}
    if little.dtype == np.dtype("<i8") and little.size and _I32.min <= little.min() and little.max() <= _I32.max:
        spec["dtype"], little = little.dtype.str, little.astype("<i4")
    flat = little.reshape(-1)
    if flat.nbytes <= WHOLE_RAW_BYTES:
        data: Any = flat.view(np.uint8).data
    else:
        spec["codec"] = ZSTD_DELTA if ascending and little.dtype == np.dtype("<i4") else ZSTD
        data = _encode(flat, spec["codec"])
    shape = spec if len(spec) > 1 else spec["shape"]
    return full, little.dtype.str, json.dumps(shape), data


def _encode(values: np.ndarray, codec: str) -> bytes:
    if codec == ZSTD_DELTA:  # the first value, then each one's difference from the one before (mod 2**32)
        values = np.diff(values.view(np.uint32), prepend=np.uint32(0))
    comp = getattr(_LOCAL, "compressor", None)
    if comp is None:
        comp = _LOCAL.compressor = compressor(_LEVEL)
    return comp.compress(_planes(values), mode=zstd.ZstdCompressor.FLUSH_FRAME)


def _planes(values: np.ndarray) -> bytes:
    """The values' bytes as planes: every value's byte 0, then every value's byte 1, ... (one-dimensional)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    return flat.view(np.uint8).reshape(flat.shape[0], flat.dtype.itemsize).T.tobytes()


def _from_planes(raw: bytes, dtype: np.dtype) -> np.ndarray:
    """The values ``_planes`` laid out (``len(raw)`` a multiple of the item size), in a new writable array.
    A plane at a time: 18 us for 4,096 int32 values where one transposing copy took 50 us (the inflate: 63)."""
    size = dtype.itemsize
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(size, len(raw) // size)
    out = np.empty((planes.shape[1], size), dtype=np.uint8)
    for j in range(size):
        out[:, j] = planes[j]
    return out.view(dtype).reshape(-1)


def _decode(data: bytes, codec: str, dtype: np.dtype, name: str) -> np.ndarray:
    """A piece's values (read-only) from its stored bytes."""
    try:
        raw = one_frame(data) if codec in (ZSTD, ZSTD_DELTA) else data
    except zstd.ZstdError as exc:
        raise IntegrityError(f"stored array {name}: a piece does not decompress: {exc}", array=name) from exc
    if len(raw) % dtype.itemsize:
        raise IntegrityError(f"stored array {name}: a piece of {len(raw)} bytes", array=name)
    if codec not in (ZSTD, ZSTD_DELTA):
        return np.frombuffer(raw, dtype=dtype)
    values = _from_planes(raw, dtype)  # a copy of its own: the differences are summed in place
    if codec == ZSTD_DELTA:
        as_u32 = values.view(np.uint32)
        np.cumsum(as_u32, dtype=np.uint32, out=as_u32)
    values.flags.writeable = False
    return values


def _piece_name(full: str, k: int) -> str:
    return f"{full}{PIECE}{k:06d}"


class Reader:
    """A read-only connection of its own to the generation the arrays were loaded from (opened by
    the caller through the verified descriptor, usable from any thread), shared by a group's
    ``StoredArray`` s; one query at a time. The connection closes with the last structure using it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def data(self, name: str) -> bytes | None:
        with self._lock:
            return term_major.read_data(self._conn, name)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` under the reader's lock (one query at a time)."""
        with self._lock:
            return fn(self._conn, *args)


class HeldReader(Reader):
    """A ``Reader`` of a group's bytes read already (``load_group`` of a small group: one query, not one per
    array and piece)."""

    def __init__(self, conn: sqlite3.Connection, held: dict[str, bytes]) -> None:
        super().__init__(conn)
        self._held = held

    def data(self, name: str) -> bytes | None:
        return self._held.get(name)


# A group of at most this many stored bytes, read whole, is read in one query: a new process's first search on a
# generation of several segments read each small segment's ~50 arrays and pieces one query each (PowerShell
# docs, 6 segments: 228 queries for 93 on one segment; its first search 94.7 -> 93.1 ms, medians of 9).
HELD_GROUP_BYTES = 1 << 20


class LazyArray:
    """A one-dimensional array whose values are read on demand: indexing with a slice, an integer or an array of
    positions reads those (``_range``, ``_take``); anything else numpy does with it (``np.asarray``,
    arithmetic, comparison) reads the whole array once (``__array__``, then kept in ``_full``)."""

    ndim = 1
    dtype: np.dtype
    shape: tuple[int]
    _full: np.ndarray | None
    _name: str

    @property
    def size(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def _positions(self, positions: np.ndarray) -> np.ndarray:
        """``positions`` flat, int64, a negative one counted from the end; IndexError beyond the array."""
        n = self.shape[0]
        flat = np.asarray(positions).ravel().astype(np.int64, copy=False)
        low = int(flat.min()) if flat.size else 0
        if flat.size and (low < -n or int(flat.max()) >= n):
            raise IndexError(f"index out of bounds for array {self._name} of {n} values")
        return flat if low >= 0 else np.where(flat < 0, flat + n, flat)

    def _range(self, a: int, b: int) -> np.ndarray:
        return self._take(np.arange(a, b, dtype=np.int64))

    def _take(self, positions: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __getitem__(self, key: Any) -> Any:
        if self._full is not None:
            return self._full[key]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step == 1:
                return self._range(start, stop) if stop > start else np.empty(0, self.dtype)
        elif isinstance(key, (int, np.integer)):
            return self._take(np.asarray([key]))[0]
        else:
            positions = np.asarray(key)
            if positions.dtype.kind in "iu":
                return self._take(positions)
        return self.__array__()[key]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise NotImplementedError


class StoredArray(LazyArray):
    """A one-dimensional stored array read a piece at a time (see the module docstring).

    Indexing with a slice, an integer or an array of positions reads only the pieces those
    positions lie in; anything else numpy does with it (``np.asarray``, arithmetic, comparison)
    reads the whole array once (``__array__``). The values are those of the stored bytes either way.
    """

    def __init__(
        self, reader: Reader, name: str, dtype: np.dtype, length: int, piece_bytes: int, codec: str = ""
    ) -> None:
        if piece_bytes <= 0 or piece_bytes % dtype.itemsize or codec not in CODECS:
            raise IntegrityError(f"stored array {name} has pieces of {piece_bytes} bytes ({codec})", array=name)
        self._reader, self._name, self.dtype, self._codec = reader, name, dtype, codec
        self.shape = (length,)
        self._per_piece = piece_bytes // dtype.itemsize
        self._n_pieces = -(-length // self._per_piece)
        self._pieces: dict[int, np.ndarray] = {}
        self._full: np.ndarray | None = None
        self._gathers = 0
        self._lock = threading.Lock()

    @property
    def per_piece(self) -> int:
        """Values a piece holds (a reader bisecting a long ascending run reads a piece per probe)."""
        return self._per_piece

    def _piece(self, k: int) -> np.ndarray:
        found = self._pieces.get(k)
        if found is not None:
            return found
        data = self._reader.data(_piece_name(self._name, k))
        want = min(self._per_piece, self.shape[0] - k * self._per_piece)
        piece = None if data is None else _decode(data, self._codec, self.dtype, self._name)
        if piece is None or piece.shape[0] != want:
            got = "none" if piece is None else f"{piece.shape[0]} values"
            raise IntegrityError(f"stored array {self._name}: piece {k} holds {got}", array=self._name, piece=k)
        with self._lock:
            self._pieces[k] = piece
        return piece

    def _range(self, a: int, b: int) -> np.ndarray:
        """The values at positions [a, b), 0 <= a < b <= len."""
        per = self._per_piece
        k0, k1 = a // per, (b - 1) // per
        if k0 == k1:
            return self._piece(k0)[a - k0 * per : b - k0 * per]
        return np.concatenate([self._piece(k)[max(a - k * per, 0) : min(b - k * per, per)] for k in range(k0, k1 + 1)])

    def _take(self, positions: np.ndarray) -> np.ndarray:
        flat = self._positions(positions)
        if flat.size == 0:
            return np.empty(positions.shape, self.dtype)
        self._gathers += 1
        if self._gathers > WHOLE_AFTER_GATHERS:
            return self.__array__()[flat].reshape(positions.shape)
        breaks = np.flatnonzero(np.diff(flat) != 1) + 1  # runs of consecutive positions: a term's postings
        if breaks.size >= MAX_RUNS:
            return self.__array__()[flat].reshape(positions.shape)
        out = np.empty(flat.size, self.dtype)
        bounds = [0, *breaks.tolist(), flat.size]
        for s, e in zip(bounds, bounds[1:]):
            out[s:e] = self._range(int(flat[s]), int(flat[e - 1]) + 1)
        return out.reshape(positions.shape)

    def gathered(self) -> None:
        """Count a gather made of slices (a query's runs read one by one): past ``WHOLE_AFTER_GATHERS``, the whole
        array is read once and kept, as ``_take`` does for a gather of positions."""
        self._gathers += 1
        if self._gathers > WHOLE_AFTER_GATHERS and self._full is None:
            self.__array__()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The whole array (read once, then kept)."""
        if self._full is None:
            whole = np.concatenate([self._piece(k) for k in range(self._n_pieces)]) if self._n_pieces else None
            full = whole if whole is not None else np.empty(0, self.dtype)
            full.flags.writeable = False
            with self._lock:
                self._full, self._pieces = full, {}
        return self._full if dtype is None else self._full.astype(dtype)


def load_group(
    conn: sqlite3.Connection,
    group: str,
    names: tuple[str, ...],
    *,
    reader: Reader | None = None,
    only: bool = False,
) -> dict[str, Any] | None:
    """The arrays of ``group`` (read-only), or ``None`` when this database holds no such group. With a
    ``reader`` an array stored in pieces is a ``StoredArray`` (read on demand), else every array is
    read whole; ``only``: the arrays ``names`` and no other, looked up by name (a writer reading a few of a
    group's arrays lists none of its other arrays or pieces).
    A group that lacks one of ``names`` or whose bytes do not fit their shape is an ``IntegrityError``."""
    if not term_major.has_term_major(conn):
        return None
    out: dict[str, Any] = {}
    pieced: dict[str, tuple[str, np.dtype, tuple[int, ...], int, str]] = {}
    rows = list(
        term_major.named_listing(conn, [group + SEP + n for n in names])
        if only
        else term_major.group_listing(conn, group)
    )
    source = Reader(conn)  # the arrays stored whole, and with no ``reader`` the pieces
    if reader is None and not only and sum(row[3] for row in rows) <= HELD_GROUP_BYTES:
        source = HeldReader(conn, term_major.group_data(conn, group))
    for full, dtype, shape, size in rows:
        name = full[len(group) + 1 :]
        if PIECE in name or (only and name not in names):
            continue  # a piece (read through its header's array), or an array not asked for
        spec, kind = json.loads(shape), np.dtype(dtype)
        if isinstance(spec, dict) and "piece_bytes" in spec:
            dims, piece_bytes = tuple(spec["shape"]), int(spec["piece_bytes"])
            if len(dims) != 1 or size != 0:
                raise IntegrityError(f"stored array {full} is pieced with shape {dims} and {size} bytes", array=full)
            pieced[name] = (full, kind, dims, piece_bytes, str(spec.get("codec", "")))
            continue
        out[name] = _whole_array(source, full, kind, spec)
    for name, (full, kind, dims, piece_bytes, codec) in pieced.items():
        lazy = StoredArray(reader or source, full, kind, dims[0], piece_bytes, codec)
        out[name] = lazy if reader is not None else np.asarray(lazy)
    if not out:
        return None
    missing = [name for name in names if name not in out]
    if missing:
        raise IntegrityError(f"stored group {group} lacks {missing}", group=group, missing=missing)
    return out


def _whole_array(source: Reader, full: str, kind: np.dtype, spec: Any) -> np.ndarray:
    """An array stored whole (read-only), widened back to its dtype when it was stored narrower."""
    dims = tuple(spec["shape"] if isinstance(spec, dict) else spec)
    data = source.data(full)
    if data is None:
        raise IntegrityError(f"stored array {full} vanished while its group was read", array=full)
    codec = str(spec.get("codec", "")) if isinstance(spec, dict) else ""
    if codec not in CODECS:
        raise IntegrityError(f"stored array {full} has an unknown codec {codec!r}", array=full)
    if codec:
        array = _decode(data, codec, kind, full)
    elif len(data) % kind.itemsize:
        raise IntegrityError(f"stored array {full} holds {len(data)} bytes of {kind}", array=full)
    else:
        array = np.frombuffer(data, dtype=kind)
    if array.size != int(np.prod(dims, dtype=np.int64)):
        raise IntegrityError(f"stored array {full} holds {array.size} values, its shape says {dims}", array=full)
    if isinstance(spec, dict) and "dtype" in spec:
        array = array.astype(np.dtype(spec["dtype"]))
        array.flags.writeable = False
    return array.reshape(dims)


def pack_terms(term_id: dict[str, int]) -> dict[str, np.ndarray]:
    """The term dictionary as two arrays: the terms as UTF-8 JSON, and their ids in that order."""
    terms = list(term_id)
    return {
        "term_text": np.frombuffer(json.dumps(terms, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
        "term_ids": np.asarray([term_id[t] for t in terms], dtype=np.int64),
    }


def unpack_terms(arrays: dict[str, np.ndarray]) -> dict[str, int]:
    words = json.loads(arrays["term_text"].tobytes().decode("utf-8"))
    ids = arrays["term_ids"].tolist()
    if len(words) != len(ids):
        raise IntegrityError(f"stored term dictionary has {len(words)} terms for {len(ids)} ids")
    return dict(zip(words, ids))
