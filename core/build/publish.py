"""Publishing a staged database as a new generation: a content-addressed part and a hashed manifest.

Lucene's two-phase order (docs/architecture.md, "Storage"): the staged database is checked
(``integrity_check``), made read-only, fsynced and hashed, then renamed to ``segments/<sha256>.seg``
(a name that exists already holds the same bytes: its size is checked and it is shared) and
``segments/`` is fsynced; then the manifest naming the part is written to a temp file, fsynced,
hashed and renamed to ``manifests/<M>.json`` and ``manifests/`` is fsynced; then ONE state-database
transaction records the generation (with ``M``) and flips the active pointer: the only commit
point. Retention marks old generations removed; garbage collection deletes the manifests and parts
no kept generation needs once ``GC_GRACE_S`` has passed since their removal (``core.index.debris``),
under the build lock. Each step in ``PUBLISH_STEPS`` calls an ``on_step`` hook first, so tests can
crash the process at every checkpoint; until the state commit, any failure leaves the previous
generation active and removes the files this publish created.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from core.build.lock import require_lock
from core.errors import SqliteIntegrityError, UsageError, ValidationError
from core.index import debris as debris_rules
from core.index import pinned
from core.index import state as gstate
from core.index.debris import debris
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, ResolvedPart
from core.index.manifest import manifest_bytes, manifest_file_name, segment_file_name, tombstone_file_name
from core.index.state import list_generations
from core.index.verify import invalidate, pinned_integrity_lines, remember_parts, resolved_generation

PUBLISH_STEPS = (
    "part_integrity_check",
    "part_fsync",
    "part_hash",
    "part_rename",
    "segments_fsync",
    "manifest_write",
    "manifest_fsync",
    "manifest_hash",
    "manifest_rename",
    "manifests_fsync",
    "state_commit",
    "retention",
    "gc",
)
RECORD_TEMP_AGE_S = 60.0


def _validate_staged(layout: IndexLayout, staged: Path) -> pinned.PinnedFile:
    """The staged file lives in staging/, is complete (no -wal/-journal beside it) and passes integrity_check.
    Returns it pinned: the inode that was checked is the one fsynced, hashed and renamed."""
    problems = []
    if staged.resolve().parent != layout.staging_dir.resolve():
        problems.append(f"{staged} is not in {layout.staging_dir} (rename must stay on one filesystem)")
    if not staged.is_file():
        problems.append(f"{staged} does not exist")
    problems += [
        f"{staged}{s} exists: close the build connection (and checkpoint its WAL) before publishing"
        for s in ("-wal", "-journal")
        if Path(f"{staged}{s}").exists()
    ]
    if problems:
        raise ValidationError(
            "staged database cannot be published: " + "; ".join(problems), path=str(staged), problems=problems
        )
    pin = pinned.pin(staged, None, None)
    lines = pinned_integrity_lines(pin, None)
    if lines:
        raise SqliteIntegrityError(
            f"staged database {staged} fails integrity_check", path=str(staged), expected="ok", actual=lines
        )
    return pin


def _generation_id(sha256: str, created_at: float, taken: set[str]) -> str:
    """``g<UTC yyyymmddTHHMMSS>-<M[:12]>``; the second is bumped if that id was ever used."""
    offset = 0
    while True:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(created_at + offset))
        candidate = f"g{stamp}-{sha256[:12]}"
        if candidate not in taken:
            return candidate
        offset += 1


def _same_size_file(path: Path, size: int) -> bool:
    """An existing content-addressed name holds the same bytes by construction: its size is checked."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return st.st_size == size and not os.path.islink(path) and path.is_file()


class _Created:
    """The files this publish put in place (removed again when it fails before the state commit)."""

    def __init__(self) -> None:
        self.paths: list[Path] = []


def _publish_part(
    layout: IndexLayout, staged: Path, step: Callable[[str], None], created: _Created, kind: str = "segment"
) -> ResolvedPart:
    step("part_integrity_check")
    pin = _validate_staged(layout, staged)
    step("part_fsync")
    os.fchmod(pin.fd, 0o444)  # parts are read-only
    os.fsync(pin.fd)
    pin.refresh()
    step("part_hash")
    sha256, size = pin.digest()
    pin.check_unchanged(None)
    step("part_rename")
    final = layout.segments_dir / (tombstone_file_name(sha256) if kind == "tombstone" else segment_file_name(sha256))
    if _same_size_file(final, size):  # shared with a generation that has it already
        staged.unlink()
        pin = pinned.pin(final, None, sha256)
    else:
        os.replace(staged, final)
        created.paths.append(final)
        pin.moved_to(final, None)
    step("segments_fsync")
    gstate.fsync_path(layout.segments_dir)
    return ResolvedPart(kind, sha256, size, final, pin)


def _publish_manifest(
    layout: IndexLayout, record: GenerationRecord, part: ResolvedPart, step: Callable[[str], None], created: _Created
) -> tuple[str, int]:
    """Write, fsync, hash and rename the manifest naming ``part``; (its SHA-256 M, its size)."""

    step("manifest_write")
    segment = {"sha256": part.sha256, "size": part.size, "notes": record.notes, "chunks": record.chunks}
    raw = manifest_bytes(
        schema=record.schema_version,
        analysis=record.analysis,
        source={"snapshot_hash": record.source_snapshot_hash},
        segments=[{**segment, "dense_chunks": record.dense_chunks}],
    )
    return write_manifest(layout, raw, step, created)


def write_manifest(layout: IndexLayout, raw: bytes, step: Callable[[str], None], created: _Created) -> tuple[str, int]:
    """Write ``raw`` as a manifest: temp file, fsync, hash of the bytes on disk, rename, directory fsync."""
    import hashlib

    temp = layout.staging_dir / f"manifest-{os.urandom(16).hex()}.json.tmp"
    created.paths.append(temp)
    fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o444)
    try:
        written = 0
        while written < len(raw):
            written += os.write(fd, raw[written:])
        step("manifest_fsync")
        os.fsync(fd)
        step("manifest_hash")
        on_disk = os.pread(fd, len(raw) + 1, 0)  # the hash names the bytes the file holds
    finally:
        os.close(fd)
    sha256 = hashlib.sha256(on_disk).hexdigest()
    step("manifest_rename")
    final = layout.manifests_dir / manifest_file_name(sha256)
    if _same_size_file(final, len(on_disk)):  # an earlier generation of exactly this content
        temp.unlink()
    else:
        os.replace(temp, final)
        created.paths.append(final)
    step("manifests_fsync")
    gstate.fsync_path(layout.manifests_dir)
    return sha256, len(on_disk)


def _discard_unpublished(layout: IndexLayout, staged: Path, created: _Created) -> None:
    """After a failed publish, remove the staged file and what this publish created, unless the state
    already names it (a commit that raised afterwards). A staged path outside staging/ is not ours."""
    if staged.resolve().parent == layout.staging_dir.resolve():
        staged.unlink(missing_ok=True)
    if not created.paths:
        return
    named = {row["file_name"] for row in list_generations(layout)}
    committed = any(path.parent == layout.manifests_dir and path.name in named for path in created.paths)
    for path in created.paths:
        if not committed or path.parent == layout.staging_dir:
            path.unlink(missing_ok=True)


def _apply_retention(layout: IndexLayout, keep: int) -> list[str]:
    """Mark all but the newest ``keep`` ready generations (and never the active one) removed, now. Their
    manifests and parts are deleted by ``_collect`` once the grace period has passed."""
    rows = [row for row in list_generations(layout) if row["status"] == "ready"]
    doomed = [row["generation_id"] for row in rows[keep:] if not row["active"]]
    if doomed:
        gstate.mark_removed(layout, doomed, time.time())
    return doomed


def _collect(layout: IndexLayout, grace_s: float) -> list[Path]:
    """Delete what no generation needs (``core.index.debris``) and dead record temps. Safe only under
    ``build_lock``: staging files and new parts are created under it."""
    found = debris(layout, time.time(), grace_s)
    cutoff = time.time() - RECORD_TEMP_AGE_S  # a younger one may belong to a reader writing it right now
    found += gstate.stale_record_temps(layout, older_than=cutoff)
    for path in found:
        path.unlink(missing_ok=True)
    return found


def start_build(layout: IndexLayout) -> tuple[str, str, str] | None:
    """Under the build lock, before a build reads its base: move an unusable state DB aside (the problem
    to report, or None), then remove what no generation needs any more (files a publish left for the
    grace period, debris of a killed build), so that even a build that publishes nothing collects them."""
    require_lock(layout)
    recovered = gstate.move_aside_unusable_state(layout)
    _collect(layout, debris_rules.GC_GRACE_S)
    return recovered


def publish(
    layout: IndexLayout,
    staging_path: Path,
    record: GenerationRecord,
    *,
    expected_base: str | None,
    keep: int = 2,
    on_step: Callable[[str], None] | None = None,
    grace_s: float | None = None,
) -> ResolvedIndex:
    """Publish a staged database as a one-segment generation, then flip the active pointer.

    MUST be called while holding ``build_lock(layout)`` (checked): garbage collection deletes every
    staging file and every unreferenced part. ``expected_base`` is the active generation id the build
    started from (``None`` for the first); if another build published meanwhile, ``BuildLockedError`` is
    raised and nothing changes. Each step in ``PUBLISH_STEPS`` calls ``on_step(name)`` first (fault
    injection). Until the state commit, any failure leaves the previous generation active and removes
    our files. ``grace_s``: how long a removed generation's manifest and parts are kept (default
    ``core.index.debris.GC_GRACE_S``).
    """
    require_lock(layout)
    if keep < 1:
        raise UsageError(f"keep must be at least 1, got {keep}", keep=keep)
    step = on_step or (lambda name: None)
    staged, created = Path(staging_path), _Created()
    try:
        part = _publish_part(layout, staged, step, created)
        sha256, size = _publish_manifest(layout, record, part, step, created)
        created_at = time.time()
        taken = {row["generation_id"] for row in list_generations(layout)}
        gid = _generation_id(sha256, created_at, taken)
        step("state_commit")
        gstate.commit_state(layout, gstate.record_row(record, gid, sha256, size, created_at), expected_base)
    except BaseException:
        _discard_unpublished(layout, staged, created)
        raise
    finally:
        invalidate(layout)
    step("retention")
    _apply_retention(layout, keep)
    step("gc")
    _collect(layout, debris_rules.GC_GRACE_S if grace_s is None else grace_s)
    if part.path in created.paths:  # hashed here; a shared existing file was only size-checked: not vouched for
        remember_parts(layout, [part])
    return resolved_generation(layout, gstate.with_state(layout, lambda conn: gstate.active_row(layout, conn)), [part])
