"""A word -> tokens map that a long-lived process cannot grow without bound.

The analyzers cache every word they have mapped. A build maps each word of a vault once; a server
maps the words of every query it is sent, and a client can send a stream of distinct long words
(10,000 characters each) for as long as it likes. ``WordCache`` counts the characters of its words
and starts a fresh map when the next words would pass ``max_chars``: the old map is dropped, never
cleared in place, so a caller still holding it keeps every word it asked for.
"""

from __future__ import annotations

MAX_CACHED_CHARS = 64 * 1024 * 1024  # ~ every distinct word of a 100k-note vault several times over


class WordCache:
    """``map``: word -> tokens. ``room`` is called under the owner's lock before new words are added."""

    def __init__(self, max_chars: int = MAX_CACHED_CHARS) -> None:
        self.map: dict[str, tuple[str, ...]] = {}
        self.max_chars = max_chars
        self._chars = 0

    def room(self, words: set[str]) -> dict[str, tuple[str, ...]]:
        """The map to add ``words`` to: this one, or a fresh one when they would pass the bound (the
        caller then maps every word it needs again)."""
        new_chars = sum(len(w) for w in words if w not in self.map)
        if self._chars + new_chars > self.max_chars:
            self.map, self._chars = {}, 0
            new_chars = sum(len(w) for w in words)
        self._chars += new_chars
        return self.map
