"""Fill an index's dense vectors: embed the chunks that have none and publish a new generation.

    lock -> verified active generation -> chunks without vectors, newest notes first ->
    embed (read-only connection) -> copy active -> staging -> insert vectors + meta
    ``dense_model`` -> validate -> publish(expected_base=active)

Batches bound the loss of an interrupt: with ``limit`` one call embeds at most ``limit``
chunks and publishes exactly one generation; without it a generation is published every
``publish_every`` chunks or ``publish_seconds`` of embedding (whichever comes first), so a killed or
interrupted run keeps all but the batch in flight, and the next run continues with the chunks still
without a vector (the CLI says so on Ctrl-C). Unchanged
chunks keep their vectors across rebuilds because the builder starts from a byte copy of
the active generation (and drops the vectors of changed notes with their chunks).

What is embedded per chunk (:func:`passage_text`): the note title, the heading path and
the chunk body. The title goes on every chunk because a chunk deep in a note often only
makes sense with it (on SciFact the title carries the claim's subject).

Identical passage texts are embedded once per call (the PowerShell docs repeat each page in
five version folders: 34,572 distinct texts among 93,256 chunks); the copies get the same vector,
kept in a bounded map (``REUSE_BYTES``) across the call's batches. The distinct texts of a batch
go to the model longest first, so each model batch holds similar lengths. The rate of a call
(chunks given a vector per second of embedding) is recorded with each generation it publishes;
``status`` estimates the time left from it.

The meta key ``dense_model`` holds the model identity (:attr:`core.dense.Embedder.identity`)
plus ``model_ref``: the preset name or the absolute model directory, so that a search can
load the same model without being told. Vectors of another identity are dropped, never
mixed with new ones (reported in ``EmbedReport.dropped``).

A generation of several parts (segments, tombstones) is embedded per segment, newest first, without
rewriting the text of the others (``core.build.embed_segments``); a change of model still re-embeds
everything as one segment (the old vectors are dropped, never mixed). A legacy single-file index
(``--in-place``) is updated in place, one transaction per batch.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from core.build import embed_segments
from core.build.incremental import scratch_base
from core.build.lock import build_lock, new_staging_path
from core.build.publish import publish
from core.dense import (
    META_KEY,
    REF_KEY,
    Embedder,
    identity_key,
    load_embedder,
    model_reference,
    stored_identity,
    stored_reference,
)
from core.errors import IndexMissingError, IntegrityError, ValidationError
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, layout_for
from core.index.state import EMBED_RATE_KEY
from core.index.tables.chunk_vectors import (
    count_pending,
    count_vectors,
    delete_all_vectors,
    insert_vectors,
    passages_to_embed,
    vector_problems,
)
from core.index.tables.chunks import count_chunks
from core.index.tables.connection import atomic, set_journal_mode
from core.index.tables.meta import get_meta, set_meta
from core.index.tables.notes import count_notes
from core.index.tables.notes_fts import note_bodies
from core.index.tables.problems import all_problems
from core.index.verify import connect_readonly, resolve
from core.models.installed import default_model
from core.models.presets import DEFAULT_EMBEDDING_MODEL

# Without a limit, publish a generation after this many newly embedded chunks, or after this many seconds of
# embedding (a slow model: BGE-M3 embeds about 0.5 passages/s on 2 cores), whichever comes first.
PUBLISH_EVERY = 2048
PUBLISH_SECONDS = 120.0
# Bytes of vectors one call keeps so identical chunk texts are embedded once (93k MiniLM vectors: 143 MB).
REUSE_BYTES = 256 << 20


@dataclass(frozen=True)
class EmbedReport:
    """What one ``embed_index`` call did."""

    index_kind: str
    generation_id: str | None  # active generation at the end (None: legacy_db)
    generations_published: list[str]
    model_ref: str
    model_name: str
    embedded: int  # chunks given a vector by this call
    reused: int  # of those, chunks whose identical text was embedded once earlier in the call
    chunks: int  # chunks in the index
    remaining: int  # chunks still without vectors
    dropped: int  # vectors of another model identity removed
    dropped_model: dict[str, Any] | None  # the identity they had
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.remaining == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


# ---------------------------------------------------------------- text and identity


def passage_text(title: str, heading_path: str, body: str) -> str:
    """The text embedded for one chunk: note title, heading path (``A > B``), blank line, body."""
    headings = [h for h in json.loads(heading_path or "[]") if h]
    head = "\n".join(x for x in (title.strip(), " > ".join(headings)) if x)
    return f"{head}\n\n{body}" if head else body


# ---------------------------------------------------------------- reading and writing vectors


def pending_chunks(
    conn: sqlite3.Connection, limit: int | None, *, everything: bool = False, skip: Collection[int] = ()
) -> list[tuple[int, str]]:
    """(chunk id, passage text) of chunks without a vector (``everything``: all chunks), newest
    notes first, at most ``limit``; none of the notes ``skip`` lists (a segment's dead notes)."""
    rows = passages_to_embed(conn, None if skip else limit, everything=everything)
    rows = [r for r in rows if r[3] not in skip][:limit] if skip else rows
    bodies = note_bodies(conn, (r[3] for r in rows))
    return [
        (cid, passage_text(title, heading, bodies[nid][start:end])) for cid, title, heading, nid, start, end in rows
    ]


def vector_blob(vector: np.ndarray) -> bytes:
    """The stored form of a vector: float32 little-endian bytes."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def _write_vectors(
    conn: sqlite3.Connection, ids: list[int], vectors: np.ndarray, meta_value: dict[str, Any], drop: bool, dim: int = 0
) -> None:
    """One transaction: drop foreign vectors when asked, insert these, stamp the identity; then, given the
    model's ``dim`` (0: not), :func:`validate_vectors`."""
    with atomic(conn):
        if drop:
            delete_all_vectors(conn)
        insert_vectors(conn, [(cid, vector_blob(v)) for cid, v in zip(ids, vectors)])
        set_meta(conn, {META_KEY: meta_value})
    if dim:
        validate_vectors(conn, dim)


def validate_vectors(conn: sqlite3.Connection, dim: int) -> None:
    """Dense manifest consistency: every vector has ``dim`` floats and a chunk, and a model is named."""
    problems = vector_problems(conn, dim)
    if not get_meta(conn).get(META_KEY):
        problems["dense_model meta missing"] = 1
    if problems:
        raise ValidationError(f"dense vectors fail validation: {problems}", problems=problems)


# ---------------------------------------------------------------- one batch


@dataclass
class _Run:
    """State shared by the batches of one call."""

    embedder: Embedder
    meta_value: dict[str, Any]
    batch_size: int
    bar: Any
    published: list[str] = field(default_factory=list)
    embedded: int = 0
    reused: int = 0  # chunks given the vector of an identical text embedded earlier in this call
    chunks_done: int = 0  # chunks given a vector so far (embedded or reused), for the rate
    reuse: dict[bytes, np.ndarray] = field(default_factory=dict)  # passage-text key -> vector, bounded
    dropped: int = 0
    dropped_model: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def remember(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Keep the vectors of these texts for copies later in the call; the oldest go first past the budget
        (a text whose vector is gone is embedded again, never guessed)."""
        for key, vector in zip(keys, vectors):
            self.reuse[key] = vector
        while self.reuse and len(self.reuse) * vectors.shape[1] * 4 > REUSE_BYTES:
            self.reuse.pop(next(iter(self.reuse)))

    def tick(self, name: str, started: float) -> None:
        self.timings[name] = round(self.timings.get(name, 0.0) + time.perf_counter() - started, 4)


def _needs_drop(conn: sqlite3.Connection, run: _Run) -> bool:
    """True when the index holds vectors (or a stamp) of another identity; records what is dropped."""
    found = stored_identity(get_meta(conn).get(META_KEY))
    if found is None or identity_key(found) == identity_key(run.embedder.identity):
        return False
    run.dropped += count_vectors(conn)
    run.dropped_model = found
    return True


def _text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _embed_pending(
    conn: sqlite3.Connection,
    run: _Run,
    take: int | None,
    drop: bool,
    deadline: float | None = None,
    skip: Collection[int] = (),
) -> tuple[list[int], np.ndarray]:
    """Embed up to ``take`` chunks still to do (all of them when the old vectors are dropped).

    Identical passage texts are embedded once (the PowerShell docs repeat each page in five version
    folders): within the batch, and across the batches of one call through ``run.reuse``. The distinct
    texts go to the model longest first, so each model batch holds texts of similar length (less padding).
    Past ``deadline`` (a ``perf_counter`` value) the texts not yet embedded are left for the next batch,
    so a slow model still publishes (and a kill loses) at most that much work; at least one step runs.
    ``skip``: note ids whose chunks are left alone (dead in the segment read).
    """
    t = time.perf_counter()
    todo = pending_chunks(conn, take, everything=drop, skip=skip)
    vectors = np.empty((len(todo), run.embedder.dim), dtype=np.float32)
    done = np.zeros(len(todo), dtype=bool)
    fresh: dict[bytes, str] = {}
    rows_of: dict[bytes, list[int]] = {}
    for row, (_, text) in enumerate(todo):
        key = _text_key(text)
        if key in run.reuse:
            vectors[row], done[row] = run.reuse[key], True
        else:
            fresh.setdefault(key, text)
            rows_of.setdefault(key, []).append(row)
    run.bar.update(int(done.sum()))  # rows served from earlier batches
    order = sorted(fresh, key=lambda k: -len(fresh[k]))
    # one model batch per step: the bar moves (and the deadline is checked) every batch_size texts, and a
    # step loses no padding efficiency because ``order`` is already sorted by length
    step, texts = run.batch_size, 0
    for start in range(0, len(order), step):
        if start and deadline is not None and time.perf_counter() > deadline:
            break
        part = order[start : start + step]
        embedded = run.embedder.embed_passages([fresh[k] for k in part], batch_size=run.batch_size)
        for key, vector in zip(part, embedded):
            vectors[rows_of[key]], done[rows_of[key]] = vector, True
        run.remember(part, embedded)
        run.bar.update(sum(len(rows_of[k]) for k in part))
        texts += len(part)
    kept = np.flatnonzero(done)
    run.reused += len(kept) - texts
    run.chunks_done += len(kept)
    run.tick("embed", t)
    return [todo[i][0] for i in kept], vectors[kept]


def _rate(run: _Run) -> dict[str, float]:
    """Chunks given a vector per second of embedding in this call (``status`` estimates time left by it)."""
    seconds = run.timings.get("embed", 0.0)
    return {EMBED_RATE_KEY: round(run.chunks_done / seconds, 3)} if seconds > 0 and run.chunks_done else {}


def _record(conn: sqlite3.Connection, run: _Run) -> GenerationRecord:
    meta = get_meta(conn)
    return GenerationRecord(
        source_snapshot_hash=meta["source_snapshot_hash"],
        notes=count_notes(conn),
        chunks=count_chunks(conn),
        dense_chunks=count_vectors(conn),
        chunker=meta["chunker"],
        tokenizer=meta["tokenizer"],
        timings={**run.timings, **_rate(run)},
        problems=[{"path": p["path"], "reason": p["reason"]} for p in all_problems(conn)],
        dense_model=identity_key(run.meta_value),
    )


def _publish_batch(
    layout: IndexLayout, base: ResolvedIndex, run: _Run, take: int | None, keep: int, seconds: float | None
) -> bool:
    """Embed up to ``take`` pending chunks of ``base`` (for about ``seconds`` at most) and publish them;
    False when nothing was to do."""
    conn = connect_readonly(base)
    try:
        drop = _needs_drop(conn, run)
        ids, vectors = _embed_pending(conn, run, take, drop, None if seconds is None else time.perf_counter() + seconds)
        tokenizer = str(get_meta(conn)["tokenizer"])
    finally:
        conn.close()
    if not ids and not drop:
        return False
    t = time.perf_counter()
    staging = new_staging_path(layout)
    try:
        scratch_base(base, staging, tokenizer)  # a generation of several segments is written as one
        work = sqlite3.connect(staging, isolation_level=None)
        try:
            set_journal_mode(work, "MEMORY")
            _write_vectors(work, ids, vectors, run.meta_value, drop, run.embedder.dim)
            record = _record(work, run)
            set_journal_mode(work, "DELETE")
        finally:
            work.close()
        published = publish(layout, staging, record, expected_base=base.generation_id, keep=keep)
    finally:
        staging.unlink(missing_ok=True)
    run.tick("publish", t)
    assert published.generation_id is not None  # a published generation always has its id
    run.published.append(published.generation_id)
    run.embedded += len(ids)
    return True


def _segment_batch(
    layout: IndexLayout, base: ResolvedIndex, run: _Run, take: int | None, keep: int, seconds: float | None
) -> bool:
    """A generation of several parts: one batch of its newest incomplete segment, published as a new version
    of that segment alone (``core.build.embed_segments``); False when every segment is complete."""
    t = time.perf_counter()
    deadline = None if seconds is None else t + seconds
    done = embed_segments.segment_batch(
        layout, base, identity_key(run.embedder.identity),
        lambda conn, dead: _embed_pending(conn, run, take, False, deadline, skip=dead),
        lambda work, ids, vectors: _write_vectors(work, ids, vectors, run.meta_value, False, run.embedder.dim),
        lambda conn: _record(conn, run), keep,
    )  # fmt: skip
    if done is not None:
        run.tick("publish", t)
        run.published.append(done[0])
        run.embedded += done[1]
    return done is not None


def _legacy_batch(layout: IndexLayout, run: _Run, take: int | None) -> bool:
    """The legacy ``index.db``: the same batch, written in place in one transaction."""
    conn = sqlite3.connect(layout.legacy_path, isolation_level=None)
    try:
        drop = _needs_drop(conn, run)
        ids, vectors = _embed_pending(conn, run, take, drop)
        if not ids and not drop:
            return False
        _write_vectors(conn, ids, vectors, run.meta_value, drop, run.embedder.dim)
    finally:
        conn.close()
    run.embedded += len(ids)
    return True


# ---------------------------------------------------------------- the entry point


def embed_index(
    vault: str | Path,
    *,
    model: str | Path | None = None,
    index_dir: str | Path | None = None,
    limit: int | None = None,
    batch_size: int = 32,
    progress: bool = False,
    threads: int | None = None,
    publish_every: int = PUBLISH_EVERY,
    publish_seconds: float = PUBLISH_SECONDS,
    keep: int = 2,
    wait_seconds: float = 0.0,
) -> EmbedReport:
    """Embed the chunks of the active index that have no vector (see the module docstring).

    ``model``: a preset name, installed model or model directory; None = the model the index
    records, else the user's default (``models install``), else the default preset. ``limit`` caps
    this call (one published generation); None embeds everything, publishing every
    ``publish_every`` chunks or ``publish_seconds`` of embedding, whichever comes first (what an
    interrupt can lose). Holds the build lock throughout.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if publish_every < 1 or publish_seconds <= 0:
        raise ValueError(f"publish_every must be >= 1 and publish_seconds > 0, got {publish_every}, {publish_seconds}")
    started = time.perf_counter()
    layout = layout_for(Path(vault).resolve(), Path(index_dir) if index_dir else None)
    with build_lock(layout, wait_seconds=wait_seconds):
        base = resolve(layout)
        ref = model_reference(model) if model is not None else _recorded_or_default(base)
        embedder = load_embedder(ref, threads=threads)
        run = _Run(embedder, {**embedder.identity, REF_KEY: ref}, batch_size, None)
        goal = _goal(base, run, limit)
        run.bar = tqdm(total=goal, unit="chunk", desc="embedding", disable=not progress, smoothing=0.1)
        try:
            _run_batches(layout, base, run, limit, (publish_every, publish_seconds), keep)
        finally:
            run.bar.close()
        final = resolve(layout)
        remaining, chunks = _counts(final)
    return EmbedReport(
        index_kind=final.kind,
        generation_id=final.generation_id,
        generations_published=run.published,
        model_ref=ref,
        model_name=embedder.config.name,
        embedded=run.embedded,
        reused=run.reused,
        chunks=chunks,
        remaining=remaining,
        dropped=run.dropped,
        dropped_model=run.dropped_model,
        seconds=round(time.perf_counter() - started, 4),
        timings=run.timings,
    )


def _run_batches(
    layout: IndexLayout,
    base: ResolvedIndex,
    run: _Run,
    limit: int | None,
    every: tuple[int, float],
    keep: int,
) -> None:
    """One batch when ``limit`` is given, else batches of ``every`` (chunks, seconds) until nothing is pending."""
    take = limit if limit is not None else every[0]
    seconds = None if limit is not None else every[1]
    while True:
        if base.kind == "legacy_db":
            did = _legacy_batch(layout, run, take)
        elif embed_segments.per_segment(base, run.embedder.identity):
            did = _segment_batch(layout, base, run, take, keep, seconds)
        else:
            did = _publish_batch(layout, base, run, take, keep, seconds)
        if not did or limit is not None:
            return
        base = resolve(layout)


def _recorded_or_default(resolved: ResolvedIndex) -> str:
    """The model reference the index records, else the user's default (``models install``), else the default preset."""
    conn = connect_readonly(resolved)
    try:
        recorded = stored_reference(get_meta(conn).get(META_KEY))
    finally:
        conn.close()
    return recorded or model_reference(default_model("embedding") or DEFAULT_EMBEDDING_MODEL)


def choose_embedding_model(
    vault: str | Path, model: str | Path | None = None, index_dir: str | Path | None = None
) -> str:
    """The model reference ``index --embed`` uses, known before any build: the caller's; else the one the
    active index records; else the user's default (``vaultsearch models install``); else the default preset.

    An index that is absent, or that fails verification (the build about to run replaces it), records no model:
    the user's default applies."""
    if model is not None:
        return model_reference(model)
    layout = layout_for(Path(vault).resolve(), Path(index_dir) if index_dir else None)
    try:
        return _recorded_or_default(resolve(layout))
    except (IndexMissingError, IntegrityError):
        return model_reference(default_model("embedding") or DEFAULT_EMBEDDING_MODEL)


def _goal(resolved: ResolvedIndex, run: _Run, limit: int | None) -> int:
    """Chunks this call will embed (for the progress bar): all of them when the model changes."""
    conn = connect_readonly(resolved)
    try:
        found = stored_identity(get_meta(conn).get(META_KEY))
        changed = found is not None and identity_key(found) != identity_key(run.embedder.identity)
        todo = count_chunks(conn) if changed else count_pending(conn)
    finally:
        conn.close()
    return todo if limit is None else min(limit, todo)


def dense_coverage(vault: str | Path, index_dir: str | Path | None = None) -> tuple[int, int]:
    """(chunks with a vector, chunks) of the active index: what an interrupted ``index --embed`` kept."""
    remaining, chunks = _counts(resolve(layout_for(Path(vault).resolve(), Path(index_dir) if index_dir else None)))
    return chunks - remaining, chunks


def _counts(resolved: ResolvedIndex) -> tuple[int, int]:
    """(chunks without a vector, chunks) of an index."""
    conn = connect_readonly(resolved)
    try:
        return count_pending(conn), count_chunks(conn)
    finally:
        conn.close()
