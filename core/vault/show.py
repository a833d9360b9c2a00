"""``vaultsearch show``: one note (or a section, or a line range) read from the vault itself.

The vault is the truth, so ``show`` reads the file, not the index: what it prints is what
Obsidian opens. Line numbers are 1-based and count every line of the file (frontmatter
included), the same numbering as a hit's line range. The path must name a Markdown file
inside the vault: ``..``, absolute paths and symlinks that leave the vault are refused with
``NoteNotFoundError``, as are a section or a line range the note does not have.

Every read of a note by path (``show`` and the servers' ``read_note``) goes through
:func:`read_confined`: one open, confined to the vault and pinned (``core.vault.scan.read_file``:
no-follow, non-blocking, a regular file, the opened descriptor's path checked), whose bytes are
what is served; a folder or link flipped out of the vault after the path was checked is
``path_outside_vault``, a FIFO ``not_regular_file``, a note over the size limit ``note_too_large``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.errors import (
    NoteNotFoundError,
    NoteTooLargeError,
    NotRegularFileError,
    PathOutsideVaultError,
    UsageError,
)
from core.index.ownership import check_vault
from core.ranking.filters import UNCLASSIFIED, Filters
from core.vault.chunking import heading_spans, mask_code
from core.vault.names import file_stem
from core.vault.notes import decode_text, is_binary, read_frontmatter
from core.vault.scan import MAX_NOTE_BYTES, FileRefusedError, read_file
from core.vault.suggest import shown_title, suggest_notes

_LINES = re.compile(r"(\d+)?:(\d+)?|(\d+)")


@dataclass(frozen=True)
class NoteView:
    rel_path: str
    title: str
    frontmatter: dict[str, Any]  # the YAML as data ({} when absent or unreadable)
    line_start: int  # 1-based, inclusive, lines of the file
    line_end: int
    lines: tuple[str, ...]  # the text of lines line_start..line_end
    section: str | None
    total_lines: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lines"] = list(self.lines)
        return d


def parse_line_range(spec: str) -> tuple[int | None, int | None]:
    """``A:B``, ``A:``, ``:B`` or ``A`` (1-based, inclusive) -> (start, end); a bad form is a UsageError."""
    match = _LINES.fullmatch(spec.strip())
    if match is None:
        raise UsageError(f"--lines takes A:B (1-based, inclusive), not {spec!r}", value=spec)
    if match.group(3) is not None:
        return int(match.group(3)), int(match.group(3))
    start = int(match.group(1)) if match.group(1) else None
    end = int(match.group(2)) if match.group(2) else None
    if (start is not None and start < 1) or (start is not None and end is not None and end < start):
        raise UsageError(f"--lines {spec!r}: need 1 <= A <= B", value=spec)
    return start, end


def confined_note_path(vault: Path, rel_path: str) -> tuple[Path, str]:
    """(real path, POSIX rel_path) of a note inside the vault, or ``NoteNotFoundError``."""
    check_vault(vault)
    root = os.path.realpath(vault)
    candidate = _candidate(rel_path)
    if "\x00" in candidate or candidate == ".md":
        raise NoteNotFoundError(f"not a note path: {rel_path!r}", path=rel_path)
    try:
        real = os.path.realpath(os.path.join(root, candidate))
    except OSError:  # a link removed while it was resolved (realpath races with the vault)
        raise NoteNotFoundError(f"no note {candidate!r} in the vault", path=candidate) from None
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        raise NoteNotFoundError(f"{rel_path!r} is outside the vault", path=rel_path)
    if not os.path.isfile(real):
        raise _no_note(candidate)
    return Path(real), Path(os.path.relpath(real, root)).as_posix()


def _candidate(rel_path: str) -> str:
    """The path as asked, POSIX, with ``.md`` (Obsidian names a note without its extension)."""
    candidate = rel_path.replace("\\", "/").strip()
    return candidate if candidate.lower().endswith(".md") else candidate + ".md"


def _no_note(candidate: str) -> NoteNotFoundError:
    """The one answer for a note that is not there, or that the caller may not see: the same words."""
    return NoteNotFoundError(f"no note {candidate!r} in the vault", path=candidate)


def _with_suggestions(
    exc: NoteNotFoundError, vault: Path, asked: str, classifications: tuple[str, ...] | None
) -> NoteNotFoundError:
    """``exc`` with the closest visible notes as its hint and evidence (``suggestions``)."""
    found = suggest_notes(vault, asked, classifications=classifications)
    if found:
        named = ", ".join(
            s.rel_path if s.title == file_stem(s.rel_path) else f"{s.rel_path} ({s.title})" for s in found
        )
        hint = f"did you mean: {named}?"
    else:
        hint = "no note has a name close to it; find it with: vaultsearch search VAULT WORDS"
    return NoteNotFoundError(exc.message, hint=hint, **exc.evidence, suggestions=[s.rel_path for s in found])


def read_confined(root: str, rel: str, *, limit: int) -> tuple[bytes, str]:
    """(bytes, SHA-256) of the note at ``rel`` under the vault's real path ``root``, read through
    one confined, pinned open (``read_file``) of at most ``limit`` bytes; typed errors otherwise."""
    try:
        return read_file(os.path.join(root, rel), root=root, limit=limit)
    except FileNotFoundError:
        raise NoteNotFoundError(f"{rel!r} is no longer in the vault", path=rel) from None
    except FileRefusedError as exc:
        if exc.reason == "not_regular_file":
            raise NotRegularFileError(f"{rel!r} is a FIFO, socket or device, not a note: not read", path=rel) from None
        if exc.reason == "too_large":
            raise NoteTooLargeError(f"{rel!r} is larger than {limit} bytes: not read", path=rel, limit=limit) from None
        raise PathOutsideVaultError(f"{rel!r} resolves outside the vault", path=rel) from None
    except OSError as exc:
        raise NoteNotFoundError(f"{rel!r} cannot be read: {exc.strerror or exc}", path=rel) from None


def _section_lines(text: str, body_offset: int, section: str) -> tuple[int, int]:
    """(first, last) 1-based file lines of the section whose heading is ``section`` (case-insensitive)."""
    body = text[body_offset:]
    heads = heading_spans(mask_code(body))
    wanted = section.strip().lstrip("#").strip().casefold()
    for i, head in enumerate(heads):
        if head.text.strip().casefold() != wanted:
            continue
        end = next((h.start for h in heads[i + 1 :] if h.level <= head.level), len(body))
        first = text.count("\n", 0, body_offset + head.start) + 1
        last = text.count("\n", 0, body_offset + end) if end < len(body) else len(text.splitlines())
        return first, max(first, last)
    names = ", ".join(repr(h.text) for h in heads[:20]) or "none"
    raise NoteNotFoundError(f"no section {section!r} in the note (headings: {names})", section=section)


def show_note(
    vault: Path,
    rel_path: str,
    *,
    section: str | None = None,
    lines: tuple[int | None, int | None] | None = None,
    classifications: Sequence[str] | None = None,
) -> NoteView:
    """The note at ``rel_path`` (confined to ``vault``): all of it, one section, or a line range.

    ``classifications`` (as for search_vault): a note of another classification is not there for the
    caller (the same ``note_not_found`` as a missing one); None shows every note. A note that is not
    found comes with the closest notes the caller may see (``hint``, evidence ``suggestions``)."""
    if section is not None and lines is not None:
        raise UsageError("give --section or --lines, not both")
    visible = None if classifications is None else Filters.make(classifications=list(classifications)).classifications
    try:
        text, rel = _visible_text(Path(vault), rel_path, visible)
    except NoteNotFoundError as exc:
        raise _with_suggestions(exc, Path(vault), rel_path, visible) from None
    front = read_frontmatter(rel, text)
    all_lines = text.splitlines()
    total = len(all_lines)
    if section is not None:
        first, last = _section_lines(text, len(text) - len(front.body), section)
    else:
        start, end = lines or (None, None)
        first, last = start or 1, min(end or total, total)
        if total and first > total:
            raise NoteNotFoundError(f"{rel} has {total} lines; --lines starts at {first}", path=rel)
    return NoteView(
        rel_path=rel,
        title=shown_title(rel, front.mapping, front.body),
        frontmatter=front.mapping,
        line_start=first,
        line_end=last,
        lines=tuple(all_lines[first - 1 : last]),
        section=section,
        total_lines=total,
    )


def _visible_text(vault: Path, rel_path: str, visible: tuple[str, ...] | None) -> tuple[str, str]:
    """(decoded text, POSIX rel_path) of a note the caller may see; ``NoteNotFoundError`` otherwise."""
    _real, rel = confined_note_path(vault, rel_path)
    try:
        data, _ = read_confined(os.path.realpath(vault), rel, limit=MAX_NOTE_BYTES)
    except (NoteTooLargeError, NotRegularFileError):
        if visible is None:
            raise
        raise _no_note(_candidate(rel_path)) from None  # no classification can be read: hidden (fails closed)
    if visible is not None and is_binary(data):
        raise _no_note(_candidate(rel_path))  # not a note to the build, so none to a restricted caller
    text, _ = decode_text(rel, data)
    if visible is not None and (read_frontmatter(rel, text).classification or UNCLASSIFIED) not in visible:
        raise _no_note(_candidate(rel_path))
    return text, rel
