"""A running reader across a build's segment-limit merge (issue 29): note-by-note edits until the build
merges segments to stay within MAX_SEGMENTS. The reader's view of each generation (core.ranking.segment_view)
loads only the segments it has not loaded (the merged one after the merge) and combines no posting; every
mode ranks as a cold build of the same notes, for restricted and unrestricted callers."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import EXAMPLE_VAULT

from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
from core.modes import segment_arrays as sa
from core.ranking.filters import Filters
from core.searcher import search_vault

MODES = ("fts", "vector", "hybrid")
QUERIES = ("postgres connection pool", "search index", "vaul")
CALLERS = (None, ("public",))


def _all(vault: Path) -> dict:
    out = {}
    for m in MODES:
        for q in QUERIES:
            for c in CALLERS:
                filters = Filters(classifications=c) if c is not None else None
                found = search_vault(vault, q, 10, mode=m, freshness=False, filters=filters, passages=False)
                out[(m, q, c)] = [(h.rel_path, h.score) for h in found.hits]
    return out


def test_a_reader_loads_only_the_segment_a_segment_limit_merge_publishes(tmp_path: Path, whole_reads) -> None:
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    notes = sorted(p for p in root.rglob("*.md") if ".vaultsearch" not in p.parts)
    merged_at = None
    for i in range(16):
        with notes[i % len(notes)].open("a", encoding="utf-8") as fh:
            fh.write(f"\nEdit {i}: a kumquat line.\n")
        report = build_index(root)
        if report.up_to_date:
            continue  # a file the vault's ignore file leaves out: no new generation
        if i == 0:
            _all(root)  # the first generation of several segments
            whole_reads.clear()
            continue
        loads, known = sa.SEGMENT_CACHE.loads, set(sa.SEGMENT_CACHE._items)
        got = _all(root)
        new = {key for key in sa.SEGMENT_CACHE._items if key not in known}
        listed = {p.sha256 for p in verify.resolve(layout_for(root)).parts if p.kind == "segment"}
        assert whole_reads == [] and sa.SEGMENT_CACHE.loads - loads == len(new), (i, report.segment_limit_merge)
        assert {sha for _, sha in new} <= listed and len(new) <= 4  # a merged segment and an edit's at most
        if report.segment_limit_merge is not None:
            merged_at = i
            live = tmp_path / "live"
            shutil.copytree(root, live, ignore=shutil.ignore_patterns(".vaultsearch"))
            build_index(live)
            assert got == _all(live)
            break
    assert merged_at is not None  # the edits reached the segment limit
