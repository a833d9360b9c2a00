"""``index --embed``: text and vectors of a small change in ONE generation.

Without this, ``index --embed`` publishes the text generation first and the embedded one
later, so ``semantic`` callers fail closed (correctly, labelled ``dense_incomplete``) for the
whole embedding time even when a few notes changed. Here the builder hands its staged,
validated database to ``embed_pending_into`` before publishing: when the chunks without a
vector are few (``IN_BUILD_MAX``, or ``--embed-limit`` when given) and the model is the one the index already
uses (or none yet), they are embedded into the staging database, so the published generation
is complete. Otherwise (a large change, another model, a model that cannot be loaded) the
staged text is published as before and ``embed_index``, which the CLI runs right after, does
the work in bounded batches and raises any model error typed: nothing is silently skipped.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tqdm import tqdm

from core.build import embed
from core.dense import META_KEY, REF_KEY, load_embedder, model_reference, stored_reference
from core.errors import CapabilityError, ModelError
from core.index.tables.chunk_vectors import count_pending
from core.index.tables.meta import get_meta
from core.models.catalog import DEFAULT_EMBEDDING_MODEL

# At most this many pending chunks are embedded inside the build (text and vectors in one generation).
# More (a first ``--embed``) go through embed_index's batches, which publish as they go: an interrupt
# keeps what was embedded, and the text is searchable meanwhile.
IN_BUILD_MAX = 256


class EmbedInStaging:
    """The ``before_publish`` hook: embed the staged index's pending chunks when they fit one batch."""

    def __init__(
        self, model: str | Path | None, *, batch: int | None = None, batch_size: int = 32, progress: bool = False
    ) -> None:
        self.model, self.batch, self.batch_size, self.progress = model, batch, batch_size, progress

    def __call__(self, conn: sqlite3.Connection) -> int:
        pending = count_pending(conn)
        if pending == 0 or pending > (self.batch or min(IN_BUILD_MAX, embed.PUBLISH_EVERY)):
            return 0
        meta = get_meta(conn)
        ref = model_reference(self.model) if self.model is not None else None
        ref = ref or stored_reference(meta.get(META_KEY)) or DEFAULT_EMBEDDING_MODEL
        try:
            embedder = load_embedder(ref)
        except (CapabilityError, ModelError):
            return 0  # publish the text; embed_index (run next by the CLI) raises this error, typed
        bar = tqdm(total=pending, unit="chunk", desc="embedding", disable=not self.progress, smoothing=0.1)
        run = embed._Run(embedder, {**embedder.identity, REF_KEY: ref}, self.batch_size, bar)
        if embed._needs_drop(conn, run):
            bar.close()
            return 0  # another model: re-embedding everything is embed_index's bounded, batched job
        try:
            ids, vectors = embed._embed_pending(conn, run, None, False)
        finally:
            bar.close()
        embed._write_vectors(conn, ids, vectors, run.meta_value, False)
        embed.validate_vectors(conn, embedder.dim)
        return len(ids)
