"""The ``related`` tool's walk: a note's links, backlinks and unresolved links, up to ``depth`` hops.

Zero trace: a caller's answer equals the answer from the same vault built without the notes it
may not see. When its classifications hide some note of the generation, its links are resolved
among its visible notes only (:meth:`core.ranking.visibility.CallerStatistics.link_rows`, cached
per generation and visible set): a link to a hidden note is unresolved, exactly like a link to a
missing note, and a link that a hidden note captured (a shared name or alias) resolves as it would
without that note; backlinks come from visible notes only. When nothing is hidden the build's
stored edges are read as they are.

Order: links in the order the links were stored (a note's links in its text order), backlinks by the
linking note's path, then in that order (as a cold build stores them: a note re-written into a newer
segment, its old id kept, stores its links after the others), breadth first; the result is cut to the caller's byte budget by :func:`core.serve.schema.fit_lists`.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any, Protocol

from core.index.tables.links import in_edges, link_targets, out_edges, unresolved_targets
from core.ranking.visibility import CallerStatistics, LinkRow


class LinkGraph(Protocol):
    def out(self, src: int) -> list[tuple[str, int]]: ...  # (kind, dst) of the resolved links from src
    def into(self, dst: int) -> list[tuple[str, int]]: ...  # (kind, src) of the links resolved to dst
    def unresolved(self, src: int) -> list[tuple[str, str]]: ...  # (target, kind) of src's unresolved links


class StoredGraph:
    """The build's resolved edges (a caller who may see every note)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def out(self, src: int) -> list[tuple[str, int]]:
        return list(out_edges(self.conn, src))

    def into(self, dst: int) -> list[tuple[str, int]]:
        return list(in_edges(self.conn, dst))

    def unresolved(self, src: int) -> list[tuple[str, str]]:
        return list(unresolved_targets(self.conn, src))


class Adjacency:
    """The visible notes' links resolved among the visible notes, by note (ids and link rowids only:
    no note text), built once per generation and visible set."""

    def __init__(self, rows: list[LinkRow]) -> None:
        self.out: dict[int, list[tuple[str, int]]] = defaultdict(list)
        self.into: dict[int, list[tuple[str, int]]] = defaultdict(list)
        self.unresolved: dict[int, list[int]] = defaultdict(list)
        for src, dst, kind, rowid in rows:
            if dst is None:
                self.unresolved[src].append(rowid)
            else:
                self.out[src].append((kind, dst))
                self.into[dst].append((kind, src))


class VisibleGraph:
    """The graph of a caller some note is hidden from (see the module docstring)."""

    def __init__(self, conn: sqlite3.Connection, adjacency: Adjacency) -> None:
        self.conn, self.adjacency = conn, adjacency

    def out(self, src: int) -> list[tuple[str, int]]:
        return self.adjacency.out.get(src, [])

    def into(self, dst: int) -> list[tuple[str, int]]:
        return self.adjacency.into.get(dst, [])

    def unresolved(self, src: int) -> list[tuple[str, str]]:
        return link_targets(self.conn, self.adjacency.unresolved.get(src, []))


def caller_graph(conn: sqlite3.Connection, stats: CallerStatistics) -> LinkGraph:
    """The link graph this caller may see (see the module docstring)."""
    if not stats.restricted:
        return StoredGraph(conn)
    return VisibleGraph(conn, stats.cached("related", _no_full, lambda _: Adjacency(stats.link_rows())))


def _no_full() -> Adjacency:
    raise AssertionError("only a caller some note is hidden from reads the visible adjacency")


def walk(
    graph: LinkGraph, note_id: int, visible: dict[int, tuple[str, str]], depth: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(links, backlinks, unresolved) of ``note_id``, breadth first up to ``depth`` hops; each note listed
    once, at its first hop. ``visible``: id -> (path, title) of the notes the caller may see."""
    links: list[dict[str, Any]] = []
    backlinks: list[dict[str, Any]] = []
    seen, frontier = {note_id}, [note_id]
    for hop in range(1, depth + 1):
        nxt: list[int] = []
        for src in frontier:
            via = visible[src][0]
            into = sorted(graph.into(src), key=lambda edge: visible[edge[1]][0] if edge[1] in visible else "")
            for out, edges in ((links, graph.out(src)), (backlinks, into)):
                for kind, other in edges:
                    if other not in visible or other in seen:  # a hidden note is neither listed nor walked through
                        continue
                    seen.add(other)
                    nxt.append(other)
                    path, title = visible[other]
                    out.append({"path": path, "title": title, "kind": kind, "depth": hop, "via": via})
        frontier = nxt
    unresolved = [{"target": t, "kind": k} for t, k in graph.unresolved(note_id)]
    return links, backlinks, unresolved
