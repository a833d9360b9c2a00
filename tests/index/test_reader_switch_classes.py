"""A server's fixed classifications on a generation of segments (issue 29): a caller whose classifications hide
no note is served the default filters' mask (no filter SQL over every note of the generation), and whether a
caller's classifications hide a live note is asked of each segment once (its left-out notes cached by its
SHA-256, less the notes it holds dead), so a reader switching to an edit's generation asks about the new
segment only; the rankings equal those of the same caller on a cold build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.index import verify, visible_counts
from core.index.layout import layout_for
from core.index.tables.connection import segment_parts
from core.modes import context
from core.ranking import visibility
from core.ranking.filters import Filters
from core.searcher import search_vault
from tests.conftest import EXAMPLE_VAULT

EVERY_CLASS = ("lan", "public", "restricted")  # the example vault's: nothing hidden
QUERIES = ("database credentials", "note", "incident retro")
RESTRICTED = "howtos/rotate-database-credentials.md"


def _restricted_note(root: Path) -> Path:
    found = [p for p in sorted(root.rglob("*.md")) if "classification: restricted" in p.read_text(encoding="utf-8")]
    assert len(found) == 1
    return found[0]


def _ranking(vault: Path, classes: tuple[str, ...] | None) -> dict[str, list[tuple[str, float]]]:
    filters = Filters(classifications=classes) if classes is not None else None
    out = {}
    for q in QUERIES:
        found = search_vault(vault, q, 10, mode="fts", freshness=False, filters=filters, passages=False)
        out[q] = [(h.rel_path, h.score) for h in found.hits]
    return out


def _segmented(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    with sorted((root / "projects").glob("*.md"))[0].open("a", encoding="utf-8") as fh:
        fh.write("\nAn edit: the generation is two segments.\n")
    build_index(root)
    assert sum(p.kind == "segment" for p in verify.resolve(layout_for(root)).parts) >= 2
    return root


def test_classifications_that_hide_nothing_are_served_the_default_mask(tmp_path: Path, monkeypatch) -> None:
    root = _segmented(tmp_path)
    unfiltered = _ranking(root, None)

    def refuse(*_: object) -> list[int]:
        raise AssertionError("the filter SQL ran for classifications that hide no note")

    monkeypatch.setattr(context, "filtered_note_ids", refuse)
    assert _ranking(root, EVERY_CLASS) == unfiltered
    with pytest.raises(AssertionError, match="filter SQL"):
        _ranking(root, ("lan", "public"))  # they hide a note: the SQL decides


def _segment_shas(root: Path) -> list[str]:
    return [p.sha256 for p in verify.resolve(layout_for(root)).parts if p.kind == "segment"]


def test_whether_classifications_hide_a_note_is_asked_of_each_segment_once(tmp_path: Path, monkeypatch) -> None:
    root = _segmented(tmp_path)
    asked: list[str] = []
    real = visibility.count_segment_notes

    def counted(conn, schema, clause, values, dead_at):
        if dead_at is None:  # every note of the segment: once per segment, then kept
            asked.append(dict(segment_parts(conn))[schema])
        return real(conn, schema, clause, values, dead_at)

    monkeypatch.setattr(visibility, "count_segment_notes", counted)
    visibility.VISIBILITY_CACHE.clear()
    visible_counts._KEPT.clear()  # an identical segment of another test's build would answer from the cache
    visible = ("lan", "public")
    assert _ranking(root, visible) != _ranking(root, None)  # the restricted note is hidden
    assert asked == _segment_shas(root)[:1]  # it is in the first segment: the answer, the others not asked
    _restricted_note(root).unlink()  # the only note those classes hide: dead in its segment, nothing hidden
    build_index(root)
    got = _ranking(root, visible)
    assert got == _ranking(root, None)  # every note's statistics, as the unfiltered caller's
    with (root / RESTRICTED.replace("rotate", "zz")).open("w", encoding="utf-8") as fh:
        fh.write("---\nclassification: public\n---\n# Another\n\nA new note in a new segment.\n")
    build_index(root)
    assert _ranking(root, visible) == _ranking(root, None)
    assert sorted(asked) == sorted(set(asked)) == sorted(set(_segment_shas(root)) | set(asked))  # each once
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    assert _ranking(root, visible) == _ranking(cold, visible)
