"""Verifying a generation: its manifest (always hashed) and each part (hashed unless a record vouches).

The manifest is pinned, read whole (KBs), hashed and compared with the state row. Each part the
manifest names is pinned (``core.index.pinned``), its size checked, and its SHA-256 computed unless
the verification record (``verified.json``, format 2) holds an entry for that part's SHA-256 with
the same stat fingerprint ``(dev, ino, size, mtime_ns, ctime_ns)``. Parts are immutable and named by
their hash, so a part's entry stays valid across generations: after a publish only the new parts are
hashed. Every check is a loop over all parts; every problem names the part's path with the
expected and the actual value. Read path: stdlib, the error types and ``core.index`` only.
"""

from __future__ import annotations

import os
from typing import Any

from core.errors import IntegrityError, Sha256MismatchError, SizeMismatchError
from core.index import pinned
from core.index import state as gstate
from core.index.layout import IndexLayout, ResolvedPart
from core.index.manifest import MANIFEST_MAX_BYTES, Manifest, parse_manifest

# A file changed within this window of its verification may change again in the same timestamp tick
# without altering its stat fingerprint (the "racy git" problem), so such a verification is not recorded.
RACY_WINDOW_NS = 50_000_000
RECORD_MAX_PARTS = 128  # entries a record keeps: the served generation's parts first, then the newest others


def is_racy(sig: tuple[int, ...] | None, now_ns: int) -> bool:
    """True when a file changed so recently that a further change could keep the same timestamps."""
    return sig is None or now_ns - max(sig[3], sig[4]) < RACY_WINDOW_NS


def read_manifest(layout: IndexLayout, record: dict[str, Any]) -> tuple[Manifest, pinned.PinnedFile]:
    """The active generation's manifest, pinned, hashed and matched with the state row, then parsed.
    A missing manifest is ``GenerationMissingError``; other bytes than the row's are a mismatch error."""
    import hashlib

    gid, path = record["generation_id"], layout.manifests_dir / record["file_name"]
    pin = pinned.pin(path, gid, record["sha256"])
    if pin.sig[2] != record["size"] or pin.sig[2] > MANIFEST_MAX_BYTES:
        raise SizeMismatchError(
            f"manifest {path} has {pin.sig[2]} bytes, state says {record['size']}",
            path=str(path),
            generation_id=gid,
            expected=record["size"],
            actual=pin.sig[2],
        )
    raw = os.pread(pin.fd, MANIFEST_MAX_BYTES + 1, 0)
    actual = hashlib.sha256(raw).hexdigest()
    pin.check_unchanged(gid)
    if actual != record["sha256"] or len(raw) != record["size"]:
        raise Sha256MismatchError(
            f"manifest {path} has SHA-256 {actual}, state says {record['sha256']}",
            path=str(path),
            generation_id=gid,
            expected=record["sha256"],
            actual=actual,
        )
    return parse_manifest(raw, path, gid), pin


def pin_parts(layout: IndexLayout, manifest: Manifest, generation_id: str) -> list[ResolvedPart]:
    """Open every part the manifest names (``GenerationMissingError`` naming the first one gone)."""
    out = []
    for entry in manifest.parts:
        path = layout.segments_dir / entry.file_name
        pin = pinned.pin(path, generation_id, entry.sha256)
        out.append(ResolvedPart(entry.kind, entry.sha256, entry.size, path, pin, entry.notes, entry.segment))
    return out


def part_problems(part: ResolvedPart, generation_id: str | None, *, hash_it: bool) -> list[IntegrityError]:
    """Size, then (``hash_it``) SHA-256 of one pinned part against its manifest entry; every problem found.
    The descriptor must be unchanged afterwards (else ``GenerationChangedError``, raised)."""
    pin = part.pinned
    problems: list[IntegrityError] = []
    if pin.sig[2] != part.size:
        problems.append(
            SizeMismatchError(
                f"part {part.path} has {pin.sig[2]} bytes, the manifest says {part.size}",
                path=str(part.path),
                generation_id=generation_id,
                expected=part.size,
                actual=pin.sig[2],
            )
        )
    if hash_it:
        actual, _ = pin.digest()
        pin.check_unchanged(generation_id)
        if actual != part.sha256:
            problems.append(
                Sha256MismatchError(
                    f"part {part.path} has SHA-256 {actual}, the manifest says {part.sha256}",
                    path=str(part.path),
                    generation_id=generation_id,
                    expected=part.sha256,
                    actual=actual,
                )
            )
    return problems


# --- the verification record: one entry per part ------------------------------------------------------------


def recorded_parts(layout: IndexLayout) -> dict[str, list[int]]:
    """part SHA-256 -> the stat fingerprint a process saw when it hashed that part ({} without a record)."""
    body, _status = gstate.read_verification(layout)
    if body is None or body.get("index_dir") != str(layout.index_dir) or not isinstance(body.get("parts"), dict):
        return {}
    return {sha: sig for sha, sig in body["parts"].items() if isinstance(sig, list)}


def vouched(recorded: dict[str, list[int]], part: ResolvedPart, now_ns: int) -> bool:
    """A record entry for exactly this part's hash names exactly this file's fingerprint."""
    sig = part.pinned.sig
    return not is_racy(sig, now_ns) and recorded.get(part.sha256) == list(sig)


def record_body(
    layout: IndexLayout, recorded: dict[str, list[int]], parts: list[ResolvedPart], now_ns: int
) -> dict[str, Any] | None:
    """The record to write after ``parts`` were verified (None: nothing new to vouch for). Entries of
    other parts are kept (they stay valid: parts never change), the oldest dropped past the bound."""
    fresh = {p.sha256: list(p.pinned.sig) for p in parts if not is_racy(p.pinned.sig, now_ns)}
    if all(recorded.get(sha) == sig for sha, sig in fresh.items()):
        return None
    others = [(sha, sig) for sha, sig in recorded.items() if sha not in fresh]
    keep = others[max(0, len(others) - (RECORD_MAX_PARTS - len(fresh))) :]
    return {"index_dir": str(layout.index_dir), "parts": {**dict(keep), **fresh}}
