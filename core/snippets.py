"""Best chunk, snippet and matched_text for a hit, from the generation's chunk texts."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from core.analysis import Analyzer, word_counts

SNIPPET_CHARS = 240
MATCHED_TEXT_CHARS = 1200
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Passage:
    chunk_id: int
    heading_path: str
    text: str            # the chunk's body text (no frontmatter, no synthetic header)
    match_count: int     # query-term occurrences in the whole note


def _chunk_rows(conn: sqlite3.Connection, note_ids: list[int]) -> dict[int, list[tuple[int, str, str, int]]]:
    """note id -> (chunk id, heading path, text, chars at the start of text the previous chunk holds too)."""
    out: dict[int, list[tuple[int, str, str, int]]] = {}
    if not note_ids:
        return out
    rows = conn.execute(
        "SELECT c.note_id, c.id, c.heading_path, c.start, c.end, f.body FROM chunks c "
        "JOIN chunks_fts f ON f.rowid = c.id "
        f"WHERE c.note_id IN ({', '.join('?' * len(note_ids))}) ORDER BY c.note_id, c.ord", note_ids)
    prev_end: dict[int, int] = {}
    for note_id, cid, hp, start, end, body in rows:
        overlap = max(0, prev_end.get(note_id, start) - start)
        prev_end[note_id] = end
        out.setdefault(note_id, []).append((cid, hp, body, overlap))
    return out


class QueryWords:
    """Per-search memo: lower-cased word -> summed weight of the query terms it yields (0: none)."""

    def __init__(self, analyzer: Analyzer, terms: list[str], weights: dict[str, float]) -> None:
        self.analyzer = analyzer
        self.weights = {t: weights.get(t, 1.0) for t in terms}
        self.memo: dict[str, float] = {}
        self._tokens = analyzer.map_words(())  # the analyzer's shared word -> tokens cache

    def weight(self, word: str) -> float:
        found = self.memo.get(word)
        if found is None:
            toks = self._tokens.get(word)
            if toks is None:
                toks = self.analyzer.map_words([word])[word]
            found = 0.0
            for t in toks:
                found += self.weights.get(t, 0.0)
            self.memo[word] = found
        return found


def best_passages(conn: sqlite3.Connection, words: QueryWords, note_ids: list[int],
                  preferred: dict[int, int] | None = None) -> dict[int, Passage]:
    """For each note, the chunk holding the most (idf-weighted) distinct query terms.

    ``preferred`` maps a note to a chunk a dense mode already chose; it wins.
    """
    out: dict[int, Passage] = {}
    for note_id, chunks in _chunk_rows(conn, note_ids).items():
        best, best_score, total = chunks[0], -1.0, 0
        for chunk in chunks:
            # the overlap with the previous chunk ends at a word end, so counting it apart splits no word;
            # only the rest counts toward match_count (an occurrence in the overlap is counted once)
            seen, fresh = word_counts(chunk[2][:chunk[3]]), word_counts(chunk[2][chunk[3]:])
            matched: dict[str, int] = {}
            for counts, is_fresh in ((seen, False), (fresh, True)):
                for word, n in counts.items():
                    if words.weight(word):
                        matched[word] = matched.get(word, 0) + n
                        total += n if is_fresh else 0
            score = sum(words.weight(word) + 1e-3 * n for word, n in matched.items())
            if score > best_score:
                best, best_score = chunk, score
        if preferred and note_id in preferred:
            best = next((c for c in chunks if c[0] == preferred[note_id]), best)
        out[note_id] = Passage(best[0], best[1], best[2], total)
    return out


def snippet(text: str, words: QueryWords, width: int = SNIPPET_CHARS) -> str:
    """A window of ``width`` characters around the densest cluster of query terms."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    positions = [m.start() for m in _WORD.finditer(flat.lower()) if words.weight(m.group())]
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
        first = next((m.start() for m in _WORD.finditer(text) if words.weight(m.group().lower())), 0)
        if first > limit // 2:
            start = text.rfind(" ", 0, first - limit // 4) + 1
    end = min(len(text), start + limit)
    if end < len(text):
        cut = text.rfind(" ", start, end)
        end = cut if cut > start + limit // 2 else end
    return ("… " if start else "") + text[start:end].strip() + (" …" if end < len(text) else "")
