"""A generation's manifest: canonical JSON naming the immutable, content-addressed parts it is made of.

``manifests/<M>.json`` where ``M`` is the SHA-256 of exactly the manifest's bytes: the generation's
content identity, a two-level Merkle root (the manifest names every part by its own SHA-256, and a
part ``segments/<sha256>.seg`` is named by the hash of its bytes). The state row records ``M`` and
the manifest's size; the one state-database transaction that flips the active pointer stays the
only commit point (docs/architecture.md, "Storage").

Format 1 (``MANIFEST_VERSION``)::

    {"analysis": {...}, "dense": [], "format": "vaultsearch-manifest", "schema": 13,
     "segments": [{"chunks": 9, "dense_chunks": 0, "notes": 3, "sha256": "<64 hex>", "size": 4096}],
     "source": {"snapshot_hash": "..."}, "tombstones": [], "version": 1}

``tombstones`` (per-segment deletes) and ``dense`` (per-segment vector parts) are reserved: empty
in format 1, and a manifest that lists any is refused as ``unsupported_index_format``. Read path:
stdlib and the error types only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import UnsupportedIndexFormatError

if TYPE_CHECKING:
    from core.index.layout import IndexLayout

MANIFEST_FORMAT = "vaultsearch-manifest"
MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = 1 << 20  # a manifest lists part hashes: KBs; anything larger is not ours
SEGMENT_SUFFIX = ".seg"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SEGMENT_FILE = re.compile(r"[0-9a-f]{64}\.seg")
_MANIFEST_FILE = re.compile(r"[0-9a-f]{64}\.json")
_KEYS = frozenset({"format", "version", "schema", "analysis", "source", "segments", "tombstones", "dense"})
_SEGMENT_KEYS = frozenset({"sha256", "size", "notes", "chunks", "dense_chunks"})


@dataclass(frozen=True)
class PartEntry:
    """One part as the manifest names it."""

    kind: str  # 'segment' (format 1 has no other kind)
    sha256: str
    size: int

    @property
    def file_name(self) -> str:
        return f"{self.sha256}{SEGMENT_SUFFIX}"


@dataclass(frozen=True)
class Manifest:
    schema: int | None  # the segments' table schema (core.index.schema.SCHEMA_VERSION)
    analysis: dict[str, Any]  # the analysis identity the segments were built with
    source: dict[str, Any]  # the source watermark (today: the snapshot hash the state row records)
    segments: tuple[PartEntry, ...]

    @property
    def parts(self) -> tuple[PartEntry, ...]:
        """Every part, in manifest order (format 1: the segments)."""
        return self.segments


def segment_file_name(sha256: str) -> str:
    return f"{sha256}{SEGMENT_SUFFIX}"


def manifest_file_name(sha256: str) -> str:
    return f"{sha256}.json"


def is_segment_file(name: str) -> bool:
    """A name publish gives a part (``<sha256>.seg``)."""
    return _SEGMENT_FILE.fullmatch(name) is not None


def is_manifest_file(name: str) -> bool:
    """A name publish gives a manifest (``<sha256>.json``)."""
    return _MANIFEST_FILE.fullmatch(name) is not None


def manifest_bytes(
    *, schema: int | None, analysis: dict[str, Any], source: dict[str, Any], segments: list[dict[str, Any]]
) -> bytes:
    """The canonical bytes of a manifest (sorted keys, no whitespace, ASCII): equal content, equal hash."""
    doc = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "schema": schema,
        "analysis": analysis,
        "source": source,
        "segments": segments,
        "tombstones": [],
        "dense": [],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _unsupported(path: Path, generation_id: str | None, why: str, **evidence: Any) -> UnsupportedIndexFormatError:
    return UnsupportedIndexFormatError(
        f"manifest {path} of generation {generation_id}: {why}",
        path=str(path),
        generation_id=generation_id,
        **evidence,
    )


def parse_manifest(raw: bytes, path: Path, generation_id: str | None) -> Manifest:
    """The manifest in ``raw`` (already hashed and matched with the state row), checked for shape;
    anything this version does not know is ``UnsupportedIndexFormatError`` (never served in part)."""
    try:
        doc = json.loads(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _unsupported(path, generation_id, f"not a manifest ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise _unsupported(path, generation_id, "not a vaultsearch manifest", expected=MANIFEST_FORMAT)
    if doc.get("version") != MANIFEST_VERSION:
        raise _unsupported(
            path, generation_id, "another manifest version", expected=MANIFEST_VERSION, actual=doc.get("version")
        )
    unknown = sorted(set(doc) - _KEYS)
    reserved = [key for key in ("tombstones", "dense") if doc.get(key) != []]
    if unknown or reserved:
        raise _unsupported(
            path, generation_id, f"unknown or non-empty parts {unknown + reserved}", actual=unknown + reserved
        )
    segments = doc.get("segments")
    if not isinstance(segments, list) or not segments:
        raise _unsupported(path, generation_id, "lists no segment")
    entries = tuple(_segment(entry, path, generation_id) for entry in segments)
    if len({e.sha256 for e in entries}) != len(entries):
        raise _unsupported(path, generation_id, "lists a segment twice")
    schema = doc.get("schema")
    analysis, source = doc.get("analysis"), doc.get("source")
    if not isinstance(analysis, dict) or not isinstance(source, dict) or not isinstance(schema, (int, type(None))):
        raise _unsupported(path, generation_id, "malformed analysis, source or schema")
    return Manifest(schema=schema, analysis=analysis, source=source, segments=entries)


def _segment(entry: Any, path: Path, generation_id: str | None) -> PartEntry:
    if (
        not isinstance(entry, dict)
        or set(entry) != _SEGMENT_KEYS
        or not isinstance(entry["sha256"], str)
        or _SHA256.fullmatch(entry["sha256"]) is None
        or any(type(entry[k]) is not int or entry[k] < 0 for k in _SEGMENT_KEYS - {"sha256"})
    ):
        raise _unsupported(path, generation_id, f"malformed segment entry {entry!r:.200}")
    return PartEntry(kind="segment", sha256=entry["sha256"], size=entry["size"])


def single_segment(manifest: Manifest, path: Path, generation_id: str | None) -> PartEntry:
    """The one segment today's reader serves on one SQLite connection; a generation of more segments
    is refused whole (the multi-segment reader is the next step of issue 29)."""
    if len(manifest.segments) != 1:
        raise _unsupported(
            path,
            generation_id,
            f"has {len(manifest.segments)} segments; this version serves one-segment generations",
            expected=1,
            actual=len(manifest.segments),
        )
    return manifest.segments[0]


def peek_segment(layout: IndexLayout, record: dict[str, Any]) -> Path | None:
    """The one segment a generation row's manifest names, read WITHOUT verification (settings and
    watermark peeks that only choose how to build; whatever is served or carried over is verified).
    None when the manifest cannot be read or does not name exactly one segment."""
    path = layout.manifests_dir / record["file_name"]
    try:
        with open(path, "rb") as handle:
            manifest = parse_manifest(handle.read(MANIFEST_MAX_BYTES + 1), path, record["generation_id"])
    except (OSError, UnsupportedIndexFormatError):
        return None
    if len(manifest.segments) != 1:
        return None
    return layout.segments_dir / manifest.segments[0].file_name
