"""Publishing a staged database as a new immutable generation, then retention and reaping.

``publish`` checks the staged file, fsyncs it, moves it to ``generations/<generation_id>.db`` and
then flips the active pointer in the generation-state database in ONE transaction. Publish steps
(``PUBLISH_STEPS``) each call an ``on_step`` hook first, so tests can crash the process at every
checkpoint; until the state commit, any failure leaves the previous generation active.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from core.build.lock import require_lock
from core.errors import SqliteIntegrityError, UsageError, ValidationError
from core.index import pinned
from core.index import state as gstate
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex
from core.index.ownership import is_generation_file
from core.index.state import list_generations
from core.index.verify import debris, invalidate, pinned_integrity_lines, ready_files, resolved_generation

PUBLISH_STEPS = ("integrity_check", "fsync", "hash", "rename", "state_commit", "retention", "reap")
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
    """``g<UTC yyyymmddTHHMMSS>-<sha256[:12]>``; the second is bumped if that id was ever used."""
    offset = 0
    while True:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(created_at + offset))
        candidate = f"g{stamp}-{sha256[:12]}"
        if candidate not in taken:
            return candidate
        offset += 1


def _taken_ids(layout: IndexLayout) -> set[str]:
    names = {p.stem for p in layout.generations_dir.glob("*.db")}
    return names | {row["generation_id"] for row in list_generations(layout)}


def _discard_unpublished(layout: IndexLayout, staged: Path, final: Path | None, gid: str | None) -> None:
    """After a failed publish, remove our staged/renamed file unless the state already names it.
    A staged path outside staging/ is not ours to delete."""
    if staged.resolve().parent == layout.staging_dir.resolve():
        staged.unlink(missing_ok=True)
    if final is not None and final.exists():
        if gid not in {row["generation_id"] for row in list_generations(layout)}:
            final.unlink()


def _apply_retention(layout: IndexLayout, keep: int) -> list[str]:
    """Mark all but the newest ``keep`` ready generations (and never the active one) removed, then delete
    their files. Rows go first: a crash in between leaves only orphan files, which ``_reap`` removes."""
    rows = [row for row in list_generations(layout) if row["status"] == "ready"]
    doomed = [row for row in rows[keep:] if not row["active"]]

    gstate.mark_removed(layout, [row["generation_id"] for row in doomed])
    for row in doomed:
        if is_generation_file(row["file_name"]):  # a state row never makes us delete a file we did not name
            (layout.generations_dir / row["file_name"]).unlink(missing_ok=True)
    return [row["generation_id"] for row in doomed]


def _reap(layout: IndexLayout) -> list[Path]:
    """Delete debris: every staging file and every generations/ file no ready row names. Safe only under
    ``build_lock``, since staging files are created under it (``new_staging_path`` checks)."""
    found = debris(layout, ready_files(layout))
    cutoff = time.time() - RECORD_TEMP_AGE_S  # a younger one may belong to a reader writing it right now
    found += gstate.stale_record_temps(layout, older_than=cutoff)
    for path in found:
        path.unlink(missing_ok=True)
    return found


def publish(
    layout: IndexLayout,
    staging_path: Path,
    record: GenerationRecord,
    *,
    expected_base: str | None,
    keep: int = 2,
    on_step: Callable[[str], None] | None = None,
) -> ResolvedIndex:
    """Check, fsync, hash and move a staged database into ``generations/``, then flip the active pointer.

    MUST be called while holding ``build_lock(layout)`` (checked): reaping deletes every staging file.
    ``expected_base`` is the active generation id the build started from (``None`` for the first);
    if another build published meanwhile, ``BuildLockedError`` is raised and nothing changes. Each
    step in ``PUBLISH_STEPS`` calls ``on_step(name)`` first (fault injection). Until the state commit,
    any failure leaves the previous generation active and removes our file.
    """
    require_lock(layout)
    if keep < 1:
        raise UsageError(f"keep must be at least 1, got {keep}", keep=keep)
    step = on_step or (lambda name: None)
    staged, final, gid = Path(staging_path), None, None
    try:
        step("integrity_check")
        pin = _validate_staged(layout, staged)
        step("fsync")
        os.fchmod(pin.fd, 0o444)  # published generations are read-only
        os.fsync(pin.fd)
        pin.refresh()
        step("hash")
        sha256, size = pin.digest()
        pin.check_unchanged(None)
        created_at = time.time()
        gid = _generation_id(sha256, created_at, _taken_ids(layout))
        step("rename")
        final = layout.generations_dir / f"{gid}.db"
        os.replace(staged, final)
        gstate.fsync_path(layout.generations_dir)
        pin.moved_to(final, gid)
        step("state_commit")
        gstate.commit_state(layout, gstate.record_row(record, gid, sha256, size, created_at), expected_base)
    except BaseException:
        _discard_unpublished(layout, staged, final, gid)
        raise
    finally:
        invalidate(layout)
    step("retention")
    _apply_retention(layout, keep)
    step("reap")
    _reap(layout)
    return resolved_generation(layout, gstate.with_state(layout, lambda conn: gstate.active_row(layout, conn)), pin)
