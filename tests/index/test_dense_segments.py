"""Dense vectors per segment (issue 29): ``--embed-only`` embeds the segments that lack vectors, newest first,
without rewriting the complete ones; each segment's matrix is cached by its SHA-256 (an edit loads one new
part); and semantic / hybrid / auto over segments with tombstones rank exactly as a cold build of the live
notes, for restricted and unrestricted callers.

Every embedding here runs one text per model call (``batch_size=1``): a text's vector then does not depend
on which other texts shared its batch (padding), so the segmented and the cold index hold the same bytes
and scores compare exactly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLE_VAULT

from core.build.build_embed import EmbedInStaging
from core.build.builder import build_index
from core.build.embed import embed_index
from core.index import verify
from core.index.layout import layout_for
from core.modes import dense_pipeline
from core.ranking.filters import Filters
from core.searcher import search_vault
from tests.minilm_fixture import FP32

MODES = ("semantic", "hybrid", "auto")
QUERIES = ("glossary of terms", "sailing boats", "how do we deploy", "weekly sync meeting", "who is on call")
CALLERS = (None, ("public",), ("lan", "public"))
EDITED = "reference/glossary.md"
DELETED = "meetings/2024-03-04-weekly-sync.md"


def _segments(root: Path) -> list[str]:
    return [p.sha256 for p in verify.resolve(layout_for(root)).parts if p.kind == "segment"]


def _ranking(vault: Path, query: str, mode: str, classes: tuple[str, ...] | None, model: Path) -> list:
    filters = Filters(classifications=classes) if classes is not None else None
    found = search_vault(
        vault, query, 10, mode=mode, freshness=False, filters=filters, passages=False, model=str(model)
    )
    return [(h.rel_path, h.score, h.actual_mode) for h in found.hits]


def _change(root: Path, step: int) -> None:
    """One change per build: an edit, a delete, an add (none changes another note's links)."""
    if step == 0:
        path = root / EDITED
        path.write_text(
            path.read_text(encoding="utf-8") + "\nAlso: a bloat report lists the slow indexes.\n", encoding="utf-8"
        )
    elif step == 1:
        (root / DELETED).unlink()
    else:
        (root / "notes").mkdir(exist_ok=True)
        (root / "notes" / "sailing.md").write_text("# Sailing\n\nWe sail small boats on the lake.\n", encoding="utf-8")


@pytest.fixture
def model(model_dirs: dict[str, Path]) -> Path:
    return model_dirs[FP32]


def test_embed_only_fills_the_new_segments_and_ranks_as_a_cold_build(tmp_path: Path, model: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    embed_index(root, model=model, batch_size=1)
    for step in range(3):
        _change(root, step)
        build_index(root)
    before = _segments(root)
    assert len(before) >= 3  # the base plus the edit's and the add's segments (the delete is a tombstone)
    report = embed_index(root, model=model, batch_size=1)
    after = _segments(root)
    # the base segment was complete: shared by hash, never rewritten; each segment with chunks to embed got
    # a new version, newest first, one publish each (a segment holding no chunk is shared as it is)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert after[0] == before[0] and changed and changed[-1] == len(before) - 1 and report.remaining == 0
    assert len(report.generations_published) == len(changed)
    assert embed_index(root, model=model, batch_size=1).generations_published == []  # complete: nothing
    live = tmp_path / "live"
    shutil.copytree(root, live, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(live)
    embed_index(live, model=model, batch_size=1)
    assert len(_segments(live)) == 1
    for mode in MODES:
        for query in QUERIES:
            for classes in CALLERS:
                expected = _ranking(live, query, mode, classes, model)
                assert expected and _ranking(root, query, mode, classes, model) == expected, (mode, query, classes)


def test_an_edit_loads_only_the_new_segments_matrix(tmp_path: Path, model: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    embed_index(root, model=model)
    hook = EmbedInStaging(model)
    _change(root, 0)
    build_index(root, before_publish=hook)  # text and vectors of the edit in one new segment
    search_vault(root, "slow queries", mode="semantic", model=str(model))
    loads = dense_pipeline.PART_CACHE.stats.loads
    _change(root, 2)
    build_index(root, before_publish=hook)
    assert len(_segments(root)) == 3
    for query in ("sailing", "lake boats", "slow queries"):
        found = search_vault(root, query, mode="semantic", model=str(model))
        assert found.actual_mode == "semantic"
    assert dense_pipeline.PART_CACHE.stats.loads == loads + 1  # the two unchanged segments were reused
    assert found.hits and any(h.rel_path == "notes/sailing.md" for h in search_vault(root, "sailing", mode="semantic"))
