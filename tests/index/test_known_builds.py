"""A watcher's builds on what its last build knew (``core.build.known``, issue 29: an edit at 100k notes costs
what changed, not a walk of the vault and a read of every base row).

The invariant: after every build, what is kept (the scan, and the published generation's row of every source
file) equals what a walk of the vault and a read of the active generation give; a build that used it read
neither; and a full build afterwards finds nothing to do (no change was missed)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import astuple
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.build import plan as plan_module
from core.build.builder import build_index
from core.build.known import KnownVault
from core.build.optimize import MERGED, optimize_index
from core.build.source import BaseStats, WorkingTreeSource, base_rows
from core.index.layout import layout_for
from core.index.state import active_record
from core.index.verify import clear_verify_cache, connect_readonly, resolve
from core.vault.scan import scan_vault
from tests.conftest import note, write_vault

WORDS = ("alpha", "beta", "gamma", "delta", "postgres", "index")
_body = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
_slot = st.integers(0, 5)
_op = st.one_of(
    st.tuples(st.just("write"), _slot, _body),
    st.tuples(st.just("delete"), _slot),
    st.tuples(st.just("rename"), _slot, _slot),
    st.tuples(st.just("link"), _slot, _slot),
    st.tuples(st.just("touch"), _slot),
    st.tuples(st.just("binary"), _slot),
    st.tuples(st.just("hidden"), _slot, _body),
    st.tuples(st.just("merge"), st.booleans()),
)


def _path(slot: int) -> str:
    return f"sub/n{slot}.md" if slot % 2 else f"n{slot}.md"


def _apply(root: Path, op: tuple) -> set[str]:
    """Make the change; the paths a watcher's events would name."""
    kind, rel = op[0], _path(op[1]) if op[0] != "merge" else ""
    path = root / rel
    if kind == "write":
        path.write_text(note(path.stem, op[2]), encoding="utf-8")
    elif kind == "delete":
        path.unlink(missing_ok=True)
    elif kind == "rename":
        target = _path(op[2])
        if path.exists() and not (root / target).exists():
            path.rename(root / target)
        return {rel, target}
    elif kind == "link" and path.exists():
        path.write_text(path.read_text(encoding="utf-8") + f"\nsee [[n{op[2]}]]\n", encoding="utf-8")
    elif kind == "touch" and path.exists():
        st_ = path.stat()
        os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 5_000_000_000))
    elif kind == "binary":
        path.write_bytes(b"\x00\x01binary\x00")
    elif kind == "hidden":
        rel = f".hidden/n{op[1]}.md"
        (root / ".hidden").mkdir(exist_ok=True)
        (root / rel).write_text(note("hidden", op[2]), encoding="utf-8")
    return {rel} if rel else set()


def _fresh(root: Path) -> tuple[object, dict]:
    """A walk of the vault and the active generation's rows, read now."""
    clear_verify_cache()
    layout = layout_for(root.resolve(), None)
    conn = connect_readonly(resolve(layout))
    try:
        rows = BaseStats(base_rows(conn)).rows
    finally:
        conn.close()
    return scan_vault(root.resolve(), index_dir=layout.index_dir), rows


def _check(root: Path, known: KnownVault) -> None:
    kept = known.peek()
    assert kept is not None, "a build that published a delta (or found nothing) keeps what it knew"
    walked, rows = _fresh(root)
    assert kept.generation_id == active_record(layout_for(root.resolve(), None))["generation_id"]
    assert kept.scan.files == walked.files
    assert sorted(map(astuple, kept.scan.problems)) == sorted(map(astuple, walked.problems))
    assert kept.stats.rows == rows
    odd = {f.rel_path for f in walked.files if (r := rows.get(f.rel_path)) is None or (r[3], r[4]) != f[3:1:-1]}
    assert kept.odd == odd, "every file outside the odd ones matches its row"


def _vault(tmp: str) -> Path:
    return write_vault(
        Path(tmp) / "vault",
        {
            "n0.md": note("n0", "alpha beta postgres see [[n1]]"),
            "sub/n1.md": note("n1", "gamma index"),
            "n2.md": note("n2", "delta alpha"),
        },
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=6))
def test_builds_on_what_the_watcher_knew_equal_a_walk_and_a_read_of_the_generation(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = _vault(tmp)
        known = KnownVault()
        build_index(root, known=known)
        _check(root, known)
        for op in ops:
            before = known.peek()
            if op[0] == "merge":
                report = optimize_index(root, one_segment=op[1], grace_s=0.0)
                if report.outcome == MERGED:  # as the watcher's idle merger does
                    known.rekey(report.generation_before, report.generation_after)
            else:
                changed = _apply(root, op)
                report = build_index(root, rehash=changed, known=known)
                assert ("known_paths" in report.timings) is (before is not None), "used whenever it was kept"
            if known.peek() is not None:
                _check(root, known)
        assert build_index(root).up_to_date, "a full walk finds no change the builds on events missed"
        shutil.rmtree(root)


def test_a_build_on_what_was_known_neither_walks_the_vault_nor_reads_the_base_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _vault(str(tmp_path))
    known = KnownVault()
    build_index(root, known=known)
    (root / "n2.md").write_text(note("n2", "delta alpha postgres"), encoding="utf-8")

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a build on what the watcher knew walked or read every row")

    monkeypatch.setattr(WorkingTreeSource, "scan", refused)
    monkeypatch.setattr(plan_module, "base_rows", refused)
    report = build_index(root, rehash={"n2.md"}, known=known)
    assert not report.up_to_date and report.timings["known_paths"] == 1
    monkeypatch.undo()
    _check(root, known)


def test_what_was_known_of_another_generation_is_not_used(tmp_path: Path) -> None:
    """Another process's ``index`` moved the active generation: the watcher's next build walks."""
    root = _vault(str(tmp_path))
    known = KnownVault()
    build_index(root, known=known)
    (root / "n2.md").write_text(note("n2", "changed by another process"), encoding="utf-8")
    build_index(root)  # not the watcher's
    (root / "n0.md").write_text(note("n0", "alpha edited"), encoding="utf-8")
    report = build_index(root, rehash={"n0.md"}, known=known)
    assert "known_paths" not in report.timings
    _check(root, known)


def test_a_vault_with_a_symlink_is_always_walked(tmp_path: Path) -> None:
    root = _vault(str(tmp_path))
    (root / "link.md").symlink_to(root / "n2.md")
    known = KnownVault()
    build_index(root, known=known)
    (root / "n2.md").write_text(note("n2", "through the link too"), encoding="utf-8")
    report = build_index(root, rehash={"n2.md"}, known=known)
    assert "known_paths" not in report.timings, "what a link reaches is the walk's to say"
    _check(root, known)


def test_a_note_that_could_not_be_read_is_read_again_by_the_next_build_on_what_was_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the last build could not read has no row: the next build reads it again though no event names it
    (``Known.odd``), as a walk's build does."""
    from tests.index.test_build_robustness import deny_reading

    root = _vault(str(tmp_path))
    known = KnownVault()
    build_index(root, known=known)
    (root / "n3.md").write_text(note("n3", "quasar"), encoding="utf-8")
    os.utime(root / "n3.md", (1_700_000_000, 1_700_000_000))  # not racy: only ``odd`` brings it back
    deny_reading(monkeypatch, root / "n3.md")
    build_index(root, rehash={"n3.md"}, known=known)
    monkeypatch.undo()
    (root / "n3.md").chmod(0o644)
    kept = known.peek()
    assert kept is not None and "n3.md" in kept.odd and "n3.md" not in kept.stats.rows
    (root / "n2.md").write_text(note("n2", "delta"), encoding="utf-8")
    report = build_index(root, rehash={"n2.md"}, known=known)
    assert report.timings["known_paths"] == 1 and report.notes == 4
    _check(root, known)
