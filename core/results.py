"""What ``search_vault`` returns: :class:`SearchResults`, a frozen response (the hits plus what ran and
from which index), and :class:`SearchResult`, one hit.

``SearchResults`` is a frozen dataclass, not a list: ``hits`` is a tuple, and iteration, ``len``,
indexing and slicing (a tuple) go over the hits, so ``for r in results`` and ``results[0]`` still work.
``freshness`` and each of ``query_expansions`` are read-only mappings (their shapes vary with the
freshness source and the expansion kind; see ``core.index.freshness`` and ``core.ranking.expansion``).
``to_dict()`` gives the JSON shape the CLI prints (plain dicts and lists).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, overload


@dataclass(frozen=True)
class SearchResult:
    rel_path: str
    title: str
    description: str | None
    note_type: str | None
    score: float
    snippet: str
    matched_text: str
    match_count: int
    tags: tuple[str, ...]
    retrieval_contract: str
    actual_mode: str
    fallback_reason: str | None
    index_age_seconds: float
    index_kind: str
    index_generation_id: str | None
    index_source_snapshot_hash: str | None
    score_source: str = ""
    index_watermark: str | None = None  # the commit a git-sourced index is a view of (None: the working tree)
    heading_path: str = "[]"
    via: dict[str, Any] | None = None
    dates: dict[str, str] | None = None  # the note's date fields that are set (git_date, updated, ...)
    line_start: int | None = None  # 1-based, inclusive: lines of the note file the best chunk covers
    line_end: int | None = None
    content_sha256: str = ""  # SHA-256 of the note file as indexed
    date: str | None = None  # the note's date under the filters' date field (ISO-8601)
    date_field: str | None = None  # which field gave ``date``: the named one, else the first of
    # updated, date, created, mtime the note has; named by the key it was read from (``lastmod``)
    obsidian_uri: str = ""  # obsidian://open?vault=...&file=... (opens the note in Obsidian)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tags"] = list(self.tags)
        return d


@dataclass(frozen=True)
class IndexIdentity:
    """Which index answered: kind (``generation`` / ``legacy_db``), generation, snapshot hash, watermark
    (the commit of a git-sourced index, None for the working tree), age in seconds at the search."""

    kind: str
    generation_id: str | None
    source_snapshot_hash: str | None
    watermark: str | None
    age_seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _read_only(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(copy.deepcopy(dict(d)))


@dataclass(frozen=True)
class SearchResults:
    """The hits, plus what ran and from which index (present even when empty). Frozen.

    ``query_terms``: the analysed words (for highlighting); ``query_expansions``: the query words the
    lexical analysis widened (prefix, variant, subword, cjk_unigram, typo, phrase, skipped) and to what;
    ``unmatched_words``: query words that no term of the index serves, not even through an expansion.
    """

    hits: tuple[SearchResult, ...]
    query: str
    requested_mode: str
    actual_mode: str
    retrieval_contract: str
    fallback_reason: str | None
    index: IndexIdentity
    freshness: Mapping[str, Any] = field(hash=False)
    query_terms: tuple[str, ...] = ()
    query_expansions: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)
    unmatched_words: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # frozen all the way down to the first level: callers' lists and dicts are copied, never shared
        object.__setattr__(self, "hits", tuple(self.hits))
        object.__setattr__(self, "freshness", _read_only(self.freshness))
        object.__setattr__(self, "query_terms", tuple(self.query_terms))
        object.__setattr__(self, "query_expansions", tuple(_read_only(e) for e in self.query_expansions))
        object.__setattr__(self, "unmatched_words", tuple(self.unmatched_words))

    def __iter__(self) -> Iterator[SearchResult]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    @overload
    def __getitem__(self, i: int) -> SearchResult: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[SearchResult, ...]: ...
    def __getitem__(self, i: int | slice) -> SearchResult | tuple[SearchResult, ...]:
        return self.hits[i]

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (``vaultsearch search --json``): plain dicts and lists."""
        return {
            "query": self.query,
            "query_terms": list(self.query_terms),
            "requested_mode": self.requested_mode,
            "actual_mode": self.actual_mode,
            "retrieval_contract": self.retrieval_contract,
            "fallback_reason": self.fallback_reason,
            "index": self.index.to_dict(),
            "freshness": copy.deepcopy(dict(self.freshness)),
            "query_expansions": [copy.deepcopy(dict(e)) for e in self.query_expansions],
            "unmatched_words": list(self.unmatched_words),
            "results": [r.to_dict() for r in self.hits],
        }

    def _repr_html_(self) -> str:
        from core.render import results_html

        return results_html(self)

    def _repr_markdown_(self) -> str:
        from core.render import results_markdown

        return results_markdown(self)
