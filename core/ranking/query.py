"""User text -> query terms, and the one function through which text reaches FTS5 MATCH."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from core.errors import QuerySyntaxError

MAX_QUERY_CHARS = 10_000
MAX_QUERY_TERMS = 64


def clean_text(text: str) -> str:
    """Drop NUL and other control characters (never searchable), bound the length."""
    text = text[:MAX_QUERY_CHARS]
    return "".join(ch if ch >= " " or ch in "\t\n" else " " for ch in text)


def fts_quote(token: str) -> str:
    """One FTS5 string literal: double quotes doubled, so no operator can escape."""
    return '"' + token.replace('"', '""') + '"'


def match_expression(terms: Sequence[str], operator: str = "OR") -> str:
    """Safe MATCH expression over already-tokenised terms: each is a quoted string."""
    if operator not in ("OR", "AND"):
        raise ValueError(f"operator must be OR or AND, not {operator!r}")
    return f" {operator} ".join(fts_quote(t) for t in dict.fromkeys(terms))


def phrase_expression(terms: Sequence[str]) -> str:
    """The terms as one FTS5 phrase (a quoted string of words)."""
    return fts_quote(" ".join(terms))


def check_raw(conn: sqlite3.Connection, expression: str) -> None:
    """Raise QuerySyntaxError when FTS5 rejects a raw expression (cheap: LIMIT 1; LIMIT 0 never parses it)."""
    try:
        conn.execute("SELECT rowid FROM notes_fts WHERE notes_fts MATCH ? LIMIT 1", (expression,)).fetchall()
    except sqlite3.OperationalError as exc:
        raise QuerySyntaxError(
            f"invalid FTS5 query {expression!r}: {exc}",
            query=expression,
            hint="drop raw=True / --raw to search the text literally",
        ) from exc
