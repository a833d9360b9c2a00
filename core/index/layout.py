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
    generations_dir: Path  # index_dir/generations/<generation_id>.db
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


@dataclass(frozen=True)
class ResolvedIndex:
    """A verified, servable index."""

    kind: str  # 'immutable_generation' | 'legacy_db'
    path: Path
    generation_id: str | None
    sha256: str | None
    size: int
    source_snapshot_hash: str | None
    created_at: float  # epoch seconds of publish (legacy: file mtime)
    layout: IndexLayout
    record: dict[str, Any]  # the state row (notes, chunks, timings, problems, ...)
    # core.index.pinned.PinnedFile: the open descriptor of the inode that was hashed (generations only);
    # connect_readonly serves exactly that inode. Not part of the identity.
    pinned: Any = field(default=None, compare=False, repr=False)


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
        generations_dir=root / "generations",
        staging_dir=root / "staging",
        lock_path=root / "build.lock",
        legacy_path=root / "index.db",
    )
