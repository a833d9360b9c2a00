"""Which files in an index directory no generation needs any more (listed here; deleted by publish's reaper).

- every staging file (``staging/``: build scratch, manifest temps, first state DBs);
- every file of the pre-manifest format in ``generations/`` (``g<stamp>-<sha[:12]>.db``);
- a manifest that no ready generation names and no removed generation superseded (the next one
  published) less than ``GC_GRACE_S`` ago;
- a part (``segments/<sha256>.seg``, or a tombstone ``.del``) that no kept manifest lists.

A removed generation's manifest and parts stay until ``GC_GRACE_S`` after it was superseded: a
reader that read the state row while that generation was active still finds the manifest and every
part it names (and a reader that finds one gone resolves the active generation again:
``core.index.verify``). When a
kept manifest cannot be read, no part is listed at all: a part is deleted only when it is known to be
unreferenced. Only names we give are ever listed (``core.index.ownership``). Read path: stdlib only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.errors import UnsupportedIndexFormatError
from core.index.layout import IndexLayout
from core.index.manifest import MANIFEST_MAX_BYTES, is_manifest_file, is_segment_file, parse_manifest
from core.index.ownership import is_generation_file, is_staging_file
from core.index.state import list_generations

# How long after a generation was superseded its manifest and parts stay on disk (once retention removed
# it). A reader needs them only between reading the state row and pinning the parts: milliseconds
# (pinned descriptors outlive any unlink); 2 s covers a descheduled reader on a loaded machine, and a
# slower one resolves the active generation again (core.index.verify). Counted from the supersession,
# not from the removal: with two generations retained, the removal comes one whole publish later, and a
# grace counted from it kept a third full copy (71 MB on SciFact) behind every quick edit until the
# next build, while a generation is one segment.
GC_GRACE_S = 2.0


def kept_manifests(rows: list[dict[str, Any]], now: float, grace_s: float) -> set[str]:
    """Manifest names of ready generations and of removed generations superseded less than ``grace_s``
    ago. ``rows`` newest first (``list_generations``); a generation is superseded when the next newer one
    was published: only a reader that read the state row before that moment can still be opening it."""
    kept, newer_created = set(), None
    for row in rows:
        if row["status"] == "ready" or (newer_created is not None and newer_created > now - grace_s):
            kept.add(row["file_name"])
        newer_created = row["created_at"]
    return kept


def referenced_parts(layout: IndexLayout, manifests: set[str]) -> set[str] | None:
    """File names of every part the given manifests list; None when one of them cannot be read."""
    names: set[str] = set()
    for name in sorted(manifests):
        path = layout.manifests_dir / name
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MANIFEST_MAX_BYTES + 1)
            manifest = parse_manifest(raw, path, None)
        except (OSError, UnsupportedIndexFormatError):
            return None  # its parts are unknown: keep every part rather than guess
        names.update(part.file_name for part in manifest.parts)
    return names


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _ours(directory: Path, check: Any) -> list[Path]:
    if not directory.is_dir():
        return []
    return [p for p in sorted(directory.iterdir()) if check(p.name) and _plain_file(p)]


def debris(layout: IndexLayout, now: float, grace_s: float = GC_GRACE_S) -> list[Path]:
    """Every file of ours that no kept generation needs (see the module docstring)."""
    found = _ours(layout.staging_dir, is_staging_file) + _ours(layout.generations_dir, is_generation_file)
    kept = kept_manifests(list_generations(layout), now, grace_s)
    found += [p for p in _ours(layout.manifests_dir, is_manifest_file) if p.name not in kept]
    referenced = referenced_parts(layout, kept)
    if referenced is not None:
        found += [p for p in _ours(layout.segments_dir, is_segment_file) if p.name not in referenced]
    return found
