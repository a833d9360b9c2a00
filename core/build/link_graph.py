"""Resolve the stored links into edges, re-resolving only the links whose target could have changed.

A build deletes its changed and removed notes (their links, edges and link keys go with them) and
inserts the changed notes again with their OLD ids (``kept``: an edge into one stays as it is) and the new
ones with new ids. Then ``recompute_edges``:

- resolves the links of the inserted notes (their rows are new), and stores their lookup keys;
- re-points every edge into a note re-inserted with a new id (same path) at that id, so that an edge's
  stored ``dst_id`` and a new resolution's are compared as ids;
- when a note appeared (a new path, or new aliases at a path), re-resolves the links of the other notes
  that have one of its lookup keys (``core.vault.links.link_keys``: the only links it can change);
- when a note went (a path gone, or aliases changed), re-resolves the links that resolved to it (a note
  that was a candidate but not the target changes nothing by leaving);
- resolves every link again when there is nothing to start from (a cold build) or when the vault's
  reading of ``[[left|right]]`` flips (``LinkResolver.label_first``: most notes Dendron-named or not;
  meta ``link_names`` keeps the two counts).

The links are resolved against the notes that share a lookup key with one of them (``target_keys``):
by ``link_keys``, no other note can change how they resolve. A content-only edit (same path, same
aliases) so resolves only the edited notes' links, and reads only the notes they may name.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.errors import IntegrityError
from core.index.tables.links import (
    NAMES_META,
    delete_all_edges,
    delete_all_keys,
    edge_counts,
    edges_of,
    insert_edges,
    insert_keys,
    links_from,
    links_of,
    move_edges,
    notes_linking_by_key,
    notes_linking_to,
    target_rows,
    target_rows_of,
    targets_by_key,
    update_edges,
)
from core.index.tables.meta import meta_value, set_meta
from core.index.tables.notes import names_of_notes
from core.vault.links import ANY_NAME, Link, LinkResolver, is_dendron_name, link_keys, note_keys, reads_label_first


@dataclass(frozen=True)
class ReplacedNote:
    """A note the build deleted (changed or removed), as it was: what its links may have resolved to."""

    note_id: int
    rel_path: str
    aliases: tuple[str, ...]


def replaced_notes(conn: sqlite3.Connection, note_ids: Sequence[int]) -> list[ReplacedNote]:
    """The notes with these ids as they are now, before the build deletes them (``recompute_edges``)."""
    return [ReplacedNote(nid, rel, tuple(json.loads(aliases))) for nid, rel, aliases in names_of_notes(conn, note_ids)]


def _aliases(cell: str) -> tuple[str, ...]:
    return () if cell == "[]" else tuple(json.loads(cell))  # most notes have none


def _link(row: tuple) -> Link:
    _, _, target, kind, heading, source, alt = row
    return Link(target=target, kind=kind, heading=heading, source=source, alt_target=alt)


class _Resolution:
    """A resolver over the notes that can be the target of some links (every note, or those sharing a
    lookup key with them: the others cannot change how they resolve), and those notes' ids."""

    def __init__(self, rows: Sequence[tuple[int, str, str]], label_first: bool) -> None:
        self.names = {rel: _aliases(aliases) for _, rel, aliases in rows}
        self.id_of = {rel: nid for nid, rel, _ in rows}
        self.resolver = LinkResolver(self.names.items(), label_first=label_first)

    @classmethod
    def for_links(cls, conn: sqlite3.Connection, links: list[tuple], label_first: bool) -> _Resolution:
        keys = set().union(*(link_keys(row[2], row[6]) for row in links))
        rows = target_rows(conn, None) if ANY_NAME in keys else targets_by_key(conn, sorted(keys))
        return cls(rows, label_first)

    def edge(self, row: tuple) -> int | None:
        """The dst id of one link row (``links_from``), None when unresolved."""
        dst = self.resolver.resolve(_link(row), row[1])
        return self.id_of[dst] if dst else None


def _insert_resolved(conn: sqlite3.Connection, res: _Resolution, links: list[tuple]) -> None:
    """Resolve the links of inserted notes into new edges; store the links' lookup keys."""
    edges: list[tuple] = []
    keys: set[tuple[str, int]] = set()
    for row in links:
        dst_id = res.edge(row)
        edges.append((row[0], dst_id, row[3], None if dst_id is not None else row[2]))
        keys.update((key, row[0]) for key in link_keys(row[2], row[6]))
    insert_edges(conn, edges)
    insert_keys(conn, sorted(keys), [])


def _insert_targets(conn: sqlite3.Connection, notes: list[tuple]) -> None:
    """Store the keys under which links find the inserted notes (id, rel_path, aliases JSON)."""
    keys = {(k, nid) for nid, rel, aliases in notes for k in note_keys(rel, _aliases(aliases)) if k != ANY_NAME}
    insert_keys(conn, [], sorted(keys))


def _re_resolve(conn: sqlite3.Connection, res: _Resolution, links: list[tuple], ids: list[int]) -> None:
    """Resolve again ``links``, those of the carried-over notes ``ids``, updating the edges whose target
    changed (in place, so that they keep their order)."""
    edges = edges_of(conn, ids)
    if len(links) != len(edges) or any(ln[0] != e[1] for ln, e in zip(links, edges)):
        raise IntegrityError(f"the edges of notes {ids[:5]} do not match their links one to one")
    changed = []
    for row, (rowid, _, old_dst) in zip(links, edges):
        dst_id = res.edge(row)
        if dst_id != old_dst:
            changed.append((dst_id, None if dst_id is not None else row[2], rowid))
    update_edges(conn, changed)


def _affected(
    conn: sqlite3.Connection, replaced: Sequence[ReplacedNote], inserted: list[tuple], below: int, kept: set[int]
) -> list[int]:
    """Ids of the carried-over notes (ids < ``below``, not ``kept``) with a link that a note which went (``replaced`` and
    not ``inserted`` again with the same aliases) resolved to, or that one which appeared could match."""
    before = {n.rel_path: frozenset(n.aliases) for n in replaced}
    after = {rel: frozenset(json.loads(aliases)) for _, rel, aliases in inserted}
    gone = [n.note_id for n in replaced if after.get(n.rel_path) != before[n.rel_path]]
    appeared = set().union(*(note_keys(rel, names) for rel, names in after.items() if before.get(rel) != names))
    found = notes_linking_to(conn, gone, below) if gone else set()
    if appeared:
        found |= notes_linking_by_key(conn, sorted(appeared), below)
    return sorted(found - kept)


def _counts(rows: Iterable[tuple]) -> tuple[int, int]:
    """(notes, notes with Dendron names) of (id, rel_path, ...) rows."""
    paths = [row[1] for row in rows]
    return len(paths), sum(1 for rel in paths if is_dendron_name(rel))


def recompute_edges(
    conn: sqlite3.Connection,
    *,
    new_from_id: int | None = None,
    replaced: Sequence[ReplacedNote] | None = None,
    kept: Sequence[int] = (),
) -> tuple[int, int]:
    """Resolve the stored links against the current notes. Returns (edges, unresolved).

    ``new_from_id``: the notes with ids >= it, and those with the ids ``kept`` (re-inserted with their old
    id), are the ones this build inserted; ``replaced``: the notes it deleted, as they were. Given both (and edges to start from, read the same way), only the links whose
    target could change are resolved, against the notes that could be their targets (see the module);
    otherwise every link is resolved again, against every note.
    """
    stored = meta_value(conn, NAMES_META)
    if new_from_id is not None and replaced is not None and isinstance(stored, dict):
        inserted = target_rows(conn, new_from_id) + (target_rows_of(conn, kept) if kept else [])
        (n_in, d_in), (n_out, d_out) = _counts(inserted), _counts((0, n.rel_path) for n in replaced)
        counts = (stored["notes"] + n_in - n_out, stored["dendron"] + d_in - d_out)
        label_first = reads_label_first(counts[1], counts[0])
        if label_first == reads_label_first(stored["dendron"], stored["notes"]):
            _incremental(conn, replaced, inserted, (new_from_id, set(kept)), label_first)
            set_meta(conn, {NAMES_META: {"notes": counts[0], "dendron": counts[1]}})
            return edge_counts(conn)
    notes = target_rows(conn, None)
    counts = _counts(notes)
    delete_all_edges(conn)
    delete_all_keys(conn)
    _insert_targets(conn, notes)
    _insert_resolved(conn, _Resolution(notes, reads_label_first(counts[1], counts[0])), list(links_from(conn, None)))
    set_meta(conn, {NAMES_META: {"notes": counts[0], "dendron": counts[1]}})
    return edge_counts(conn)


def _incremental(
    conn: sqlite3.Connection,
    replaced: Sequence[ReplacedNote],
    inserted: list[tuple],
    new: tuple[int, set[int]],
    label_first: bool,
) -> None:
    """``new``: (the first new id, the kept ids): the inserted notes."""
    affected = _affected(conn, replaced, inserted, new[0], new[1])
    new_id = {rel: nid for nid, rel, _ in inserted}
    move_edges(
        conn, {n.note_id: new_id[n.rel_path] for n in replaced if new_id.get(n.rel_path, n.note_id) != n.note_id}
    )
    _insert_targets(conn, inserted)  # before the notes the links may name are looked up
    old_links = list(links_of(conn, affected)) if affected else []
    new_links = (list(links_of(conn, sorted(new[1]))) if new[1] else []) + list(links_from(conn, new[0]))
    res = _Resolution.for_links(conn, old_links + new_links, label_first)
    if affected:
        _re_resolve(conn, res, old_links, affected)
    _insert_resolved(conn, res, new_links)


class BaseLinks(Protocol):
    """What ``resolve_on_base`` asks of the base generation, its replaced notes left out (``core.build.base_view``)."""

    def targets(self, keys: Sequence[str] | None) -> list[tuple[int, str, str]]: ...

    def linking_to(self, dst_ids: Sequence[int], below: int) -> set[int]: ...

    def linking_by_key(self, keys: Sequence[str], below: int) -> set[int]: ...

    def links_of(self, note_ids: Sequence[int]) -> list[tuple]: ...

    def edges_of(self, note_ids: Sequence[int]) -> list[tuple[int, int, int | None]]: ...

    def edge_counts(self) -> tuple[int, int]: ...


@dataclass(frozen=True)
class _OnBase:
    """What ``resolve_on_base`` works out before writing anything: the inserted notes, the links to resolve,
    the resolver over their possible targets, the carried-over notes whose edges would move, the new counts."""

    inserted: list[tuple]
    new_links: list[tuple]
    res: _Resolution
    moved: list[int]
    counts: tuple[int, int]


def _possible_targets(inserted: list[tuple], keys: set[str]) -> list[tuple]:
    """The inserted notes a link with one of ``keys`` may name (``targets_by_key`` of their ``note_keys``)."""
    if ANY_NAME in keys:
        return list(inserted)
    return [row for row in inserted if keys.intersection(note_keys(row[1], _aliases(row[2])))]


def _on_base(
    conn: sqlite3.Connection, base: BaseLinks, new_from_id: int, replaced: Sequence[ReplacedNote], kept: Sequence[int]
) -> _OnBase | str:
    """``resolve_on_base``'s reading, nothing written (str: why the delta cannot be resolved this way)."""
    stored = meta_value(conn, NAMES_META)
    if not isinstance(stored, dict):
        return "the base records no link names"
    inserted = target_rows(conn, new_from_id) + (target_rows_of(conn, kept) if kept else [])
    (n_in, d_in), (n_out, d_out) = _counts(inserted), _counts((0, n.rel_path) for n in replaced)
    counts = (stored["notes"] + n_in - n_out, stored["dendron"] + d_in - d_out)
    label_first = reads_label_first(counts[1], counts[0])
    if label_first != reads_label_first(stored["dendron"], stored["notes"]):
        return "the vault's reading of [[left|right]] flips"
    new_id = {rel: nid for nid, rel, _ in inserted}
    if any(new_id.get(n.rel_path, n.note_id) != n.note_id for n in replaced):
        return "a re-inserted note has a new id"
    affected = _affected_on_base(base, replaced, inserted, new_from_id)
    old_links = base.links_of(affected) if affected else []
    new_links = (list(links_of(conn, sorted(kept))) if kept else []) + list(links_from(conn, new_from_id))
    keys = set().union(*(link_keys(row[2], row[6]) for row in old_links + new_links))
    mine = _possible_targets(inserted, keys)  # the working database holds only the inserted notes
    res = _Resolution(sorted(base.targets(None if ANY_NAME in keys else sorted(keys)) + mine), label_first)
    edges = base.edges_of(affected) if affected else []
    if len(old_links) != len(edges) or any(ln[0] != e[1] for ln, e in zip(old_links, edges)):
        raise IntegrityError(f"the edges of notes {affected[:5]} do not match their links one to one")
    moved = sorted({row[0] for row, edge in zip(old_links, edges) if res.edge(row) != edge[2]})
    return _OnBase(inserted, new_links, res, moved, counts)


def moved_on_base(
    conn: sqlite3.Connection,
    base: BaseLinks,
    *,
    new_from_id: int,
    replaced: Sequence[ReplacedNote],
    kept: Sequence[int],
) -> list[int] | str:
    """The carried-over notes (ids, sorted) whose resolved edges the build's notes change (an add a dangling
    link now names, a delete or rename of a linked note, an alias change), read before ``resolve_on_base``
    writes anything: ``core.build.delta_stage`` re-publishes them in the delta with their kept ids. A str:
    why the delta cannot be resolved on the base at all."""
    found = _on_base(conn, base, new_from_id, replaced, kept)
    return found if isinstance(found, str) else found.moved


def resolve_on_base(
    conn: sqlite3.Connection,
    base: BaseLinks,
    *,
    new_from_id: int,
    replaced: Sequence[ReplacedNote],
    kept: Sequence[int],
) -> tuple[int, int] | str:
    """``recompute_edges`` on a working database that holds only the build's notes (``core.build.delta_stage``):
    the inserted notes' links resolved against the base's live notes (``base``: the replaced ones left out) and
    the inserted ones. Returns the published generation's (edges, unresolved), or why a carried-over note's
    edges would change (a delta cannot carry that: ``moved_on_base`` names them first, and the stage
    re-inserts them, so this is a check)."""
    found = _on_base(conn, base, new_from_id, replaced, kept)
    if isinstance(found, str):
        return found
    if found.moved:
        return f"{len(found.moved)} unchanged notes have other resolved edges"
    _insert_targets(conn, found.inserted)
    _insert_resolved(conn, found.res, found.new_links)
    set_meta(conn, {NAMES_META: {"notes": found.counts[0], "dendron": found.counts[1]}})
    carried, here = base.edge_counts(), edge_counts(conn)
    return carried[0] + here[0], carried[1] + here[1]


def _affected_on_base(
    base: BaseLinks, replaced: Sequence[ReplacedNote], inserted: list[tuple], below: int
) -> list[int]:
    """``_affected`` over the base's carried-over notes (the replaced ones, still in the base, left out)."""
    before = {n.rel_path: frozenset(n.aliases) for n in replaced}
    after = {rel: frozenset(json.loads(aliases)) for _, rel, aliases in inserted}
    gone = [n.note_id for n in replaced if after.get(n.rel_path) != before[n.rel_path]]
    appeared = set().union(*(note_keys(rel, names) for rel, names in after.items() if before.get(rel) != names))
    found = base.linking_to(gone, below) if gone else set()
    if appeared:
        found |= base.linking_by_key(sorted(appeared), below)
    return sorted(found - {n.note_id for n in replaced})
