"""Writing a segment from existing segments' rows (the merge and split path: no note is parsed again), and
a tombstone part for a segment's deleted notes (issue 29, step 2a).

``write_segment`` creates a new segment file holding the given notes' rows of every per-note table
(notes, note_tags, note_names, note_problems, chunks, note_text (re-encoded where the text dictionary
changes: ``segments.copy_note_texts``) and its FTS5 rows, links, link_keys,
target_keys, the edges those notes are the source of, note_terms / chunk_terms, dense chunk_vectors),
copied from each source segment ATTACHed read-only; then the term-major arrays and per-class
statistics over THAT segment's notes only, with the builder's own array code. The first source's term
dictionary is kept as it is (its ids unchanged); a term of a later source that it lacks gets the next
id, and that source's vectors are remapped. An edge to a note listed as dead is left out.

Generation-level tables (meta, skipped_files, build_problems, git_dates) are carried by the NEWEST
segment of a generation (``core.index.segmented`` reads them there): ``generation_from`` names the
source they are copied from (every segment carries its own ``meta`` schema version and tokenizer).

``write_tombstone`` writes ``dead(note_id)`` and the deleted notes' exact per-class statistics of the
sparse group (notes, field-length sums, and df only for the terms those notes hold, over the segment's
own term ids: ``core.index.tables.segments.create_tombstone``), counted by writing those notes as a
small compact scratch segment (the builder's own array code): what the ranking side subtracts
(``core.modes.segment_arrays.tombstone_of``). The chunk group needs none: the combined chunk vectors
recompute their statistics from the live chunks (``core.ranking.segment_chunks``).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.build import text_dict
from core.errors import UsageError
from core.index.schema import create_schema
from core.index.tables import segments as seg
from core.index.tables.connection import atomic, set_journal_mode, set_page_size, set_working_mode
from core.ranking.chunk_vectors import compute_chunk_vectors, store_chunk_vectors
from core.ranking.segments import tombstone
from core.ranking.sparse import load_sparse, store_sparse
from core.ranking.sparse_rows import compute_sparse

_FIELDS = 5  # len(FTS_COLUMNS): the tf columns of a note_terms row
SMALL_PAGE = 1024  # bytes: the SQLite page of a compact segment and of a tombstone (SQLite's default: 4096)


@dataclass(frozen=True)
class SegmentSource:
    """A segment file to copy notes from (a path SQLite can open: a pinned ``/proc/self/fd/N`` too)."""

    path: Path
    note_ids: Collection[int]


def _uri(path: Path, *, immutable: bool = True) -> str:
    return f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")


def _table(pairs: list[tuple[int, int]]) -> np.ndarray:
    table = np.zeros(max((p[0] for p in pairs), default=0) + 1, dtype=np.int32)
    for old, new in pairs:
        table[old] = new
    return table


def _remap(ids: np.ndarray, tf: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    new = table[ids]
    order = np.argsort(new, kind="stable")
    return new[order], tf[order]


def _remapped(notes: list[tuple], chunks: list[tuple], table: np.ndarray) -> tuple[list[tuple], list[tuple]]:
    """Vector rows (as stored) with their term ids mapped through ``table`` and sorted again per vector."""
    out_notes = []
    for nid, n, data in notes:
        raw = zlib.decompress(data)
        ids = np.frombuffer(raw, dtype="<i4", count=n)
        tf = np.frombuffer(raw, dtype="<u2", offset=4 * n).reshape(n, _FIELDS)
        ids, tf = _remap(ids, tf, table)
        out_notes.append((nid, n, zlib.compress(ids.astype("<i4").tobytes() + tf.astype("<u2").tobytes(), 1)))
    out_chunks = []
    for nid, count, n, data in chunks:
        raw = zlib.decompress(data)
        lengths = np.frombuffer(raw, dtype="<u4", count=count)
        ids = np.frombuffer(raw, dtype="<i4", offset=4 * count, count=n)
        tf = np.frombuffer(raw, dtype="<u2", offset=4 * count + 4 * n, count=n)
        runs, at = [], 0
        for length in lengths.tolist():
            runs.append(_remap(ids[at : at + length], tf[at : at + length], table))
            at += length
        new_ids = np.concatenate([r[0] for r in runs]) if runs else ids
        new_tf = np.concatenate([r[1] for r in runs]) if runs else tf
        blob = lengths.tobytes() + new_ids.astype("<i4").tobytes() + new_tf.astype("<u2").tobytes()
        out_chunks.append((nid, count, n, zlib.compress(blob, 1)))
    return out_notes, out_chunks


def _used_terms(notes: list[tuple], chunks: list[tuple]) -> set[int]:
    """The term ids the stored vector rows name."""
    used: set[int] = set()
    for _, n, data in notes:
        used.update(np.frombuffer(zlib.decompress(data), dtype="<i4", count=n).tolist())
    for _, count, n, data in chunks:
        used.update(np.frombuffer(zlib.decompress(data), dtype="<i4", offset=4 * count, count=n).tolist())
    return used


def _copy_source(
    conn: sqlite3.Connection, source: SegmentSource, first: bool, compact: bool = False, use_dict: bool = True
) -> None:
    seg.choose_notes(conn, source.note_ids)
    seg.attach(conn, _uri(source.path), "src")
    try:
        with atomic(conn):
            if compact and first:  # only the terms the chosen notes hold (a small segment of a big one)
                rows = seg.source_vector_rows(conn)
                pairs: list[tuple[int, int]] | None = seg.insert_used_terms(conn, sorted(_used_terms(*rows)))
            else:
                pairs = seg.merge_terms(conn, keep_ids=first)
            seg.copy_note_rows(conn)
            seg.copy_note_texts(conn, use_dict=use_dict)
            if pairs is None:
                seg.copy_vector_rows(conn)
            else:
                seg.insert_vector_rows(conn, *_remapped(*seg.source_vector_rows(conn), _table(pairs)))
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
        if compact:  # a small segment of a few notes: its ~40 tables and indexes take a page each at least
            set_page_size(conn, SMALL_PAGE)
        set_working_mode(conn, durable=False)
        create_schema(conn, tokenizer)
        seg.start_copy(conn, dead)
        use_dict = sum(len(s.note_ids) for s in sources) >= text_dict.MIN_NOTES  # a few notes: cheaper without
        for i, source in enumerate(sources):
            _copy_source(conn, source, i == 0, compact, use_dict)
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


def _dead_rows(scratch: sqlite3.Connection) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, int]]]:
    """(classes rows, df rows) of ``seg.create_tombstone`` from ``scratch`` (the dead notes written as a
    compact segment, the segment ATTACHed as ``seg``): every number counted from the scratch's own arrays
    (``core.ranking.segments.tombstone``: what the ranking side subtracts), its term ids mapped to the
    segment's."""
    sparse = load_sparse(scratch)
    if sparse.classes is None:
        raise UsageError("a segment without per-classification statistics cannot be tombstoned")
    counted = tombstone(sparse, np.arange(sparse.n_docs, dtype=np.int64))
    names = sparse.classes.names
    to_segment = seg.segment_term_ids(scratch, "seg")
    classes = [(name, int(counted.docs[c]), json.dumps(counted.field_len[c].tolist())) for c, name in enumerate(names)]
    cls, terms = np.nonzero(counted.df)
    df = [(names[c], to_segment[t], int(counted.df[c, t])) for c, t in zip(cls.tolist(), terms.tolist(), strict=True)]
    return classes, df


def write_tombstone(dest: Path, segment: Path, dead_ids: Collection[int], *, tokenizer: str) -> int:
    """Write a tombstone part ``dest`` for ``segment``: ALL of that segment's deleted note ids (a newer
    delete writes a new tombstone) and their exact per-class statistics for the terms they hold (its size
    grows with the dead notes, not with the segment). Returns how many ids it lists."""
    ids = sorted(set(dead_ids))
    # a staging-shaped name (core.index.ownership.is_staging_file): a kill before the unlink leaves
    # debris the next build's reaper knows as ours
    scratch = dest.with_name(dest.name + "-scratch.db.tmp")
    try:
        found = write_segment(scratch, [SegmentSource(segment, ids)], tokenizer=tokenizer, compact=True)["notes"]
        if found != len(ids):
            raise UsageError(
                f"a tombstone lists only notes of its segment: {len(ids) - found} of {len(ids)} ids are not in {segment}",
                path=str(segment),
                expected=len(ids),
                actual=found,
            )
        src = sqlite3.connect(_uri(scratch, immutable=False), uri=True)
        try:
            seg.attach(src, _uri(segment), "seg")
            classes, df = _dead_rows(src)
        finally:
            src.close()
        conn = sqlite3.connect(f"file:{dest}?mode=rwc", uri=True, isolation_level=None)
        try:
            set_page_size(conn, SMALL_PAGE)
            with atomic(conn):
                seg.create_tombstone(conn, ids, classes, df)
            set_journal_mode(conn, "DELETE")
        finally:
            conn.close()
    finally:
        scratch.unlink(missing_ok=True)
    return len(ids)
