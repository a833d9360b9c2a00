"""Edits that move OTHER notes' resolved links, and notes only touched, publish a delta (issue 29: "an add,
delete or rename re-resolves only the links whose target could change"; ``core.build.delta_stage.relink``).

A delete or rename of a note others link to, an add a dangling link now names, an alias change, and a touch
(same bytes, new mtime) used to stage the build on a copy of the WHOLE base and publish one whole segment
(``whole_base_links_change`` / ``whole_base_touched_notes``). Now the carried-over notes whose edges (or mtime)
move are re-published in the delta at their kept ids, their old copies tombstoned: the bytes written under the
index directory are a small fraction of the base, and the generation equals a cold build of the same vault
(notes, edges, snapshot hash, rankings, links and backlinks).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from core.build import builder, delta_stage
from core.build.builder import build_index
from core.build.report import BuildReport
from core.errors import SourceChangedError
from core.index import verify
from core.index.layout import layout_for
from core.serve.tools import ServeConfig, Tools
from tests.index.test_edit_writes import _body, _ranking, _snapshot, measured_build
from tests.index.test_segmented import _tool_answers

N = 160


def _vault(root: Path) -> Path:
    """Notes n000..n159, each linking to the next and to the fifth next; one note whose links dangle."""
    root.mkdir()
    for i in range(N):
        links = f"[[n{(i + 1) % N:03d}]] [[n{(i + 5) % N:03d}|see]]"
        (root / f"n{i:03d}.md").write_text(f"---\ntitle: Note {i}\n---\n# Note {i}\n\n{_body(i)}\n\n{links}\n")
    (root / "dangling.md").write_text("# Dangling\n\nriver0 garden, see [[later-note]] and [[Hub Thirty]]\n")
    return root


def _delete(root: Path) -> None:
    (root / "n010.md").unlink()  # n009 and n005 link to it


def _add(root: Path) -> None:
    (root / "later-note.md").write_text("# Later\n\nnow the dangling link resolves, river0\n")


def _rename(root: Path) -> None:
    (root / "n020.md").rename(root / "n020-moved.md")  # n019's and n015's links dangle now


def _alias(root: Path) -> None:
    path = root / "n030.md"
    path.write_text(path.read_text().replace("title: Note 30", "title: Note 30\naliases: [Hub Thirty]"))


def _touch(root: Path) -> None:
    path = root / "n040.md"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 7_000_000_000))


CHANGES: dict[str, tuple[Callable[[Path], None], int]] = {  # the change, the notes it re-publishes
    "delete_linked": (_delete, 2),
    "add_dangling_target": (_add, 1),
    "rename_linked": (_rename, 2),
    "alias_change": (_alias, 1),
    "touch": (_touch, 1),
}


def _rows(root: Path) -> tuple[list[tuple], list[tuple]]:
    """The live notes (path, content hash, mtime, size, title, aliases) and every edge (source path, kind,
    target when unresolved, destination path) of the active generation, by path: what a cold build must equal."""
    conn = verify.connect_readonly(verify.resolve(layout_for(root)))
    try:
        notes = conn.execute(
            "SELECT rel_path, content_sha256, mtime_ns, size, title, aliases FROM notes ORDER BY rel_path"
        ).fetchall()
        edges = conn.execute(
            "SELECT n.rel_path, e.kind, e.target, d.rel_path FROM edges e JOIN notes n ON n.id = e.src_id "
            "LEFT JOIN notes d ON d.id = e.dst_id ORDER BY 1, 2, 3, 4"
        ).fetchall()
    finally:
        conn.close()
    return notes, edges


def _tools(root: Path, paths: list[str]) -> list:
    return [
        _tool_answers(Tools(ServeConfig(root, classifications=classes)), paths)
        for classes in (("lan", "public", "restricted"), ("public",))
    ]


def _first_difference(a: object, b: object, at: str = "") -> str:
    """Where two tool answers first differ, and how (an assertion's message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{at}/{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{at}[{i}]")
    return f"{at}: {a!r:.800} != {b!r:.800}"


def _assert_cold_equal(root: Path, cold: Path, report: BuildReport) -> None:
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))  # copy2: the mtimes too
    cold_report = build_index(cold)
    assert (report.notes, report.chunks, report.links, report.unresolved_links) == (
        cold_report.notes, cold_report.chunks, cold_report.links, cold_report.unresolved_links,
    )  # fmt: skip
    assert _snapshot(root) == _snapshot(cold)
    assert _rows(root) == _rows(cold)
    for mode in ("fts", "hybrid", "graph_assisted"):
        for query in ("river0 garden", "note 30", "hub thirty", "later"):
            assert _ranking(root, query, mode) == _ranking(cold, query, mode), (mode, query)
    paths = ["n005.md", "n009.md", "n011.md", "n015.md", "n019.md", "n030.md", "n040.md", "dangling.md"]
    here, there = _tools(root, paths), _tools(cold, paths)
    assert here == there, _first_difference(here, there)  # read_note and related: links and backlinks


@pytest.mark.parametrize("name", list(CHANGES))
def test_a_change_that_moves_other_notes_edges_or_mtime_publishes_a_delta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    root = _vault(tmp_path / "vault")
    build_index(root)
    change, relinked = CHANGES[name]
    change(root)
    report, written, base_bytes = measured_build(root, monkeypatch)
    assert report.whole_base_reason is None and report.one_segment_reason is None, report
    assert report.relinked_notes == relinked, report
    # the whole-base path writes more than the base (a copy of it, then one segment); a delta of a few notes
    # writes its working database, segment, tombstone and manifest (105-191 KB here, 20 of it for the notes,
    # against a base of 0.76 MB)
    assert written < base_bytes / 3, (written, base_bytes)
    kinds = [p.kind for p in verify.resolve(layout_for(root)).parts]
    assert (kinds.count("segment"), kinds.count("tombstone")) == (2, 1)  # the base shared, a delta beside it
    _assert_cold_equal(root, tmp_path / "cold", report)
    assert build_index(root).up_to_date  # the touched note's new mtime is stored: not re-read every build


def test_a_hub_renamed_is_staged_on_the_whole_base_and_says_why(tmp_path: Path) -> None:
    """Re-publishing more than a quarter of the carried-over notes costs as much as the whole base: labelled."""
    root = tmp_path / "vault"
    root.mkdir()
    (root / "hub.md").write_text("# Hub\n\nthe hub\n")
    for i in range(60):
        (root / f"s{i:02d}.md").write_text(f"# Spoke {i}\n\nspoke river0 garden [[hub]]\n")
    build_index(root)
    (root / "hub.md").rename(root / "hub-moved.md")
    report = build_index(root)
    assert (report.whole_base_reason or "").startswith(delta_stage.LINKS), report
    assert "more than 25%" in (report.whole_base_reason or "")
    _assert_cold_equal(root, tmp_path / "cold", report)


@pytest.mark.parametrize("may_change", [False, True])
def test_a_note_to_republish_changed_after_the_scan_is_handled_as_a_change_during_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, may_change: bool
) -> None:
    """A note re-read for the delta whose content is not the base's any more (written after the scan) is
    handled as any file changed during a build: ``source_changed``; or, for a caller that publishes what it
    read (the watcher), the build is staged on the whole base (labelled), the note as the base holds it, and
    the next build takes the change."""
    root = _vault(tmp_path / "vault")
    build_index(root)
    _delete(root)
    real_plan = builder.plan_build

    def plan_then_write(*args: object, **kwargs: object) -> object:
        plan = real_plan(*args, **kwargs)  # type: ignore[arg-type]
        path = root / "n009.md"  # n009 links to the deleted n010: re-read for the delta
        path.write_text(path.read_text() + "\nwritten after the scan, zebrafish\n")
        return plan

    monkeypatch.setattr(builder, "plan_build", plan_then_write)
    if not may_change:
        with pytest.raises(SourceChangedError):
            build_index(root)
        return
    report = build_index(root, source_may_change=True)
    monkeypatch.undo()
    assert (report.whole_base_reason or "").startswith(delta_stage.RELINK_CHANGED), report
    assert _ranking(root, "zebrafish", "fts") == []  # n009 as the base holds it
    assert build_index(root).changed == 1  # the next build reads the change
    _assert_cold_equal(root, tmp_path / "cold", build_index(root))


def test_a_sequence_of_link_moving_changes_stays_a_cold_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The five changes one after the other on one index (kept ids dead in two segments, a tombstone built on
    the previous one): a delta each time, a cold build's generation after each."""
    root = _vault(tmp_path / "vault")
    build_index(root)
    for step, (change, _) in enumerate(CHANGES.values()):
        change(root)
        report, written, base_bytes = measured_build(root, monkeypatch)
        assert report.whole_base_reason is None and report.one_segment_reason is None, (step, report)
        assert written < base_bytes / 3, (step, written, base_bytes)  # as above
        _assert_cold_equal(root, tmp_path / f"cold{step}", report)


def test_relinked_rows_are_the_base_rows_but_their_edges(tmp_path: Path) -> None:
    """A re-published note's stored rows (chunks, terms of its text) are those a cold build stores: its
    chunk texts' hashes by path and order."""
    root = _vault(tmp_path / "vault")
    build_index(root)
    _delete(root)
    assert build_index(root).relinked_notes == 2
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)

    def chunks(vault: Path) -> list[tuple]:
        conn = verify.connect_readonly(verify.resolve(layout_for(vault)))
        try:
            return conn.execute(
                "SELECT n.rel_path, c.ord, c.heading_path, c.start, c.end FROM chunks c "
                "JOIN notes n ON n.id = c.note_id ORDER BY 1, 2"
            ).fetchall()
        finally:
            conn.close()

    assert chunks(root) == chunks(cold)
