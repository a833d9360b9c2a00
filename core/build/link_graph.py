"""Resolve the stored links into edges, re-resolving only the links whose target could have changed.

A build deletes its changed and removed notes (their links, edges and link keys go with them) and
inserts the changed and new ones with new ids. Then ``recompute_edges``:

- resolves the links of the inserted notes (their rows are new), and stores their lookup keys;
- re-points every edge into a re-inserted note at its new id (the edge keeps its ``dst_path``);
- when a note appeared (a new path, or new aliases at a path), re-resolves the links of the other notes
  that have one of its lookup keys (``core.vault.links.link_keys``: the only links it can change);
- when a note went (a path gone, or aliases changed), re-resolves the links that resolved to it (a note
  that was a candidate but not the target changes nothing by leaving);
- resolves every link again when there is nothing to start from (a cold build) or when the vault's
  reading of ``[[left|right]]`` flips (``LinkResolver.label_first``: most notes Dendron-named or not).

A content-only edit (same path, same aliases) so resolves only the edited notes' links.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.errors import IntegrityError
from core.index.tables.links import (
    delete_all_edges,
    delete_all_link_keys,
    edge_counts,
    edges_of,
    insert_edges,
    insert_link_keys,
    links_from,
    links_of,
    move_edges,
    notes_linking_by_key,
    notes_linking_to,
    update_edges,
)
from core.index.tables.meta import meta_value, set_meta
from core.index.tables.notes import names_of_notes, note_ids_by_path, note_names
from core.vault.links import Link, LinkResolver, link_keys, note_keys

# meta key: how the edges' ``[[left|right]]`` links were read (absent: no edges resolved yet)
LABEL_FIRST_META = "link_label_first"


@dataclass(frozen=True)
class ReplacedNote:
    """A note the build deleted (changed or removed), as it was: what its links may have resolved to."""

    note_id: int
    rel_path: str
    aliases: tuple[str, ...]


def _link(row: tuple) -> Link:
    _, _, target, kind, heading, alias, source, alt = row
    return Link(target=target, kind=kind, heading=heading, alias=alias, source=source, alt_target=alt)


class _Resolution:
    """The resolver over every current note, and the ids of their paths."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.names = {rel: tuple(json.loads(aliases)) for rel, aliases in note_names(conn)}
        self.resolver = LinkResolver(self.names.items())
        self.id_of = note_ids_by_path(conn)

    def edge(self, row: tuple) -> tuple[int | None, str | None]:
        """(dst id, dst path) of one link row (``links_from``), (None, None) when unresolved."""
        dst = self.resolver.resolve(_link(row), row[1])
        return (self.id_of.get(dst), dst) if dst else (None, None)


def _insert_resolved(conn: sqlite3.Connection, res: _Resolution, rows: Iterable[tuple]) -> None:
    """Resolve link rows into new edges, and store their notes' lookup keys."""
    edges: list[tuple] = []
    keys: set[tuple[str, int]] = set()
    for row in rows:
        dst_id, dst = res.edge(row)
        edges.append((row[0], dst_id, row[3], row[2], dst))
        keys.update((key, row[0]) for key in link_keys(row[2], row[7]))
    insert_edges(conn, edges)
    insert_link_keys(conn, sorted(keys))


def _re_resolve(conn: sqlite3.Connection, res: _Resolution, note_ids: set[int]) -> int:
    """Resolve again the links of carried-over notes, updating the edges whose target changed (in place,
    so they keep their order). Returns how many links were resolved."""
    if not note_ids:
        return 0
    ids = sorted(note_ids)
    links = list(links_of(conn, ids))
    edges = edges_of(conn, ids)
    if len(links) != len(edges) or any(ln[0] != e[1] for ln, e in zip(links, edges)):
        raise IntegrityError(f"the edges of notes {ids[:5]} do not match their links one to one")
    changed = []
    for row, (rowid, _, old_dst) in zip(links, edges):
        dst_id, dst = res.edge(row)
        if dst != old_dst:
            changed.append((dst_id, dst, rowid))
    update_edges(conn, changed)
    return len(links)


def _affected(
    conn: sqlite3.Connection, res: _Resolution, replaced: Iterable[ReplacedNote], new_from_id: int
) -> set[int]:
    """Ids of the carried-over notes (ids < ``new_from_id``) with a link a name change could re-point."""
    before = {n.rel_path: (n.note_id, frozenset(n.aliases)) for n in replaced}
    inserted = {rel for rel, nid in res.id_of.items() if nid >= new_from_id}
    gone = [
        nid for rel, (nid, aliases) in before.items() if rel not in res.names or frozenset(res.names[rel]) != aliases
    ]
    appeared: set[str] = set()
    for rel in inserted:
        old = before.get(rel)
        if old is None or old[1] != frozenset(res.names[rel]):
            appeared |= note_keys(rel, res.names[rel])
    found = notes_linking_to(conn, gone, new_from_id) if gone else set()
    if appeared:
        found |= notes_linking_by_key(conn, sorted(appeared), new_from_id)
    return found


def recompute_edges(
    conn: sqlite3.Connection, *, new_from_id: int | None = None, replaced: Iterable[ReplacedNote] | None = None
) -> tuple[int, int]:
    """Resolve the stored links against the current notes. Returns (edges, unresolved).

    ``new_from_id``: the notes with ids >= it are the ones this build inserted; ``replaced``: the notes it
    deleted, as they were. Given both (and edges to start from, read the same way), only the links whose
    target could change are resolved (see the module); otherwise every link is resolved again.
    """
    res = _Resolution(conn)
    label_first = meta_value(conn, LABEL_FIRST_META)
    if new_from_id is not None and replaced is not None and label_first == res.resolver.label_first:
        affected = _affected(conn, res, replaced, new_from_id)
        move_edges(conn, {n.note_id: res.id_of[n.rel_path] for n in replaced if n.rel_path in res.id_of})
        _re_resolve(conn, res, affected)
        _insert_resolved(conn, res, links_from(conn, new_from_id))
    else:
        delete_all_edges(conn)
        delete_all_link_keys(conn)
        _insert_resolved(conn, res, links_from(conn, None))
    set_meta(conn, {LABEL_FIRST_META: res.resolver.label_first})
    return edge_counts(conn)


def replaced_notes(conn: sqlite3.Connection, note_ids: Sequence[int]) -> list[ReplacedNote]:
    """The notes with these ids as they are now, before the build deletes them (``recompute_edges``)."""
    return [ReplacedNote(nid, rel, tuple(json.loads(aliases))) for nid, rel, aliases in names_of_notes(conn, note_ids)]
