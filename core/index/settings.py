"""Index settings: what shapes an index, stored in it, and reused by the next build.

``IndexConfig`` is everything a build is told (tokenizer, chunking, ignore rules, size limit).
A generation stores its settings in meta ``settings``; the next build starts from them and
applies only what the caller changed (``resolve_config``), so a tokenizer chosen once is not
forgotten by the next plain ``index``. Tokenizer, chunker and the language analysis are part of the index
identity: changing them rebuilds every note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from core.errors import IntegrityError, UsageError, VaultSearchError
from core.index.layout import IndexLayout
from core.index.schema import SCHEMA_VERSION
from core.index.state import active_record
from core.index.tables.meta import get_meta
from core.index.verify import connect_readonly, resolve
from core.ranking.analysis import check_tokenizer
from core.ranking.languages import analysis_identity, check_language
from core.vault.chunking import CHUNKER_VERSION, chunk_body
from core.vault.scan import MAX_NOTE_BYTES

DEFAULT_TOKENIZER = "porter unicode61 remove_diacritics 2"


@dataclass(frozen=True)
class IndexConfig:
    """Everything that shapes the index. Chunker and tokenizer are part of its identity."""

    chunk_size: int = 600
    chunk_overlap: int = 60
    tokenizer: str = DEFAULT_TOKENIZER
    max_note_bytes: int = MAX_NOTE_BYTES
    include_dot_paths: bool = False  # index dot-files and dot-folders (Obsidian hides them)
    language: str = "en"  # the vault default: notes with no frontmatter language and none detected

    def __post_init__(self) -> None:
        check_tokenizer(self.tokenizer)
        object.__setattr__(self, "language", check_language(self.language))
        chunk_body("", size=self.chunk_size, overlap=self.chunk_overlap)  # a bad size or overlap: UsageError

    def settings(self) -> dict[str, Any]:
        """What the index stores (meta ``settings``) and the next build reuses unless told otherwise."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def chunker(self) -> str:
        return f"{CHUNKER_VERSION}:{self.chunk_size}:{self.chunk_overlap}"

    def identity(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "chunker": self.chunker,
            "tokenizer": self.tokenizer,
            "analysis": analysis_identity(self.language),
        }


def stored_settings(layout: IndexLayout) -> dict[str, Any]:
    """The settings the active generation was built with (meta ``settings``); {} without one."""
    try:
        if active_record(layout) is None:
            return {}
        base = resolve(layout)
    except IntegrityError:  # a broken active generation is rebuilt from the defaults, and the report says why
        return {}
    conn = connect_readonly(base)
    try:
        meta = get_meta(conn)
    finally:
        conn.close()
    stored = meta.get("settings") or ({"tokenizer": meta["tokenizer"]} if meta.get("tokenizer") else {})
    known = {f.name for f in fields(IndexConfig)}
    return {k: v for k, v in stored.items() if k in known}


def resolve_config(layout: IndexLayout, changes: Mapping[str, Any] | None) -> IndexConfig:
    """The stored settings of the index (else the defaults), with ``changes`` (what the caller set) applied."""
    unknown = set(changes or {}) - {f.name for f in fields(IndexConfig)}
    if unknown:
        raise UsageError(f"unknown index setting(s): {sorted(unknown)}")
    return replace(
        IndexConfig(**stored_settings(layout)), **{k: v for k, v in (changes or {}).items() if v is not None}
    )


def config_of_active(layout: IndexLayout) -> Any:
    """The IndexConfig the active generation was built with (so a watch build never re-chunks it all);
    the defaults when no generation can be resolved."""
    try:
        resolved = resolve(layout)
    except VaultSearchError:
        return IndexConfig()
    conn = connect_readonly(resolved)
    try:
        meta = get_meta(conn)
    finally:
        conn.close()
    kw: dict[str, Any] = {}
    if isinstance(meta.get("tokenizer"), str):
        kw["tokenizer"] = meta["tokenizer"]
    parts = str(meta.get("chunker") or "").split(":")
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        kw["chunk_size"], kw["chunk_overlap"] = int(parts[1]), int(parts[2])
    return IndexConfig(**kw)
