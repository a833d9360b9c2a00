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
in format 1, and a manifest that lists any is refused as ``unsupported_index_format``.

Format 2 (``MANIFEST_VERSION_2``, issue 29 step 2a) adds up to ``MAX_SEGMENTS`` segments in a fixed
order (oldest first), tombstone parts and the generation's id watermarks::

    {..., "next_chunk_id": 42, "next_note_id": 17, "segments": [<segment>, ...],
     "tombstones": [{"notes": 2, "segment": "<segment sha256>", "sha256": "<64 hex>", "size": 8192}],
     "version": 2}

A tombstone ``segments/<T>.del`` belongs to one listed segment (at most one per segment: a newer
delete writes a new tombstone listing ALL that segment's deleted notes, Lucene's DelGen), is named by
its own SHA-256 and verified like a segment; ``notes`` is how many note ids it lists. Note and chunk
ids are unique across a generation's segments; ``next_*_id`` is where the next segment's ids start.
``dense`` stays reserved (empty). Read path: stdlib and the error types only.
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
MANIFEST_VERSION_2 = 2
MAX_SEGMENTS = 11  # one SQLite connection: the main database and SQLITE_LIMIT_ATTACHED (10) attached ones
MANIFEST_MAX_BYTES = 1 << 20  # a manifest lists part hashes: KBs; anything larger is not ours
SEGMENT_SUFFIX = ".seg"
TOMBSTONE_SUFFIX = ".del"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SEGMENT_FILE = re.compile(r"[0-9a-f]{64}\.(seg|del)")
_MANIFEST_FILE = re.compile(r"[0-9a-f]{64}\.json")
_KEYS = frozenset({"format", "version", "schema", "analysis", "source", "segments", "tombstones", "dense"})
_KEYS_2 = _KEYS | {"next_note_id", "next_chunk_id"}
_SEGMENT_KEYS = frozenset({"sha256", "size", "notes", "chunks", "dense_chunks"})
_TOMBSTONE_KEYS = frozenset({"segment", "sha256", "size", "notes"})


@dataclass(frozen=True)
class PartEntry:
    """One part as the manifest names it."""

    kind: str  # 'segment' | 'tombstone' (format 2)
    sha256: str
    size: int
    notes: int = 0  # a segment: its note rows (dead ones included); a tombstone: the note ids it lists
    chunks: int = 0  # a segment: its chunk rows
    segment: str | None = None  # a tombstone: the SHA-256 of the segment it belongs to

    @property
    def file_name(self) -> str:
        return f"{self.sha256}{TOMBSTONE_SUFFIX if self.kind == 'tombstone' else SEGMENT_SUFFIX}"


@dataclass(frozen=True)
class Manifest:
    schema: int | None  # the segments' table schema (core.index.schema.SCHEMA_VERSION)
    analysis: dict[str, Any]  # the analysis identity the segments were built with
    source: dict[str, Any]  # the source watermark (today: the snapshot hash the state row records)
    segments: tuple[PartEntry, ...]  # oldest first
    tombstones: tuple[PartEntry, ...] = ()  # format 2: at most one per segment
    next_note_id: int | None = None  # format 2: ids of a generation's segments are below these
    next_chunk_id: int | None = None

    @property
    def parts(self) -> tuple[PartEntry, ...]:
        """Every part, in manifest order: the segments, then the tombstones."""
        return self.segments + self.tombstones

    def tombstone_of(self, segment_sha256: str) -> PartEntry | None:
        return next((t for t in self.tombstones if t.segment == segment_sha256), None)


def segment_file_name(sha256: str) -> str:
    return f"{sha256}{SEGMENT_SUFFIX}"


def manifest_file_name(sha256: str) -> str:
    return f"{sha256}.json"


def tombstone_file_name(sha256: str) -> str:
    return f"{sha256}{TOMBSTONE_SUFFIX}"


def is_segment_file(name: str) -> bool:
    """A name publish gives a part (``<sha256>.seg``, or a tombstone ``<sha256>.del``)."""
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


def manifest_bytes_v2(
    *,
    schema: int | None,
    analysis: dict[str, Any],
    source: dict[str, Any],
    segments: list[dict[str, Any]],
    tombstones: list[dict[str, Any]],
    next_note_id: int,
    next_chunk_id: int,
) -> bytes:
    """The canonical bytes of a format 2 manifest: ``segments`` oldest first, ``tombstones`` (each
    ``{"segment", "sha256", "size", "notes"}``) in their segments' order."""
    doc = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION_2,
        "schema": schema,
        "analysis": analysis,
        "source": source,
        "segments": segments,
        "tombstones": tombstones,
        "dense": [],
        "next_note_id": next_note_id,
        "next_chunk_id": next_chunk_id,
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
    version = doc.get("version")
    if version not in (MANIFEST_VERSION, MANIFEST_VERSION_2) or type(version) is not int:
        raise _unsupported(path, generation_id, "another manifest version", expected=MANIFEST_VERSION_2, actual=version)
    keys = _KEYS if version == MANIFEST_VERSION else _KEYS_2
    unknown = sorted(set(doc) - keys)
    missing = sorted(keys - set(doc)) if version == MANIFEST_VERSION_2 else []
    reserved = [key for key in ("tombstones", "dense") if doc.get(key) != [] and (version == 1 or key == "dense")]
    if unknown or reserved or missing:
        raise _unsupported(
            path, generation_id, f"unknown, missing or non-empty parts {unknown + missing + reserved}",
            actual=unknown + missing + reserved,
        )  # fmt: skip
    segments = doc.get("segments")
    if not isinstance(segments, list) or not segments:
        raise _unsupported(path, generation_id, "lists no segment")
    if len(segments) > MAX_SEGMENTS:
        raise _unsupported(
            path, generation_id, f"lists {len(segments)} segments; at most {MAX_SEGMENTS} are served",
            expected=MAX_SEGMENTS, actual=len(segments),
        )  # fmt: skip
    entries = tuple(_segment(entry, path, generation_id) for entry in segments)
    if len({e.sha256 for e in entries}) != len(entries):
        raise _unsupported(path, generation_id, "lists a segment twice")
    schema = doc.get("schema")
    analysis, source = doc.get("analysis"), doc.get("source")
    if not isinstance(analysis, dict) or not isinstance(source, dict) or not isinstance(schema, (int, type(None))):
        raise _unsupported(path, generation_id, "malformed analysis, source or schema")
    if version == MANIFEST_VERSION:
        if len(entries) != 1:
            raise _unsupported(
                path, generation_id, f"format 1 lists {len(entries)} segments; it has one",
                expected=1, actual=len(entries),
            )  # fmt: skip
        return Manifest(schema=schema, analysis=analysis, source=source, segments=entries)
    return _format_2(doc, entries, schema, analysis, source, path, generation_id)


def _format_2(
    doc: dict[str, Any], entries: tuple[PartEntry, ...], schema: int | None, analysis: dict[str, Any],
    source: dict[str, Any], path: Path, generation_id: str | None,
) -> Manifest:  # fmt: skip
    """The format 2 fields: tombstones (each of one listed segment, at most one per segment, in the
    segments' order, listing no more notes than the segment holds) and the id watermarks. Two segments'
    tombstones may be one part: the same dead ids with the same statistics are the same bytes (a note kept
    its id through two edits of the same length), and content-addressed parts are shared."""
    raw_tombstones = doc.get("tombstones")
    if not isinstance(raw_tombstones, list):
        raise _unsupported(path, generation_id, "malformed tombstones")
    tombstones = tuple(_tombstone(entry, path, generation_id) for entry in raw_tombstones)
    order = {e.sha256: (i, e) for i, e in enumerate(entries)}
    owners = [order.get(t.segment or "") for t in tombstones]
    if any(o is None or t.notes > o[1].notes for o, t in zip(owners, tombstones, strict=True)):
        raise _unsupported(path, generation_id, "a tombstone names no listed segment, or more notes than it holds")
    positions = [o[0] for o in owners if o is not None]
    if positions != sorted(set(positions)):
        raise _unsupported(path, generation_id, "tombstones out of segment order, or two for one segment")
    if {t.sha256 for t in tombstones} & {e.sha256 for e in entries}:  # two tombstones may be the same bytes
        raise _unsupported(path, generation_id, "lists a part as a segment and as a tombstone")
    ids = [doc.get("next_note_id"), doc.get("next_chunk_id")]
    if any(type(v) is not int or v < 1 for v in ids):
        raise _unsupported(path, generation_id, f"malformed next ids {ids}")
    return Manifest(
        schema=schema, analysis=analysis, source=source, segments=entries, tombstones=tombstones,
        next_note_id=ids[0], next_chunk_id=ids[1],
    )  # fmt: skip


def _segment(entry: Any, path: Path, generation_id: str | None) -> PartEntry:
    if (
        not isinstance(entry, dict)
        or set(entry) != _SEGMENT_KEYS
        or not isinstance(entry["sha256"], str)
        or _SHA256.fullmatch(entry["sha256"]) is None
        or any(type(entry[k]) is not int or entry[k] < 0 for k in _SEGMENT_KEYS - {"sha256"})
    ):
        raise _unsupported(path, generation_id, f"malformed segment entry {entry!r:.200}")
    return PartEntry(
        kind="segment", sha256=entry["sha256"], size=entry["size"], notes=entry["notes"], chunks=entry["chunks"]
    )


def _tombstone(entry: Any, path: Path, generation_id: str | None) -> PartEntry:
    if (
        not isinstance(entry, dict)
        or set(entry) != _TOMBSTONE_KEYS
        or any(not isinstance(entry[k], str) or _SHA256.fullmatch(entry[k]) is None for k in ("sha256", "segment"))
        or any(type(entry[k]) is not int or entry[k] < 0 for k in ("size", "notes"))
    ):
        raise _unsupported(path, generation_id, f"malformed tombstone entry {entry!r:.200}")
    return PartEntry(
        kind="tombstone", sha256=entry["sha256"], size=entry["size"], notes=entry["notes"], segment=entry["segment"]
    )


def peek_segment(layout: IndexLayout, record: dict[str, Any]) -> Path | None:
    """The segment carrying a generation row's generation-level tables (meta, settings, watermarks: its
    newest, the last listed), read WITHOUT verification (settings and watermark peeks that only choose
    how to build; whatever is served or carried over is verified). None when the manifest cannot be read."""
    path = layout.manifests_dir / record["file_name"]
    try:
        with open(path, "rb") as handle:
            manifest = parse_manifest(handle.read(MANIFEST_MAX_BYTES + 1), path, record["generation_id"])
    except (OSError, UnsupportedIndexFormatError):
        return None
    return layout.segments_dir / manifest.segments[-1].file_name
