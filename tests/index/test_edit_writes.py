"""A build on a generation is staged on its changes only (issue 29, ``core.build.delta_stage``): an edit writes
under the index directory in proportion to the change, not a scratch copy of the whole base, and the
generation it publishes ranks and stores exactly what a cold build of the same notes does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.report import BuildReport
from core.index import state as gstate
from core.index import verify
from core.index.layout import layout_for
from core.index.tables.meta import get_meta

WORDS = (
    "alpha beta gamma delta river stone garden window market signal harbor lantern meadow pencil orbit "
    "cobalt violin thunder saddle marble falcon tundra quartz ember willow canyon glacier "
).split()


def _body(i: int) -> str:
    words = [WORDS[(i * 7 + k * 3) % len(WORDS)] + str((i + k) % 97) for k in range(400)]
    return " ".join(words)


def _vault(root: Path, n: int = 420) -> Path:
    root.mkdir()
    for i in range(n):
        links = f"[[n{(i + 1) % n:03d}]] [[n{(i + 5) % n:03d}|see]]"
        (root / f"n{i:03d}.md").write_text(f"---\ntitle: Note {i}\n---\n# Note {i}\n\n{_body(i)}\n\n{links}\n")
    return root


Walk = dict[str, tuple[int, int, int]]


def _walk(root: Path) -> Walk:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino) for p in root.rglob("*") if p.is_file()}


def _written(before: Walk, after: Walk) -> int:
    """Bytes of every file under the index dir that is new or changed (size, mtime or inode) since ``before``."""
    return sum(sig[0] for path, sig in after.items() if before.get(path) != sig)


def measured_build(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[BuildReport, int, int]:
    """Build ``root``: (the report, bytes written under the index dir up to the commit, the base's part bytes)."""
    layout = layout_for(root)
    base_bytes = sum(p.size for p in verify.resolve(layout).parts)
    before = _walk(layout.index_dir)
    written: list[int] = []
    real_commit = gstate.commit_state

    def measured_commit(*args: object, **kwargs: object) -> object:
        written.append(_written(before, _walk(layout.index_dir)))  # every staged file still exists here
        return real_commit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gstate, "commit_state", measured_commit)
    report = build_index(root)
    monkeypatch.undo()
    assert written, report
    return report, written[0], base_bytes


def _ranking(root: Path, query: str, mode: str) -> list[tuple[str, float, str]]:
    from core.searcher import search_vault

    found = search_vault(root, query, 10, mode=mode, freshness=False, passages=False)
    return [(h.rel_path, h.score, h.actual_mode) for h in found.hits]


def _snapshot(root: Path, index_dir: Path | None = None) -> str:
    resolved = verify.resolve(layout_for(root, index_dir))
    conn = verify.connect_readonly(resolved)
    try:
        return str(get_meta(conn)["source_snapshot_hash"])
    finally:
        conn.close()


def test_a_content_edit_on_several_segments_writes_in_proportion_to_the_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _vault(tmp_path / "vault")
    build_index(root)
    first = root / "n010.md"
    first.write_text(first.read_text() + "\nan edit that makes a second segment\n")
    build_index(root)
    layout = layout_for(root)
    base = verify.resolve(layout)
    assert sum(p.kind == "segment" for p in base.parts) >= 2  # a base of several segments
    edited = root / "n077.md"
    edited.write_text(edited.read_text().replace("# Note 77", "# Note 77\n\nzebrafish quokka river0"))
    report, written, base_bytes = measured_build(root, monkeypatch)
    assert written < base_bytes / 10, (written, base_bytes)  # the old scratch: the whole base
    assert report.one_segment_reason is None and report.whole_base_reason is None

    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    cold_report = build_index(cold)
    assert (report.notes, report.chunks, report.links, report.unresolved_links) == (
        cold_report.notes, cold_report.chunks, cold_report.links, cold_report.unresolved_links,
    )  # fmt: skip
    assert _snapshot(root) == _snapshot(cold)  # the source snapshot a cold build stores
    for mode in ("fts", "vector", "hybrid", "graph_assisted"):
        for query in ("zebrafish quokka", "river0 stone", "note 77", "garden"):
            assert _ranking(root, query, mode) == _ranking(cold, query, mode), (mode, query)
    state = gstate.active_record(layout)
    cold_state = gstate.active_record(layout_for(cold))
    assert state is not None and cold_state is not None
    assert (state["notes"], state["chunks"]) == (cold_state["notes"], cold_state["chunks"])


def test_an_add_that_changes_another_notes_edges_publishes_a_delta(tmp_path: Path) -> None:
    """The note whose dangling link now resolves is re-published in the delta at its id (``delta_stage.relink``;
    before: the build was staged on the whole base, ``whole_base_links_change``)."""
    root = _vault(tmp_path / "vault", n=12)
    (root / "dangling.md").write_text("# Dangling\n\nsee [[later-note]]\n")
    build_index(root)
    (root / "later-note.md").write_text("# Later\n\nnow the dangling link resolves\n")
    report = build_index(root)
    assert report.whole_base_reason is None and report.one_segment_reason is None, report
    assert report.relinked_notes == 1
    assert list(layout_for(root).staging_dir.iterdir()) == []  # the working database of the changes went with it
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    cold_report = build_index(cold)
    assert (report.links, report.unresolved_links) == (cold_report.links, cold_report.unresolved_links)
    assert _snapshot(root) == _snapshot(cold)


def _same_as_cold(root: Path, cold: Path) -> None:
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    assert _snapshot(root) == _snapshot(cold)
    for mode in ("fts", "graph_assisted"):
        for query in ("garden river0", "fresh links"):
            assert _ranking(root, query, mode) == _ranking(cold, query, mode), (mode, query)


def test_adds_renames_and_deletes_that_move_no_other_edge_are_staged_on_their_changes(tmp_path: Path) -> None:
    root = _vault(tmp_path / "vault", n=24)
    build_index(root)
    steps = [
        lambda: (root / "fresh.md").write_text("# Fresh\n\nfresh links to [[n003]] and garden7\n"),
        lambda: (root / "fresh.md").rename(root / "fresh-moved.md"),
        lambda: (root / "n004.md").write_text((root / "n004.md").read_text() + "\nfresh garden river0\n"),
        lambda: (root / "fresh-moved.md").unlink(),
    ]
    for step, change in enumerate(steps):
        change()
        report = build_index(root)
        assert report.whole_base_reason is None and report.one_segment_reason is None, (step, report)
        _same_as_cold(root, tmp_path / f"cold{step}")
