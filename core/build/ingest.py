"""Turn note files into rows of a working index database (and delete them again).

The builder decides *which* notes change; this module knows *how* a note becomes rows:
the notes row, tags, per-note problems, its FTS5 row, chunks, the sparse term vector
and the links as written. Three stages, so that two CPU cores can share the work:

    prepare_notes    files -> PreparedBatch: read, hash, parse, chunk, count words. Pure
                     apart from a per-process WordTable, so ``core.build.prepare_pool``
                     can run it in forked worker processes while this process writes.
    NoteWriter       assigns note and chunk ids, turns word counts into term vectors
                     (``core.ranking.analysis.TermVectors``: FTS5's tokens) and inserts the rows
                     a batch at a time with executemany.

(A writer *thread* was tried and measured slower: executemany takes the GIL back for every
row it binds, so the two threads mostly traded the GIL; processes are what overlap.)
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from core.build.bounds import bound_vocabulary
from core.errors import SourceChangedError
from core.index.tables import notes as notes_table
from core.index.tables import text_blocks
from core.index.tables.chunks import HeadingIds, insert_chunks, insert_headings, next_chunk_id
from core.index.tables.links import insert_links
from core.index.tables.meta import get_meta, set_meta
from core.index.tables.names import insert_names
from core.index.tables.notes import insert_notes, next_note_id
from core.index.tables.notes_fts import FTS_COLUMNS, insert_fts_rows, insert_text_blocks
from core.index.tables.problems import insert_note_problems
from core.index.tables.skipped_files import insert_skipped
from core.index.tables.tags import insert_tags
from core.index.tables.terms import (
    CHUNK_FIELD_UNITS,
    insert_chunk_terms,
    insert_note_terms,
    insert_terms,
    next_term_id,
    term_ids,
)
from core.ranking.analysis import LanguageAnalyzer, LocalVector, TermVectors, WordTable, language_tag
from core.ranking.filters import utc_microseconds
from core.ranking.languages import note_language
from core.vault.chunking import chunk_body, headings
from core.vault.gitrun import BlobRef
from core.vault.names import name_rows
from core.vault.notes import ParsedNote, names_text, parse_note, skip_problem
from core.vault.scan import FileRefusedError, read_file

# One batch's inserts, in the order they run (notes first: the other rows name them).
_INSERTS = {
    "notes": insert_notes,
    "tags": insert_tags,
    "names": insert_names,
    "problems": insert_note_problems,
    "headings": insert_headings,
    "chunks": insert_chunks,
    "blocks": insert_text_blocks,
    "fts": insert_fts_rows,
    "new_terms": insert_terms,
    "terms": insert_note_terms,
    "chunk_terms": insert_chunk_terms,
    "links": insert_links,
    "skipped": insert_skipped,
}
_BATCH_NOTES = 256
_BATCH_CHUNKS = 4096

# rel_path, path, content and sha256 (None: not read yet), mtime_ns, size
NoteFile = tuple[str, str, "bytes | BlobRef | None", "str | None", int, int]


# ---------------------------------------------------------------- prepare (may run in a worker)


@dataclass(frozen=True)
class PreparedNote:
    """Everything one note puts in the index except the ids the writer assigns.

    Compact on purpose (chunks are offsets into the body, term counts are packed), since
    a worker process pickles it back to the builder.
    """

    values: tuple  # the notes row after ``id``, in NOTE_COLUMNS order
    tags: tuple[str, ...]
    problems: tuple[tuple[str, str], ...]  # (reason, detail)
    links: tuple[tuple, ...]  # (target, kind, heading, source, alt_target)
    cells: tuple[str, ...]  # the notes_fts row: the texts of FTS_COLUMNS (the body last)
    text: tuple[int, int, int]  # its compressed cell in the batch's text blocks: (block index, start, size)
    chunks: tuple[tuple[int, str, int, int, bytes], ...]  # ord, heading_path JSON, start, end, SHA-256 digest
    terms: LocalVector
    chunk_terms: LocalVector  # its chunks' vectors, one group (``_pieces`` says what)
    language: str = ""  # the language its terms were analysed in (core.ranking.languages)
    names: tuple[tuple[str, str, int], ...] = ()  # (name key, rule, ord) of its names (core.vault.names)


@dataclass(frozen=True)
class SkippedFile:
    """A file that was read but not indexed (binary): a ``skipped_files`` row."""

    row: tuple[str, str, int, int, str, str]  # rel_path, sha256, mtime_ns, size, reason, detail


@dataclass(frozen=True)
class PreparedBatch:
    """Prepared notes, in input order, with the words their process numbered meanwhile."""

    table: tuple[int, str]  # (pid, build): whose WordTable numbered the words
    new_words: list[bytes]
    notes: list[PreparedNote | SkippedFile | UnreadableFile]
    # its notes' compressed cells stored back to back in blocks (core.index.tables.text_blocks)
    text_blocks: tuple[bytes, ...] = ()


_tables: dict[str, WordTable] = {}  # build -> this process's WordTable for it


def field_texts(note: ParsedNote) -> tuple[str, ...]:
    """The note's text per FTS column (FTS_COLUMNS order): what its term vector counts."""
    return (
        names_text(note),
        note.description or "",
        " ".join(note.tags),
        "\n".join(headings(note.body)),
        note.body,
    )


def _chunk_rows(note: ParsedNote, chunk_size: int, chunk_overlap: int) -> tuple[tuple[tuple, ...], list[str]]:
    """The chunks rows (ord, heading_path JSON, start, end) and each chunk's heading cell
    (its section's heading on the section's first chunk, else ""). A note without a body still
    gets one empty chunk, so that every note has a passage to show."""
    chunks = chunk_body(note.body, size=chunk_size, overlap=chunk_overlap)
    if not chunks:
        return ((0, "[]", 0, 0),), [""]
    rows, cells = [], []
    prev_path: tuple[str, ...] | None = None
    path_json = ""
    for chunk in chunks:
        heading = ""
        if chunk.heading_path != prev_path:  # a section's first chunk; its chunks share the path's JSON
            prev_path, path_json = chunk.heading_path, notes_table.json_cell(chunk.heading_path)
            heading = chunk.heading_path[-1] if chunk.heading_path else ""
        rows.append((chunk.ord, path_json, chunk.start, chunk.end))
        cells.append(heading)
    return tuple(rows), cells


def _splits_words(body: str, spans: list[tuple[int, int]]) -> bool:
    """True unless the chunks' own stretches (each chunk from where the previous one ended)
    tile the body's words exactly: every gap between them is whitespace and no boundary
    falls inside a word (a hard cut of an over-long word)."""
    prev = 0
    for start, end in spans:
        if start > prev:
            if body[prev:start].strip():
                return True
        elif 0 < prev < len(body) and not body[prev - 1].isspace() and not body[prev].isspace():
            return True  # this chunk's own stretch would start inside a word
        prev = max(prev, end)
    return bool(body[prev:].strip())


def _pieces(doc: int, texts: tuple[str, ...], rows: tuple[tuple, ...], cells: list[str]) -> list[tuple[str, tuple]]:
    """The pieces of text that make up a note's vector (document ``doc``) and its chunks' vectors
    (documents ``doc + 1 + ord``), for ``WordTable.count_pieces``.

    A chunk vector counts the note's title, description and tags on chunk 0, its heading cell and
    its text, overlap included. Each stretch of body text is cut into words once: a chunk's own
    stretch counts for the note body and the chunk, the overlap it repeats for the chunk only.
    """
    nf, first = len(FTS_COLUMNS), doc + 1
    head, body_f = FTS_COLUMNS.index("headings"), FTS_COLUMNS.index("body")
    pieces: list[tuple[str, tuple]] = [(texts[f], (doc * nf + f, first * nf + f)) for f in range(head)]
    pieces.append((texts[head], (doc * nf + head,)))
    pieces += [(cell, ((first + i) * nf + head,)) for i, cell in enumerate(cells) if cell]
    body = texts[body_f]
    spans = [(row[2], row[3]) for row in rows]
    if _splits_words(body, spans):  # rare: count the body and each chunk text on their own
        pieces.append((body, (doc * nf + body_f,)))
        pieces += [(body[s:e], ((first + i) * nf + body_f,)) for i, (s, e) in enumerate(spans)]
        return pieces
    prev = 0
    for i, (start, end) in enumerate(spans):
        target = (first + i) * nf + body_f
        if start < prev:
            pieces.append((body[start:prev], (target,)))
        pieces.append((body[max(start, prev) : end], (doc * nf + body_f, target)))
        prev = max(prev, end)
    return pieces


def read_source(rel_path: str, path: str | os.PathLike[str], root: str, limit: int | None = None) -> tuple[bytes, str]:
    """(content, sha256) of a vault file, read safely inside the vault's real ``root``, and no more than
    the build's note size ``limit`` (a note grown past it since the scan is refused as ``too_large``
    having read ``limit + 1`` bytes, not read whole); a file gone since the scan is a
    ``SourceChangedError``; any other ``OSError`` is the caller's problem."""
    try:
        return read_file(path, root=root, limit=limit)
    except FileNotFoundError:
        raise SourceChangedError(f"{rel_path} disappeared during the build", paths=[rel_path]) from None


@dataclass(frozen=True)
class UnreadableFile:
    """A scanned file that could not be read (permissions, not a regular file, left the vault): not
    indexed, reported as a build problem, and read again by the next build."""

    rel_path: str
    reason: str
    detail: str


def sample_bytes(items: Sequence[NoteFile], root: str, limit: int | None) -> Iterator[bytes]:
    """The content of each of ``items`` (read unless given); one that cannot be read is left out: the
    build's own read of it reports it (``_parse``)."""
    for rel_path, path, data, _, _, _ in items:
        if isinstance(data, bytes):
            yield data
            continue
        try:
            yield data.load()[0] if isinstance(data, BlobRef) else read_source(rel_path, path, root, limit)[0]
        except (FileRefusedError, OSError):
            continue  # reported where the note is read for the index


def _parse(item: NoteFile, root: str, limit: int | None) -> tuple[str, ParsedNote | SkippedFile | UnreadableFile]:
    """(sha256, parsed note) of one file, read unless its content is given; a binary file is skipped,
    an unreadable one reported."""
    rel_path, path, data, sha256, mtime_ns, size = item
    if not isinstance(data, bytes) or sha256 is None:  # not read yet (a git blob is read here, one at a time)
        try:
            data, sha256 = data.load() if isinstance(data, BlobRef) else read_source(rel_path, path, root, limit)
        except FileRefusedError as exc:
            return "", UnreadableFile(rel_path, exc.reason, exc.detail)
        except FileNotFoundError:
            raise
        except OSError as exc:
            return "", UnreadableFile(rel_path, "unreadable", f"{type(exc).__name__}: {exc.strerror or exc}")
    note = parse_note(rel_path, data)
    if note is None:
        problem = skip_problem(rel_path, data)
        return sha256, SkippedFile((rel_path, sha256, mtime_ns, size, problem.reason, problem.detail))
    return sha256, bound_vocabulary(note)


def _prepared(
    item: NoteFile,
    sha256: str,
    note: ParsedNote,
    texts: tuple[str, ...],
    chunks: tuple[tuple, ...],
    terms: LocalVector,
    chunk_terms: LocalVector,
    language: str,
    text: tuple[int, int, int],
) -> PreparedNote:
    mtime_ns, size = item[4], item[5]
    d = note.dates
    values = (
        note.rel_path,
        note.title,
        note.description,
        note.note_type,
        notes_table.json_cell(note.tags),
        d.get("created"),
        d.get("updated"),
        d.get("source_date"),
        d.get("date"),
        note.volatility,
        note.status,
        note.classification,
        note.namespace,
        notes_table.json_cell(note.supersedes),
        notes_table.json_cell(note.superseded_by),
        notes_table.json_cell(note.aliases),
        note.frontmatter_id,
        notes_table.extra_cell(note.extra, note.frontmatter_id),
        sha256,
        mtime_ns,
        size,
        len(note.body),
        note.body_line,
        *(_utc_key(d.get(name)) for name in ("created", "updated", "source_date", "date")),
        note.date_keys.get("updated"),
    )
    return PreparedNote(
        values=values,
        tags=note.tags,
        problems=tuple((p.reason, p.detail) for p in note.problems),
        links=tuple((ln.target, ln.kind, ln.heading, ln.source, ln.alt_target) for ln in note.links),
        cells=texts,
        text=text,
        chunks=chunks,
        terms=terms,
        chunk_terms=chunk_terms,
        language=language,
        names=name_rows(note.names),
    )


def _utc_key(iso: str | None) -> int | None:
    return None if iso is None else utc_microseconds(iso)


def prepare_notes(
    items: Sequence[NoteFile],
    *,
    chunk_size: int,
    chunk_overlap: int,
    build: str,
    root: str,
    language: str = "en",
    max_bytes: int | None = None,
    zdict: bytes | None = None,
) -> PreparedBatch:
    """Read (inside the vault's real ``root``), parse, chunk and count a batch of note files. Words are
    counted for the batch at once by this process's ``WordTable`` for ``build``; each note's words are
    tagged with its language unless it is the vault default ``language`` (``core.ranking.languages.note_language``);
    ``zdict``: the segment's text dictionary each note's cell is compressed with."""
    table = _tables.get(build)
    if table is None:
        table = _tables[build] = WordTable(len(FTS_COLUMNS))
    parsed, notes, pieces, groups, tags = [], [], [], [], []
    n_docs = 0
    for item in items:  # parse, texts and chunks of one note in a row: they share its cached block scan
        sha, note = _parse(item, root, max_bytes)
        parsed.append(note)
        if isinstance(note, ParsedNote):
            texts = field_texts(note)
            rows, cells = _chunk_rows(note, chunk_size, chunk_overlap)
            lang = note_language(
                note.extra.get("lang") or note.extra.get("language"), texts[0] + "\n" + note.body, language
            )
            notes.append((item, sha, note, texts, rows, lang))
            mine = _pieces(n_docs, texts, rows, cells)
            pieces += mine
            tags += [language_tag(lang, language)] * len(mine)
            groups.append((n_docs + 1, n_docs + 1 + len(rows)))
            n_docs += 1 + len(rows)
    # each note's vector, then its chunks' as one weighted group
    new_words, vectors = table.count_pieces(n_docs, pieces, groups, CHUNK_FIELD_UNITS, tags)
    packed = text_blocks.pack(text_blocks.encode_cell(n[3], len(FTS_COLUMNS), zdict) for n in notes)
    ready = {
        id(note): _prepared(item, sha, note, texts, rows, vectors[2 * i], vectors[2 * i + 1], lang, packed.places[i])
        for i, (item, sha, note, texts, rows, lang) in enumerate(notes)
    }
    done = [ready[id(note)] if isinstance(note, ParsedNote) else note for note in parsed]
    return PreparedBatch((os.getpid(), build), new_words, done, tuple(packed.blocks))


def forget_word_tables(build: str | None = None) -> None:
    """Drop this process's word table of ``build``, or every one (a forked worker starts with none)."""
    if build is None:
        _tables.clear()
    else:
        _tables.pop(build, None)


# ---------------------------------------------------------------- write (builder process)


class NoteWriter:
    """Gives prepared notes their ids and term vectors and inserts their rows, a batch at a time.

    Call ``flush`` after the last batch. It writes inside the caller's transaction.
    """

    def __init__(self, conn: sqlite3.Connection, analyzer: LanguageAnalyzer) -> None:
        self.next_note_id = next_note_id(conn)
        self.next_chunk_id = next_chunk_id(conn)
        self.next_block = text_blocks.next_block_id(conn)
        self.headings = HeadingIds(conn)
        first_term = next_term_id(conn)
        # a build that starts from an empty dictionary (a cold build) knows every term it meets: the
        # terms it gave ids to; only a carried-over index is asked for the ids it already has
        known = partial(term_ids, conn) if first_term > 1 else None
        self.vectors = TermVectors(analyzer, len(FTS_COLUMNS), next_id=first_term, known=known)
        self._rows: dict[str, list[tuple]] = {name: [] for name in _INSERTS}
        self._terms: list[tuple[int, tuple[int, str], LocalVector]] = []  # note id, table, vector
        self._chunk_terms: list[tuple[int, tuple[int, str], LocalVector]] = []  # note id, table, vector
        # every language a note of the index was analysed in (meta ``languages``: the query is analysed in each)
        self.languages: set[str] = set(get_meta(conn).get("languages", ()))
        self._languages_written = set(self.languages)
        self.conn = conn
        self.unreadable: list[UnreadableFile] = []
        # rel_path -> the id a note re-inserted at that path keeps (its old one); ``kept``: the ids so reused
        self.keep_ids: dict[str, int] = {}
        self.kept: list[int] = []

    def add_batch(self, batch: PreparedBatch) -> None:
        """Queue the rows of a prepared batch (skipped files become ``skipped_files`` rows, unreadable
        ones are kept in ``unreadable`` for the build report)."""
        self.vectors.register(batch.table, batch.new_words)
        first_block = self.next_block
        self._rows["blocks"].extend((first_block + i, data) for i, data in enumerate(batch.text_blocks))
        self.next_block += len(batch.text_blocks)
        for note in batch.notes:
            if isinstance(note, SkippedFile):
                self._rows["skipped"].append(note.row)
            elif isinstance(note, UnreadableFile):
                self.unreadable.append(note)
            else:
                self._add(note, batch.table, first_block)
        if len(self._terms) >= _BATCH_NOTES or len(self._rows["chunks"]) >= _BATCH_CHUNKS:
            self.flush()

    def _add(self, note: PreparedNote, table: tuple[int, str], first_block: int) -> None:
        note_id = self.keep_ids.pop(note.values[0], None)  # values[0]: rel_path (NOTE_COLUMNS after id)
        if note_id is None:
            note_id = self.next_note_id
            self.next_note_id += 1
        else:
            self.kept.append(note_id)
        rows = self._rows
        rows["notes"].append((note_id, *note.values))
        rows["tags"].extend((tag, note_id) for tag in note.tags)
        rows["names"].extend((key, note_id, rule, ord_) for key, rule, ord_ in note.names)
        rows["problems"].extend((note_id, *p) for p in note.problems)
        rows["links"].extend((note_id, *ln) for ln in note.links)
        block, start, size = note.text
        rows["fts"].append((note_id, first_block + block, start, size, *note.cells))
        cid = self.next_chunk_id
        heading_id = self.headings.id_of
        rows["chunks"].extend((cid + i, note_id, c[0], heading_id(c[1]), *c[2:]) for i, c in enumerate(note.chunks))
        self._chunk_terms.append((note_id, table, note.chunk_terms))
        self.next_chunk_id = cid + len(note.chunks)
        self._terms.append((note_id, table, note.terms))
        self.languages.add(note.language)

    def flush(self) -> None:
        """Turn the queued word counts into term vectors and insert every queued row."""
        rows = self._rows
        if self._terms:
            vectors = self.vectors.vectors([(table, local) for _, table, local in self._terms])
            rows["terms"] = [(nid, ids, tf) for (nid, _, _), (ids, tf, _) in zip(self._terms, vectors)]
        if self._chunk_terms:
            vectors = self.vectors.vectors([(table, local) for _, table, local in self._chunk_terms], columns=1)
            rows["chunk_terms"] = [
                (nid, lengths, ids, tf) for (nid, _, _), (ids, tf, lengths) in zip(self._chunk_terms, vectors)
            ]
        rows["new_terms"] = self.vectors.take_new_terms()
        rows["headings"] = self.headings.take_new()
        for name, insert in _INSERTS.items():
            if rows[name]:
                insert(self.conn, rows[name])
        self._rows = {name: [] for name in _INSERTS}
        self._terms, self._chunk_terms = [], []
        if self.languages != self._languages_written:
            set_meta(self.conn, {"languages": sorted(self.languages)})
            self._languages_written = set(self.languages)
