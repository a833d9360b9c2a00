"""``status``'s visible notes, chunks and vectors on a generation of segments (core.index.visible_counts): per
segment, each segment's count of every row kept by its SHA-256 and its dead rows counted again; through edits,
deletes and adds, with vectors on some chunks only, they equal the counts the federated views give, for every
visible set, and a new generation counts its new segments' rows only."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.build.builder import build_index
from core.build.embed import embed_index
from core.index import visible_counts as vc
from core.index.layout import layout_for
from core.index.tables.chunk_vectors import count_visible_vectors
from core.index.tables.chunks import count_visible_chunks
from core.index.tables.notes import count_visible_notes
from core.index.verify import connect_readonly, resolve
from core.ranking.filters import Filters
from tests.conftest import EXAMPLE_VAULT
from tests.minilm_fixture import FP32, cached_model_dirs, fixture_root

VISIBLE_SETS = (("public",), ("lan", "public"), ("lan", "public", "restricted"), ())


def _check(root: Path) -> list[str]:
    """The shas of the segments whose every row was counted (not kept) while checking each visible set."""
    resolved = resolve(layout_for(root))
    conn = connect_readonly(resolved)
    try:
        for classes in VISIBLE_SETS:
            clause, vals = Filters(classifications=classes).visible_classification_clause()
            views = (
                count_visible_notes(conn, clause, vals),
                count_visible_chunks(conn, clause, vals),
                count_visible_vectors(conn, clause, vals),
            )
            assert vc.visible_counts(conn, clause, vals) == views, classes
        return [p.sha256 for p in resolved.parts if p.kind == "segment"]
    finally:
        conn.close()


def test_visible_counts_per_segment_are_the_views_counts(
    tmp_path: Path, request, tmp_path_factory, monkeypatch
) -> None:
    dirs = cached_model_dirs(fixture_root(request, tmp_path_factory))
    root = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    embed_index(root, model=dirs[FP32])
    counted: list[str] = []

    def watched(what, count):
        def every(conn, schema, clause, values, dead_at):
            if dead_at is None and what == "notes":
                counted.append(schema)
            return count(conn, schema, clause, values, dead_at)

        return every

    monkeypatch.setattr(vc, "COUNTERS", tuple((w, watched(w, c), whole) for w, c, whole in vc.COUNTERS))
    vc._KEPT.clear()
    _check(root)  # one segment: the views' SQL
    edits = (
        lambda: sorted((root / "projects").glob("*.md"))[0].open("a").write("\nAn appended line.\n"),
        lambda: sorted((root / "meetings").glob("*.md"))[0].unlink(),
        lambda: (root / "howtos" / "zz-new.md").write_text("---\nclassification: lan\n---\n# New\n\nA new note.\n"),
        lambda: sorted((root / "howtos").glob("*.md"))[-1].open("a").write("\nMore.\n"),
    )
    seen: set[str] = set()
    for edit in edits:
        edit()
        build_index(root)  # the new segment's chunks have no vector
        counted.clear()
        shas = _check(root)
        assert len(shas) >= 2
        assert len(counted) == len(VISIBLE_SETS) * len(set(shas) - seen)  # each new segment once per visible set
        seen.update(shas)
