"""The git source of a build (``--source git``): notes read from the blobs of one commit.

The generation meta records the source as its watermark: ``source = "git"``, ``git_rev`` (what
was asked, e.g. ``HEAD``; the next build follows it again), ``git_commit`` (the commit it resolved
to) and ``git_tree`` (the vault folder's tree in it: the source identity), ``git_shallow``.

    up to date     the stored ``git_commit`` equals what the revision resolves to now: one
                   ``rev-parse``, nothing listed or read (``is_current``)
    incremental    ``diff-tree`` of the stored tree and the new one: only the paths it names
                   are read (one ``cat-file --batch``) and re-indexed; the rest, and their
                   dense vectors, are carried over as for the working tree
    dates          ``git_dates`` (rel_path -> newest commit that changed / added the path) is
                   kept for every note path of the tree; a build whose base commit is in the new
                   commit's history reads only ``base..new`` from ``git log``, any other build
                   reads the whole history once. The notes' ``git_date`` / ``git_created`` (UTC
                   ISO) are set from it.

``git_created`` is the newest commit that *added* the path: a note deleted and added again, or
renamed (git records a rename as a delete and an add), is created anew. In a shallow clone the
dates come from the history present (the boundary commit adds every path) and the build
reports ``git_shallow_history``.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.build.source import BaseStats, Read
from core.index.tables.git_dates import store_dates, stored_dates
from core.index.tables.meta import get_meta
from core.vault import gitrun
from core.vault import gitsource as git
from core.vault.problems import Problem
from core.vault.scan import ScannedFile, ScanResult


class GitSource:
    """Notes from the tree of ``rev`` (see the module docstring)."""

    kind = "git"

    def __init__(
        self, vault: Path, index_dir: Path, max_bytes: int, rev: str, *, include_dot_paths: bool = False
    ) -> None:
        self.repo = git.discover(vault)
        self.include_dot_paths = include_dot_paths  # the working-tree scan's dot rule (Obsidian hides them)
        self.vault, self.max_bytes = Path(vault).resolve(), max_bytes
        self.revision = git.resolve(self.repo, rev)
        index_rel = _relative(Path(index_dir).resolve(), self.vault)
        self.index_skip = index_rel + "/" if index_rel else None
        self._entries: dict[str, git.TreeEntry] = {}
        self._content: dict[str, bytes] = {}  # blob -> bytes already read (small blobs, LFS check)
        self._note_paths: set[str] = set()

    # ------------------------------------------------------------ listing

    def scan(self) -> ScanResult:
        listing = git.list_tree(
            self.repo,
            self.revision.tree,
            max_bytes=self.max_bytes,
            skip=self.index_skip,
            include_dot_paths=self.include_dot_paths,
        )
        problems = list(listing.problems)
        small = [e.blob for e in listing.entries if e.size <= 1024]
        self._content = git.read_blobs(self.repo, small)
        mtime_ns = self.revision.committed_at * 1_000_000_000
        files = []
        for e in listing.entries:
            data = self._content.get(e.blob)
            if data is not None and git.is_lfs_pointer(data):
                problems.append(Problem(e.rel_path, "git_lfs_pointer_skipped", "a Git LFS pointer, not the note"))
                continue
            self._entries[e.rel_path] = e
            files.append(ScannedFile(e.rel_path, str(self.vault / e.rel_path), e.size, mtime_ns))
        if self.repo.shallow:
            problems.append(
                Problem(".", "git_shallow_history", "a shallow clone: git dates come from the commits present")
            )
        self._note_paths = {f.rel_path for f in files}
        return ScanResult(files, problems)

    # ------------------------------------------------------------ planning and reading

    def is_current(self, meta: Mapping[str, Any]) -> bool:
        return (
            meta.get("source") == "git"
            and meta.get("git_commit") == self.revision.commit
            and meta.get("git_tree") == self.revision.tree
            and meta.get("git_rev") == self.revision.rev
            and meta.get("max_note_bytes") == self.max_bytes
        )

    def unvouched(self, files: Sequence[ScannedFile], base: BaseStats, meta: Mapping[str, Any]) -> list[ScannedFile]:
        """Every file, unless the base was built from a git tree: then the files not in it or in the diff."""
        base_tree = meta.get("git_tree") if meta.get("source") == "git" else None
        if not base_tree:
            return list(files)
        changed = git.changed_paths(self.repo, base_tree, self.revision.tree)
        if changed is None:
            return list(files)
        known = base.paths
        return [f for f in files if f.rel_path not in known or f.rel_path in changed]

    def read(self, files: list[ScannedFile], *, defer: bool) -> list[Read]:
        """Small blobs the listing read already are given; every other blob is read where it is
        parsed, one at a time (``BlobRef``): a build holds no more blob content than the working
        tree's holds files. (Every file offered here is one the tree diff names, so none is read
        twice to compare hashes: its content hash is taken where it is parsed.)"""
        out: list[Read] = []
        for f in files:
            blob = self._entries[f.rel_path].blob
            data = self._content.get(blob)
            if data is not None:
                out.append((f, data, hashlib.sha256(data).hexdigest()))
            else:
                out.append((f, gitrun.BlobRef(self.repo.vault, blob, self.max_bytes), None))
        return out

    def check_unchanged(self, scan: ScanResult, read: Sequence[ScannedFile], gone: Sequence[str]) -> None:
        """A commit does not change: nothing to check (the watermark is the commit read)."""

    def settings(self) -> dict[str, Any]:
        r = self.revision
        return {"source": "git", "git_rev": r.rev, "git_commit": r.commit, "git_tree": r.tree,
                "git_shallow": self.repo.shallow}  # fmt: skip

    # ------------------------------------------------------------ dates

    def finish(self, conn: sqlite3.Connection) -> None:
        """Bring ``git_dates`` to this commit (incrementally when the base commit is an ancestor)
        and set every note's ``git_date`` / ``git_created`` from it. Reads the base's meta, so it
        runs before the new meta is stamped."""
        meta = get_meta(conn)
        base = meta.get("git_commit") if meta.get("source") == "git" else None
        incremental = bool(base) and git.is_ancestor(self.repo, str(base), self.revision.commit)
        found = self._dates(conn, str(base)) if incremental else None
        # no usable base, or a note path the base never dated (an ignore rule changed): the whole history
        rows = found if found is not None else self._dates(conn, None) or []
        store_dates(conn, rows)
        gitrun.close_streams(self.repo.vault)  # every blob is read: end this build's cat-file process

    def _dates(self, conn: sqlite3.Connection, base: str | None) -> list[tuple[str, int, int | None]] | None:
        """(path, last, added) of every note path: from the stored dates and ``base..commit`` when
        ``base`` is given (None when a note path is in neither), else from the whole history."""
        stored: dict[str, tuple[int, int | None]] = {}
        if base is not None:
            stored = stored_dates(conn)
        found = git.history(self.repo, self.revision.commit, since=base)
        rows = []
        for path in sorted(self._note_paths):
            old, new = stored.get(path), found.get(path)
            if old is None and new is None:
                if base is not None:
                    return None
                continue
            rows.append((path, *merge_dates(old, new)))
        return rows


def merge_dates(old: tuple[int, int | None] | None, new: git.PathDates | None) -> tuple[int, int | None]:
    """The (last, added) commit times of a path from its stored dates and a newer history range."""
    if new is None:
        assert old is not None
        return old
    if old is None:
        return new.last, new.added
    added = [a for a in (old[1], new.added) if a is not None]
    return max(old[0], new.last), (max(added) if added else None)


def _relative(path: Path, root: Path) -> str | None:
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if str(rel) != "." else None
