"""Where a build reads its notes: the working tree (the default) or a git commit.

The builder plans, writes, validates and publishes the same way for every source; a source
only answers these questions (``NoteSource``):

    scan()                 which note files there are (sorted), and the problems met listing them
    trusted(files, known)  which files the source vouches are unchanged since the base index
                           without reading them (working tree: same mtime and size, not racy;
                           git: not in the diff of the base tree and this tree)
    read(files, defer)     their (content, sha256); ``defer`` lets a file be read later, where it
                           is parsed (a worker process), when the source can do that
    finish(conn)           last writes inside the build's transaction (git: the date fields)
    settings()             what the generation meta records of the source (reused by the next build)
    check_unchanged(scan)  fail when the source moved during the build (a commit cannot)

The source choice and the revision are index settings: ``source_settings`` reads the ones the
active generation recorded, so ``vaultsearch index VAULT`` keeps building the way it was set up.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from core.build.ingest import read_source
from core.errors import IntegrityError, SourceChangedError, UsageError
from core.index.freshness_walk import RACY_NS  # one racy-mtime rule for the build and freshness
from core.index.layout import IndexLayout
from core.index.manifest import peek_segment
from core.index.state import active_record
from core.index.tables.git_dates import forget_dates
from core.index.tables.meta import get_meta
from core.vault.scan import ScannedFile, ScanResult, scan_vault

if TYPE_CHECKING:
    from core.vault.gitrun import BlobRef

SOURCES = ("worktree", "git")

# rel_path -> (note id or -1 for a skipped file, content sha256, mtime_ns, size) in the base index
Known = Mapping[str, tuple[int, str, int, int]]
Read = tuple[ScannedFile, "bytes | BlobRef | None", "str | None"]  # BlobRef: read where parsed


class NoteSource(Protocol):
    kind: str

    def scan(self) -> ScanResult: ...

    def trusted(self, files: Iterable[ScannedFile], known: Known, meta: Mapping[str, Any]) -> set[str]: ...

    def read(self, files: list[ScannedFile], *, defer: bool) -> list[Read]: ...

    def finish(self, conn: sqlite3.Connection) -> None: ...

    def settings(self) -> dict[str, Any]: ...

    def check_unchanged(self, scan: ScanResult) -> None: ...

    def is_current(self, meta: Mapping[str, Any]) -> bool: ...


WORKTREE_SETTINGS = {"source": "worktree", "git_rev": None, "git_commit": None, "git_tree": None, "git_shallow": None}


class WorkingTreeSource:
    """The files on disk, as ``scan_vault`` lists them."""

    kind = "worktree"

    def __init__(
        self,
        vault: Path,
        index_dir: Path,
        max_bytes: int,
        *,
        include_dot_paths: bool = False,
        rehash: Iterable[str] = (),
    ) -> None:
        self.vault, self.index_dir, self.max_bytes = vault, index_dir, max_bytes
        self.rehash = frozenset(rehash)  # paths seen changing (the watcher's events): never trusted by stat
        self.include_dot_paths = include_dot_paths  # Obsidian hides dot-files and dot-folders
        self.root = os.path.realpath(vault)  # every note is read inside the vault's real path

    def scan(self) -> ScanResult:
        return scan_vault(
            self.vault, index_dir=self.index_dir, max_bytes=self.max_bytes, include_dot_paths=self.include_dot_paths
        )

    def trusted(self, files: Iterable[ScannedFile], known: Known, meta: Mapping[str, Any]) -> set[str]:
        racy_after = int(meta.get("scan_started_ns", 0)) - RACY_NS
        out = set()
        for f in files:
            old = known.get(f.rel_path)
            if old is not None and old[2] == f.mtime_ns and old[3] == f.size and f.mtime_ns < racy_after:
                if f.rel_path not in self.rehash:
                    out.add(f.rel_path)
        return out

    def read(self, files: list[ScannedFile], *, defer: bool) -> list[Read]:
        if defer:  # new files are read and hashed where they are parsed (perhaps in a worker process)
            return [(f, None, None) for f in files]
        out: list[Read] = []
        for f in files:
            try:
                out.append((f, *read_source(f.rel_path, f.path, self.root, self.max_bytes)))
            except OSError:  # unreadable now: read again (and reported) where notes are parsed
                out.append((f, None, None))
        return out

    def finish(self, conn: sqlite3.Connection) -> None:
        """Git dates belong to a git-sourced index: rows carried over from one lose them."""
        forget_dates(conn)

    def settings(self) -> dict[str, Any]:
        return dict(WORKTREE_SETTINGS)

    def check_unchanged(self, scan: ScanResult) -> None:
        again = self.scan()
        before = {f.rel_path: (f.mtime_ns, f.size) for f in scan.files}
        after = {f.rel_path: (f.mtime_ns, f.size) for f in again.files}
        if before != after:
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            raise SourceChangedError(
                f"{len(changed)} file(s) changed during the build, e.g. {changed[:3]}", paths=changed[:20]
            )

    def is_current(self, meta: Mapping[str, Any]) -> bool:
        return False  # only a scan can tell


def stored_settings(layout: IndexLayout, *, in_place: bool) -> dict[str, Any] | None:
    """The source settings the current index recorded (None: no readable index). Read without
    verifying: they only choose how to build; what is carried over is verified by ``_open_base``."""
    path: Path | None = layout.legacy_path if in_place else None
    if not in_place:
        try:
            record = active_record(layout)
        except IntegrityError:
            return None
        path = peek_segment(layout, record) if record else None
    if path is None or not path.exists():
        return None
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return get_meta(conn)
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


def resolve_settings(source: str | None, rev: str | None, stored: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """(source, rev) of this build: what the caller asked, else what the active generation recorded,
    else the working tree. A git build without a revision follows the stored one, else ``HEAD``."""
    if source is not None and source not in SOURCES:
        raise UsageError(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}", source=source)
    stored = stored or {}
    chosen = source or stored.get("source") or "worktree"
    if chosen == "worktree":
        if rev is not None:
            raise UsageError("--rev applies to --source git", rev=rev)
        return chosen, None
    return chosen, rev or (stored.get("git_rev") if stored.get("source") == "git" else None) or "HEAD"
