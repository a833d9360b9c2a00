"""User text -> query terms, and the one function through which text reaches FTS5 MATCH."""

from __future__ import annotations

from collections.abc import Sequence

MAX_QUERY_CHARS = 10_000
MAX_QUERY_TERMS = 64


def clean_text(text: str) -> str:
    """Drop NUL and other control characters (never searchable), bound the length."""
    text = text[:MAX_QUERY_CHARS]
    return "".join(ch if ch >= " " or ch in "\t\n" else " " for ch in text)


def fts_quote(token: str) -> str:
    """One FTS5 string literal: double quotes doubled, so no operator can escape."""
    return '"' + token.replace('"', '""') + '"'


def phrase_expression(terms: Sequence[str]) -> str:
    """The terms as one FTS5 phrase (a quoted string of words)."""
    return fts_quote(" ".join(terms))
