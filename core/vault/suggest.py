"""Did you mean: the notes whose names come closest to a name or path ``show`` did not find.

A note is known by its path, its file name and its title (the one the index shows:
``core.vault.names``). What was asked is compared with them, case-folded: a name that holds the
whole request (``adr-001`` in ``decisions/adr-001-use-postgres``) is close, else ``difflib``'s
ratio of the request's last part and the file name or title decides (at least :data:`CUTOFF`).

The candidates are the vault's notes as the build lists them (``scan_vault``: the same ignore and
dot-path rules), read through the confined reader. A caller restricted to some classifications is
offered only notes it may see: each candidate's classification is read as the build reads it
(``read_frontmatter``, failing closed), so a hidden note is never suggested. This runs only when a
note was not found: it reads every note (about 1.5 s for 3,000 notes on a loaded 2-core machine).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.ranking.filters import UNCLASSIFIED
from core.vault.chunking import heading_spans
from core.vault.names import file_stem, index_folder, leading_h1, title_keys
from core.vault.notes import decode_text, is_binary, note_title, read_frontmatter
from core.vault.scan import MAX_NOTE_BYTES, read_file, scan_vault

MAX_SUGGESTIONS = 3
CUTOFF = 0.6
CONTAINED = 0.9  # the score of a name that holds the whole request (of at least MIN_CONTAINED characters)
MIN_CONTAINED = 3


@dataclass(frozen=True)
class Suggestion:
    rel_path: str
    title: str
    score: float  # 0..1, the closest of the note's names


def shown_title(rel: str, mapping: dict[str, Any], body: str) -> str:
    """The title the index shows for a note (``core.vault.names``), from its frontmatter and body."""
    titles = (mapping.get(key) for key in title_keys(mapping))
    title = next((t.strip() for t in titles if isinstance(t, str) and t.strip()), None)
    # only an index note (``docs/intro/index.md``) can be shown by its H1: no other note pays for the headings
    h1 = leading_h1(body, heading_spans(body)) if index_folder(rel) is not None else None
    return note_title(title, rel, h1)


def _similarity(matcher: difflib.SequenceMatcher[str], wanted: str, name: str) -> float:
    """How close ``name`` is to ``wanted`` (``matcher``: one per request, ``wanted`` its second sequence,
    whose index difflib builds once)."""
    key = name.casefold()
    if not key:
        return 0.0
    if len(wanted) >= MIN_CONTAINED and wanted in key:
        return CONTAINED + 0.1 * len(wanted) / len(key)
    matcher.set_seq1(key)
    if matcher.real_quick_ratio() < CUTOFF or matcher.quick_ratio() < CUTOFF:  # upper bounds of ratio()
        return 0.0
    return matcher.ratio()


def _score(wanted: str, rel_path: str, title: str) -> float:
    """The closest of the note's names: a request with a folder is compared with the path only by
    containment (a shared folder alone makes no two notes alike), its last part with the names."""
    last = wanted.rsplit("/", 1)[-1]
    matcher = difflib.SequenceMatcher(None, "", last, autojunk=False)
    best = max(_similarity(matcher, last, file_stem(rel_path)), _similarity(matcher, last, title))
    if "/" in wanted and len(wanted) >= MIN_CONTAINED and wanted in rel_path.casefold():
        best = max(best, CONTAINED + 0.1 * len(wanted) / len(rel_path))
    return best


def _request(text: str) -> str:
    wanted = text.replace("\\", "/").strip().strip("/").casefold()
    return wanted[:-3] if wanted.endswith(".md") else wanted


def suggest_notes(
    vault: Path, requested: str, *, classifications: Sequence[str] | None = None, limit: int = MAX_SUGGESTIONS
) -> list[Suggestion]:
    """Up to ``limit`` notes closest to ``requested``, best first; only notes of ``classifications``
    when given (None: every note, as ``show`` without --classification)."""
    wanted = _request(requested)
    if not wanted:
        return []
    root = os.path.realpath(vault)
    found: list[Suggestion] = []
    for f in scan_vault(Path(vault)).files:
        try:
            data, _ = read_file(f.path, root=root, limit=MAX_NOTE_BYTES)
        except OSError:
            continue  # gone or refused since the walk: nothing to offer, and no trace of it
        if is_binary(data):
            continue
        text, _ = decode_text(f.rel_path, data)
        front = read_frontmatter(f.rel_path, text)
        if classifications is not None and (front.classification or UNCLASSIFIED) not in classifications:
            continue
        title = shown_title(f.rel_path, front.mapping, front.body)
        score = _score(wanted, f.rel_path, title)
        if score >= CUTOFF:
            found.append(Suggestion(f.rel_path, title, round(score, 3)))
    found.sort(key=lambda s: (-s.score, s.rel_path))
    return found[:limit]
