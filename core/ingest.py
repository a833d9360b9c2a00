"""Write parsed notes into a working index database (and delete them again).

The builder decides *which* notes change; this module knows *how* a note becomes rows:
the notes row, tags, per-note problems, chunks + their FTS5 rows, the sparse term vector
and the links as written.

Rows are buffered per batch of notes and written by a ``RowSink``: one worker thread that
runs the batch's ``executemany`` calls on the build connection. SQLite releases the GIL
while it steps a statement (FTS5 tokenising and writing the chunks is most of the write
cost), so the database work of one batch overlaps the parsing of the next.
"""

from __future__ import annotations

import hashlib
import json
import queue
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable
from types import TracebackType

from core.analysis import Analyzer, TermVectors, word_counts
from core.chunking import Chunk, chunk_body, headings
from core.links import LinkResolver
from core.notes import Link, ParsedNote
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
# json.dumps(value, ensure_ascii=False, sort_keys=True) without building an encoder per call
_encode_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


def _json(value: object) -> str:
    return _encode_json(value)


Batch = list[tuple[str, list[tuple]]]


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
    """Turns parsed notes into rows and hands them, a batch at a time, to a ``RowSink``.

    Use it as a context manager: a clean exit writes the last batch and waits for every
    write to finish; an exception stops the writes and propagates (the caller's
    transaction then rolls back). The connection must allow use from another thread.
    """

    def __init__(self, conn: sqlite3.Connection, analyzer: Analyzer, *, chunk_size: int,
                 chunk_overlap: int) -> None:
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.next_note_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM notes").fetchone()[0]
        self.next_chunk_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
        self.vectors = TermVectors(analyzer, dict(conn.execute("SELECT term, id FROM terms")), len(FTS_COLUMNS))
        self._rows: dict[str, list[tuple]] = {name: [] for name in _INSERTS}
        self._counts: list[tuple[int, list[Counter[str]]]] = []
        self._heading_json: dict[tuple[str, ...], str] = {}
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

    def add(self, note: ParsedNote, *, sha256: str, mtime_ns: int, size: int) -> int:
        """Queue the rows of one note; returns its note id."""
        note_id = self.next_note_id
        self.next_note_id += 1
        d = note.dates
        self._rows["notes"].append((
            note_id, note.rel_path, note.title, note.description, note.note_type, _json(list(note.tags)),
            d.get("created"), d.get("updated"), d.get("source_date"), d.get("date"), note.volatility,
            note.status, note.classification, note.namespace, _json(list(note.supersedes)),
            _json(list(note.superseded_by)), _json(list(note.aliases)), note.frontmatter_id,
            _json(note.extra), sha256, mtime_ns, size, len(note.body),
        ))
        self._rows["tags"].extend((tag, note_id) for tag in note.tags)
        self._rows["problems"].extend((note_id, p.reason, p.detail) for p in note.problems)
        self._rows["links"].extend((note_id, ln.target, ln.kind, ln.heading, ln.alias, ln.source, ln.alt_target)
                                   for ln in note.links)
        fields = self._fields(note)
        self._add_chunks(note_id, note, fields)
        self._counts.append((note_id, [word_counts(fields[name]) for name in FTS_COLUMNS]))
        if len(self._counts) >= _BATCH_NOTES or len(self._rows["chunks"]) >= _BATCH_CHUNKS:
            self._flush()
        return note_id

    @staticmethod
    def _fields(note: ParsedNote) -> dict[str, str]:
        return {
            "title": " ".join((note.title, *note.aliases)),
            "description": note.description or "",
            "tags": " ".join(note.tags),
            "headings": "\n".join(headings(note.body)),
            "body": note.body,
        }

    def _path_json(self, path: tuple[str, ...]) -> str:
        found = self._heading_json.get(path)
        if found is None:
            found = self._heading_json[path] = _json(list(path))
        return found

    def _add_chunks(self, note_id: int, note: ParsedNote, fields: dict[str, str]) -> None:
        chunks: list[Chunk] = chunk_body(note.body, size=self.chunk_size, overlap=self.chunk_overlap)
        if not chunks:  # a note with no body still gets one (empty) chunk so title/tags are searchable
            chunks = [Chunk(ord=0, heading_path=(), text="", start=0, end=0)]
        prev_path: tuple[str, ...] | None = None
        chunk_rows, fts_rows = self._rows["chunks"], self._rows["fts"]
        for chunk in chunks:
            cid = self.next_chunk_id
            self.next_chunk_id += 1
            first = chunk.ord == 0
            path = chunk.heading_path
            new_section = path != prev_path
            prev_path = path
            chunk_rows.append((cid, note_id, chunk.ord, self._path_json(path), chunk.start, chunk.end,
                               hashlib.sha256(chunk.text.encode("utf-8")).hexdigest()))
            fts_rows.append((
                cid,
                fields["title"] if first else "",
                fields["description"] if first else "",
                fields["tags"] if first else "",
                path[-1] if (new_section and path) else "",
                chunk.text,
            ))
        self.chunks_added += len(chunks)

    def _flush(self) -> None:
        """Turn the queued word counts into term vectors and hand the batch to the sink."""
        rows = self._rows
        if self._counts:
            vectors = self.vectors.vectors([counts for _, counts in self._counts])
            rows["terms"] = [(note_id, tids, tf) for (note_id, _), (tids, tf) in zip(self._counts, vectors)]
            rows["new_terms"] = self.vectors.take_new_terms()
        self._sink.put([(_INSERTS[name], rows[name]) for name in _INSERTS])
        self._rows = {name: [] for name in _INSERTS}
        self._counts = []


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
