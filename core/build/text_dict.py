"""The preset dictionary a segment's text blocks are compressed with (``core.index.tables.text_blocks``).

zlib compresses a short stream poorly on its own: the words it shares with the rest of the vault are
spelt out again in every block. A dictionary of the vault's frequent words and word trigrams (weighted
by count x length, the most valuable last: nearest the data, cheapest to refer to) gives every block
those strings for free and keeps each block readable alone. Measured when each note was its own cell:
SciFact's 5,183 notes, 3.96 MB of zlib level 1 without, 3.10 MB at level 4 with a dictionary trained on
256 notes (0.13 s to train; level 6: 2.98 MB, and 2.93 MB trained on 1,024 notes).

A build trains one when it writes at least ``MIN_NOTES`` notes into a segment that has none, from the
first ``SAMPLE_BYTES`` of up to ``SAMPLE_NOTES`` of those notes spread evenly over them.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence

from core.index.tables.text_blocks import DICT_BYTES, store_text_dict, stored_text_dict

MIN_NOTES = 64  # fewer notes: a 32 KB dictionary would cost more than it saves
SAMPLE_NOTES = 256
SAMPLE_BYTES = 4096
_WORD = re.compile(rb"\S+")


def train_text_dict(samples: Iterable[bytes], size: int = DICT_BYTES) -> bytes:
    """A dictionary of the words and word trigrams found in at least two samples (b"" when none is)."""
    counts: Counter[bytes] = Counter()
    for sample in samples:
        words = _WORD.findall(sample)
        grams = set(words)
        grams.update(b" ".join(words[i : i + 3]) for i in range(len(words) - 2))
        counts.update(grams)
    ranked = sorted(((n * len(w), w) for w, n in counts.items() if n > 1 and len(w) > 3), reverse=True)
    parts: list[bytes] = []
    total = 0
    for _, word in ranked:
        if total >= size:
            break
        parts.append(word)
        total += len(word) + 1
    return b" ".join(reversed(parts))[-size:]


def spread(items: Sequence, count: int = SAMPLE_NOTES) -> list:
    """Up to ``count`` of ``items``, evenly spaced."""
    step = max(1, len(items) // count)
    return list(items[::step][:count])


def dictionary_for(conn: sqlite3.Connection, n_notes: int, samples: Iterable[bytes]) -> bytes | None:
    """The dictionary new blocks of ``conn``'s segment are compressed with: the stored one; else, for at
    least ``MIN_NOTES`` new notes, one trained on ``samples`` and stored; else None (plain zlib)."""
    stored = stored_text_dict(conn)
    if stored is not None or n_notes < MIN_NOTES:
        return stored
    trained = train_text_dict(sample[:SAMPLE_BYTES] for sample in samples)
    if not trained:
        return None
    store_text_dict(conn, trained)
    return trained
