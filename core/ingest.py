"""Turn note files into rows of a working index database (and delete them again).

The builder decides *which* notes change; this module knows *how* a note becomes rows:
the notes row, tags, per-note problems, chunks + their FTS5 rows, the sparse term vector
and the links as written. Three stages, so that two CPU cores can share the work:

    prepare_note     file -> PreparedNote: read, hash, parse, chunk, count terms. Pure,
                     so ``prepared_notes`` can run it in forked worker processes.
    NoteWriter       assigns note and chunk ids, turns term counts into term vectors
                     (``core.analysis.TermVectors``) and batches the rows ...
    RowSink          ... which one worker thread inserts. SQLite releases the GIL while
                     it steps a statement (FTS5 tokenising the chunks is most of the
                     write cost), so inserting one batch overlaps preparing the next.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from types import TracebackType

from core import analysis
from core.analysis import FieldTerms, TermVectors, analyzer_for, field_terms
from core.chunking import chunk_body, headings
from core.errors import SourceChangedError
from core.links import LinkResolver
from core.notes import Link, ParsedNote, parse_note, skip_problem
from core.scan import read_file
from core.schema import FTS_COLUMNS, NOTE_COLUMNS

_NOTE_INSERT = f"INSERT INTO notes({', '.join(NOTE_COLUMNS)}) VALUES ({', '.join('?' * len(NOTE_COLUMNS))})"
_FTS_INSERT = (f"INSERT INTO chunks_fts(rowid, {', '.join(FTS_COLUMNS)}) "
               f"VALUES (?{', ?' * len(FTS_COLUMNS)})")
# One batch's statements, in the order they run (notes first: the other rows name them).
_INSERTS = {
    "notes": _NOTE_INSERT,
    "tags": "INSERT INTO note_tags(tag, note_id) VALUES (?, ?)",
    "problems": "INSERT INTO note_problems(note_id, reason, detail) VALUES (?, ?, ?)",
    "chunks": "INSERT INTO chunks(id, note_id, ord, heading_path, start, end, text_sha256) VALUES (?, ?, ?, ?, ?, ?, ?)",
    "fts": _FTS_INSERT,
    "new_terms": "INSERT INTO terms(id, term) VALUES (?, ?)",
    "terms": "INSERT INTO note_terms(note_id, term_ids, tf) VALUES (?, ?, ?)",
    "links": "INSERT INTO links(note_id, target, kind, heading, alias, source, alt_target) VALUES (?, ?, ?, ?, ?, ?, ?)",
}
_BATCH_NOTES = 256
_BATCH_CHUNKS = 4096
POOL_MIN_NOTES = 1000      # fewer notes than this are prepared in process: forking would not pay off
_POOL_TASK_NOTES = 64
_ORPHAN_POLL_S = 0.2
# json.dumps(value, ensure_ascii=False, sort_keys=True) without building an encoder per call
_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode

Batch = list[tuple[str, list[tuple]]]
# rel_path, path, content and sha256 (None: not read yet), mtime_ns, size
NoteFile = tuple[str, str, "bytes | None", "str | None", int, int]


# ---------------------------------------------------------------- prepare (pure, may run in a worker)

@dataclass(frozen=True)
class PreparedNote:
    """Everything one note puts in the index except the ids the writer assigns.

    Compact on purpose (chunk texts are offsets into ``body``, word counts are flat), since a
    worker process pickles it back to the builder.
    """

    rel_path: str
    values: tuple                    # the notes row after ``id``, in NOTE_COLUMNS order
    tags: tuple[str, ...]
    problems: tuple[tuple[str, str], ...]                 # (reason, detail)
    links: tuple[tuple, ...]         # (target, kind, heading, alias, source, alt_target)
    body: str
    chunks: tuple[tuple[int, str, int, int, str, str], ...]  # ord, heading_path JSON, start, end, sha256, heading cell
    first_cells: tuple[str, str, str]                     # title, description, tags: FTS cells of chunk 0
    terms: FieldTerms


@dataclass(frozen=True)
class SkippedFile:
    """A file that was read but not indexed (binary): a ``skipped_files`` row."""

    row: tuple[str, str, int, int, str, str]   # rel_path, sha256, mtime_ns, size, reason, detail


def _field_texts(note: ParsedNote) -> tuple[str, ...]:
    """The note's text per FTS column (FTS_COLUMNS order): what its term vector counts."""
    return (" ".join((note.title, *note.aliases)), note.description or "", " ".join(note.tags),
            "\n".join(headings(note.body)), note.body)


def _chunk_rows(note: ParsedNote, chunk_size: int, chunk_overlap: int) -> tuple[tuple, ...]:
    """(ord, heading_path JSON, start, end, sha256, heading cell) per chunk; a note without a body
    still gets one empty chunk so that its title and tags are searchable."""
    chunks = chunk_body(note.body, size=chunk_size, overlap=chunk_overlap)
    if not chunks:
        return ((0, "[]", 0, 0, hashlib.sha256(b"").hexdigest(), ""),)
    rows = []
    prev_path: tuple[str, ...] | None = None
    for chunk in chunks:
        path = chunk.heading_path
        cell = path[-1] if (path and path != prev_path) else ""   # a heading on its section's first chunk
        prev_path = path
        rows.append((chunk.ord, _json(list(path)), chunk.start, chunk.end,
                     hashlib.sha256(chunk.text.encode("utf-8")).hexdigest(), cell))
    return tuple(rows)


def read_source(rel_path: str, path: str | os.PathLike[str]) -> tuple[bytes, str]:
    """(content, sha256) of a vault file; a file gone since the scan is a ``SourceChangedError``."""
    try:
        return read_file(path)
    except FileNotFoundError:
        raise SourceChangedError(f"{rel_path} disappeared during the build", paths=[rel_path]) from None


def prepare_note(item: NoteFile, *, chunk_size: int, chunk_overlap: int,
                 tokenizer: str) -> PreparedNote | SkippedFile:
    """Read (unless the content is given), parse, chunk and count one note file."""
    rel_path, path, data, sha256, mtime_ns, size = item
    if data is None or sha256 is None:
        data, sha256 = read_source(rel_path, path)
    note = parse_note(rel_path, data)
    if note is None:
        problem = skip_problem(rel_path, data)
        return SkippedFile((rel_path, sha256, mtime_ns, size, problem.reason, problem.detail))
    d = note.dates
    values = (
        note.rel_path, note.title, note.description, note.note_type, _json(list(note.tags)),
        d.get("created"), d.get("updated"), d.get("source_date"), d.get("date"), note.volatility,
        note.status, note.classification, note.namespace, _json(list(note.supersedes)),
        _json(list(note.superseded_by)), _json(list(note.aliases)), note.frontmatter_id,
        _json(note.extra), sha256, mtime_ns, size, len(note.body),
    )
    texts = _field_texts(note)
    return PreparedNote(
        rel_path=rel_path, values=values, tags=note.tags,
        problems=tuple((p.reason, p.detail) for p in note.problems),
        links=tuple((ln.target, ln.kind, ln.heading, ln.alias, ln.source, ln.alt_target) for ln in note.links),
        body=note.body, chunks=_chunk_rows(note, chunk_size, chunk_overlap), first_cells=texts[:3],
        terms=field_terms(analyzer_for(tokenizer), texts))


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_ORPHAN_POLL_S)
    os._exit(1)


def _worker_init(parent: int) -> None:
    """A forked worker holds the builder's open files, the build lock among them: if the builder
    dies, the worker must exit at once or the lock would outlive it. It also must not use the
    parent's SQLite connections, so it makes its own analyzer."""
    analysis.forget_inherited_analyzers()
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def default_workers(n_notes: int) -> int:
    """Worker processes for preparing ``n_notes``: 1 (in process) for small batches or without fork."""
    if n_notes < POOL_MIN_NOTES or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


@contextmanager
def prepared_notes(items: Sequence[NoteFile], *, chunk_size: int, chunk_overlap: int, tokenizer: str,
                   workers: int) -> Iterator[Iterator[PreparedNote | SkippedFile]]:
    """``prepare_note`` over ``items``, in order: in process, or in ``workers`` forked processes.

    Enter it BEFORE starting threads (a ``NoteWriter``): the workers are forked on entry. Fork
    (not spawn) keeps the start cheap; the workers only parse, they never touch SQLite.
    """
    prepare = partial(prepare_note, chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenizer)
    if workers <= 1:
        yield map(prepare, items)
        return
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_worker_init, initargs=(os.getpid(),)) as pool:
        yield pool.imap(prepare, items, chunksize=_POOL_TASK_NOTES)


# ---------------------------------------------------------------- write (builder process)

class RowSink:
    """Runs batches of INSERTs, in order, on one worker thread using the caller's connection.

    The connection must be opened with ``check_same_thread=False``, and the caller must not
    use it until ``close`` returns; the caller's transaction stays the caller's (the sink only
    inserts). A failed insert stops the sink: its error is raised by the next ``put`` or by
    ``close``, never dropped.
    """

    def __init__(self, conn: sqlite3.Connection, *, depth: int = 2) -> None:
        self.conn = conn
        self._queue: queue.Queue[Batch | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._abort = False
        self._thread = threading.Thread(target=self._run, name="vaultsearch-row-sink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is not None or self._abort:
                continue  # keep draining so that a blocked put() returns; nothing more is written
            try:
                for sql, rows in batch:
                    if rows:
                        self.conn.executemany(sql, rows)
            except Exception as exc:  # handed over to the caller's thread, which raises it
                self._error = exc

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def put(self, batch: Batch) -> None:
        """Queue one batch (blocks while ``depth`` batches are waiting)."""
        self._raise_error()
        self._queue.put(batch)

    def close(self, *, abort: bool = False) -> None:
        """Wait until every queued batch is written (or, with ``abort``, skipped); raise a write error."""
        self._abort = abort
        self._queue.put(None)
        self._thread.join()
        self._raise_error()


class NoteWriter:
    """Gives prepared notes their ids and term vectors and hands their rows, a batch at a time,
    to a ``RowSink``.

    Use it as a context manager: a clean exit writes the last batch and waits for every
    write to finish; an exception stops the writes and propagates (the caller's
    transaction then rolls back). The connection must allow use from another thread.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.next_note_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM notes").fetchone()[0]
        self.next_chunk_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
        self.vectors = TermVectors(dict(conn.execute("SELECT term, id FROM terms")), len(FTS_COLUMNS))
        self._rows: dict[str, list[tuple]] = {name: [] for name in _INSERTS}
        self._terms: list[tuple[int, FieldTerms]] = []
        self.chunks_added = 0
        self._sink = RowSink(conn)

    def __enter__(self) -> NoteWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        failed = exc_type is not None
        try:
            if not failed:
                self._flush()
        except BaseException:
            failed = True
            raise
        finally:
            self._sink.close(abort=failed)

    def add(self, note: PreparedNote) -> int:
        """Queue the rows of one note; returns its note id."""
        note_id = self.next_note_id
        self.next_note_id += 1
        rows = self._rows
        rows["notes"].append((note_id, *note.values))
        rows["tags"].extend((tag, note_id) for tag in note.tags)
        rows["problems"].extend((note_id, *p) for p in note.problems)
        rows["links"].extend((note_id, *ln) for ln in note.links)
        self._add_chunks(note_id, note)
        self._terms.append((note_id, note.terms))
        if len(self._terms) >= _BATCH_NOTES or len(rows["chunks"]) >= _BATCH_CHUNKS:
            self._flush()
        return note_id

    def _add_chunks(self, note_id: int, note: PreparedNote) -> None:
        chunk_rows, fts_rows, body = self._rows["chunks"], self._rows["fts"], note.body
        title, description, tags = note.first_cells
        cid = self.next_chunk_id
        for ord_, path_json, start, end, sha, heading in note.chunks:
            chunk_rows.append((cid, note_id, ord_, path_json, start, end, sha))
            if ord_ == 0:
                fts_rows.append((cid, title, description, tags, heading, body[start:end]))
            else:
                fts_rows.append((cid, "", "", "", heading, body[start:end]))
            cid += 1
        self.chunks_added += cid - self.next_chunk_id
        self.next_chunk_id = cid

    def _flush(self) -> None:
        """Turn the queued term counts into term vectors and hand the batch to the sink."""
        rows = self._rows
        if self._terms:
            vectors = self.vectors.vectors([terms for _, terms in self._terms])
            rows["terms"] = [(note_id, tids, tf) for (note_id, _), (tids, tf) in zip(self._terms, vectors)]
            rows["new_terms"] = self.vectors.take_new_terms()
        self._sink.put([(_INSERTS[name], rows[name]) for name in _INSERTS])
        self._rows = {name: [] for name in _INSERTS}
        self._terms = []


def delete_notes(conn: sqlite3.Connection, note_ids: Iterable[int]) -> int:
    """Remove notes and everything derived from them. Returns the number removed."""
    ids = [(i,) for i in note_ids]
    if not ids:
        return 0
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS gone(id INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.gone")
    conn.executemany("INSERT INTO temp.gone(id) VALUES (?)", ids)
    gone_chunks = "SELECT id FROM chunks WHERE note_id IN (SELECT id FROM temp.gone)"
    conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({gone_chunks})")
    conn.execute(f"DELETE FROM chunk_vectors WHERE chunk_id IN ({gone_chunks})")
    for table, col in (("chunks", "note_id"), ("note_tags", "note_id"), ("note_problems", "note_id"),
                       ("note_terms", "note_id"), ("links", "note_id"), ("notes", "id")):
        conn.execute(f"DELETE FROM {table} WHERE {col} IN (SELECT id FROM temp.gone)")
    conn.execute("DELETE FROM temp.gone")
    return len(ids)


def recompute_edges(conn: sqlite3.Connection) -> tuple[int, int]:
    """Resolve every stored link against the current notes. Returns (edges, unresolved)."""
    notes = [(rel, tuple(json.loads(aliases))) for rel, aliases in conn.execute("SELECT rel_path, aliases FROM notes")]
    id_of = dict(conn.execute("SELECT rel_path, id FROM notes"))
    resolver = LinkResolver(notes)
    rows = []
    unresolved = 0
    for src_id, src_path, target, kind, heading, alias, source, alt in conn.execute(
            "SELECT l.note_id, n.rel_path, l.target, l.kind, l.heading, l.alias, l.source, l.alt_target "
            "FROM links l JOIN notes n ON n.id = l.note_id"):
        dst = resolver.resolve(Link(target=target, kind=kind, heading=heading, alias=alias, source=source,
                                    alt_target=alt), src_path)
        if dst is None:
            unresolved += 1
        rows.append((src_id, id_of.get(dst) if dst else None, kind, target))
    conn.execute("DELETE FROM edges")
    conn.executemany("INSERT INTO edges(src_id, dst_id, kind, target) VALUES (?, ?, ?, ?)", rows)
    return len(rows), unresolved
