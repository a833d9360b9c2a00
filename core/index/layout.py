"""Where an index lives and what a generation is: the types shared by the read and the write path.

They sit below both :mod:`core.generations` and :mod:`core.index.state`, so neither imports
the other for its types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class IndexLayout:
    vault: Path
    index_dir: Path  # <vault>/.vaultsearch by default
    state_path: Path  # index_dir/state.db  (generation-state DB)
    segments_dir: Path  # index_dir/segments/<sha256>.seg  (immutable parts, named by their SHA-256)
    manifests_dir: Path  # index_dir/manifests/<M>.json  (a generation: M = SHA-256 of the manifest bytes)
    generations_dir: Path  # index_dir/generations/: the pre-manifest format's one-file generations (reaped)
    staging_dir: Path  # index_dir/staging/
    lock_path: Path  # index_dir/build.lock
    legacy_path: Path  # index_dir/index.db  (the --in-place single-file layout)


@dataclass(frozen=True)
class GenerationRecord:
    """What the builder tells publish about the staged database."""

    source_snapshot_hash: str
    notes: int
    chunks: int
    dense_chunks: int
    chunker: str  # identity string, e.g. 'heading-v1:600:60'
    tokenizer: str  # FTS5 tokenizer spec
    timings: dict[str, float]
    problems: list[dict[str, str]]
    dense_model: str | None = None  # JSON identity of the dense model, when vectors exist
    schema_version: int | None = None  # the staged database's table schema (recorded in the manifest)
    analysis: dict[str, Any] = field(default_factory=dict)  # analysis identity (IndexConfig.identity())


@dataclass(frozen=True)
class ResolvedPart:
    """One verified part of a generation: its manifest entry and the open descriptor that was checked."""

    kind: str  # 'segment' | 'tombstone'
    sha256: str
    size: int
    path: Path
    pinned: Any = field(default=None, compare=False, repr=False)  # core.index.pinned.PinnedFile
    notes: int = 0  # the manifest's count: a segment's note rows, a tombstone's dead note ids
    segment: str | None = None  # a tombstone: the SHA-256 of the segment it belongs to


@dataclass(frozen=True)
class ResolvedIndex:
    """A verified, servable index."""

    kind: str  # 'immutable_generation' | 'legacy_db'
    path: Path  # a generation: its manifest, manifests/<sha256>.json; legacy: index.db
    generation_id: str | None
    sha256: str | None  # a generation: the manifest's SHA-256 (its content identity); legacy: None
    size: int  # a generation: the manifest's byte count
    source_snapshot_hash: str | None
    created_at: float  # epoch seconds of publish (legacy: file mtime)
    layout: IndexLayout
    record: dict[str, Any]  # the state row (notes, chunks, timings, problems, ...)
    # core.index.pinned.PinnedFile: the open descriptor of the generation's first segment that was verified
    # (generations only); connect_readonly serves exactly that inode. Not part of the identity.
    pinned: Any = field(default=None, compare=False, repr=False)
    parts: tuple[ResolvedPart, ...] = field(default=(), compare=False)  # every verified part, manifest order


def vault_identity(layout: IndexLayout) -> str:
    """Which vault an index directory serves, as recorded in its generation state.

    An index dir inside the vault (the default ``.vaultsearch``) is named by its place in the
    vault (``inside:.vaultsearch``), so a vault moved or renamed with its index keeps it; an
    index dir elsewhere is named by the vault's real path (``path:/home/me/notes``), so two
    vaults sharing one index dir never serve each other's notes.
    """
    if layout.vault in layout.index_dir.parents:
        return "inside:" + layout.index_dir.relative_to(layout.vault).as_posix()
    return "path:" + str(layout.vault)


def layout_for(vault: Path, index_dir: Path | None = None) -> IndexLayout:
    """Where the index of ``vault`` lives: ``<vault>/.vaultsearch`` unless ``index_dir`` is given."""
    vault = Path(vault).expanduser().resolve()
    root = Path(index_dir).expanduser().resolve() if index_dir is not None else vault / ".vaultsearch"
    return IndexLayout(
        vault=vault,
        index_dir=root,
        state_path=root / "state.db",
        segments_dir=root / "segments",
        manifests_dir=root / "manifests",
        generations_dir=root / "generations",
        staging_dir=root / "staging",
        lock_path=root / "build.lock",
        legacy_path=root / "index.db",
    )
