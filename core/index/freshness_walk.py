"""The freshness check's stat walk (``core.index.freshness``): what the scanner lists, diffed against
the served generation's (path, mtime_ns, size) rows as it goes, stat-changed files hashed (at most
``HASH_BUDGET``); and the same diff for a watcher's few paths. On the read path: the scanner's
helpers are imported inside functions."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

# A file whose mtime is this close to a build's scan (or later: a future mtime) may have changed
# within the same timestamp tick; the build and freshness hash it instead of trusting (mtime, size).
RACY_NS = 2_000_000_000
HASH_BUDGET = 256  # stat-changed files hashed per check; beyond it a stat change counts as modified
_DEADLINE_MASK = 1023  # a walk looks at the clock every 1,024 entries (and at every folder)


Row = tuple[str, int, int, str | None]  # a source row: (sha256, mtime_ns, size, lower(classification))


@dataclass(frozen=True)
class _Known:
    """The served generation's files: rel_path -> (mtime_ns, size); the rest of a row is looked up
    for the few paths that differ (reading two columns of every row costs half of reading four)."""

    rows: dict[str, tuple[int, int]]
    max_note_bytes: int | None
    include_dot_paths: bool
    racy_after: int = 1 << 62  # a row with an mtime_ns at or past this is hashed (racy or future: never trusted)


@dataclass(frozen=True)
class _Diff:
    at: float  # epoch seconds the check started
    added: tuple[str, ...]
    modified: tuple[str, ...]
    removed: tuple[str, ...]
    hashed: int
    unverified: int  # stat changes beyond the hash budget, counted as modified
    over_budget: int | None = None  # files walked when the budget ran out (the walk was abandoned)
    seconds: float = 0.0
    budget: float | None = None  # the budget the walk had
    rows: dict[str, Row] = field(default_factory=dict)  # the generation's rows of the changed paths
    unverified_paths: frozenset[str] = frozenset()  # the modified ones counted without a hash
    folders: tuple[tuple[str, int], ...] = ()  # (folder, mtime_ns) of every folder the walk listed


class _OverBudget(Exception):
    def __init__(self, walked: int) -> None:
        super().__init__(walked)
        self.walked = walked


class _FastWalk:
    """One freshness walk: what ``scan_vault`` lists (its rules, inlined: the hot loop stats and
    compares, it builds no objects; tests/serve/test_freshness_walk.py holds the two to the same
    answer), diffed against the generation's rows as it goes."""

    def __init__(self, vault: Path, index_dir: Path, known: _Known, max_bytes: int, deadline: float | None) -> None:
        from core.vault.scan import SKIP_DIR_NAMES, load_ignore_spec, undecodable

        spec, _ = load_ignore_spec(vault)
        self.undecodable = undecodable  # a name that is not valid UTF-8: the scanner skips it too
        self.match = spec.match_file if spec is not None else None
        self.skip_names = SKIP_DIR_NAMES
        self.known, self.max_bytes, self.deadline = known, max_bytes, deadline
        self.root = os.path.realpath(vault)
        self.root_slash = self.root.rstrip(os.sep) + os.sep
        self.skip: set[tuple[int, int]] = set()
        try:
            st = os.stat(index_dir)
            self.skip.add((st.st_dev, st.st_ino))
        except FileNotFoundError:
            pass
        st = os.stat(vault)
        self.visited = {(st.st_dev, st.st_ino)}
        self.stack = [(str(vault.absolute()), "")]
        self.added: list[str] = []
        self.changed: list[tuple[str, str]] = []  # (rel, path) whose (mtime_ns, size) differ
        self.seen: list[str] = []
        self.folders: list[tuple[str, int]] = []  # (folder, mtime_ns before it was listed)
        self.count = 0

    def run(self) -> _FastWalk:
        while self.stack:
            if self.deadline is not None and time.perf_counter() > self.deadline:
                raise _OverBudget(len(self.seen))
            self._folder(*self.stack.pop())
        return self

    def _note(self, rel: str, path: str, size: int, mtime_ns: int) -> None:
        if size > self.max_bytes:
            return  # too large: the scanner leaves it out too
        self.seen.append(rel)
        old = self.known.rows.get(rel)
        if old is None:
            self.added.append(rel)
        elif old[0] != mtime_ns or old[1] != size or old[0] >= self.known.racy_after:
            self.changed.append((rel, path))

    def _folder(self, folder: str, prefix: str) -> None:
        try:
            self.folders.append((folder, os.stat(folder).st_mtime_ns))  # stat first: a later change differs
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            return  # unreadable: a scan problem, nothing listed
        dots, match, rows, deadline = self.known.include_dot_paths, self.match, self.known.rows, self.deadline
        racy = self.known.racy_after
        seen, added, changed = self.seen, self.added, self.changed
        for entry in entries:
            name = entry.name
            if (not dots and name.startswith(".")) or (not name.isascii() and self.undecodable(name)):
                continue
            rel = prefix + name
            self.count += 1
            if not self.count & _DEADLINE_MASK and deadline is not None and time.perf_counter() > deadline:
                raise _OverBudget(len(seen))
            try:
                if entry.is_file(follow_symlinks=False):  # the common case, inlined
                    if name[-3:].lower() != ".md" or (match is not None and match(rel)):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    if st.st_size > self.max_bytes:
                        continue  # too large: the scanner leaves it out too
                    seen.append(rel)
                    old = rows.get(rel)
                    if old is None:
                        added.append(rel)
                    elif old[0] != st.st_mtime_ns or old[1] != st.st_size or old[0] >= racy:
                        changed.append((rel, entry.path))
                elif entry.is_symlink():
                    self._link(entry, rel)
                elif entry.is_dir(follow_symlinks=False):
                    if name in self.skip_names or (match is not None and match(rel + "/")):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    self._enter((st.st_dev, st.st_ino), entry.path, rel)
                # anything else (a FIFO, socket or device) is never a note
            except OSError:
                continue  # vanished or unreadable between the listing and the stat: a scan problem

    def _enter(self, key: tuple[int, int], path: str, rel: str) -> None:
        if key not in self.skip and key not in self.visited:
            self.visited.add(key)
            self.stack.append((path, rel + "/"))

    def _link(self, entry: os.DirEntry[str], rel: str) -> None:
        """A symlink is followed only when its real path stays inside the vault (as the scanner does)."""
        is_note = entry.name[-3:].lower() == ".md"
        try:
            st = os.stat(entry.path)
        except FileNotFoundError:
            return  # broken: a scan problem
        is_dir = stat.S_ISDIR(st.st_mode)
        if (not is_dir and not is_note) or (is_dir and entry.name in self.skip_names):
            return
        if self.match is not None and self.match(rel + "/" if is_dir else rel):
            return
        real = os.path.realpath(entry.path)
        if real != self.root and not real.startswith(self.root_slash):
            return  # leaves the vault: never followed
        if is_dir:
            self._enter((st.st_dev, st.st_ino), entry.path, rel)
        elif stat.S_ISREG(st.st_mode):
            self._note(rel, entry.path, st.st_size, st.st_mtime_ns)


def _fast_walk(
    vault: Path, index_dir: Path, known: _Known, max_bytes: int, deadline: float | None
) -> tuple[list[str], list[tuple[str, str]], list[str], list[tuple[str, int]]]:
    """(added, stat-changed (rel, path), every note path seen, (folder, mtime_ns) of each folder
    listed); ``_OverBudget`` past ``deadline``."""
    from core.errors import UsageError

    if not os.path.isdir(vault):
        raise UsageError(f"vault is not a directory: {vault}", vault=str(vault))
    walk = _FastWalk(vault, index_dir, known, max_bytes, deadline).run()
    return walk.added, walk.changed, walk.seen, walk.folders


def folders_unchanged(folders: Iterable[tuple[str, int]]) -> bool:
    """Is every folder a walk listed still as it was (no note added, removed or renamed in it)?"""
    for folder, mtime_ns in folders:
        try:
            if os.stat(folder).st_mtime_ns != mtime_ns:
                return False
        except OSError:
            return False
    return True


def _verify(
    root: str, changed: Iterable[tuple[str, str]], sha_of: Callable[[str], str]
) -> tuple[list[str], int, list[str]]:
    """The stat-changed files whose content differs (hashing at most ``HASH_BUDGET``), how many
    were hashed, and those counted as modified unhashed (beyond the budget)."""
    from core.vault.scan import read_file

    modified: list[str] = []
    unverified: list[str] = []
    hashed = 0
    for rel, path in changed:
        if hashed >= HASH_BUDGET:
            unverified.append(rel)
            modified.append(rel)
            continue
        hashed += 1
        try:
            differs = read_file(path, root=root)[1] != sha_of(rel)
        except FileNotFoundError:  # deleted between the walk and the read: it is removed
            continue
        except OSError:  # unreadable or refused (not a regular file, leaves the vault): changed
            differs = True
        if differs:
            modified.append(rel)
    return modified, hashed, unverified


def _diff_paths(vault: Path, rows: dict[str, Row], paths: tuple[str, ...]) -> _Diff:
    """What the watcher's ``paths`` are now, against the generation's ``rows`` of them: gone and
    indexed (removed), new (added: a file the next build may still skip counts until it says so),
    or with other content (modified). Every indexed path is hashed: the watcher saw it change, so
    an edit that kept the size and put the mtime back is no less an edit."""
    started, t = time.time(), time.perf_counter()
    added: list[str] = []
    removed: list[str] = []
    changed: list[tuple[str, str]] = []
    for rel in paths:
        path = os.path.join(vault, rel)
        try:
            os.stat(path)
        except FileNotFoundError:
            if rel in rows:
                removed.append(rel)
            continue
        except OSError:
            if rel in rows:
                changed.append((rel, path))
            continue
        if rel in rows:
            changed.append((rel, path))
        else:
            added.append(rel)
    modified, hashed, unverified = _verify(os.path.realpath(vault), changed, lambda rel: rows[rel][0])
    return _Diff(
        started,
        tuple(added),
        tuple(modified),
        tuple(removed),
        hashed,
        len(unverified),
        None,
        time.perf_counter() - t,
        rows=rows,
        unverified_paths=frozenset(unverified),
    )
