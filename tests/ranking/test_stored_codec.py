"""The codecs of a stored array's piece (core.ranking.stored): byte planes, with or without differences,
decode to exactly the values encoded for every dtype the build stores; they are the small form of a
posting list; a piece of another codec or doctored bytes fails closed."""

from __future__ import annotations

import json
import sqlite3
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from core.errors import IntegrityError
from core.index.tables import term_major
from core.index.tables.zstd_frames import one_frame, zstd
from core.ranking import stored

DTYPES = ("<i4", "<u2", "<u4", "|u1", "|b1", "<f4", "<i8")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(DTYPES).flatmap(lambda d: hnp.arrays(np.dtype(d), st.integers(0, 300))))
def test_planes_decode_to_the_values_encoded(values: np.ndarray) -> None:
    got = stored._decode(stored._encode(values, stored.ZSTD), stored.ZSTD, values.dtype, "x")
    assert got.dtype == values.dtype and got.tobytes() == values.tobytes() and not got.flags.writeable


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.dtype("<i4"), st.integers(0, 300)))
def test_differences_as_planes_decode_to_the_values_encoded(values: np.ndarray) -> None:
    got = stored._decode(stored._encode(values, stored.ZSTD_DELTA), stored.ZSTD_DELTA, values.dtype, "x")
    assert got.dtype == values.dtype and np.array_equal(got, values) and not got.flags.writeable


def test_a_posting_list_of_small_gaps_is_stored_in_about_a_byte_a_posting() -> None:
    """Ascending note ids (gaps below 256) in runs, and their term frequencies: interleaved bytes at level 1
    (schema 22) took 1.3 and 0.4 bytes a value here; byte planes take under 1.1 and 0.3."""
    rng = np.random.default_rng(3)
    runs = [np.cumsum(rng.integers(1, 200, rng.integers(20, 400))) for _ in range(40)]
    docs = np.concatenate(runs).astype("<i4")[: stored.PIECE_BYTES // 4]
    tf = np.minimum(rng.geometric(0.6, docs.shape[0]), 65535).astype("<u2")
    assert len(stored._encode(docs, stored.ZSTD_DELTA)) < 1.1 * docs.shape[0]
    assert len(stored._encode(tf, stored.ZSTD)) < 0.3 * tf.shape[0]


@pytest.mark.parametrize("old", [("zlib", "zlib-delta"), ("zlib-planes", "zlib-delta-planes")])
def test_a_piece_of_an_older_codec_is_refused(old: tuple[str, str]) -> None:
    """An array written with schema 22's codec names (interleaved bytes) or schema 27's (zlib planes) is an
    unknown codec, never decoded as zstd planes."""
    conn = sqlite3.connect(":memory:")
    conn.execute(term_major.DDL_TERM_MAJOR)
    big = np.arange(3000, dtype="<i4")
    term_major.insert_rows(conn, [("g/a", "<i4", json.dumps({"shape": [3000], "codec": old[0]}), zlib.compress(big))])
    with pytest.raises(IntegrityError):
        stored.load_group(conn, "g", ("a",))
    with pytest.raises(IntegrityError):
        stored.StoredArray(stored.Reader(conn), "g/b", np.dtype("<i4"), 3000, stored.PIECE_BYTES, old[1])


@pytest.mark.parametrize("codec", [stored.ZSTD, stored.ZSTD_DELTA])
def test_a_doctored_piece_fails_closed(codec: str) -> None:
    values = np.arange(1000, dtype="<i4")
    data = stored._encode(values, codec)
    flipped = data[:10] + bytes([data[10] ^ 0xFF]) + data[11:]
    cut = zstd.compress(one_frame(data)[:-1])  # a valid frame one byte short of whole values
    for bad in (flipped, data[:-3], cut):
        with pytest.raises(IntegrityError):
            stored._decode(bad, codec, np.dtype("<i4"), "x")
