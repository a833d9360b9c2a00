"""search_vault: resolve the verified index, dispatch through the registry, build results.

What it returns: :class:`SearchResults`, a frozen response (the hits plus what ran and from which
index), and :class:`SearchResult`, one hit. ``SearchResults`` is a frozen dataclass, not a list:
``hits`` is a tuple, and iteration, ``len``, indexing and slicing (a tuple) go over the hits, so
``for r in results`` and ``results[0]`` still work. ``freshness`` and each of ``query_expansions``
are read-only mappings (their shapes vary with the freshness source and the expansion kind: see
``core.index.freshness`` and ``core.ranking.expansion``). ``to_dict()`` gives the JSON shape the CLI
prints (plain dicts and lists).
"""

from __future__ import annotations

import copy
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, overload
from urllib.parse import quote

import numpy as np

from core.errors import SchemaMismatchError
from core.index import verify
from core.index.freshness import FreshnessOptions, check_freshness
from core.index.layout import IndexLayout, ResolvedIndex, layout_for
from core.index.ownership import check_index_dir_for_reading, check_vault
from core.index.schema import SCHEMA_VERSION
from core.index.tables.meta import get_meta, meta_value
from core.index.tables.notes import hit_files, latest_note_ids
from core.modes.context import Hit, ModeRun, SearchContext, note_fields
from core.modes.decay import AgeDecay, apply_decay
from core.ranking.expansion import surface
from core.ranking.filters import Filters
from core.ranking.query import clean_text
from core.ranking.snippets import QueryWords, best_passages, matched_text, snippet
from core.ranking.sparse import body_term_counts
from core.registry import DEFAULT_MODE, ModeSpec, dispatch
from core.search_arguments import check_keywords, check_search_arguments, freshness_options, max_results_argument


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


class ReadOnlyDict(dict[str, Any]):
    """A dict that refuses every change (``TypeError``): prints, compares, copies, pickles and
    serialises to JSON as a dict."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("this mapping of SearchResults is read-only; copy it with dict(...) to change it")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyDict, (dict(self),))


def _read_only(d: Mapping[str, Any]) -> ReadOnlyDict:
    """A read-only deep copy of ``d``: the caller's dict (and its lists) are never shared."""
    return ReadOnlyDict(copy.deepcopy(dict(d)))


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


_local = threading.local()


def _layout(vault: str, index_dir: str | None) -> IndexLayout:
    """The index layout of an absolute vault path, symlinks resolved on every call (never cached by the
    unresolved path: a vault symlink that is retargeted serves its new target). A vault that is not a
    folder, or an index dir that is not a readable folder, is a typed usage error."""
    check_vault(Path(vault))
    layout = layout_for(Path(vault), Path(index_dir) if index_dir else None)  # which resolves both
    check_index_dir_for_reading(layout)
    return layout


def _connection(resolved: ResolvedIndex) -> sqlite3.Connection:
    """A read-only connection per thread and generation file (legacy: opened each time)."""
    if resolved.kind == "legacy_db":
        return verify.connect_readonly(resolved)
    cache: dict[str, sqlite3.Connection] = getattr(_local, "conns", None) or {}
    _local.conns = cache
    key = f"{resolved.path}|{resolved.sha256}"
    conn = cache.get(key)
    if conn is None:
        for old in list(cache):
            if old.startswith(f"{resolved.path.parent}"):
                cache.pop(old).close()
        conn = cache[key] = verify.connect_readonly(resolved)
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
    clause, vals = ctx.where()
    rows = latest_note_ids(ctx.conn, clause, vals, ctx.filters.date_key_sql(), ctx.limit)
    return ModeRun([Hit(r[0], 0.0, "metadata") for r in rows], "metadata", "metadata_only")


def _note_files(conn: sqlite3.Connection, note_ids: list[int]) -> dict[int, tuple[str, int]]:
    """note id -> (content SHA-256, lines before the body) of the hits."""
    if not note_ids:
        return {}
    return hit_files(conn, note_ids)


def obsidian_uri(vault_name: str, rel_path: str) -> str:
    """The URI that opens a note in Obsidian: ``obsidian://open?vault=<name>&file=<path without .md>``."""
    file = rel_path[:-3] if rel_path.lower().endswith(".md") else rel_path
    # the name's own bytes, percent-encoded: a folder name that is not UTF-8 (surrogateescape) is kept exactly
    return f"obsidian://open?vault={quote(os.fsencode(vault_name), safe='')}&file={quote(os.fsencode(file), safe='')}"


def _decided_date(
    dates: dict[str, str | None], order: tuple[str, ...], keys: dict[str, str]
) -> tuple[str | None, str | None]:
    """(date, key): the first field of ``order`` the note has, named by the frontmatter key it was read
    from (``keys``: ``lastmod`` for an ``updated`` read from it)."""
    for name in order:
        if dates.get(name):
            return dates[name], keys.get(name, name)
    return None, None


def _base_terms(ctx: SearchContext) -> np.ndarray:
    """Per id of the query's postings: is it a base term of a query word (not an exact form or an expansion)?"""
    a, sp = ctx.analysis, ctx.sparse()
    return np.asarray([k == "base" for t, k in zip(a.terms, a.kinds) if t in sp.term_id], dtype=bool)


def _without_extensions(words: dict[str, float]) -> list[str]:
    """The words (in their order) that no other word is a prefix of: a longer word adds nothing to
    substring counts (``templat`` covers ``templates``). In sorted order the words that begin with a
    word follow it directly, so one pass over the sorted words finds them."""
    covered: set[str] = set()
    kept = None
    for w in sorted(words):
        if kept is not None and w.startswith(kept):
            covered.add(w)
        else:
            kept = w
    return [w for w in words if w not in covered]


def _results(ctx: SearchContext, run: ModeRun, with_passages: bool, watermark: str | None) -> list[SearchResult]:
    ids = [h.note_id for h in run.hits]
    fields = note_fields(ctx.conn, ids)
    files = _note_files(ctx.conn, ids)
    sp = ctx.sparse()
    weights: dict[str, float] = {}
    said = [t for t in ctx.terms if t in sp.term_id and t not in ctx.analysis.quiet]
    for t, idf in zip(said, sp.idf(np.asarray([sp.term_id[t] for t in said], dtype=np.int64)).tolist()):
        weights[surface(t)] = max(weights.get(surface(t), 0.0), idf)
    shown = _without_extensions(weights)
    words = QueryWords(shown, {w: weights[w] for w in shown})
    preferred = {h.note_id: h.chunk_id for h in run.hits if h.chunk_id is not None}
    passages = best_passages(ctx.conn, words, ids, preferred) if with_passages else {}
    # occurrences of the query's words: their base terms only (an exact form also counted would count twice)
    counts = body_term_counts(sp, [], ids, ctx.hit_postings(), _base_terms(ctx)) if with_passages else {}
    r = ctx.resolved
    age = max(0.0, time.time() - r.created_at)
    vault_name = r.layout.vault.name  # the vault as resolved for this search (`_layout`)
    order = ctx.filters.date_label_order()
    out = []
    for h in run.hits:
        f, p = fields[h.note_id], passages.get(h.note_id)
        text = p.text if p else ""
        sha256, body_line = files[h.note_id]
        date, date_field = _decided_date(f["dates"], order, f["date_keys"])
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
                retrieval_contract=run.labels()[1],
                actual_mode=run.labels()[0],
                fallback_reason=run.fallback_reason,
                index_age_seconds=round(age, 3),
                index_kind=r.kind,
                index_generation_id=r.generation_id,
                index_source_snapshot_hash=r.source_snapshot_hash,
                index_watermark=watermark,
                score_source=h.score_source,
                heading_path=p.heading_path if p else "[]",
                via=h.via,
                dates=f["dates"],
                line_start=body_line + p.body_lines[0] + 1 if p else None,
                line_end=body_line + p.body_lines[1] + 1 if p else None,
                content_sha256=sha256,
                date=date,
                date_field=date_field,
                obsidian_uri=obsidian_uri(vault_name, f["rel_path"]),
            )
        )
    return out


def search_vault(
    vault_dir: str | Path,
    query: str,
    max_results: int = 10,
    mode: str = DEFAULT_MODE,
    *,
    limit: int | None = None,
    filters: Filters | None = None,
    raw: bool = False,
    allow_fallback: bool = False,
    model: str | None = None,
    index_dir: str | Path | None = None,
    options: dict[str, Any] | None = None,
    passages: bool = True,
    decay: AgeDecay | None = None,
    freshness: bool | FreshnessOptions = True,
    **filter_kw: Any,
) -> SearchResults:
    """Search a vault's verified index: ``search_vault(vault_dir, query, max_results, mode)``.

    Filters may be given as ``filters=`` or as keywords (``note_types=``, ``tags_all=``,
    ``tags_any=``, ``path_prefixes=``, ``since=``, ...); any other keyword is a ``TypeError``.
    ``limit`` is an alias of ``max_results``.

    ``passages=False`` skips snippet / matched_text / match_count / line range (left empty):
    for evaluation runs that only need the ranking. ``freshness`` (default on) compares the
    vault with the served generation (``core.index.freshness``); ``False`` says ``checked: false``.
    ``decay=AgeDecay()`` down-weights volatile notes by age (``core.modes.decay``; off by default,
    re-scored hits say ``+age_decay``).
    """
    check_keywords(filter_kw)
    spec, filters, n = check_search_arguments(
        vault_dir, query, mode, max_results_argument(max_results, limit), filters, filter_kw, locals()
    )
    fresh = freshness_options(freshness)
    vault = Path(vault_dir)
    resolved = verify.resolve(_layout(os.path.abspath(vault), os.path.abspath(index_dir) if index_dir else None))
    conn = _connection(resolved)
    try:
        ctx = SearchContext(
            vault=vault,
            text=clean_text(query),
            limit=max(n, decay.candidates) if decay is not None else n,
            filters=filters,
            raw=raw,
            allow_fallback=allow_fallback,
            model=model,
            resolved=resolved,
            conn=conn,
            options=dict(options or {}),
        )
        run = _mode_run(ctx, spec, decay, n)
        watermark = meta_value(conn, "git_commit")  # the commit of a git-sourced index, else None
        hits = _results(ctx, run, passages, watermark)
        fresh_info = check_freshness(resolved, conn, options=fresh, classifications=filters.classifications)
        analysed = _query_words(ctx)
    finally:
        if resolved.kind == "legacy_db":
            conn.close()
    return _response(hits, query, mode, run, resolved, fresh_info, analysed, watermark)


def _response(
    hits: list[SearchResult],
    query: str,
    mode: str,
    run: ModeRun,
    resolved: ResolvedIndex,
    freshness: dict[str, Any],
    analysed: dict[str, Any],
    watermark: str | None = None,
) -> SearchResults:
    """The hits with what ran (the registry's labels), from which index, how fresh, and the query's words."""
    return SearchResults(
        tuple(hits),
        query=query,
        requested_mode=mode,
        actual_mode=run.labels()[0],
        retrieval_contract=run.labels()[1],
        fallback_reason=run.fallback_reason,
        index=_index_info(resolved, watermark),
        freshness=freshness,
        **analysed,
    )


def _mode_run(ctx: SearchContext, spec: ModeSpec, decay: AgeDecay | None, n: int) -> ModeRun:
    """The mode's run (dispatched through the registry), or metadata only / no terms; then the age decay."""
    if not ctx.text.strip() or (not ctx.raw and not ctx.terms):
        empty = not ctx.text.strip()
        run = _metadata_only(ctx) if empty else ModeRun([], "none", "no_query_terms", "no_query_terms")
    else:
        run = dispatch(spec, ctx)
    if decay is not None:
        run = replace(run, hits=apply_decay(ctx.conn, run.hits, decay, n))
    return run


def _query_words(ctx: SearchContext) -> dict[str, Any]:
    """The query's words (for highlighting), and for a lexical query its expansions and unmatched words."""
    text = ctx.text
    lexical = not ctx.raw and bool(text.strip())
    return {
        "query_terms": tuple(ctx.analysis.words) if text.strip() else (),
        "query_expansions": tuple(ctx.analysis.expansions) if lexical else (),
        "unmatched_words": tuple(ctx.analysis.unmatched) if lexical else (),
    }


def _index_info(resolved: ResolvedIndex, watermark: str | None = None) -> IndexIdentity:
    """Which index answered: kind, generation, snapshot hash, watermark (the commit of a git-sourced
    index, None for the working tree), age."""
    return IndexIdentity(
        kind=resolved.kind,
        generation_id=resolved.generation_id,
        source_snapshot_hash=resolved.source_snapshot_hash,
        watermark=watermark,
        age_seconds=round(max(0.0, time.time() - resolved.created_at), 3),
    )
