"""The dictionary a segment's text cells are compressed with (``core.index.tables.text_blocks``).

zstd compresses a short frame poorly on its own: the strings a note shares with the rest of the vault are
spelt out again in every cell. A dictionary trained on the vault's notes (zstd's own trainer: its frequent
strings, and the statistics its entropy coders start from) gives every cell those for free and keeps each
cell readable alone. The cells and the dictionary of the PowerShell docs (3,088 notes, 33.8 MB of texts):
8.88 MB as zlib level 4 with a 32 KB dictionary of frequent words and trigrams (before schema 27), 7.40 MB
as zstd level 6 with a 64 KB trained dictionary; Dendron docs 0.82 -> 0.72 MB (a 32 KB dictionary).

A build trains one when it writes at least ``MIN_NOTES`` notes into a segment that has none, from the
first ``SAMPLE_BYTES`` of up to ``SAMPLE_NOTES`` of those notes spread evenly over them, of 1/32 of the
samples' bytes (zstd's advice: about 1/100; a larger share did better on these short notes), at most
``DICT_BYTES``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from core.index.tables.text_blocks import DICT_BYTES, store_text_dict, stored_text_dict, train_dictionary

MIN_NOTES = 64  # fewer notes: a dictionary would cost more than it saves
SAMPLE_NOTES = 512
SAMPLE_BYTES = 16384
MIN_DICT_BYTES = 1024  # less sample text than 32 times this: no dictionary


def train_text_dict(samples: Iterable[bytes], size: int = DICT_BYTES) -> bytes:
    """A zstd dictionary of 1/32 of the samples' bytes (at most ``size``), b"" when they are too few or too
    alike to train one on (zstd's trainer refuses them: the cells are then compressed without)."""
    chosen = [s for s in samples if s]
    want = min(size, sum(map(len, chosen)) // 32)
    return train_dictionary(chosen, want) if want >= MIN_DICT_BYTES else b""


def spread(items: Sequence, count: int = SAMPLE_NOTES) -> list:
    """Up to ``count`` of ``items``, evenly spaced."""
    step = max(1, len(items) // count)
    return list(items[::step][:count])


def dictionary_for(conn: sqlite3.Connection, n_notes: int, samples: Iterable[bytes]) -> bytes | None:
    """The dictionary new blocks of ``conn``'s segment are compressed with: the stored one; else, for at
    least ``MIN_NOTES`` new notes, one trained on ``samples`` and stored; else None (no dictionary)."""
    stored = stored_text_dict(conn)
    if stored is not None or n_notes < MIN_NOTES:
        return stored
    trained = train_text_dict(sample[:SAMPLE_BYTES] for sample in samples)
    if not trained:
        return None
    store_text_dict(conn, trained)
    return trained
