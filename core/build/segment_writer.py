"""Writing a segment from existing segments' rows (the merge and split path: no note is parsed again), and
a tombstone part for a segment's deleted notes (issue 29, step 2a).

``write_segment`` creates a new segment file holding the given notes' rows of every per-note table
(notes, note_tags, note_names, note_problems, chunks, note_text and its blocks (a block copied whole when
every record in it is a chosen note's and the dictionary is the same, else packed again:
``segments.copy_note_texts``) and its FTS5 rows, links, link_keys, target_keys, the edges those
notes are the source of, dense chunk_vectors), copied from each source segment ATTACHed read-only; the
chosen notes' term vectors derived from the source's term-major arrays (core.build.forward_rows: a segment
stores its postings once) into the writer's TEMP working tables; then the term-major arrays and per-class
statistics over THAT segment's notes only, with the builder's own array code. The first source's term
dictionary is kept as it is (its ids unchanged); a term of a later source that it lacks gets the next
id, and that source's vectors are remapped. An edge to a note listed as dead is left out.

Generation-level tables (meta, skipped_files, build_problems, git_dates) are carried by the NEWEST
segment of a generation (``core.index.segmented`` reads them there): ``generation_from`` names the
source they are copied from (every segment carries its own ``meta`` schema version and tokenizer).

``write_tombstone`` writes ``dead(note_id)`` and the deleted notes' exact per-class statistics of the
sparse group (notes, field-length sums, and df only for the terms those notes hold, over the segment's
own term ids: ``core.index.tables.segments.create_tombstone``): the segment's previous tombstone's plus the
newly dead notes', each counted from its own verified postings (``core.build.tomb_stats``: O(dead note); a
note that does not verify from the segment's whole arrays, as ``core.ranking.segments.dead_counts`` counts
what the ranking side subtracts, ``core.modes.segment_arrays.tombstone_of``; ``write_tombstone_counted``
says which). The chunk group needs none: a generation's chunk vectors recompute their statistics from the
live chunks (``core.ranking.segment_view.view_chunks``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.build import text_dict
from core.build.forward_rows import Forward, create_working, fill_working, insert_dictionary, merge_terms, read_forward
from core.build.tomb_stats import tombstone_sums
from core.errors import IntegrityError, ValidationError
from core.index.schema import create_schema
from core.index.tables import segments as seg
from core.index.tables.checks import PATHS_HELD_TWICE, failing
from core.index.tables.connection import atomic, set_journal_mode, set_page_size, set_working_mode
from core.index.tables.notes import files_bytes
from core.ranking.chunk_vectors import compute_chunk_vectors, store_chunk_vectors
from core.ranking.sparse import store_sparse
from core.ranking.sparse_rows import compute_sparse

# bytes: the SQLite page of a compact segment and of a tombstone (SQLite's default: 4096). Its ~45 tables and
# indexes take a page each at least: a Dendron note's edit wrote a 95 KB segment in 1 KB pages, 76 KB in 512 B.
SMALL_PAGE = 512
# A whole segment of less Markdown than SMALL_VAULT_BYTES has pages of SMALL_VAULT_PAGE bytes: a table's last page
# and a blob's last overflow page are half empty on average, a waste that is a larger share of a smaller
# segment. A cold build's index, 2 KB pages against 4 KB: Dendron docs (2.0 MiB of Markdown) 5.12 -> 4.94 MB,
# SciFact (7.6 MiB) 15.47 -> 15.15 MB, PowerShell docs (31.6 MiB) 37.9 -> 37.5 MB (-1%, and warm fts p50 5.25
# -> 5.6 ms: FTS5's 4 KB leaves overflow a 2 KB page); 1 KB pages: Dendron 4.97 MB.
SMALL_VAULT_BYTES = 16 * 2**20
SMALL_VAULT_PAGE = 2048


def whole_page_size(markdown_bytes: int) -> int | None:
    """The page size of a whole segment (a cold build's, a merge's) of notes of ``markdown_bytes`` in all;
    None: SQLite's default."""
    return SMALL_VAULT_PAGE if markdown_bytes < SMALL_VAULT_BYTES else None


Terms = dict[str, int] | None  # a writer's dictionary (None: a segment written without arrays)


@dataclass(frozen=True)
class SegmentSource:
    """A segment file to copy notes from (a path SQLite can open: a pinned ``/proc/self/fd/N`` too)."""

    path: Path
    note_ids: Collection[int]
    forward: Forward | None = None  # its notes' term vectors, when the file holds no arrays for them (a scratch)


def _uri(path: Path, *, immutable: bool = True) -> str:
    return f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")


def _source_forward(source: SegmentSource) -> Forward:
    """The chosen notes' forward rows: the source's own (``forward``), else derived from its stored arrays."""
    if source.forward is not None:
        return source.forward.only(source.note_ids)
    conn = sqlite3.connect(_uri(source.path), uri=True)
    try:
        forward = read_forward(conn, source.note_ids)
    finally:
        conn.close()
    if forward is None:
        raise IntegrityError(f"segment {source.path} holds no term-major arrays", path=str(source.path))
    return forward


def _copy_source(
    conn: sqlite3.Connection, source: SegmentSource, first: bool, compact: bool, use_dict: bool, dictionary: Terms
) -> None:
    """One source's chosen notes; their term vectors too unless ``dictionary`` is None (no arrays written)."""
    seg.choose_notes(conn, source.note_ids)
    forward = table = None
    if dictionary is not None:
        forward = _source_forward(source)
        table = merge_terms(dictionary, forward, first, compact)
    seg.attach(conn, _uri(source.path), "src")
    try:
        with atomic(conn):
            seg.copy_note_rows(conn)
            seg.copy_note_texts(conn, use_dict=use_dict)
            if forward is not None:
                fill_working(conn, forward, table)
            if first:
                seg.copy_generation_tables(conn, meta_only=True)
    finally:
        seg.detach(conn, "src")


def _markdown_bytes(sources: Sequence[SegmentSource]) -> int:
    """The files' bytes of the notes ``sources`` choose (their ``size`` as scanned)."""
    total = 0
    for source in sources:
        conn = sqlite3.connect(_uri(source.path), uri=True)
        try:
            total += files_bytes(conn, source.note_ids)
        finally:
            conn.close()
    return total


def write_segment(
    dest: Path,
    sources: Sequence[SegmentSource],
    *,
    tokenizer: str,
    dead: Collection[int] = (),
    generation_from: Path | None = None,
    compact: bool = False,
    arrays: bool = True,
    texts: Collection[int] | None = None,
) -> dict[str, int]:
    """Write a new segment file ``dest`` (must not exist) of ``sources``' chosen notes; ``dead``: note ids
    no edge may point at; ``generation_from``: the segment whose generation-level tables it carries;
    ``compact``: the dictionary holds only the terms of the chosen notes (renumbered), not the first
    source's whole dictionary; ``arrays=False`` and ``texts`` (FTS5 rows of these notes only): a build's
    working database, never published as it is (``core.build.incremental.scratch_base``). Returns the
    segment's counts (notes, chunks, dense_chunks)."""
    conn = sqlite3.connect(f"file:{dest}?mode=rwc", uri=True, isolation_level=None)
    try:
        page = SMALL_PAGE if compact else whole_page_size(_markdown_bytes(sources))
        if page is not None:  # a small segment of a few notes: its ~40 tables and indexes take a page each at least
            set_page_size(conn, page)
        set_working_mode(conn, durable=False)
        create_schema(conn, tokenizer)
        create_working(conn)
        seg.start_copy(conn, dead)
        use_dict = sum(len(s.note_ids) for s in sources) >= text_dict.MIN_NOTES  # a few notes: cheaper without
        dictionary: Terms = {} if arrays else None
        for i, source in enumerate(sources):
            _copy_source(conn, source, i == 0, compact, use_dict, dictionary)
        twice = failing(conn, (PATHS_HELD_TWICE,))  # notes' paths have no UNIQUE index (core.index.tables.notes)
        if twice:
            raise ValidationError(f"a segment being written holds one path twice ({twice[0]})", problems=twice)
        if dictionary is not None:
            with atomic(conn):
                insert_dictionary(conn, dictionary)
        if generation_from is not None:
            seg.attach(conn, _uri(generation_from), "src")
            try:
                with atomic(conn):
                    seg.copy_generation_tables(conn, meta_only=False)
            finally:
                seg.detach(conn, "src")
        with atomic(conn):
            seg.index_stored_texts(conn, texts)
            if arrays:
                sparse = compute_sparse(conn)
                store_sparse(conn, sparse)
                store_chunk_vectors(conn, compute_chunk_vectors(conn, sparse))
        counts = seg.segment_counts(conn)
        set_journal_mode(conn, "DELETE")
    finally:
        conn.close()
    return counts


def write_tombstone(dest: Path, segment: Path, dead_ids: Collection[int], previous: Path | None = None) -> int:
    """Write a tombstone part ``dest`` for ``segment``: ALL of that segment's deleted note ids (a newer
    delete writes a new tombstone) and their exact per-class statistics for the terms they hold (its size
    grows with the dead notes, not with the segment); ``previous``: the segment's tombstone so far, whose
    statistics the new one builds on. Returns how many ids it lists."""
    return len(write_tombstone_counted(dest, segment, dead_ids, previous).ids)


@dataclass(frozen=True)
class TombstoneWrite:
    ids: list[int]  # every dead id the tombstone lists
    how: list[str]  # how its statistics were counted (core.build.tomb_stats: VERIFIED, or why from the whole arrays)
    whole: int = 0  # how many dead notes were counted from the segment's whole arrays


def write_tombstone_counted(
    dest: Path, segment: Path, dead_ids: Collection[int], previous: Path | None = None
) -> TombstoneWrite:
    """``write_tombstone``, saying how the statistics were counted (``core.build.tomb_stats.tombstone_sums``:
    the newly dead notes from their own postings, a note that does not verify from the whole arrays)."""
    ids = sorted(set(dead_ids))
    sums = tombstone_sums(segment, ids, previous)
    classes, df = sums.rows()
    conn = sqlite3.connect(f"file:{dest}?mode=rwc", uri=True, isolation_level=None)
    try:
        set_page_size(conn, SMALL_PAGE)
        with atomic(conn):
            seg.create_tombstone(conn, ids, classes, df)
        set_journal_mode(conn, "DELETE")
    finally:
        conn.close()
    return TombstoneWrite(ids, sums.how, sums.whole)
