"""Write parsed notes into a working index database (and delete them again).

The builder decides *which* notes change; this module knows *how* a note becomes rows:
the notes row, tags, per-note problems, chunks + their FTS5 rows, the sparse term vector
and the links as written. Rows are buffered and written with executemany.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable

import numpy as np

from core.analysis import Analyzer, word_counts
from core.chunking import Chunk, chunk_body, headings
from core.links import LinkResolver
from core.notes import Link, ParsedNote
from core.schema import FTS_COLUMNS, NOTE_COLUMNS

_NOTE_INSERT = f"INSERT INTO notes({', '.join(NOTE_COLUMNS)}) VALUES ({', '.join('?' * len(NOTE_COLUMNS))})"
_FTS_INSERT = (f"INSERT INTO chunks_fts(rowid, {', '.join(FTS_COLUMNS)}) "
               f"VALUES (?{', ?' * len(FTS_COLUMNS)})")
_FIELD = {name: i for i, name in enumerate(FTS_COLUMNS)}
_TF_MAX = np.iinfo(np.uint16).max
_FLUSH_TERMS_EVERY = 2000


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


class NoteWriter:
    """Buffers the rows of new notes; ``flush`` writes them in one go."""

    def __init__(self, conn: sqlite3.Connection, analyzer: Analyzer, *, chunk_size: int,
                 chunk_overlap: int) -> None:
        self.conn = conn
        self.analyzer = analyzer
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.next_note_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM notes").fetchone()[0]
        self.next_chunk_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
        self.term_ids: dict[str, int] = dict(conn.execute("SELECT term, id FROM terms"))
        self._new_terms: list[tuple[int, str]] = []
        self._word_tids: dict[str, tuple[int, ...]] = {}
        self._pending_terms: list[tuple[int, list[Counter[str]]]] = []
        self._rows: dict[str, list[tuple]] = {k: [] for k in
                                              ("notes", "tags", "problems", "chunks", "fts", "terms", "links")}
        self.chunks_added = 0

    def add(self, note: ParsedNote, *, sha256: str, mtime_ns: int, size: int) -> int:
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
        self._add_terms(note_id, fields, note.body)
        return note_id

    @staticmethod
    def _fields(note: ParsedNote) -> dict[str, str]:
        return {
            "title": " ".join((note.title, *note.aliases)),
            "description": note.description or "",
            "tags": " ".join(note.tags),
            "headings": "\n".join(headings(note.body)),
        }

    def _add_chunks(self, note_id: int, note: ParsedNote, fields: dict[str, str]) -> None:
        chunks: list[Chunk] = chunk_body(note.body, size=self.chunk_size, overlap=self.chunk_overlap)
        if not chunks:  # a note with no body still gets one (empty) chunk so title/tags are searchable
            chunks = [Chunk(ord=0, heading_path=(), text="", start=0, end=0)]
        prev_path: tuple[str, ...] | None = None
        for chunk in chunks:
            cid = self.next_chunk_id
            self.next_chunk_id += 1
            first = chunk.ord == 0
            new_section = chunk.heading_path != prev_path
            prev_path = chunk.heading_path
            self._rows["chunks"].append((cid, note_id, chunk.ord, _json(list(chunk.heading_path)), chunk.start,
                                         chunk.end, hashlib.sha256(chunk.text.encode("utf-8")).hexdigest()))
            self._rows["fts"].append((
                cid,
                fields["title"] if first else "",
                fields["description"] if first else "",
                fields["tags"] if first else "",
                chunk.heading_path[-1] if (new_section and chunk.heading_path) else "",
                chunk.text,
            ))
        self.chunks_added += len(chunks)

    def _add_terms(self, note_id: int, fields: dict[str, str], body: str) -> None:
        """Queue the note's per-field word counts; terms are resolved in bulk at flush."""
        counts = [word_counts(body if name == "body" else fields[name]) for name in FTS_COLUMNS]
        self._pending_terms.append((note_id, counts))
        if len(self._pending_terms) >= _FLUSH_TERMS_EVERY:
            self._resolve_terms()

    def _word_term_ids(self, words: set[str]) -> dict[str, tuple[int, ...]]:
        """word -> FTS5 term ids, assigning ids to terms never seen before."""
        cache = self._word_tids
        new = [w for w in words if w not in cache]
        if new:
            mapping = self.analyzer.map_words(new)
            for w in new:
                ids = []
                for term in mapping[w]:
                    tid = self.term_ids.get(term)
                    if tid is None:
                        tid = self.term_ids[term] = len(self.term_ids) + 1
                        self._new_terms.append((tid, term))
                    ids.append(tid)
                cache[w] = tuple(ids)
        return cache

    def _resolve_terms(self) -> None:
        """Turn queued word counts into id-sorted sparse vectors (one row per note)."""
        words: set[str] = set()
        for _, counts in self._pending_terms:
            for c in counts:
                words.update(c)
        wt = self._word_term_ids(words)
        for note_id, counts in self._pending_terms:
            tids: list[int] = []
            cols: list[int] = []
            vals: list[int] = []
            for col, c in enumerate(counts):
                for w, n in c.items():
                    for tid in wt[w]:
                        tids.append(tid)
                        cols.append(col)
                        vals.append(n)
            uniq, inv = np.unique(np.asarray(tids, dtype=np.int32), return_inverse=True)
            tf = np.zeros((uniq.shape[0], len(FTS_COLUMNS)), dtype=np.int64)
            np.add.at(tf, (inv, np.asarray(cols, dtype=np.int64)), np.asarray(vals, dtype=np.int64))
            packed = np.minimum(tf, _TF_MAX).astype("<u2")
            self._rows["terms"].append((note_id, uniq.astype("<i4").tobytes(), packed.tobytes()))
        self._pending_terms = []

    def flush(self) -> None:
        self._resolve_terms()
        c = self.conn
        c.executemany(_NOTE_INSERT, self._rows["notes"])
        c.executemany("INSERT INTO note_tags(tag, note_id) VALUES (?, ?)", self._rows["tags"])
        c.executemany("INSERT INTO note_problems(note_id, reason, detail) VALUES (?, ?, ?)", self._rows["problems"])
        c.executemany("INSERT INTO chunks(id, note_id, ord, heading_path, start, end, text_sha256) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)", self._rows["chunks"])
        c.executemany(_FTS_INSERT, self._rows["fts"])
        c.executemany("INSERT INTO terms(id, term) VALUES (?, ?)", self._new_terms)
        c.executemany("INSERT INTO note_terms(note_id, term_ids, tf) VALUES (?, ?, ?)", self._rows["terms"])
        c.executemany("INSERT INTO links(note_id, target, kind, heading, alias, source, alt_target) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)", self._rows["links"])
        self._new_terms = []
        self._rows = {k: [] for k in self._rows}


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
