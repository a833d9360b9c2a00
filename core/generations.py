"""Immutable index generations: the public surface of layout, build lock, publish, resolve and verify.

A build writes a database under ``staging/``; ``publish`` checks it, fsyncs it and moves it to
``segments/<sha256>.seg``, writes the manifest naming it to ``manifests/<M>.json`` (M: the
manifest's SHA-256, the generation's content identity), and then flips the active pointer in the
small generation-state database in ONE transaction. Readers call ``resolve``, which verifies the
active generation (state row, the manifest's SHA-256, each part's size and SHA-256) and caches
that verified identity by file fingerprint. Any mismatch fails closed with a typed
``IntegrityError``; there is never a fallback to an older generation.

The mechanics live in ``core.index``: ``lock`` (the build lock, staging paths), ``publish``
(publish, retention, reaping), ``verify`` (resolve, its caches and the verification record,
verify_full, the read-only connection), ``state`` (the generation-state database) and
``layout`` (the shared types).
"""

from __future__ import annotations

from core.build.lock import build_lock, ensure_layout, new_staging_path
from core.build.publish import PUBLISH_STEPS, publish
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, layout_for
from core.index.state import STATE_SCHEMA_VERSION, active_record, list_generations
from core.index.tables.connection import atomic
from core.index.verify import (
    VERIFY_STATS,
    clear_verify_cache,
    connect_readonly,
    copy_base,
    hash_file,
    resolve,
    verify_full,
)

__all__ = [
    "PUBLISH_STEPS",
    "STATE_SCHEMA_VERSION",
    "VERIFY_STATS",
    "GenerationRecord",
    "IndexLayout",
    "ResolvedIndex",
    "active_record",
    "atomic",
    "build_lock",
    "clear_verify_cache",
    "connect_readonly",
    "copy_base",
    "ensure_layout",
    "hash_file",
    "layout_for",
    "list_generations",
    "new_staging_path",
    "publish",
    "resolve",
    "verify_full",
]
