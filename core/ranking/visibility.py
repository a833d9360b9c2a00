"""Zero trace: the ranking statistics a restricted caller is scored with, over the notes it may see.

A caller that restricts classifications (``Filters.classifications`` not None) must get the
same results - ids, scores, snippets, counts - as it would from an index of the vault without
the notes it may not see. BM25F's N, document frequencies and average field lengths, the
idf and mean chunk length of `vector`, the heading and identifier bonus maxima (taken over the
scored rows) and the term dictionary (no term only hidden notes hold) therefore come from the
visible notes only: the generation's own :class:`~core.ranking.sparse.SparseIndex` (and
:class:`~core.ranking.chunk_vectors.ChunkVectors`) seen through the caller's classes
(``SparseIndex.restrict``, ``restrict_chunks``): the same arrays with the hidden rows masked, and
statistics summed over the visible classes from the per-classification statistics stored with
them (core.ranking.classes). One code path: an unrestricted caller sees every class.

A view is cached per process by (generation, visible classifications): its df, row mask and
numbers only, no note text, at most :data:`SETS_PER_INDEX` visibility sets per index directory,
and a new generation drops every set of the old one. When every note of the generation is visible
the full (already cached) index is used as it is, so an unrestricted caller, and a restricted one
on a vault with nothing hidden, pay nothing extra.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from core.index.tables.connection import segment_parts
from core.index.tables.links import links_of_kind, visible_links
from core.index.tables.notes import count_segment_notes, visible_names, visible_paths_of
from core.index.tables.notes import hides_notes as _hides_notes
from core.index.visible_counts import segment_count
from core.ranking.chunk_vectors import ChunkVectors, restrict_chunks
from core.ranking.sparse import SparseIndex
from core.ranking.visible_links import kept_link_rows

SETS_PER_INDEX = 4
T = TypeVar("T")

# The SQL condition (over ``notes`` aliased ``n``) and bound values of the visible notes.
Clause = tuple[str, list[object]]


class _VisibleSet:
    """The derived structures of one (generation, visibility): filled on first use."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # a loader may ask for another structure of the same set
        self.everything: bool | None = None  # True when no note of the generation is hidden
        self.values: dict[str, Any] = {}


class VisibilityCache:
    """Per-process cache of visibility-specific statistics, per index dir and generation key."""

    def __init__(self, sets_per_index: int = SETS_PER_INDEX) -> None:
        self._lock = threading.Lock()
        self._sets_per_index = sets_per_index
        self._owners: dict[str, tuple[tuple, OrderedDict[tuple[str, ...], _VisibleSet]]] = {}
        self.loads = 0

    def entry(self, owner: str, generation: tuple, visible: tuple[str, ...]) -> _VisibleSet:
        with self._lock:
            found = self._owners.get(owner)
            if found is None or found[0] != generation:  # a new generation drops the old one's sets
                found = self._owners[owner] = (generation, OrderedDict())
            sets = found[1]
            if visible in sets:
                sets.move_to_end(visible)
                return sets[visible]
            entry = sets[visible] = _VisibleSet()
            while len(sets) > self._sets_per_index:
                sets.popitem(last=False)
            return entry

    def get(self, entry: _VisibleSet, name: str, loader: Callable[[], T]) -> T:
        with entry.lock:
            if name not in entry.values:
                entry.values[name] = loader()
                with self._lock:
                    self.loads += 1
            return entry.values[name]

    def clear(self) -> None:
        with self._lock:
            self._owners.clear()


VISIBILITY_CACHE = VisibilityCache()


def hides_notes(conn: sqlite3.Connection, visible: Clause) -> bool:
    """True when some live note of the generation is outside the visible clause. On a generation of several
    segments: a segment hides a live note when it leaves out more notes (counted once, cached by its SHA-256)
    than the ones it holds dead among them (a few index look-ups). At 100k notes the federated ``notes`` view
    took 30-85 ms a generation; a new delta segment takes under 1 ms."""
    sql, vals = visible
    parts = segment_parts(conn)
    if parts is None:
        return _hides_notes(conn, sql, vals)
    refused, bound = f"NOT coalesce(({sql}), 0)", json.dumps(vals, default=str)
    for pos, (schema, sha) in enumerate(parts):
        every = segment_count(
            (sha, "refused notes", refused, bound), partial(count_segment_notes, conn, schema, refused, vals, None)
        )
        if every and every > count_segment_notes(conn, schema, refused, vals, pos):
            return True
    return False


# (source note id, target note id or None when unresolved, kind, the link's rowid in ``links``)
LinkRow = tuple[int, int | None, str, int]


def visible_link_rows(conn: sqlite3.Connection, visible: Clause) -> list[LinkRow]:
    """Every link of the visible notes resolved among the visible notes only, as a build of the vault
    without the hidden notes would resolve it, in the stored links' order: a link to a hidden note is
    unresolved (like a link to a missing note), and a hidden note that shares a name or alias with a
    visible one captures no link (graph, supersession, ``related``, status counts). The link's text is
    not kept: its ``links`` rowid is (core.index.tables.links.link_targets)."""

    kept = kept_link_rows(conn, visible, lambda label_first: _visible_resolver(conn, visible, label_first))
    # the stored resolution with the links to hidden notes resolved again (exact, faster), else every link
    return kept if kept is not None else resolved_link_rows(conn, visible)


def resolved_link_rows(conn: sqlite3.Connection, visible: Clause) -> list[LinkRow]:
    """:func:`visible_link_rows` by resolving every visible link again among the visible notes."""
    from core.vault.links import Link

    clause, vals = visible
    resolver, id_of = _visible_resolver(conn, visible)
    out: list[LinkRow] = []
    for rowid, src, src_path, target, kind, heading, source, alt in visible_links(conn, clause, vals):
        found = resolver.resolve(Link(target, kind, heading, None, source, alt), src_path)
        out.append((src, id_of.get(found) if found else None, sys.intern(kind), rowid))
    return out


def _visible_resolver(
    conn: sqlite3.Connection, visible: Clause, label_first: bool | None = None
) -> tuple[Any, dict[str, int]]:
    """The build's link resolver over the visible notes' names (reading ``[[a|b]]`` label first or not as
    their names say, unless ``label_first`` says it), and their ids by path."""
    from core.vault.links import LinkResolver

    notes = visible_names(conn, *visible)
    resolver = LinkResolver([(rel, tuple(json.loads(aliases))) for _, rel, aliases in notes], label_first=label_first)
    return resolver, {rel: nid for nid, rel, _ in notes}


def visible_superseded(conn: sqlite3.Connection, visible: Clause) -> list[int]:
    """The notes the visible notes' ``supersedes`` links resolve to among the visible notes (sorted ids): what
    :func:`visible_link_rows` gives for those links, without resolving the others. A vault whose visible notes
    have no such link (most) reads no note's name: at 100k notes, resolving every link took 2.2 s of a
    restricted caller's first search on each new generation."""
    from core.vault.links import Link

    found = links_of_kind(conn, "supersedes")
    paths = visible_paths_of(conn, *visible, (r[1] for r in found)) if found else {}
    rows = [r for r in found if r[1] in paths]
    if not rows:
        return []
    resolver, id_of = _visible_resolver(conn, visible)
    out: set[int] = set()
    for _, src, target, kind, heading, source, alt in rows:
        hit = resolver.resolve(Link(target, kind, heading, None, source, alt), paths[src])
        if hit is not None and (dst := id_of.get(hit)) is not None:
            out.add(dst)
    return sorted(out)


def visible_edges(conn: sqlite3.Connection, visible: Clause) -> list[tuple[int, int, str]]:
    """(src, dst, kind) of the visible notes' resolved links (:func:`visible_link_rows`)."""
    return [(src, dst, kind) for src, dst, kind, _ in visible_link_rows(conn, visible) if dst is not None]


class CallerStatistics:
    """What one search scores with: the full index's structures, or the visible notes' ones.

    Each accessor takes ``full`` (loads or fetches from its own cache the whole generation's
    structure), used when nothing is hidden from the caller; ``generation`` is None for a legacy
    index (mutable: nothing is cached, the visible structures are loaded per search).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        visible: Clause | None,
        owner: str,
        generation: tuple | None,
        classifications: tuple[str, ...] | None,
    ) -> None:
        self.conn, self.visible = conn, visible
        self.classifications = tuple(sorted(set(classifications or ())))
        self._entry: _VisibleSet | None = None
        self._restricted: bool | None = None if visible is not None else False
        if visible is not None and generation is not None:
            self._entry = VISIBILITY_CACHE.entry(owner, generation, self.classifications)

    @property
    def restricted(self) -> bool:
        """True when the caller may not see some note of this generation."""
        if self._restricted is None:
            assert self.visible is not None
            if self._entry is None:
                self._restricted = hides_notes(self.conn, self.visible)
            else:
                with self._entry.lock:
                    if self._entry.everything is None:
                        self._entry.everything = not hides_notes(self.conn, self.visible)
                    self._restricted = not self._entry.everything
        return self._restricted

    def cached(self, name: str, full: Callable[[], T], visible_loader: Callable[[Clause], T]) -> T:
        """``full()`` when nothing is hidden from the caller, else ``visible_loader(visible clause)``
        cached under ``name`` for this (generation, visible set)."""
        if not self.restricted:
            return full()
        assert self.visible is not None
        visible = self.visible
        if self._entry is None:
            return visible_loader(visible)
        return VISIBILITY_CACHE.get(self._entry, name, lambda: visible_loader(visible))

    def link_rows(self) -> list[LinkRow]:
        """The restricted caller's links, resolved among its visible notes (:func:`visible_link_rows`);
        only when ``restricted``."""
        assert self.restricted
        return self.cached("links", list, lambda visible: visible_link_rows(self.conn, visible))

    def edges(self) -> list[tuple[int, int, str]]:
        """The restricted caller's resolved links (:func:`visible_edges`); only when ``restricted``."""
        assert self.restricted
        return self.cached("edges", list, lambda _: [(s, d, k) for s, d, k, _ in self.link_rows() if d is not None])

    def superseded_ids(self) -> list[int]:
        """Notes a visible note supersedes (its ``supersedes`` links resolved among visible notes: every link's
        resolution when a caller asked for it already, else those links' only); only when ``restricted``."""
        known = self._entry is not None and "edges" in self._entry.values
        if known:
            return self.cached(
                "superseded", list, lambda _: sorted({d for _, d, k in self.edges() if k == "supersedes"})
            )
        return self.cached("superseded", list, lambda visible: visible_superseded(self.conn, visible))

    def sparse(self, full: Callable[[], SparseIndex]) -> SparseIndex:
        """The whole generation's index (``full()``), seen through the caller's classes when it hides some note."""
        return self.cached("sparse", full, lambda _: full().restrict(self.classifications))

    def chunk_vectors(self, sparse: SparseIndex, full: Callable[[], ChunkVectors]) -> ChunkVectors:
        """The whole generation's chunk vectors (``full()``), seen as ``sparse`` (this caller's) sees them."""
        return self.cached("chunks", full, lambda _: restrict_chunks(full(), sparse))
