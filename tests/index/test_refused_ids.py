"""The default filters' refused notes (``notes.refused_note_ids``: the superseded) of a generation of several
segments, scanned per segment minus each segment's dead ids, equal the ids the ``notes`` view gives: a note
superseded by its own frontmatter or by another note's ``supersedes``, edited (dead in one segment, live in a
later one), deleted, or superseding no more."""

from __future__ import annotations

from pathlib import Path

from core.build.builder import build_index
from core.index.layout import layout_for
from core.index.tables.notes import refused_note_ids
from core.index.verify import clear_verify_cache, connect_readonly, resolve
from core.ranking.filters import Filters
from tests.conftest import note, write_vault


def _both(root: Path) -> tuple[list[int], list[int], int]:
    clear_verify_cache()
    resolved = resolve(layout_for(root.resolve(), None))
    conn = connect_readonly(resolved)
    try:
        clause, values = Filters().where()
        view = [row[0] for row in conn.execute(f"SELECT n.id FROM notes n WHERE NOT coalesce(({clause}), 0)", values)]
        return (
            sorted(refused_note_ids(conn, clause, values)),
            sorted(view),
            sum(p.kind == "segment" for p in resolved.parts),
        )
    finally:
        conn.close()


def test_refused_per_segment_equal_the_view(tmp_path: Path) -> None:
    root = write_vault(
        tmp_path / "v",
        {
            "old.md": note("old", "the old way", status="superseded"),
            "adr-1.md": note("adr-1", "first decision"),
            "adr-2.md": note("adr-2", "second decision", supersedes="adr-1"),
            "adr-3.md": note("adr-3", "third decision"),
            "keep.md": note("keep", "kept as it is"),
        },
    )
    build_index(root)
    steps = [
        lambda: (root / "old.md").write_text(note("old", "the old way, edited", status="superseded")),
        lambda: (root / "adr-4.md").write_text(note("adr-4", "fourth", supersedes="adr-3")),
        lambda: (root / "adr-2.md").write_text(note("adr-2", "second decision, superseding nothing")),
        lambda: (root / "old.md").unlink(),
    ]
    for step in steps:
        step()
        build_index(root)
        mine, view, segments = _both(root)
        assert segments > 1 and mine == view
    assert view, "some note is refused at the end (adr-3, superseded by adr-4)"
