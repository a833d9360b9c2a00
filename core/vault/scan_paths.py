"""A scan brought up to date at a few paths (a watcher's events), by the rules of the walk (``core.vault.scan``).

``rescan_paths(previous, paths)`` is the ``ScanResult`` a full ``scan_vault`` would give now, provided that only
``paths`` changed since ``previous`` was listed: each path is looked at as the walk would meet it (hidden and
skipped folders, the index directory, the ignore file's patterns on every folder above it and on the file, the
``.md`` suffix, the size limit, a FIFO or device), with one ``lstat`` per folder above it and one for the file.

It gives up (None: only a walk can say) wherever the walk's answer depends on more than the path: a previous
scan that met a symlink (what a link reaches, and a folder reached twice, are the walk's), a folder it could
not list, a path with a symlink, a folder named like a note or an undecodable name on it. A change of the
ignore file or of a folder is never a path here: the watcher asks for a walk then.
"""

from __future__ import annotations

import os
import stat
from operator import itemgetter
from pathlib import Path

from core.vault.problems import Problem
from core.vault.scan import (
    SKIP_DIR_NAMES,
    ScannedFile,
    ScanResult,
    _not_regular,
    _os_detail,
    _too_large,
    load_ignore_spec,
    undecodable,
)

# the problems a path-by-path look can tell again; any other (a folder not listed) needs the walk
PATH_PROBLEMS = frozenset({"too_large", "not_regular_file", "ignore_file_invalid"})


class _GiveUp(Exception):
    """Only a walk can say what this path is."""


def _listed(vault: Path, index_key: tuple[int, int] | None, rel: str, include_dot_paths: bool, spec: object) -> bool:
    """Would the walk enter every folder above ``rel`` and consider its name? Raises ``_GiveUp``."""
    *folders, name = rel.split("/")
    if any(undecodable(part) for part in (*folders, name)):
        raise _GiveUp(rel)
    if any(not part or part in (".", "..") for part in (*folders, name)):
        raise _GiveUp(rel)
    hide = not include_dot_paths
    if (hide and name.startswith(".")) or name[-3:].lower() != ".md":
        return False
    at = os.fspath(vault.absolute())
    prefix = ""
    for part in folders:
        if (hide and part.startswith(".")) or part in SKIP_DIR_NAMES:
            return False
        prefix += part + "/"
        if spec is not None and spec.match_file(prefix):  # type: ignore[attr-defined]
            return False
        at = os.path.join(at, part)
        try:
            st = os.lstat(at)
        except FileNotFoundError:
            return False  # the folder went: its notes went with it
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise _GiveUp(rel)
        if (st.st_dev, st.st_ino) == index_key:
            return False
    return spec is None or not spec.match_file(rel)  # type: ignore[attr-defined]


def _look(vault: Path, rel: str, max_bytes: int) -> ScannedFile | Problem | None:
    """What the walk records for the listed name ``rel``: a note, a problem, or nothing (gone)."""
    path = os.path.join(os.fspath(vault.absolute()), rel)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Problem(rel, "unreadable", _os_detail(exc))
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        raise _GiveUp(rel)
    if not stat.S_ISREG(st.st_mode):
        return _not_regular(rel)
    if st.st_size > max_bytes:
        return _too_large(rel, st.st_size, max_bytes)
    return ScannedFile(rel, path, st.st_size, st.st_mtime_ns)


def rescan_paths(
    vault: Path,
    previous: ScanResult,
    paths: set[str] | frozenset[str],
    *,
    index_dir: Path | None,
    max_bytes: int,
    include_dot_paths: bool = False,
) -> ScanResult | None:
    """``previous`` with ``paths`` (vault-relative, POSIX) looked at again; None when only a walk can say."""
    if previous.links or any(p.reason not in PATH_PROBLEMS for p in previous.problems):
        return None
    try:
        index_st = os.stat(index_dir) if index_dir is not None else None
    except FileNotFoundError:
        index_st = None
    index_key = (index_st.st_dev, index_st.st_ino) if index_st is not None else None
    spec, _ = load_ignore_spec(vault)  # its problems are the previous scan's: a change of the file is a walk
    found: list[ScannedFile] = []
    problems: list[Problem] = []
    try:
        for rel in sorted(paths):
            if not _listed(vault, index_key, rel, include_dot_paths, spec):
                continue
            seen = _look(vault, rel, max_bytes)
            if isinstance(seen, ScannedFile):
                found.append(seen)
            elif seen is not None:
                problems.append(seen)
    except _GiveUp:
        return None
    files = [f for f in previous.files if f.rel_path not in paths] + found
    files.sort(key=itemgetter(0))
    kept = [p for p in previous.problems if p.path not in paths]
    return ScanResult(files, kept + problems, False)
