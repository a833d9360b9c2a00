"""graph_assisted: hybrid anchors, then expansion through the stored links and typed relations."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import numpy as np

from core.index.tables.links import graph_edges
from core.index.tables.notes import paths_of
from core.modes.context import Hit, ModeRun, SearchContext
from core.modes.lexical import FUSION_DEPTH, fts_ranking, fused, vector_ranking
from core.ranking import scoring
from core.ranking.sparse import GRAPH_CACHE, SparseIndex

GRAPH_ANCHORS = 10
GRAPH_HOPS = 2
GRAPH_DECAY = 0.5


def _neighbors(ctx: SearchContext) -> dict[int, list[tuple[int, str, str]]]:
    """The link graph, both directions; loaded once per verified generation (never cached for legacy).

    A caller whose classifications hide notes gets the links of its visible notes resolved
    against its visible notes only (core.ranking.visibility caches it per visible set): a hidden
    note that shares a name with a visible one must not capture the links that reach it."""
    r = ctx.resolved

    def full() -> dict[int, list[tuple[int, str, str]]]:
        if r.kind == "legacy_db":
            return _load_neighbors(ctx.conn)
        return GRAPH_CACHE.get(
            str(r.layout.index_dir), (str(r.path), r.generation_id, r.sha256), lambda: _load_neighbors(ctx.conn)
        )

    stats = ctx.statistics()
    return stats.cached("graph", full, lambda _: _adjacency((s, d, k) for s, d, k in stats.edges() if s != d))


def _adjacency(edges: Iterable[tuple[int, int, str]]) -> dict[int, list[tuple[int, str, str]]]:
    out: dict[int, list[tuple[int, str, str]]] = {}
    for src, dst, kind in edges:
        out.setdefault(src, []).append((dst, kind, "out"))
        out.setdefault(dst, []).append((src, kind, "in"))
    return out


def _load_neighbors(conn: sqlite3.Connection) -> dict[int, list[tuple[int, str, str]]]:
    return _adjacency(graph_edges(conn))


class _Allowed:
    """``note_id in allowed`` answered from the cached filter mask (no per-query id set)."""

    def __init__(self, sparse: SparseIndex, mask: np.ndarray) -> None:
        self.sparse, self.mask = sparse, mask

    def __contains__(self, note_id: object) -> bool:
        if not isinstance(note_id, int):
            return False
        pos = int(self.sparse.positions(np.asarray([note_id]))[0])
        return pos >= 0 and bool(self.mask[pos])


def run_graph(ctx: SearchContext) -> ModeRun:
    """Hybrid list; its top anchors spread their scores through stored links, never through hidden notes."""
    depth = max(FUSION_DEPTH, ctx.limit)
    tie = ctx.tie_order()
    fusion = fused([fts_ranking(ctx, depth), vector_ranking(ctx, depth)], depth, tie=tie)
    anchors = dict(fusion[:GRAPH_ANCHORS])
    expanded = scoring.graph_expand(
        anchors,
        _neighbors(ctx),
        hops=GRAPH_HOPS,
        decay=GRAPH_DECAY,
        allowed=_Allowed(ctx.sparse(), ctx.mask()),
        tie=tie,
    )
    best: dict[int, Hit] = {nid: Hit(nid, s, "rrf") for nid, s in fusion}
    for nid, (s, via, kind, direction, hops) in expanded.items():
        if nid not in best or s > best[nid].score:
            best[nid] = Hit(nid, s, "graph", {"from": via, "edge": kind, "direction": direction, "hops": hops})
    hits = sorted(best.values(), key=lambda h: (-h.score, tie(h.note_id)))[: ctx.limit]
    via_ids = sorted({h.via["from"] for h in hits if h.via})
    path_of = paths_of(ctx.conn, via_ids) if via_ids else {}
    hits = [
        Hit(h.note_id, h.score, h.score_source, {**h.via, "from": path_of[h.via["from"]]}) if h.via else h for h in hits
    ]
    return ModeRun(hits)
