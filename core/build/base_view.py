"""The verified base generation as a build staged on its changes only reads it (issue 29: an edit's work and
writes proportional to the change, ``core.build.delta_stage``).

The build's working database holds only the notes it writes; whatever needs the rest of the vault asks
this view of the base (its federated read-only connection, ``core.index.verify.connect_readonly``), with
the notes the build replaces (``gone``: its changed and removed ids, live in the base still) left out:
their names, the carried-over notes' stats and hashes, link targets and the links that could change,
and the counts the generation record adds up. Every query is a table module's.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.build.link_graph import ReplacedNote, replaced_notes
from core.index.layout import ResolvedIndex
from core.index.tables.chunk_vectors import count_chunks_and_vectors_of, count_vectors, vectors_by_position
from core.index.tables.chunks import count_chunks
from core.index.tables.links import (
    edge_counts_from,
    edges_of,
    links_of,
    notes_linking_by_key,
    notes_linking_to,
    target_rows,
    targets_by_key,
)
from core.index.tables.notes import count_notes
from core.index.tables.problems import note_problems_except
from core.index.tables.segments import live_edge_counts
from core.index.verify import connect_readonly

if TYPE_CHECKING:
    from core.build.source import BaseRow, BaseStats


class BaseView:
    """The base generation ``base`` without the notes ``gone`` (ids live in it), and the rows the build's plan
    read of it (``rows``: its source files' rows are read once per build, there). Close it (a context manager)."""

    def __init__(self, base: ResolvedIndex, gone: Sequence[int], rows: BaseStats) -> None:
        self.base, self.rows = base, rows
        self.gone = set(gone)
        self._gone_json = json.dumps(sorted(self.gone))
        self.conn: sqlite3.Connection = connect_readonly(base)

    def __enter__(self) -> BaseView:
        return self

    def __exit__(self, *_: object) -> None:
        self.conn.close()

    def leave_out(self, note_ids: Sequence[int]) -> list[ReplacedNote]:
        """Leave out these carried-over notes too (the build re-publishes them: ``core.build.delta_stage``);
        they as they are in the base."""
        self.gone.update(note_ids)
        self._gone_json = json.dumps(sorted(self.gone))
        return replaced_notes(self.conn, sorted(note_ids))

    def file_rows(self, note_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """Note id -> (rel_path, content sha256) of these notes in the base."""
        wanted = set(note_ids)
        return {nid: (rel, sha) for rel, nid, sha, _, _ in self.rows.rows.values() if nid in wanted}

    def vectors(self, note_ids: Sequence[int]) -> list[tuple[int, int, int, int, bytes]]:
        """(note id, chunk ord, start, end, vector) of these notes' embedded chunks in the base."""
        return vectors_by_position(self.conn, json.dumps(sorted(note_ids)))

    def replaced(self) -> list[ReplacedNote]:
        """The notes ``gone`` as they are in the base (what links may have resolved to)."""
        return replaced_notes(self.conn, sorted(self.gone))

    def carried_stats(self) -> list[tuple[str, str, int, int]]:
        """(rel_path, content sha256, mtime_ns, size) of the carried-over notes (``source_stats`` without
        the skipped files: the working database carries the generation's)."""
        gone = self.gone
        return [
            (rel, sha, mtime, size)
            for rel, nid, sha, mtime, size in self.rows.rows.values()
            if nid >= 0 and nid not in gone
        ]

    def carried_rows(self) -> list[BaseRow]:
        """The carried-over notes' rows as the base holds them (``BaseStats``: with their ids)."""
        gone = self.gone
        return [row for row in self.rows.rows.values() if row[1] >= 0 and row[1] not in gone]

    def targets(self, keys: Sequence[str] | None) -> list[tuple[int, str, str]]:
        """(id, rel_path, aliases JSON) of the carried-over notes a link with one of ``keys`` may name (None: all)."""
        rows = target_rows(self.conn, None) if keys is None else targets_by_key(self.conn, keys)
        return [row for row in rows if row[0] not in self.gone]

    def linking_to(self, dst_ids: Sequence[int], below: int) -> set[int]:
        return notes_linking_to(self.conn, dst_ids, below) - self.gone

    def linking_by_key(self, keys: Sequence[str], below: int) -> set[int]:
        return notes_linking_by_key(self.conn, keys, below) - self.gone

    def links_of(self, note_ids: Sequence[int]) -> list[tuple]:
        return list(links_of(self.conn, note_ids))

    def edges_of(self, note_ids: Sequence[int]) -> list[tuple[int, int, int | None]]:
        return edges_of(self.conn, note_ids)

    def edge_counts(self) -> tuple[int, int]:
        """(edges, unresolved edges) of the carried-over notes: the base's (counted per segment) minus the
        gone notes' (an index lookup each), as ``counts`` does for notes and chunks."""
        edges, unresolved = live_edge_counts(self.conn)
        gone_edges, gone_unresolved = edge_counts_from(self.conn, self._gone_json)
        return edges - gone_edges, unresolved - gone_unresolved

    def counts(self) -> tuple[int, int, int]:
        """(notes, chunks, chunks with a vector) of the carried-over notes."""
        notes = count_notes(self.conn) - len(self.gone)
        chunks, vectors = count_chunks_and_vectors_of(self.conn, self._gone_json)
        return notes, count_chunks(self.conn) - chunks, count_vectors(self.conn) - vectors

    def note_problems(self) -> list[dict[str, str]]:
        """The carried-over notes' own problems (path, reason, detail)."""
        return note_problems_except(self.conn, self._gone_json)
