"""Which files in an index directory no generation needs any more (listed here; deleted by publish's reaper).

- every staging file (``staging/``: build scratch, manifest temps, first state DBs);
- every file of the pre-manifest format in ``generations/`` (``g<stamp>-<sha[:12]>.db``);
- a manifest that no ready generation names and no generation removed less than ``GC_GRACE_S`` ago;
- a part (``segments/<sha256>.seg``) that no kept manifest lists.

A removed generation's manifest and parts outlive it by ``GC_GRACE_S``: a reader that read the state
row just before a publish removed that generation still finds the manifest and every part it names
(and a reader that finds one gone resolves the active generation again: ``core.index.verify``). When a
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

# How long a removed generation's manifest and parts stay on disk. A reader needs them only between
# reading the state row and pinning the parts: milliseconds (pinned descriptors outlive any unlink). With
# two generations retained, a generation is removed only by the second publish after it stopped being
# active, so a reader that read its row must also have slept through a whole publish (>= 0.5 s on
# SciFact); 2 s more covers a descheduled reader on a loaded machine, and one that is slower still
# resolves the active generation again (core.index.verify). Longer would cost disk: while a generation
# is one segment, every superseded segment kept for the grace is a full copy (measured: 10 s left a
# third 71 MB SciFact copy behind edits 5 s apart, until the next build).
GC_GRACE_S = 2.0


def kept_manifests(rows: list[dict[str, Any]], now: float, grace_s: float) -> set[str]:
    """Manifest names of ready generations and of generations removed less than ``grace_s`` ago."""
    return {
        row["file_name"]
        for row in rows
        if row["status"] == "ready" or (row.get("removed_at") is not None and row["removed_at"] > now - grace_s)
    }


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
