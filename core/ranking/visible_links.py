"""A restricted caller's links from the generation's own resolution (core.ranking.visibility): the build resolved
every link among every note (``edges``: one per link, in the order of the note's links), and resolving among
fewer notes changes only a link whose target is one of the notes taken away: each rule of the resolver takes
the first or smallest candidate, so a candidate that goes changes nothing unless it was the one taken (the
property incremental resolution rests on, ``core.vault.links.link_keys``), and a link no note matched matches
none of fewer. So a visible note's link keeps its stored target when that target is visible (or it has none),
and only the links to a hidden (or deleted) note are resolved again, among the visible notes.

That holds while the visible notes read ``[[a|b]]`` as every note does (``LinkResolver.label_first``: most
notes Dendron-named or not, ``NAMES_META``); else, or when a database's edges do not pair one to one with its
links, None: every link is resolved again (``visibility.visible_link_rows``). At 100k notes in about 9
segments, with 15% of the notes hidden, resolving every link took about 2.8 s of each new generation.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from core.index.tables.connection import segment_parts
from core.index.tables.links import NAMES_META, segment_edges, segment_links, segment_links_by_rowid
from core.index.tables.meta import meta_value
from core.index.tables.notes import visible_paths
from core.index.tables.segments import ROWID_SHIFT

# (source note id, target note id or None when unresolved, kind, the link's rowid in ``links``)
LinkRow = tuple[int, int | None, str, int]
Clause = tuple[str, list[object]]
Resolver = Callable[[bool], tuple[Any, dict[str, int]]]


def _reading(conn: sqlite3.Connection, paths: dict[int, str]) -> bool | None:
    """How the visible notes read ``[[a|b]]`` (label first?) when the notes the stored edges were resolved
    among read it the same way, else None."""
    from core.vault.links import is_dendron_name, reads_label_first

    stored = meta_value(conn, NAMES_META)
    if not isinstance(stored, dict):
        return None
    mine = reads_label_first(sum(1 for p in paths.values() if is_dendron_name(p)), len(paths))
    return mine if mine == reads_label_first(int(stored["dendron"]), int(stored["notes"])) else None


def _paired(conn: sqlite3.Connection, schema: str, dead_at: int | None, seen: dict[int, str]) -> list | None:
    """(local rowid, source, kind, stored destination) of the visible notes' links of one database, by rowid;
    None when its edges do not pair one to one with its links."""
    edges: dict[int, list[int | None]] = {}
    for src, dst in segment_edges(conn, schema, dead_at):
        if src in seen:
            edges.setdefault(src, []).append(dst)
    used = dict.fromkeys(edges, 0)
    out = []
    for rowid, src, kind in segment_links(conn, schema, dead_at):
        if src not in seen:
            continue
        dsts, i = edges.get(src), used.get(src, 0)
        if dsts is None or i >= len(dsts):
            return None
        used[src] = i + 1
        out.append((rowid, src, kind, dsts[i]))
    return out if all(used[s] == len(d) for s, d in edges.items()) else None


def kept_link_rows(conn: sqlite3.Connection, visible: Clause, resolver: Resolver) -> list[LinkRow] | None:
    """The visible notes' links in the stored links' order, each with its target among the visible notes
    (see the module); ``resolver(label_first)``: the build's resolver over the visible notes and their ids by
    path, built only when a link must be resolved again. None: every link must be resolved again."""
    from core.vault.links import Link

    paths = visible_paths(conn, *visible)
    label_first = _reading(conn, paths)
    if label_first is None:
        return None
    parts = segment_parts(conn)
    out: list[LinkRow] = []
    again: dict[str, list[int]] = {}  # schema -> positions in ``out`` of the links to resolve again
    for pos, (schema, _) in enumerate(parts or [("main", "")]):
        rows = _paired(conn, schema, None if parts is None else pos, paths)
        if rows is None:
            return None
        shift = 0 if parts is None else pos << ROWID_SHIFT
        for rowid, src, kind, dst in rows:
            if dst is not None and dst not in paths:  # hidden, or no longer a note
                again.setdefault(schema, []).append(len(out))
            out.append((src, dst, sys.intern(kind), shift + rowid))
    if again:
        found, id_of = resolver(label_first)
        for schema, at in again.items():
            local = [out[i][3] & ((1 << ROWID_SHIFT) - 1) for i in at]
            texts = segment_links_by_rowid(conn, schema, local)
            for i, rowid in zip(at, local):
                src, _, kind, view_rowid = out[i]
                target, _, heading, source, alt = texts[rowid]
                hit = found.resolve(Link(target, kind, heading, None, source, alt), paths[src])
                out[i] = (src, id_of.get(hit) if hit else None, kind, view_rowid)
    return out
