"""Phrases and passages of a plain (non-raw) query, matched over the notes' analysed text.

* A phrase is ``"quoted text"`` of two or more words (or a CJK run of two or more characters). It
  is matched by FTS5 as a phrase over every column of ``notes_fts`` (the index's own tokenizer, the
  analysis the rest of the query gets); a phrase with CJK text, which FTS5's unicode61 keeps as one
  token per run, is matched as a substring of the text of the notes that hold all its bigrams. A
  note holding a phrase ranks above every note that only holds its words (``lexical``).
* A passage: without quotes, a query of PASSAGE_MIN_WORDS to PASSAGE_MAX_WORDS content words whose
  words (any form of their stems) all occur within PASSAGE_SPAN tokens of each other in one note
  (FTS5 ``NEAR``): that note's
  best passage holds the whole query, which its length normalisation would otherwise bury.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from core.index.tables import notes_fts
from core.ranking.languages import cjk_grams, has_cjk, is_cjk_run, script_runs
from core.ranking.query import fts_quote, phrase_expression

_QUOTED = re.compile(r'"([^"]+)"')
_WORD = re.compile(r"[^\W_]+")
MAX_PHRASES = 4
PASSAGE_MIN_WORDS = 2
PASSAGE_MAX_WORDS = 6
PASSAGE_MIN_STEM = 4
PASSAGE_SPAN = 8  # tokens between the first and the last query word (FTS5 NEAR's distance)


def quoted_phrases(text: str) -> list[str]:
    """The quoted spans of a query that are phrases: two or more words, or a CJK run of two or more
    characters (its characters then have to be adjacent); unbalanced quotes are plain text."""
    out = []
    for span in _QUOTED.findall(text):
        words = _WORD.findall(span)
        if len(words) >= 2 or (len(words) == 1 and is_cjk_run(words[0]) and len(words[0]) >= 2):
            out.append(" ".join(span.split()))
    return list(dict.fromkeys(out))[:MAX_PHRASES]


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def phrase_note_ids(conn: sqlite3.Connection, phrase: str, candidates: Sequence[int]) -> set[int]:
    """The note ids holding ``phrase``: FTS5's phrase match; for CJK text, a substring of the
    ``candidates`` ' text (the notes that hold every bigram of it)."""
    words = _WORD.findall(phrase)
    if not has_cjk(phrase):
        return {r[0] for r in notes_fts.matching_rowids(conn, phrase_expression(words))}
    want = _folded(phrase)
    texts = notes_fts.note_texts(conn, candidates)
    return {nid for nid, text in texts.items() if want in _folded(text)}


def phrase_grams(phrase: str) -> list[str]:
    """The bigram terms of a CJK phrase's runs (a note holding the phrase holds them all)."""
    return [
        g for w in _WORD.findall(phrase.lower()) for run in script_runs(w) if is_cjk_run(run) for g in cjk_grams(run)
    ]


def passage_note_ids(conn: sqlite3.Connection, stems: Sequence[str]) -> set[int]:
    """The note ids in which a word starting with each of ``stems`` (a query word's shortest stem
    in the index's languages: any form of it, ``blöcke`` for ``block``) occurs, all within
    PASSAGE_SPAN tokens (FTS5 NEAR of prefix tokens; a stem under PASSAGE_MIN_STEM letters is the
    word itself)."""
    if not PASSAGE_MIN_WORDS <= len(stems) <= PASSAGE_MAX_WORDS or any(has_cjk(w) for w in stems):
        return set()
    tokens = [fts_quote(w) + ("*" if len(w) >= PASSAGE_MIN_STEM else "") for w in stems]
    return {r[0] for r in notes_fts.matching_rowids(conn, f"NEAR({' '.join(tokens)}, {PASSAGE_SPAN})")}
