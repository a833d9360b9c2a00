"""Best chunk, snippet and matched_text for a hit, from the generation's chunk texts."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from core.index.tables.chunks import note_chunks
from core.index.tables.notes_fts import note_bodies

SNIPPET_CHARS = 240
MATCHED_TEXT_CHARS = 1200


@dataclass(frozen=True)
class Passage:
    chunk_id: int
    heading_path: str
    text: str  # the chunk's body text (no frontmatter, no synthetic header)
    body_lines: tuple[int, int] = (0, 0)  # 0-based first and last line of the body the chunk covers


def _line_span(body: str, start: int, end: int) -> tuple[int, int]:
    """0-based (first, last) line of ``body`` that ``body[start:end]`` touches; a newline that ends
    the range does not start another line."""
    first = body.count("\n", 0, start)
    last = body.count("\n", 0, end - 1) if end - 1 > start else first
    return first, last


_Row = tuple[int, str, str, int, int]


def _chunk_rows(conn: sqlite3.Connection, note_ids: list[int]) -> tuple[dict[int, list[_Row]], dict[int, str]]:
    """(note id -> [(chunk id, heading path, text, start, end)] in order, note id -> body)."""
    out: dict[int, list[_Row]] = {}
    if not note_ids:
        return out, {}
    rows = note_chunks(conn, note_ids)
    bodies = note_bodies(conn, note_ids)
    for note_id, cid, hp, start, end in rows:
        out.setdefault(note_id, []).append((cid, hp, bodies[note_id][start:end], start, end))
    return out, bodies


class QueryWords:
    """Finds the query's terms in chunk text without re-tokenising it.

    An FTS5 term (lower-cased, porter-stemmed) is matched as a word prefix in the lower-cased
    text: ``knowledg`` finds "Knowledge" and "knowledgeable". That is exact for unstemmed terms
    and close for stems (a stem that is not a prefix, like ``happi`` for "happy", is missed); it
    only chooses the passage and places the snippet, it never ranks. ``str.find``/``str.count``
    keep it at C speed: this runs on every chunk of every hit.
    """

    def __init__(self, terms: list[str], weights: dict[str, float]) -> None:
        self.weights = {t: weights.get(t, 1.0) for t in terms if t}
        # terms of word characters only (all analysed terms) are found with str.find; any other
        # (raw FTS5 input) by one regex, compiled when first needed: compiling an alternation of a
        # dozen terms costs more than finding them in all ten hits
        self._plain = all(t.isalnum() for t in self.weights)
        self._regex: re.Pattern[str] | None = None

    def _starts(self) -> re.Pattern[str]:
        if self._regex is None:
            # one pass for every term: a word start, then the longest term that fits there
            alternatives = "|".join(re.escape(t) for t in sorted(self.weights, key=lambda t: (-len(t), t)))
            self._regex = re.compile(f"(?<![^\\W_])(?:{alternatives})")
        return self._regex

    def chunk_score(self, text: str) -> float:
        """Cheap passage score: idf of the distinct terms the text contains (as substrings of its
        lower-cased form), plus a little per occurrence. Chooses a passage; never ranks notes."""
        low = text.lower()
        score = 0.0
        for term, weight in self.weights.items():
            n = low.count(term)
            if n:
                score += weight + 1e-3 * n
        return score

    def matches(self, text: str) -> list[tuple[int, str]]:
        """(offset, term) of every word of ``text`` that starts with a query term, in text order."""
        if not self.weights:
            return []
        low = text.lower()
        if len(low) != len(text):  # a few characters change length when lower-cased: keep offsets true
            low = "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)
        if not self._plain:
            return [(m.start(), m.group()) for m in self._starts().finditer(low)]
        # A term of word characters that starts at a word start ends inside that word, so two such
        # matches never overlap: at each word start the longest term that fits there is the match
        # (what the regex's longest-first alternation picks).
        found: dict[int, str] = {}
        for term in self.weights:
            i = low.find(term)
            while i >= 0:
                if (i == 0 or not low[i - 1].isalnum()) and len(term) > len(found.get(i, "")):
                    found[i] = term
                i = low.find(term, i + 1)
        return sorted(found.items())


def best_passages(
    conn: sqlite3.Connection, words: QueryWords, note_ids: list[int], preferred: dict[int, int] | None = None
) -> dict[int, Passage]:
    """For each note, the chunk holding the most (idf-weighted) distinct query terms.

    ``preferred`` maps a note to a chunk a dense mode already chose; it wins.
    """
    out: dict[int, Passage] = {}
    rows, bodies = _chunk_rows(conn, note_ids)
    for note_id, chunks in rows.items():
        # first of equals: the earliest chunk; a note of one chunk is not scored
        best = chunks[0] if len(chunks) == 1 else max(chunks, key=lambda c: words.chunk_score(c[2]))
        if preferred and note_id in preferred:
            best = next((c for c in chunks if c[0] == preferred[note_id]), best)
        out[note_id] = Passage(best[0], best[1], best[2], _line_span(bodies[note_id], best[3], best[4]))
    return out


def snippet(text: str, words: QueryWords, width: int = SNIPPET_CHARS) -> str:
    """A window of ``width`` characters around the densest cluster of query terms."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    positions = [pos for pos, _ in words.matches(flat)]
    if not positions:
        return flat[:width].rsplit(" ", 1)[0] + " …"
    best_start, best_n = positions[0], 0
    j = 0
    for i, p in enumerate(positions):  # sliding window over match positions
        while positions[j] < p - width * 2 // 3:
            j += 1
        if i - j + 1 > best_n:
            best_n, best_start = i - j + 1, positions[j]
    start = max(0, best_start - width // 4)
    if start > 0:
        start = flat.rfind(" ", 0, start) + 1
    end = min(len(flat), start + width)
    if end < len(flat):
        end = max(flat.rfind(" ", start, end), start + width // 2)
    return ("… " if start > 0 else "") + flat[start:end].strip() + (" …" if end < len(flat) else "")


def matched_text(text: str, words: QueryWords | None = None, limit: int = MATCHED_TEXT_CHARS) -> str:
    """The passage for an agent: body text only, bounded at word boundaries, holding the first match.

    A chunk longer than ``limit`` (a large chunk size) is cut from its start, unless the first
    query word lies past the middle of that window: then the window starts shortly before it.
    """
    text = text.strip()
    if len(text) <= limit:
        return text
    start = 0
    if words is not None:
        first = next((pos for pos, _ in words.matches(text)), 0)
        if first > limit // 2:
            start = text.rfind(" ", 0, first - limit // 4) + 1
    end = min(len(text), start + limit)
    if end < len(text):
        cut = text.rfind(" ", start, end)
        end = cut if cut > start + limit // 2 else end
    return ("… " if start else "") + text[start:end].strip() + (" …" if end < len(text) else "")
