"""Where a build reads its notes: the working tree (the default) or a git commit.

The builder plans, writes, validates and publishes the same way for every source; a source
only answers these questions (``NoteSource``):

    scan()                  which note files there are (sorted), and the problems met listing them
    unvouched(files, base)  the files the source does NOT vouch are unchanged since the base index
                            (``BaseStats``: the base's rows, read once); the rest
                            is carried over unread (working tree: same mtime and size, not racy;
                            git: in the base and not in the diff of the base tree and this tree)
    read(files, defer)      their (content, sha256); ``defer`` lets a file be read later, where it
                            is parsed (a worker process), when the source can do that
    finish(conn)            last writes inside the build's transaction (git: the date fields)
    settings()              what the generation meta records of the source (reused by the next build)
    check_unchanged(scan, read, gone)
                            fail when a file the build read (or found gone) moved during the build
                            (a commit cannot); ``WorkingTreeSource.check_unchanged`` says why the
                            files carried over unread need no second look

The source choice and the revision are index settings: ``source_settings`` reads the ones the
active generation recorded, so ``vaultsearch index VAULT`` keeps building the way it was set up.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
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
from core.index.tables.notes import note_file_rows
from core.index.tables.skipped_files import skipped_file_rows
from core.vault.scan import ScannedFile, ScanResult, scan_vault

if TYPE_CHECKING:
    from core.vault.gitrun import BlobRef

SOURCES = ("worktree", "git")

Read = tuple[ScannedFile, "bytes | BlobRef | None", "str | None"]  # BlobRef: read where parsed


BaseRow = tuple[str, int, str, int, int]  # (rel_path, note id (-1: a skipped file), content sha256, mtime_ns, size)


def base_rows(conn: sqlite3.Connection) -> Iterator[BaseRow]:
    """Every source file's row in the base (notes, then skipped files with note id -1)."""
    yield from note_file_rows(conn)
    yield from ((rel, -1, sha, mtime, size) for rel, sha, mtime, size in skipped_file_rows(conn))


class BaseStats:
    """What a plan compares a scan with: the row of every source file (notes and skipped files) the base index
    holds, by path (``base_rows``), read once per build. The plan looks up each scanned file's stat and the
    unvouched files' whole rows in it; a build staged on its changes takes the carried-over notes' rows
    (its snapshot and racy rows: ``core.build.base_view.BaseView.carried_stats``) from it, where it read the
    base's rows a second time (0.3-0.4 s of CPU at 100k notes)."""

    def __init__(self, rows: Iterable[BaseRow] = ()) -> None:
        self.rows: dict[str, BaseRow] = {row[0]: row for row in rows}

    def __len__(self) -> int:
        return len(self.rows)

    @cached_property
    def paths(self) -> set[str]:
        """The base's source paths (built only when asked: a removal, or a git source's plan)."""
        return set(self.rows)


class NoteSource(Protocol):
    kind: str

    def scan(self) -> ScanResult: ...

    def unvouched(
        self, files: Sequence[ScannedFile], base: BaseStats, meta: Mapping[str, Any]
    ) -> list[ScannedFile]: ...

    def read(self, files: list[ScannedFile], *, defer: bool) -> list[Read]: ...

    def finish(self, conn: sqlite3.Connection) -> None: ...

    def settings(self) -> dict[str, Any]: ...

    def check_unchanged(self, scan: ScanResult, read: Sequence[ScannedFile], gone: Sequence[str]) -> None: ...

    def is_current(self, meta: Mapping[str, Any]) -> bool: ...


def _same_file(f: ScannedFile) -> bool:
    """``f`` is still a regular file with the (mtime, size) the scan gave it."""
    try:
        st = os.stat(f.os_path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_mtime_ns, st.st_size) == (f.mtime_ns, f.size)


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
        self.among: frozenset[str] | None = None  # set by a known build: the only paths whose rows may not match
        self.include_dot_paths = include_dot_paths  # Obsidian hides dot-files and dot-folders
        self.root = os.path.realpath(vault)  # every note is read inside the vault's real path

    def scan(self) -> ScanResult:
        return scan_vault(
            self.vault, index_dir=self.index_dir, max_bytes=self.max_bytes, include_dot_paths=self.include_dot_paths
        )

    def unvouched(self, files: Sequence[ScannedFile], base: BaseStats, meta: Mapping[str, Any]) -> list[ScannedFile]:
        """The files not vouched for by their stat: another (mtime, size) than the base row's (or none), an mtime
        within ``RACY_NS`` of the base's scan or later (a write in the tick of its read would not show), or a
        path seen changing (``rehash``). With ``among`` (the watcher's known builds: ``core.build.known``) only
        the files it names and the racy ones are compared: the others are known to match their rows."""
        racy_after = int(meta.get("scan_started_ns", 0)) - RACY_NS
        rows, rehash = base.rows, self.rehash
        if self.among is not None:
            among = self.among | rehash
            files = [f for f in files if f.rel_path in among or f.mtime_ns >= racy_after]
        out = [
            f
            for f in files
            if f.mtime_ns >= racy_after
            or (row := rows.get(f.rel_path)) is None
            or row[3] != f.mtime_ns
            or row[4] != f.size
        ]
        if rehash:
            listed = {f.rel_path for f in out}
            out += [f for f in files if f.rel_path in rehash and f.rel_path not in listed]
            out.sort(key=lambda f: f.rel_path)
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

    def check_unchanged(self, scan: ScanResult, read: Sequence[ScannedFile], gone: Sequence[str]) -> None:
        """Fail (``SourceChangedError``) when a file the build read or hashed (``read``: every file the plan did
        not vouch for by stat, new ones included) has another (mtime, size) than the scan gave it, is gone or is
        no regular file any more, or when a file the plan removed (``gone``) is back. O(change): one ``stat``
        per such file (followed, as the scan follows a symlink inside the vault), no second walk of the vault.

        Why the files carried over unread need no second look. Such a file was vouched for by its stat: the
        scan's (mtime, size) is the base row's, and the mtime is older than the base's scan by ``RACY_NS``
        or more, so the row's content is the file's as of this scan. The new generation keeps that row (mtime,
        size and content hash together): a true statement about the file at the scan. A write after the scan
        gives the file an mtime at or after the scan's start (later than the row's, which is older than the
        racy window), or another size; either way its stat differs from the row, and freshness and the next
        build, which compare every file's stat with its row, see it as modified and read it (a second walk
        would compare the same stat with the same values, only sooner). Only a write that keeps both mtime
        and size (an mtime set back by hand) escapes, and it escapes a second walk as well. A file added
        after the scan is not in the generation and is seen as added; one removed after it keeps its row
        and is seen as removed. So no generation presents content the build did not read as current: what
        it read is checked here, what it did not read carries its own stat."""
        changed = [f.rel_path for f in read if not _same_file(f)]
        changed += [rel for rel in gone if os.path.lexists(os.path.join(self.vault, rel))]
        if changed:
            changed.sort()
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
