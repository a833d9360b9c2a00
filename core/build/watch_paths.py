"""Which watched paths a build must look at (``core.build.watch``): a note's path, a walk, or nothing.

``relevant_path`` gives the vault-relative path of a changed ``*.md`` file (``core.vault.scan_paths`` applies the
walk's rules to it), ``RESCAN`` for a change only a walk can resolve (the ignore file, a folder created, or one
moved or deleted that held notes in the baseline generation), else None (not a note, or the index's own files).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from core.errors import IndexMissingError, VaultSearchError
from core.index.layout import IndexLayout
from core.index.tables import notes as notes_table
from core.index.verify import connect_readonly, resolve

IGNORE_FILE = ".vaultsearchignore"
SKIPPED_PARTS = (".git", ".obsidian", ".trash")
RESCAN = "\x00rescan"  # the pending key of an event only a walk can resolve


def holds_notes_under(layout: IndexLayout, rel: str) -> bool:
    """Did the baseline generation index anything under the folder ``rel``?"""
    try:
        resolved = resolve(layout)
        conn = connect_readonly(resolved)  # the file may go between the two (a publish, a deleted vault)
    except IndexMissingError:
        return False  # nothing indexed yet: the first build lists everything anyway
    except VaultSearchError:
        return True  # the index cannot say: a walk decides
    try:
        return notes_table.holds_files_under(conn, rel)
    finally:
        conn.close()


def relevant_path(vault: Path, layout: IndexLayout, path: str, holds: Callable[[str], bool]) -> str | None:
    """The vault-relative path of a changed note, ``RESCAN`` for a change only a walk can
    resolve (the ignore file, a folder), else None (not a note, or ours)."""
    p = Path(path)
    try:
        rel = p.resolve().relative_to(vault) if p.is_absolute() else p
    except ValueError:
        try:
            rel = p.relative_to(vault)
        except ValueError:
            return None
    if p.is_relative_to(layout.index_dir) or any(part in SKIPPED_PARTS for part in rel.parts):
        return None
    if rel.name == IGNORE_FILE and len(rel.parts) == 1:
        return RESCAN
    if rel.suffix.lower() == ".md":
        return rel.as_posix()
    try:
        is_dir = stat.S_ISDIR(os.stat(p if p.is_absolute() else vault / p).st_mode)
    except FileNotFoundError:  # gone: a deleted file, or a folder moved or deleted
        return RESCAN if rel.parts and holds(rel.as_posix()) else None
    except OSError:
        return RESCAN
    return RESCAN if is_dir else None
