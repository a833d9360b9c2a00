"""The index directory is ours: created and marked by us, refused when it is not.

Every writer (build, embed) goes through ``prepare_index_dir`` before it creates, writes or
deletes anything, so that a mistaken ``--index-dir`` (the vault itself, a folder of notes,
``/``, a file, ``/dev/null``, ``/proc/self``) is refused with a typed ``IndexDirError``
(exit 2) instead of having its files reaped or a ``.gitignore`` written into it.

An index directory is ours when it holds our marker file (``MARKER_NAME``, JSON with a
format version). A directory without the marker is claimed only when it is empty (or
absent: it is created), or when everything in it is recognisably a pre-marker index of
ours (only our file names). Reaping and retention delete only files named as we name
them (``is_staging_file``, ``is_generation_file``, and ``core.index.manifest``'s ``is_segment_file`` and
``is_manifest_file`` for ``segments/`` and ``manifests/``).

Read-path safe: only ``os``, ``json`` and the error types.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import (
    IndexDirHoldsNotesError,
    IndexDirInaccessibleError,
    IndexDirIsVaultError,
    IndexDirNotDirectoryError,
    IndexDirNotOursError,
    VaultMissingError,
    VaultNotDirectoryError,
)
from core.index.manifest import is_manifest_file, is_segment_file

if TYPE_CHECKING:
    from core.index.layout import IndexLayout

MARKER_NAME = "vaultsearch-index.json"
MARKER_FORMAT = "vaultsearch-index"
MARKER_VERSION = 1
MARKER_MAX_BYTES = 4096
_STAGING_FILE = re.compile(r"[\w.-]+\.(db|json)\.tmp(-journal|-wal|-shm)?")
_GENERATION_FILE = re.compile(r"g\d{8}T\d{6}-[0-9a-f]{12}\.db")
_ASIDE_FILE = re.compile(r"state\.db(-journal)?\.corrupt-\d+")
# a verification record's temp file (core.index.state.write_verification): .verified-<pid>-<32 hex>.tmp
_RECORD_TEMP_FILE = re.compile(r"\.verified-\d+-[0-9a-f]{32}\.tmp")
# What a pre-marker index directory of ours holds at its top level (verified.json: core.index.state).
_OUR_ROOT_FILES = frozenset(
    {".gitignore", "state.db", "state.db-journal", "build.lock", "index.db", "index.db-journal"}
    | {"index.db.building", "index.db.building-journal", "verified.json"}
    | {"watch.json", "watch.lock"}
)
_OUR_ROOT_DIRS = frozenset({"generations", "staging", "segments", "manifests"})


def is_staging_file(name: str) -> bool:
    """A name the builder or publish gives a staging file (``<hex>.db.tmp``, ``state-<hex>.db.tmp``,
    ``manifest-<hex>.json.tmp``)."""
    return _STAGING_FILE.fullmatch(name) is not None


def is_generation_file(name: str) -> bool:
    """A name the pre-manifest publish gave a one-file generation (``g<yyyymmddTHHMMSS>-<sha256[:12]>.db``)."""
    return _GENERATION_FILE.fullmatch(name) is not None


def is_aside_file(name: str) -> bool:
    """A state database the builder moved aside as unusable (``state.db.corrupt-<ns>``)."""
    return _ASIDE_FILE.fullmatch(name) is not None


def _our_root_file(name: str) -> bool:
    return name in _OUR_ROOT_FILES or is_aside_file(name) or _RECORD_TEMP_FILE.fullmatch(name) is not None


def check_vault(vault: Path) -> None:
    """The vault must be an existing folder: it is read, never created."""
    try:
        st = os.stat(vault)
    except FileNotFoundError:
        raise VaultMissingError(f"vault {vault} does not exist", vault=str(vault)) from None
    except NotADirectoryError:
        raise VaultNotDirectoryError(f"vault {vault} is not a directory", vault=str(vault)) from None
    except OSError as exc:
        raise VaultMissingError(f"vault {vault} cannot be reached: {exc.strerror}", vault=str(vault)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise VaultNotDirectoryError(f"vault {vault} is not a directory", vault=str(vault))


def check_index_dir_for_reading(layout: IndexLayout) -> None:
    """A reader's check: an index dir that exists must be a readable directory (else a typed error)."""
    try:
        st = os.stat(layout.index_dir)
    except FileNotFoundError:
        return  # no index yet: resolve says index_missing
    except NotADirectoryError:
        raise _not_directory(layout.index_dir) from None
    except OSError as exc:
        raise _inaccessible(layout.index_dir, exc) from None
    if not stat.S_ISDIR(st.st_mode):
        raise _not_directory(layout.index_dir)
    if not os.access(layout.index_dir, os.R_OK | os.X_OK):
        raise _inaccessible(layout.index_dir, PermissionError(13, "Permission denied"))


def prepare_index_dir(layout: IndexLayout) -> list[str]:
    """Refuse an index directory that is not ours, else create/mark it and its sub-folders.

    Returns what was done (``created``, ``adopted``) for reports; raises an ``IndexDirError``
    subclass (a ``UsageError``, exit 2) before touching anything when the directory is refused.
    """
    check_vault(layout.vault)
    index_dir, vault = layout.index_dir, layout.vault
    if index_dir == vault or index_dir in vault.parents:
        raise IndexDirIsVaultError(
            f"index directory {index_dir} is the vault {vault} or contains it",
            index_dir=str(index_dir),
            vault=str(vault),
        )
    if vault in index_dir.parents:
        _check_not_in_note_folder(index_dir, vault)
    done: list[str] = []
    entries = _entries(index_dir)
    if entries is None:
        _create(index_dir)
        done.append("created")
    elif MARKER_NAME in entries:
        _check_marker(index_dir)
    elif not entries or _recognisably_ours(index_dir, entries):
        _write_marker(index_dir)
        done.append("adopted" if entries else "claimed")
    else:
        _refuse_foreign(index_dir, entries)
    _check_holds_no_notes(index_dir)
    for directory in (layout.segments_dir, layout.manifests_dir, layout.staging_dir):
        try:
            directory.mkdir(exist_ok=True)
        except OSError as exc:
            raise _inaccessible(directory, exc) from None
    if not os.access(index_dir, os.W_OK | os.X_OK):
        raise _inaccessible(index_dir, PermissionError(13, "Permission denied"))
    return done


def _not_directory(path: Path) -> IndexDirNotDirectoryError:
    return IndexDirNotDirectoryError(f"index directory {path} is not a directory", index_dir=str(path))


def _inaccessible(path: Path, exc: OSError) -> IndexDirInaccessibleError:
    return IndexDirInaccessibleError(
        f"index directory {path} cannot be used: {exc.strerror or exc}",
        index_dir=str(path),
        errno=exc.errno,
    )


def _entries(index_dir: Path) -> list[str] | None:
    """The names in ``index_dir`` (None when it does not exist); typed errors for anything else."""
    try:
        st = os.stat(index_dir)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise _not_directory(index_dir) from None
    except OSError as exc:
        raise _inaccessible(index_dir, exc) from None
    if not stat.S_ISDIR(st.st_mode):
        raise _not_directory(index_dir)
    try:
        return os.listdir(index_dir)
    except OSError as exc:
        raise _inaccessible(index_dir, exc) from None


def _has_note(folder: Path) -> str | None:
    """The name of a ``*.md`` entry directly in ``folder`` (None when there is none or it cannot be listed)."""
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.name.lower().endswith(".md"):
                    return entry.name
    except OSError:
        return None
    return None


def _check_not_in_note_folder(index_dir: Path, vault: Path) -> None:
    """Inside the vault, the index dir must not lie in a sub-folder that holds notes (they would be skipped)."""
    for folder in index_dir.parents:
        if folder == vault:
            return
        found = _has_note(folder)
        if found is not None:
            raise IndexDirHoldsNotesError(
                f"index directory {index_dir} lies in the note folder {folder} (holds {found})",
                index_dir=str(index_dir),
                folder=str(folder),
                note=found,
            )


def _check_holds_no_notes(index_dir: Path) -> None:
    """Notes put into the index dir would be skipped by every scan: refuse rather than drop them silently."""
    for root, dirs, files in os.walk(index_dir):
        notes = [name for name in files if name.lower().endswith(".md")]
        if notes:
            raise IndexDirHoldsNotesError(
                f"index directory {index_dir} holds notes (e.g. {Path(root, notes[0])})",
                index_dir=str(index_dir),
                note=str(Path(root, notes[0])),
            )
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]


def _recognisably_ours(index_dir: Path, entries: list[str]) -> bool:
    """A pre-marker index of ours: only our top-level names, and only our files in our sub-folders."""
    for name in entries:
        path = index_dir / name
        if name in _OUR_ROOT_DIRS:
            if path.is_symlink() or not path.is_dir():
                return False
            check = _DIR_FILES[name]
            try:
                if not all(check(child) for child in os.listdir(path)):
                    return False
            except OSError:
                return False
        elif not _our_root_file(name) or path.is_symlink() or not path.is_file():
            return False
    return True


_DIR_FILES = {
    "generations": is_generation_file,
    "staging": is_staging_file,
    "segments": is_segment_file,
    "manifests": is_manifest_file,
}


def _refuse_foreign(index_dir: Path, entries: list[str]) -> None:
    notes = sorted(name for name in entries if name.lower().endswith(".md"))
    if notes:
        raise IndexDirHoldsNotesError(
            f"index directory {index_dir} holds notes (e.g. {notes[0]})", index_dir=str(index_dir), note=notes[0]
        )
    raise IndexDirNotOursError(
        f"index directory {index_dir} is not empty and was not created by vaultsearch (no {MARKER_NAME})",
        index_dir=str(index_dir),
        entries=sorted(entries)[:10],
    )


def _marker_bytes() -> bytes:
    return (json.dumps({"format": MARKER_FORMAT, "version": MARKER_VERSION}, sort_keys=True) + "\n").encode()


def _create(index_dir: Path) -> None:
    try:
        index_dir.mkdir(parents=True)
    except FileExistsError:  # created meanwhile by another builder: claim it like an existing one
        if MARKER_NAME not in (_entries(index_dir) or []):
            _write_marker(index_dir)
        return
    except NotADirectoryError:
        raise _not_directory(index_dir) from None
    except OSError as exc:
        raise _inaccessible(index_dir, exc) from None
    _write_marker(index_dir)


def _write_marker(index_dir: Path) -> None:
    temp = index_dir / f".{MARKER_NAME}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, _marker_bytes())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, index_dir / MARKER_NAME)
    except OSError as exc:
        try:
            temp.unlink(missing_ok=True)
        except OSError:
            pass  # the directory itself is the problem; reported below
        raise _inaccessible(index_dir, exc) from None


def _check_marker(index_dir: Path) -> None:
    path = index_dir / MARKER_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise IndexDirNotOursError(
            f"marker {path} cannot be read: {exc.strerror}", index_dir=str(index_dir), marker=str(path)
        ) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        raw = os.read(fd, MARKER_MAX_BYTES + 1) if regular else b""
    finally:
        os.close(fd)
    try:
        marker = json.loads(raw.decode("utf-8")) if regular and len(raw) <= MARKER_MAX_BYTES else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        marker = None
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT:
        raise IndexDirNotOursError(f"marker {path} is not a vaultsearch marker", index_dir=str(index_dir))
    if marker.get("version") != MARKER_VERSION:
        raise IndexDirNotOursError(
            f"index directory {index_dir} has marker version {marker.get('version')!r}, this vaultsearch writes "
            f"{MARKER_VERSION}",
            index_dir=str(index_dir),
            expected=MARKER_VERSION,
            actual=marker.get("version"),
        )
