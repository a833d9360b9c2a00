"""An incremental build on a generation (one segment or several) publishes only a new segment with the
changed notes, tombstones and a manifest sharing the unchanged parts (issue 29, storage step 3); a
sequence of such builds ranks exactly as a cold build of the same notes."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.build import incremental
from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
from tests.conftest import EXAMPLE_VAULT
from tests.index.test_segmented_search import CALLERS, MODES, QUERIES, _ranking


def _files(root: Path) -> set[str]:
    return {p.name for p in layout_for(root).segments_dir.iterdir()}


def _same_as_cold(root: Path, tmp_path: Path, step: int) -> None:
    cold = tmp_path / f"cold{step}"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    for mode in MODES:
        for query in (*QUERIES, "zebrafish quokka"):
            for classes in CALLERS:
                assert _ranking(root, None, query, mode, classes) == _ranking(cold, None, query, mode, classes), (
                    step, mode, query, classes,
                )  # fmt: skip


def _leaf(root: Path) -> Path:
    """A note nothing links to (its edit changes no other note's edges)."""
    target = root / "leaf-note.md"
    target.write_text("# Leaf\n\nA note about database search and a quokka.\n")
    return target


def test_edits_publish_only_the_delta_and_rank_as_a_cold_build(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    leaf = _leaf(root)
    build_index(root)
    steps = [
        lambda: (root / "zebra.md").write_text("# Zebra\n\nA zebrafish note about a project decision.\n"),
        lambda: leaf.write_text("# Leaf\n\nAn edited note about the search index and a quokka.\n"),
        lambda: (root / "zebra.md").unlink(),
        lambda: leaf.rename(root / "leaf-moved.md"),
        lambda: (root / "leaf-moved.md").write_text("# Leaf\n\nMeeting people, zebrafish.\n"),
    ]
    for step, change in enumerate(steps):
        before = _files(root)
        change()
        report = build_index(root)
        assert report.full_rebuild_reason is None, (step, report.full_rebuild_detail)
        assert not report.up_to_date, (step, report)
        new = _files(root) - before
        assert len([n for n in new if n.endswith(".seg")]) == 1, (step, new)  # only the changed notes' segment
        assert len([n for n in new if n.endswith(".del")]) <= 1, (step, new)
        parts = verify.resolve(layout_for(root)).parts
        assert sum(p.kind == "segment" for p in parts) == step + 2
        _same_as_cold(root, tmp_path, step)


def test_an_edit_that_moves_other_notes_edges_publishes_one_segment_labelled(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    (root / "zebra.md").write_text("# Zebra\n\nzebrafish\n")
    build_index(root)
    linked = root / "index.md"
    linked.write_text(linked.read_text() + "\nzebrafish quokka\n")  # a note others may link to
    report = build_index(root)
    if report.full_rebuild_reason is not None:
        assert report.full_rebuild_reason == incremental.LINKS_CHANGED
        assert len(verify.resolve(layout_for(root)).parts) == 1
    _same_as_cold(root, tmp_path, 0)
