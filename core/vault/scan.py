"""Walk a vault: ignore rules, symlink policy, stat.

``scan_vault`` lists every ``*.md`` file (extension case-insensitive) under the vault with
its size and mtime, fast enough to run before every search as a staleness check: one
``os.scandir`` per folder and one cached ``stat`` per note, nothing opened.

Skipped: every dot-folder and dot-file (``.github/``, ``.obsidian/``, ``.draft.md``, anywhere:
Obsidian hides them; ``include_dot_paths=True`` indexes them, apart from the folders named
``.git``, ``.obsidian``, ``.vaultsearch``, ``.trash``, which are always skipped),
the index directory when it lies inside the vault, and paths matched by the optional
``<vault>/.vaultsearchignore`` (gitignore syntax, ``pathspec.GitIgnoreSpec``; a matched
folder is pruned, as in git).

Problems (``Problem.reason``), recorded instead of raised:

    ignore_file_invalid    a line of .vaultsearchignore is not a valid pattern (that line is
                           dropped, the others apply) or the file is not valid UTF-8
    symlink_outside_vault  a symlink whose real path leaves the vault: never followed
    unreadable             a broken symlink, or a folder/file that cannot be listed/stat'ed/read
    too_large              a note over ``max_bytes`` (default ``MAX_NOTE_BYTES``): excluded
    not_regular_file       a ``*.md`` (or ``.vaultsearchignore``) that is a FIFO, socket or device:
                           never opened for reading in a way that could block, never read
    undecodable_name       a note or folder whose name is not valid UTF-8 (``caf\\xe9.md`` from an
                           old archive): it cannot be stored, searched or returned as text, so it is
                           skipped, its path reported with the undecodable bytes escaped (``\\xe9``)

File names are decoded losslessly (``os.fsdecode``: an undecodable byte becomes a lone surrogate,
``surrogateescape``); ``undecodable`` tells such a name from a valid one, and ``escaped_path``
is the one printable form of it. Every lister (this scan, the freshness walk, the git tree, the
watcher) skips such names the same way.

Reading (``read_file``) is as careful as scanning, because the vault can change in between:
the file is opened with ``O_NONBLOCK | O_NOFOLLOW`` (a FIFO never blocks, a last component
swapped for a symlink is not followed), checked with ``fstat`` to be a regular file, and,
given the vault's real root, the opened descriptor's real path must lie inside the vault
(``/proc/self/fd``; where that is missing, every component is opened with ``O_NOFOLLOW`` from a
descriptor of the root), so "nothing outside the vault is read" holds at read time, and the bytes
returned are those of the descriptor that was checked. Every read of a note uses it: the build,
freshness, ``show`` and ``read_note``.

Symlinks (to files or folders) whose real path stays inside the vault are followed; a
folder reached twice through links (a cycle, or two links to one folder) is walked once.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from core.errors import UsageError
from core.vault.problems import Problem

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

# The staleness check runs this module before every search: what only a vault with an ignore file
# (pathspec) or a read (hashlib) needs is imported there.

MAX_NOTE_BYTES = 16 * 1024 * 1024
IGNORE_FILE = ".vaultsearchignore"
SKIP_DIR_NAMES = frozenset({".git", ".obsidian", ".vaultsearch", ".trash"})


UNDECODABLE_NAME = "undecodable_name"


def undecodable(name: str) -> bool:
    """True when a file name (``os.fsdecode``'d) held bytes that are not UTF-8: it has lone surrogates."""
    if name.isascii():
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def escaped_path(rel: str) -> str:
    """A path holding undecodable bytes as printable text: each such byte as ``\\xNN``."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def undecodable_problem(rel: str) -> Problem:
    return Problem(escaped_path(rel), UNDECODABLE_NAME, "the name is not valid UTF-8: not indexed")


class ScannedFile(NamedTuple):
    """One note file. A named tuple with the path kept as the listing's string: the staleness
    scan builds thousands of these, and a frozen dataclass plus a Path each cost more than the
    stat itself."""

    rel_path: str  # POSIX, relative to the vault root
    os_path: str  # absolute path, as os.scandir gave it
    size: int
    mtime_ns: int

    @property
    def path(self) -> Path:
        return Path(self.os_path)


@dataclass(frozen=True)
class ScanResult:
    files: list[ScannedFile]  # sorted by rel_path
    problems: list[Problem]
    links: bool = False  # the walk met a symlink (followed or not): only a walk can say what it reaches


class FileRefusedError(OSError):
    """A vault file that is not read: not a regular file, or its real path leaves the vault.
    Internal to the build (it becomes a ``Problem`` with ``reason``), never raised to a caller."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def load_ignore_spec(vault: Path) -> tuple[GitIgnoreSpec | None, list[Problem]]:
    """The vault's ignore patterns (None when there are none) and any problem with them. A
    ``.vaultsearchignore`` that is not a regular file, or leaves the vault, is not read."""
    ignore_path = vault / IGNORE_FILE
    try:
        raw, _ = read_file(ignore_path, root=os.path.realpath(vault))
    except FileNotFoundError:
        return None, []
    except FileRefusedError as exc:
        return None, [Problem(IGNORE_FILE, exc.reason, exc.detail)]
    except OSError as exc:
        return None, [Problem(IGNORE_FILE, "unreadable", _os_detail(exc))]
    return parse_ignore_spec(raw)


def parse_ignore_spec(raw: bytes) -> tuple[GitIgnoreSpec | None, list[Problem]]:
    """Ignore patterns from the bytes of a ``.vaultsearchignore`` (of the working tree or a git tree)."""
    import re

    from pathspec import GitIgnoreSpec

    problems: list[Problem] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        problems.append(Problem(IGNORE_FILE, "ignore_file_invalid", f"invalid UTF-8 at byte {exc.start}"))
    good: list[str] = []
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        try:
            GitIgnoreSpec.from_lines([line])
        except (ValueError, re.error) as exc:
            problems.append(Problem(IGNORE_FILE, "ignore_file_invalid", f"line {number}: {line!r}: {exc}"))
            continue
        good.append(line)
    spec = GitIgnoreSpec.from_lines(good)
    return (spec if len(spec.patterns) else None), problems


@dataclass
class _Walk:
    """State of one scan: the vault's real root, what to skip, and what was found."""

    root: str  # real path of the vault
    skip: frozenset[tuple[int, int]]  # (st_dev, st_ino) of folders never entered (the index dir)
    spec: GitIgnoreSpec | None
    max_bytes: int
    files: list[ScannedFile]
    problems: list[Problem]
    visited: set[tuple[int, int]]  # (st_dev, st_ino) of folders walked
    include_dot_paths: bool = False
    links: bool = False  # a symlink was met

    def hidden(self, name: str) -> bool:
        """A dot-file or dot-folder, skipped unless dot paths are included."""
        return not self.include_dot_paths and name.startswith(".")

    def inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)

    def ignored(self, rel: str) -> bool:
        return self.spec is not None and self.spec.match_file(rel)


def _dir_key(path: Path | str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class WalkStopped(Exception):
    """``scan_vault``'s ``stop()`` said so between two folders: the walk was given up, nothing is listed."""


def scan_vault(
    vault: Path,
    *,
    index_dir: Path | None = None,
    max_bytes: int = MAX_NOTE_BYTES,
    include_dot_paths: bool = False,
    stop: Callable[[], bool] | None = None,
) -> ScanResult:
    """Every note file of the vault (sorted by rel_path) and the problems met on the way.

    Raises ``UsageError`` when ``vault`` is not a folder; everything else is a Problem. ``stop``: asked before
    each folder; True gives the walk up (``WalkStopped``: a watcher's quiet walk, when an event arrives).
    """
    vault = Path(vault)
    if not vault.is_dir():
        raise UsageError(f"vault is not a directory: {vault}", vault=str(vault))
    index_key = _dir_key(index_dir) if index_dir is not None else None
    spec, problems = load_ignore_spec(vault)
    root_key = _dir_key(vault)
    walk = _Walk(
        os.path.realpath(vault),
        frozenset({index_key} if index_key else ()),
        spec,
        max_bytes,
        [],
        problems,
        {root_key} if root_key else set(),
        include_dot_paths,
    )
    stack: list[tuple[Path, str]] = [(vault.absolute(), "")]
    while stack:
        if stop is not None and stop():
            raise WalkStopped(str(vault))
        folder, prefix = stack.pop()
        _walk_folder(walk, folder, prefix, stack)
    walk.files.sort(key=itemgetter(0))  # rel_path, in C: a lambda per file cost 0.1 s at 100k notes
    return ScanResult(walk.files, walk.problems, walk.links)


def _walk_folder(walk: _Walk, folder: Path, prefix: str, stack: list[tuple[Path, str]]) -> None:
    """List one folder: queue its sub-folders, record its notes and problems.

    The common case (a plain ``.md`` file) is inlined: this loop is the staleness check's
    hot path, and ``DirEntry.stat`` reuses what the listing already knows where it can.
    """
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError as exc:
        walk.problems.append(Problem(prefix.rstrip("/") or ".", "unreadable", _os_detail(exc)))
        return
    files, spec, max_bytes, hide = walk.files, walk.spec, walk.max_bytes, not walk.include_dot_paths
    for entry in entries:
        name = entry.name
        if hide and name[0] == ".":  # walk.hidden, inlined
            continue
        rel = prefix + name
        try:
            if not name.isascii() and undecodable(name):
                _visit_undecodable(walk, entry, rel)
            elif entry.is_file(follow_symlinks=False):
                if name[-3:].lower() != ".md" or (spec is not None and spec.match_file(rel)):
                    continue
                st = entry.stat(follow_symlinks=False)
                if st.st_size > max_bytes:
                    walk.problems.append(_too_large(rel, st.st_size, max_bytes))
                else:
                    files.append(ScannedFile(rel, entry.path, st.st_size, st.st_mtime_ns))
            elif entry.is_symlink():
                _visit_symlink(walk, entry, folder, rel, stack)
            elif entry.is_dir(follow_symlinks=False):
                _visit_dir(walk, entry, folder, rel, stack)
            elif name[-3:].lower() == ".md" and not (spec is not None and spec.match_file(rel)):
                walk.problems.append(_not_regular(rel))
        except OSError as exc:
            walk.problems.append(Problem(rel, "unreadable", _os_detail(exc)))


def _visit_undecodable(walk: _Walk, entry: os.DirEntry[str], rel: str) -> None:
    """A name that is not valid UTF-8: a note or folder (not ignored) is reported, nothing under it walked."""
    is_dir = entry.is_dir()
    if (is_dir or entry.name[-3:].lower() == ".md") and not walk.ignored(rel + "/" if is_dir else rel):
        walk.problems.append(undecodable_problem(rel))


def _visit_dir(walk: _Walk, entry: os.DirEntry[str], folder: Path, rel: str, stack: list[tuple[Path, str]]) -> None:
    """Queue a real (non-symlink) sub-folder unless it is skipped, ignored or already walked."""
    if entry.name in SKIP_DIR_NAMES or walk.ignored(rel + "/"):
        return
    st = entry.stat(follow_symlinks=False)
    key = (st.st_dev, st.st_ino)
    if key not in walk.skip and key not in walk.visited:
        walk.visited.add(key)
        stack.append((folder / entry.name, rel + "/"))


def _visit_symlink(walk: _Walk, entry: os.DirEntry[str], folder: Path, rel: str, stack: list[tuple[Path, str]]) -> None:
    """Follow a symlink only when its real path stays inside the vault."""
    walk.links = True
    is_note = entry.name.lower().endswith(".md")
    try:
        st = os.stat(entry.path)
    except FileNotFoundError:
        if (is_note or "." not in entry.name) and not walk.ignored(rel):
            walk.problems.append(Problem(rel, "unreadable", f"broken symlink to {os.readlink(entry.path)}"))
        return
    is_dir = stat.S_ISDIR(st.st_mode)
    if (
        (not is_dir and not is_note)
        or (is_dir and entry.name in SKIP_DIR_NAMES)
        or walk.ignored(rel + "/" if is_dir else rel)
    ):
        return
    real = os.path.realpath(entry.path)
    if not walk.inside(real):
        walk.problems.append(Problem(rel, "symlink_outside_vault", f"points to {real}"))
        return
    key = (st.st_dev, st.st_ino)
    if is_dir and key not in walk.visited and key not in walk.skip:
        walk.visited.add(key)
        stack.append((folder / entry.name, rel + "/"))
    elif stat.S_ISREG(st.st_mode):
        _add_file(walk, folder / entry.name, rel, st)
    elif not is_dir:
        walk.problems.append(_not_regular(rel))


def _not_regular(rel: str) -> Problem:
    return Problem(rel, "not_regular_file", "a FIFO, socket or device, not a file: not read")


def _add_file(walk: _Walk, path: Path, rel: str, st: os.stat_result) -> None:
    if st.st_size > walk.max_bytes:
        walk.problems.append(_too_large(rel, st.st_size, walk.max_bytes))
    else:
        walk.files.append(ScannedFile(rel, str(path), st.st_size, st.st_mtime_ns))


def _too_large(rel: str, size: int, limit: int) -> Problem:
    return Problem(rel, "too_large", f"{size} bytes > limit {limit}")


def _os_detail(exc: OSError) -> str:
    return f"{type(exc).__name__}: {exc.strerror or exc}"


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_FD_DIR = "/proc/self/fd"
_READ_BLOCK = 1 << 20  # a file that grew since its fstat is read on in blocks of this size
_HAS_FD_DIR = os.path.isdir(_FD_DIR)


def _open_confined(target: str, root: str | None) -> int:
    """Open ``target`` without blocking; with ``root``, never through a final symlink that leaves it.

    The common case (a plain file) is one ``open`` with ``O_NOFOLLOW``; a note that is a symlink
    (``ELOOP``) is opened at its real path, which must lie inside ``root``, again with ``O_NOFOLLOW``.
    Where ``/proc/self/fd`` cannot show what was opened, every component below ``root`` is opened
    with ``O_NOFOLLOW`` from a descriptor of ``root`` (``_open_beneath``) instead.
    """
    if root is None:
        return os.open(target, _OPEN_FLAGS)
    if not _HAS_FD_DIR:
        return _open_beneath(root, target)
    try:
        return os.open(target, _OPEN_FLAGS | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EMLINK):  # the last component is a symlink (Linux, BSD)
            raise
    real = os.path.realpath(target)
    if not _inside(root, real):
        raise FileRefusedError("symlink_outside_vault", f"points to {real}: not read")
    return os.open(real, _OPEN_FLAGS | os.O_NOFOLLOW)


def _open_beneath(root: str, target: str) -> int:
    """Open ``target``'s real path walking down from a descriptor of ``root``, each folder and the
    file itself opened with ``O_NOFOLLOW`` relative to the previous descriptor: a component that
    became a symlink since ``realpath`` fails the open (``ELOOP``/``ENOTDIR``) instead of leaving."""
    real = os.path.realpath(target)
    if not _inside(root, real):
        raise FileRefusedError("symlink_outside_vault", f"points to {real}: not read")
    *folders, name = os.path.relpath(real, root).split(os.sep)
    dir_flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(root, dir_flags)
    try:
        for folder in folders:
            try:
                below = os.open(folder, dir_flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise FileRefusedError(
                        "symlink_outside_vault", f"{folder!r} changed into a link: not read"
                    ) from exc
                raise
            os.close(fd)
            fd = below
        try:
            return os.open(name, _OPEN_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise FileRefusedError("symlink_outside_vault", f"{name!r} changed into a link: not read") from exc
            raise
    finally:
        os.close(fd)


def _inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def read_file(path: str | os.PathLike[str], *, root: str | None = None, limit: int | None = None) -> tuple[bytes, str]:
    """Read a regular file without blocking and return (data, sha256 hex).

    With ``root`` (the vault's real path) the file must lie inside it when it is opened: the
    bytes returned are those of the one descriptor whose path was checked (``/proc/self/fd``, or
    opened component by component without following links). With ``limit``, a file of more than
    ``limit`` bytes is refused (``too_large``) having read at most ``limit + 1`` bytes.
    Raises ``FileRefusedError`` (an ``OSError``) for a non-regular file, a file outside the
    vault or over ``limit``, and ``OSError`` when the file cannot be read (``FileNotFoundError``
    when it is gone).
    """
    import hashlib

    fd = _open_confined(os.fspath(path), root)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefusedError("not_regular_file", "a FIFO, socket or device, not a file: not read")
        if root is not None and _HAS_FD_DIR:
            opened = os.readlink(f"{_FD_DIR}/{fd}")
            if not _inside(root, opened):
                raise FileRefusedError("symlink_outside_vault", f"opened {opened}, outside the vault: not read")
        if limit is not None and st.st_size > limit:
            raise FileRefusedError("too_large", f"{st.st_size} bytes > limit {limit}")
        parts = [os.read(fd, st.st_size + 1)]  # the whole file, then the empty read of its end
        got = len(parts[0])
        while parts[-1] and (limit is None or got <= limit):
            parts.append(os.read(fd, _READ_BLOCK if limit is None else min(_READ_BLOCK, limit + 1 - got)))
            got += len(parts[-1])
        if limit is not None and got > limit:
            raise FileRefusedError("too_large", f"over {limit} bytes (grew while read)")
        data = b"".join(parts)
    finally:
        os.close(fd)
    return data, hashlib.sha256(data).hexdigest()
