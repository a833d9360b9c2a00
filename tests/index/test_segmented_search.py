"""search_vault over a generation of several segments with tombstones ranks exactly as a cold build of
the live notes alone (issue 29): the SQL side (core.index.segmented) and the arrays side
(core.ranking.segments) together, through the public entry point."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
from core.index.tables.meta import get_meta
from core.ranking.filters import Filters
from core.searcher import search_vault
from tests.conftest import EXAMPLE_VAULT
from tests.index.test_segmented import publish_split, split_ids

MODES = ("fts", "vector", "hybrid", "graph_assisted")
QUERIES = ("note", "postgres database", "search index", "project decision", "vaul", "meeting people")
CALLERS = (None, ("public",), ("lan", "public"))


def _ranking(vault: Path, index_dir: Path | None, query: str, mode: str, classes: tuple[str, ...] | None):
    filters = Filters(classifications=classes) if classes is not None else None
    found = search_vault(
        vault, query, 10, mode=mode, index_dir=index_dir, freshness=False, filters=filters, passages=False
    )
    return [(h.rel_path, h.score, h.actual_mode) for h in found.hits]


@pytest.mark.parametrize("k", [2, 4])
def test_k_segments_with_tombstones_rank_as_a_cold_build_of_the_live_notes(tmp_path: Path, k: int) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    part = verify.resolve(layout_for(root)).parts[0].path
    segment = tmp_path / "base.seg"
    shutil.copyfile(part, segment)
    conn = sqlite3.connect(segment)
    rows = conn.execute("SELECT id, rel_path FROM notes ORDER BY id").fetchall()
    tokenizer = get_meta(conn)["tokenizer"]
    conn.close()
    rng = random.Random(k)
    ids = [r[0] for r in rows]
    dead = set(rng.sample(ids, 3))
    index_dir = tmp_path / "split"
    publish_split(layout_for(root, index_dir), segment, split_ids(ids, k, rng), dead, tokenizer)
    assert len(verify.resolve(layout_for(root, index_dir)).parts) > k  # k segments and their tombstones
    live = tmp_path / "live"
    shutil.copytree(root, live, ignore=shutil.ignore_patterns(".vaultsearch"))
    for note_id, rel in rows:
        if note_id in dead:
            (live / rel).unlink()
    build_index(live)
    for mode in MODES:
        for query in QUERIES:
            for classes in CALLERS:
                expected = _ranking(live, None, query, mode, classes)
                assert _ranking(root, index_dir, query, mode, classes) == expected, (mode, query, classes)
