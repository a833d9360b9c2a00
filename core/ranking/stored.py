"""Term-major arrays stored in the generation (table ``term_major``), read back with one query.

The builder computes the arrays the sparse loaders hold (``core.ranking.sparse``,
``core.ranking.chunk_vectors``) from ``note_terms`` / ``chunk_terms`` once per build and stores
each as a little-endian BLOB inside the generation database, so the generation's SHA-256 covers
them like every other row. A reader then loads a group of arrays with one ``SELECT`` and
``np.frombuffer`` (read-only views of the fetched bytes) instead of rebuilding them row by row.

A group is keyed by what its numbers depend on (the ranking parameters), so arrays computed
under other parameters are never served for these; absent a group, the loaders compute the
same arrays from the rows (identical numbers: the same code computes both).
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from core.errors import IntegrityError
from core.index.schema import SQL_TERM_MAJOR_DELETE_GROUP, SQL_TERM_MAJOR_INSERT, SQL_TERM_MAJOR_READ_GROUP

SEP = "/"  # between a group and an array name; the SQL range of a group relies on it


def _has_table(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'term_major'").fetchone() is not None
    )


def save_group(conn: sqlite3.Connection, group: str, arrays: dict[str, np.ndarray]) -> None:
    """Replace the arrays of ``group`` (little-endian, C order); call inside the build's transaction."""
    conn.execute(SQL_TERM_MAJOR_DELETE_GROUP, (group + "/", group + "0"))
    rows = []
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        little = data.astype(data.dtype.newbyteorder("<"), copy=False)
        rows.append((group + SEP + name, little.dtype.str, json.dumps(list(little.shape)), little.tobytes()))
    conn.executemany(SQL_TERM_MAJOR_INSERT, rows)


def load_group(conn: sqlite3.Connection, group: str, names: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """The arrays of ``group`` (read-only), or ``None`` when this database holds no such group. A group
    that lacks one of ``names`` or whose bytes do not fit their shape is an ``IntegrityError``."""
    if not _has_table(conn):
        return None
    out: dict[str, np.ndarray] = {}
    for full, dtype, shape, data in conn.execute(SQL_TERM_MAJOR_READ_GROUP, (group + "/", group + "0")):
        dims = tuple(json.loads(shape))
        array = np.frombuffer(data, dtype=np.dtype(dtype))
        if array.size != int(np.prod(dims, dtype=np.int64)):
            raise IntegrityError(f"stored array {full} holds {array.size} values, its shape says {dims}", array=full)
        out[full[len(group) + 1 :]] = array.reshape(dims)
    if not out:
        return None
    missing = [name for name in names if name not in out]
    if missing:
        raise IntegrityError(f"stored group {group} lacks {missing}", group=group, missing=missing)
    return out


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
