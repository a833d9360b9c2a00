"""A term dictionary whose ids are the positions of its terms in sorted order (a combined index's:
core.ranking.segments, core.ranking.segment_delta), looked up by a binary search in the sorted terms.

A generation derived from the previous one renumbers every term after a new one; a dict of every term
(a million at 100k notes) built again per derived generation cost ~0.35 s of a reader's switch. This
mapping is built in O(1) over the sorted terms array the combination keeps anyway; a look-up is a
bisection (~20 comparisons); iterating keys, values or items walks the array once.
"""

from __future__ import annotations

import bisect
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView

import numpy as np


class SortedTerms(Mapping[str, int]):
    """term -> its position in ``words`` (a sorted object array of distinct terms)."""

    def __init__(self, words: np.ndarray) -> None:
        self.words = words
        self._n = int(words.shape[0])

    def _find(self, term: object) -> int:
        if not isinstance(term, str):
            return -1
        i = bisect.bisect_left(self.words, term)
        return i if i < self._n and self.words[i] == term else -1

    def __getitem__(self, term: str) -> int:
        i = self._find(term)
        if i < 0:
            raise KeyError(term)
        return i

    def __contains__(self, term: object) -> bool:
        return self._find(term) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self.words.tolist())

    def __len__(self) -> int:
        return self._n

    def keys(self) -> KeysView[str]:
        return _Keys(self)

    def values(self) -> ValuesView[int]:
        return _Values(self)

    def items(self) -> ItemsView[str, int]:
        return _Items(self)


class _Keys(KeysView[str]):
    _mapping: SortedTerms

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping)


class _Values(ValuesView[int]):
    _mapping: SortedTerms

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._mapping)))


class _Items(ItemsView[str, int]):
    _mapping: SortedTerms

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return zip(self._mapping.words.tolist(), range(len(self._mapping)))
