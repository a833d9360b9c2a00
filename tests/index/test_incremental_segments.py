"""An incremental build on a generation (one segment or several) publishes only a new segment with the
changed notes, tombstones and a manifest sharing the unchanged parts (issue 29, storage step 3); a
sequence of such builds ranks exactly as a cold build of the same notes."""

from __future__ import annotations

import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from core.build import incremental
from core.build.builder import build_index
from core.build.forward_rows import read_forward
from core.build.merge import SEGMENT_BUDGET
from core.generations import PUBLISH_STEPS
from core.index import verify
from core.index.layout import layout_for
from core.index.manifest import MAX_SEGMENTS
from core.ranking import segments as ranking_segments
from core.searcher import search_vault
from core.serve.tools import ServeConfig, Tools
from tests.conftest import EXAMPLE_VAULT
from tests.index.test_build_crash import CHILD, COMMITTED_AT, child, served
from tests.index.test_segmented import _tool_answers
from tests.index.test_segmented_search import CALLERS, MODES, QUERIES, _ranking


def _files(root: Path) -> set[str]:
    return {p.name for p in layout_for(root).segments_dir.iterdir()}


def _terms(segment: Path) -> int:
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        forward = read_forward(conn)  # the dictionary a segment stores with its arrays
        assert forward is not None
        return len(forward.terms)
    finally:
        conn.close()


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
        assert report.full_rebuild_reason is None and report.one_segment_reason is None, (step, report)
        assert not report.up_to_date, (step, report)
        new = _files(root) - before
        assert len([n for n in new if n.endswith(".seg")]) == 1, (step, new)  # only the changed notes' segment
        assert len([n for n in new if n.endswith(".del")]) <= 1, (step, new)
        parts = verify.resolve(layout_for(root)).parts
        segments = [p.path for p in parts if p.kind == "segment"]
        assert len(segments) == step + 2
        assert _terms(segments[-1]) < _terms(segments[0]) / 10  # its own notes' dictionary, not the base's
        _same_as_cold(root, tmp_path, step)


def _sizes(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in layout_for(root).segments_dir.iterdir()}


def test_a_delta_publish_writes_parts_sized_by_the_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One-note edits on a base of one and of several segments: the new segment and tombstone are small
    against the base segment (a tombstone was the dead notes with the base's whole dictionary and its
    arrays: sized by the dictionary), nothing is left in staging, and the reader takes the tombstones'
    statistics from the tombstones (counting them from a segment's arrays fails the test)."""
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    leaf = _leaf(root)
    (root / "other-leaf.md").write_text("# Other leaf\n\nA quokka and a zebrafish.\n")
    for i in range(220):  # a larger dictionary: 11,000 more terms (a base of ~0.65 MB in 2 KB pages)
        words = " ".join(f"term{i}x{j}" for j in range(50))
        (root / "filler" / f"n{i:03d}.md").parent.mkdir(exist_ok=True)
        (root / "filler" / f"n{i:03d}.md").write_text(f"# Filler {i}\n\n{words} database search\n")
    build_index(root)
    base_size = max(_sizes(root).values())
    edits = [
        lambda: leaf.write_text("# Leaf\n\nedited once, zebrafish\n"),  # one base segment
        lambda: leaf.write_text("# Leaf\n\nedited twice, quokka\n"),  # its tombstone on the delta segment
        lambda: (root / "other-leaf.md").write_text("# Other leaf\n\nA quokka.\n"),  # the base's 2nd tombstone
    ]
    for step, edit in enumerate(edits):
        before = _sizes(root)
        edit()
        report = build_index(root)
        assert report.one_segment_reason is None, (step, report.one_segment_reason)
        new = {n: size for n, size in _sizes(root).items() if n not in before}
        assert sorted(n.rsplit(".", 1)[1] for n in new) == ["del", "seg"], (step, new)
        for name, size in new.items():
            assert size * (50 if name.endswith(".del") else 10) < base_size, (step, name, size, base_size)
            # in bytes too: a one-note segment's ~45 tables and indexes take a page each (512 B pages: 31 KB;
            # 1 KB pages: 50 KB), a tombstone's 3 (3 KB; 5 KB); the state database, 1 KB pages: 9 KB (4 KB: 24 KB)
            assert size <= (4096 if name.endswith(".del") else 40960), (step, name, size)
        assert layout_for(root).state_path.stat().st_size <= 12288
        assert list(layout_for(root).staging_dir.iterdir()) == []
    monkeypatch.setattr(ranking_segments, "tombstone", lambda *a: pytest.fail("statistics counted, not read"))
    _same_as_cold(root, tmp_path, 0)


def _tools(root: Path, paths: list[str]) -> list:
    """read_note and related of ``paths`` for an unrestricted and a restricted caller."""
    return [
        _tool_answers(Tools(ServeConfig(root, classifications=classes)), paths)
        for classes in (("lan", "public", "restricted"), ("public",))
    ]


def test_an_edit_of_a_linked_note_publishes_only_its_delta(tmp_path: Path) -> None:
    """The edited note keeps its id: the notes linking to it keep their edges, so a content-only edit of a
    note with backlinks publishes one segment and one tombstone (no ``incremental_links_changed``), and
    ranks and reads (related: links and backlinks) as a cold build; twice (its id then dead in two segments)."""
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    (root / "hub.md").write_text("# Hub\n\nzebrafish, see [[spoke]]\n")
    (root / "spoke.md").write_text("# Spoke\n\nsee [[hub]] and [[hub#Hub|the hub]]\n")
    (root / "zz-late.md").write_text("# Late\n\n[[hub]] quokka\n")
    build_index(root)
    paths = ["hub.md", "spoke.md", "zz-late.md", "index.md"]
    for step, text in enumerate(("zebrafish quokka, see [[spoke]]", "meeting people, see [[spoke]] [[index]]")):
        before = _files(root)
        (root / "hub.md").write_text(f"# Hub\n\n{text}\n")
        report = build_index(root)
        assert report.full_rebuild_reason is None and report.one_segment_reason is None, report
        new = sorted(n.rsplit(".", 1)[1] for n in _files(root) - before)
        assert new == ["del", "seg"], new
        kinds = [p.kind for p in verify.resolve(layout_for(root)).parts]
        assert kinds.count("segment") == step + 2 and kinds.count("tombstone") == step + 1
        _same_as_cold(root, tmp_path, step)
        cold = tmp_path / f"cold{step}"
        assert _tools(root, paths) == _tools(cold, paths)


def test_the_twelfth_segment_merges_the_smallest_segments_not_every_one(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    for i in range(MAX_SEGMENTS - 1):
        (root / f"new{i}.md").write_text(f"# New {i}\n\nzebrafish {i}\n")
        assert build_index(root).one_segment_reason is None
    before = verify.resolve(layout_for(root)).parts
    assert len(before) == MAX_SEGMENTS
    (root / "last.md").write_text("# Last\n\nquokka\n")
    report = build_index(root)
    assert report.one_segment_reason is None  # a delta still (before: every segment merged into one)
    assert (report.segment_limit_merge or "").startswith(incremental.SEGMENT_LIMIT)
    after = verify.resolve(layout_for(root)).parts
    # the five smallest merged into one: SEGMENT_BUDGET segments with the delta; the big base segment shared
    assert len(after) == SEGMENT_BUDGET and after[0].sha256 == before[0].sha256
    assert after[-1].notes == 1  # the delta: last.md
    _same_as_cold(root, tmp_path, 0)


@pytest.mark.parametrize("step", PUBLISH_STEPS)
def test_a_kill_at_each_step_of_a_delta_publish_leaves_a_served_generation(tmp_path: Path, step: str) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    leaf = _leaf(root)
    build_index(root)
    leaf.write_text("# Leaf\n\nedited once, zebrafish\n")
    old = build_index(root).generation_id
    leaf.write_text("# Leaf\n\nedited twice, quokka\n")  # a segment and a tombstone
    proc = child(CHILD, str(root), step, "kill", "1")
    out, err = proc.communicate(timeout=120)
    now = served(root)
    if PUBLISH_STEPS.index(step) < COMMITTED_AT:
        assert proc.returncode == -signal.SIGKILL, err
        assert now == old
    else:
        assert now != old
    assert build_index(root).up_to_date == (PUBLISH_STEPS.index(step) >= COMMITTED_AT)  # the edit, once
    assert served(root)
    _same_as_cold(root, tmp_path, 0)


def test_two_segments_whose_tombstones_are_the_same_bytes_share_one_part(tmp_path: Path) -> None:
    """One note edited twice with texts of the same shape: it keeps its id, so segment 0's and segment 1's
    tombstones list the same id with the same statistics, byte for byte one part. The manifest lists it for
    both segments and the generation is served (it was refused as "lists a part twice")."""
    root = tmp_path / "vault"
    root.mkdir()
    for version in range(3):
        (root / "a.md").write_text(f"# Alpha\n\nalpha words, version {version}\n")
        assert build_index(root).one_segment_reason is None
    parts = verify.resolve(layout_for(root)).parts
    stones = [p for p in parts if p.kind == "tombstone"]
    assert [p.kind for p in parts].count("segment") == 3 and len(stones) == 2
    assert stones[0].sha256 == stones[1].sha256 and stones[0].segment != stones[1].segment
    assert verify.verify_full(layout_for(root))["orphans"] == []
    hits = search_vault(root, "alpha", mode="fts")
    assert [h.rel_path for h in hits] == ["a.md"]
