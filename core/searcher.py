"""search_vault: resolve the verified index, dispatch through the registry, build results."""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core import generations as gen
from core.errors import SchemaMismatchError, UsageError
from core.index.schema import SCHEMA_VERSION, get_meta
from core.modes.context import Hit, ModeRun, SearchContext, note_fields
from core.ranking.expansion import surface
from core.ranking.filters import Filters
from core.ranking.query import clean_text
from core.ranking.snippets import QueryWords, best_passages, matched_text, snippet
from core.ranking.sparse import QueryPostings, body_term_counts
from core.registry import DEFAULT_MODE, dispatch, get_mode


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
    heading_path: str = "[]"
    via: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tags"] = list(self.tags)
        return d


class SearchResults(list):
    """The hits, plus what ran and from which index (present even when empty). Read-only."""

    def __init__(
        self,
        hits: list[SearchResult],
        *,
        query: str,
        requested_mode: str,
        actual_mode: str,
        retrieval_contract: str,
        fallback_reason: str | None,
        index: dict[str, Any],
        query_expansions: list[dict[str, Any]] | None = None,
        unmatched_words: list[str] | None = None,
    ) -> None:
        super().__init__(hits)
        self._info = {
            "query": query,
            "requested_mode": requested_mode,
            "actual_mode": actual_mode,
            "retrieval_contract": retrieval_contract,
            "fallback_reason": fallback_reason,
            "index": dict(index),
            "query_expansions": [dict(e) for e in query_expansions or ()],
            "unmatched_words": list(unmatched_words or ()),
        }

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("SearchResults is read-only; copy it with list(results) to change it")

    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only  # type: ignore[assignment]

    query = property(lambda self: self._info["query"])
    requested_mode = property(lambda self: self._info["requested_mode"])
    actual_mode = property(lambda self: self._info["actual_mode"])
    retrieval_contract = property(lambda self: self._info["retrieval_contract"])
    fallback_reason = property(lambda self: self._info["fallback_reason"])
    index = property(lambda self: dict(self._info["index"]))
    # query words the lexical analysis expanded (prefix, variant, subword, cjk_unigram, typo) and to what
    query_expansions = property(lambda self: [dict(e) for e in self._info["query_expansions"]])
    # query words that no term of the index serves, not even through an expansion
    unmatched_words = property(lambda self: list(self._info["unmatched_words"]))

    def to_dict(self) -> dict[str, Any]:
        return {**self._info, "results": [r.to_dict() for r in self]}

    def _repr_html_(self) -> str:
        from core.render import results_html

        return results_html(self)

    def _repr_markdown_(self) -> str:
        from core.render import results_markdown

        return results_markdown(self)


_local = threading.local()


@functools.lru_cache(maxsize=64)
def _layout(vault: str, index_dir: str | None) -> gen.IndexLayout:
    """The index layout of an absolute vault path (symlinks resolved once per process)."""
    return gen.layout_for(Path(vault).resolve(), Path(index_dir) if index_dir else None)


def _connection(resolved: gen.ResolvedIndex) -> sqlite3.Connection:
    """A read-only connection per thread and generation file (legacy: opened each time)."""
    if resolved.kind == "legacy_db":
        return gen.connect_readonly(resolved)
    cache: dict[str, sqlite3.Connection] = getattr(_local, "conns", None) or {}
    _local.conns = cache
    key = f"{resolved.path}|{resolved.sha256}"
    conn = cache.get(key)
    if conn is None:
        for old in list(cache):
            if old.startswith(f"{resolved.path.parent}"):
                cache.pop(old).close()
        conn = cache[key] = gen.connect_readonly(resolved)
        meta = get_meta(conn)
        if meta.get("schema_version") != SCHEMA_VERSION:
            cache.pop(key).close()
            raise SchemaMismatchError(
                f"index schema {meta.get('schema_version')} != {SCHEMA_VERSION}",
                expected=SCHEMA_VERSION,
                actual=meta.get("schema_version"),
            )
    return conn


def _metadata_only(ctx: SearchContext) -> ModeRun:
    clause, vals = ctx.filters.where()
    rows = ctx.conn.execute(
        f"SELECT n.id FROM notes n WHERE {clause} ORDER BY "
        f"coalesce(n.updated, n.created, n.date, '') DESC, n.rel_path LIMIT ?",
        [*vals, ctx.limit],
    ).fetchall()
    return ModeRun([Hit(r[0], 0.0, "metadata") for r in rows], "metadata", "metadata_only")


def _base_postings(ctx: SearchContext) -> QueryPostings:
    """The query's postings of its words' base terms only (not their exact forms or expansions)."""
    a, p, sp = ctx.analysis, ctx.postings(), ctx.sparse()
    base = np.asarray([k == "base" for t, k in zip(a.terms, a.kinds) if t in sp.term_id], dtype=bool)
    sel = base[p.owner] if base.size else np.zeros(p.owner.shape, dtype=bool)
    return QueryPostings(p.ids, p.pos[sel], p.owner[sel], p.docs[sel])


def _results(ctx: SearchContext, run: ModeRun, with_passages: bool) -> list[SearchResult]:
    ids = [h.note_id for h in run.hits]
    fields = note_fields(ctx.conn, ids)
    sp = ctx.sparse()
    weights: dict[str, float] = {}
    for t in ctx.terms:
        if t in sp.term_id and t not in ctx.analysis.quiet:
            weights[surface(t)] = max(weights.get(surface(t), 0.0), float(sp.bm25_idf[sp.term_id[t]]))
    # a word another one is a prefix of adds nothing to substring counts (``templat`` covers ``templates``)
    shown = [w for w in weights if not any(o != w and w.startswith(o) for o in weights)]
    words = QueryWords(shown, {w: weights[w] for w in shown})
    preferred = {h.note_id: h.chunk_id for h in run.hits if h.chunk_id is not None}
    passages = best_passages(ctx.conn, words, ids, preferred) if with_passages else {}
    # occurrences of the query's words: their base terms only (an exact form also counted would count twice)
    counts = body_term_counts(sp, [], ids, _base_postings(ctx)) if with_passages else {}
    r = ctx.resolved
    age = max(0.0, time.time() - r.created_at)
    out = []
    for h in run.hits:
        f, p = fields[h.note_id], passages.get(h.note_id)
        text = p.text if p else ""
        out.append(
            SearchResult(
                rel_path=f["rel_path"],
                title=f["title"],
                description=f["description"],
                note_type=f["note_type"],
                score=round(h.score, 6),
                snippet=snippet(text, words),
                matched_text=matched_text(text, words),
                match_count=counts.get(h.note_id, 0),
                tags=f["tags"],
                retrieval_contract=run.retrieval_contract,
                actual_mode=run.actual_mode,
                fallback_reason=run.fallback_reason,
                index_age_seconds=round(age, 3),
                index_kind=r.kind,
                index_generation_id=r.generation_id,
                index_source_snapshot_hash=r.source_snapshot_hash,
                score_source=h.score_source,
                heading_path=p.heading_path if p else "[]",
                via=h.via,
            )
        )
    return out


def search_vault(
    vault: str | Path,
    query: str,
    mode: str = DEFAULT_MODE,
    *,
    limit: int = 10,
    filters: Filters | None = None,
    raw: bool = False,
    allow_fallback: bool = False,
    model: str | None = None,
    index_dir: str | Path | None = None,
    options: dict[str, Any] | None = None,
    passages: bool = True,
    **filter_kw: Any,
) -> SearchResults:
    """Search a vault's verified index. Filters may be given as ``filters=`` or as keywords
    (``note_types=``, ``tags_all=``, ``tags_any=``, ``path_prefixes=``, ``since=``, ...).

    ``passages=False`` skips snippet / matched_text / match_count (left empty): for
    evaluation runs that only need the ranking."""
    spec = get_mode(mode)
    if limit < 1:
        raise UsageError(f"limit must be >= 1, not {limit}")
    if filters is not None and filter_kw:
        raise UsageError("give filters either as filters=Filters(...) or as keywords, not both")
    filters = filters or Filters.make(**filter_kw)
    filters.where()  # validate every filter up front, also for a query that has no terms
    vault = Path(vault)
    resolved = gen.resolve(_layout(os.path.abspath(vault), os.path.abspath(index_dir) if index_dir else None))
    conn = _connection(resolved)
    try:
        text = clean_text(query)
        ctx = SearchContext(
            vault=vault,
            text=text,
            limit=limit,
            filters=filters,
            raw=raw,
            allow_fallback=allow_fallback,
            model=model,
            resolved=resolved,
            conn=conn,
            options=dict(options or {}),
        )
        if not text.strip() or (not raw and not ctx.terms):
            run = _metadata_only(ctx) if (not text.strip()) else ModeRun([], "none", "no_query_terms", "no_query_terms")
        else:
            run = dispatch(spec, ctx)
        hits = _results(ctx, run, passages)
        lexical = not raw and bool(text.strip())
        expansions = ctx.analysis.expansions if lexical else []
        unmatched = ctx.analysis.unmatched if lexical else []
    finally:
        if resolved.kind == "legacy_db":
            conn.close()
    index = {
        "kind": resolved.kind,
        "generation_id": resolved.generation_id,
        "source_snapshot_hash": resolved.source_snapshot_hash,
        "age_seconds": round(max(0.0, time.time() - resolved.created_at), 3),
    }
    return SearchResults(
        hits,
        query=query,
        requested_mode=mode,
        actual_mode=run.actual_mode,
        retrieval_contract=run.retrieval_contract,
        fallback_reason=run.fallback_reason,
        index=index,
        query_expansions=expansions,
        unmatched_words=unmatched,
    )
