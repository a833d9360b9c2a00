"""Writing a segment from existing segments' rows (the merge and split path: no note is parsed again), and
a tombstone part for a segment's deleted notes (issue 29, step 2a).

``write_segment`` creates a new segment file holding the given notes' rows of every per-note table
(notes, note_tags, note_names, note_problems, chunks, note_text and its FTS5 rows, links, link_keys,
target_keys, the edges those notes are the source of, dense chunk_vectors), copied from each source
segment ATTACHed read-only; the chosen notes' term vectors derived from the source's term-major arrays
(core.build.forward_rows: a segment stores its postings once) into the writer's TEMP working tables;
then the term-major arrays and per-class statistics over THAT segment's notes only, with the builder's
own array code. The first source's term dictionary is kept as it is (its ids unchanged); a term of a
later source that it lacks gets the next id, and that source's vectors are remapped. An edge to a note
listed as dead is left out.

Generation-level tables (meta, skipped_files, build_problems, git_dates) are carried by the NEWEST
segment of a generation (``core.index.segmented`` reads them there): ``generation_from`` names the
source they are copied from (every segment carries its own ``meta`` schema version and tokenizer).

``write_tombstone`` writes ``dead(note_id)`` and, in ``term_major``, the deleted notes' exact
statistics: the ``class_*`` arrays of the sparse and chunk groups (core.ranking.classes' encoding),
the sparse group's total ``df`` and both groups' ``indptr`` (per term: its dead notes / chunks), all
over the segment's own term ids; computed by writing those notes as a scratch segment with the
segment's whole dictionary (the builder's own array code): what the ranking side subtracts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.build.forward_rows import Forward, create_working, fill_working, insert_dictionary, read_forward
from core.errors import IntegrityError, UsageError
from core.index.schema import create_schema
from core.index.tables import segments as seg
from core.index.tables.connection import atomic, set_journal_mode, set_working_mode
from core.ranking.chunk_vectors import compute_chunk_vectors, store_chunk_vectors
from core.ranking.sparse import store_sparse
from core.ranking.sparse_rows import compute_sparse


@dataclass(frozen=True)
class SegmentSource:
    """A segment file to copy notes from (a path SQLite can open: a pinned ``/proc/self/fd/N`` too)."""

    path: Path
    note_ids: Collection[int]


def _uri(path: Path, *, immutable: bool = True) -> str:
    return f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")


def _source_forward(source: SegmentSource) -> Forward:
    """The chosen notes' forward rows, derived from the source's stored term-major arrays."""
    conn = sqlite3.connect(_uri(source.path), uri=True)
    try:
        forward = read_forward(conn, source.note_ids)
    finally:
        conn.close()
    if forward is None:
        raise IntegrityError(f"segment {source.path} holds no term-major arrays", path=str(source.path))
    return forward


def _merge_terms(dictionary: dict[str, int], forward: Forward, first: bool, compact: bool) -> np.ndarray | None:
    """Merge ``forward``'s terms into ``dictionary``; the source id -> new id table (None: ids kept). The first
    source's dictionary is kept whole (or, ``compact``, only the terms its chosen notes hold, numbered 1..
    in their order); a later source's term the dictionary lacks gets the next id, in source id order."""
    if first and not compact:
        dictionary.update(forward.terms)
        return None
    size = max(max(forward.terms.values(), default=0), int(forward.used_terms().max(initial=0))) + 1
    table = np.zeros(size, dtype=np.int32)
    word = {i: t for t, i in forward.terms.items()}
    if first:
        for new, old in enumerate(forward.used_terms().tolist(), start=1):
            table[old] = dictionary[word[old]] = new
        return table
    next_id = max(dictionary.values(), default=0) + 1
    for old in sorted(word):
        found = dictionary.get(word[old])
        if found is None:
            found = dictionary[word[old]] = next_id
            next_id += 1
        table[old] = found
    return table


def _copy_source(
    conn: sqlite3.Connection, source: SegmentSource, first: bool, compact: bool, dictionary: dict[str, int]
) -> None:
    seg.choose_notes(conn, source.note_ids)
    forward = _source_forward(source)
    table = _merge_terms(dictionary, forward, first, compact)
    seg.attach(conn, _uri(source.path), "src")
    try:
        with atomic(conn):
            seg.copy_note_rows(conn)
            fill_working(conn, forward, table)
            if first:
                seg.copy_generation_tables(conn, meta_only=True)
    finally:
        seg.detach(conn, "src")


def write_segment(
    dest: Path,
    sources: Sequence[SegmentSource],
    *,
    tokenizer: str,
    dead: Collection[int] = (),
    generation_from: Path | None = None,
    compact: bool = False,
) -> dict[str, int]:
    """Write a new segment file ``dest`` (must not exist) of ``sources``' chosen notes; ``dead``: note ids
    no edge may point at; ``generation_from``: the segment whose generation-level tables it carries;
    ``compact``: the dictionary holds only the terms of the chosen notes (renumbered), not the first
    source's whole dictionary. Returns the segment's counts (notes, chunks, dense_chunks)."""
    conn = sqlite3.connect(f"file:{dest}?mode=rwc", uri=True, isolation_level=None)
    try:
        set_working_mode(conn, durable=False)
        create_schema(conn, tokenizer)
        create_working(conn)
        seg.start_copy(conn, dead)
        dictionary: dict[str, int] = {}
        for i, source in enumerate(sources):
            _copy_source(conn, source, i == 0, compact, dictionary)
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
            seg.index_stored_texts(conn)
            sparse = compute_sparse(conn)
            store_sparse(conn, sparse)
            store_chunk_vectors(conn, compute_chunk_vectors(conn, sparse))
        counts = seg.segment_counts(conn)
        set_journal_mode(conn, "DELETE")
    finally:
        conn.close()
    return counts


def _statistic(name: str) -> bool:
    """An array (or piece) a tombstone keeps: per-class statistics, the total df (``df``) and the
    postings' term pointers (``indptr``: a term's notes / chunks) of the dead notes."""
    array = name.split("/", 1)[-1].split("#", 1)[0]
    return array.startswith("class_") or array in ("df", "indptr")


def write_tombstone(dest: Path, segment: Path, dead_ids: Collection[int], *, tokenizer: str) -> int:
    """Write a tombstone part ``dest`` for ``segment``: ALL of that segment's deleted note ids (a newer
    delete writes a new tombstone) and their statistics. Returns how many ids it lists."""
    ids = sorted(set(dead_ids))
    scratch = dest.with_name(dest.name + ".scratch")
    try:
        found = write_segment(scratch, [SegmentSource(segment, ids)], tokenizer=tokenizer)["notes"]
        if found != len(ids):
            raise UsageError(
                f"a tombstone lists only notes of its segment: {len(ids) - found} of {len(ids)} ids are not in {segment}",
                path=str(segment),
                expected=len(ids),
                actual=found,
            )
        conn = sqlite3.connect(f"file:{dest}?mode=rwc", uri=True, isolation_level=None)
        try:
            seg.attach(conn, _uri(scratch, immutable=False), "src")
            with atomic(conn):
                seg.create_tombstone(conn, ids)
                seg.copy_arrays(conn, _statistic)
            seg.detach(conn, "src")
            set_journal_mode(conn, "DELETE")
        finally:
            conn.close()
    finally:
        scratch.unlink(missing_ok=True)
    return len(ids)
