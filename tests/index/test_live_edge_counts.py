"""The carried-over notes' edge counts of a build on a base (``BaseView.edge_counts``): counted per segment and
minus the gone notes' edges, they equal a count through the ``edges`` view (every edge of a note not gone,
an edge to a note dead in every segment dropped), on a generation of segments and tombstones."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from core.build.base_view import BaseView
from core.build.builder import build_index
from core.build.source import BaseStats
from core.index.layout import layout_for
from core.index.verify import clear_verify_cache, connect_readonly, resolve
from tests.conftest import note, write_vault


def _through_view(conn: sqlite3.Connection, gone: list[int]) -> tuple[int, int]:
    row = conn.execute(
        "SELECT count(*), count(*) - count(dst_id) FROM edges WHERE src_id NOT IN (SELECT value FROM json_each(?))",
        (json.dumps(gone),),
    ).fetchone()
    return int(row[0]), int(row[1])


@pytest.fixture
def segmented(tmp_path: Path) -> Path:
    root = write_vault(
        tmp_path / "v",
        {f"n{i}.md": note(f"n{i}", f"body {i} [[n{(i + 1) % 6}]] [[missing{i % 2}]]") for i in range(6)},
    )
    build_index(root)
    (root / "n2.md").unlink()  # links to it: dropped by the view while no segment holds it live
    build_index(root)
    (root / "n3.md").write_text(note("n3", "edited [[n4]] [[nowhere]] [[n0]]"), encoding="utf-8")
    build_index(root)
    (root / "n6.md").write_text(note("n6", "new [[n3]] [[n2]]"), encoding="utf-8")
    build_index(root)
    return root


def test_counted_per_segment_equal_the_count_through_the_view(segmented: Path) -> None:
    clear_verify_cache()
    base = resolve(layout_for(segmented.resolve(), None))
    assert sum(p.kind == "segment" for p in base.parts) > 1, "a generation of several segments"
    conn = connect_readonly(base)
    try:
        ids = [row[0] for row in conn.execute("SELECT id FROM notes ORDER BY id")]
    finally:
        conn.close()
    for gone in ([], ids[:1], ids[1:3], ids[-2:], ids):
        with BaseView(base, gone, BaseStats()) as view:
            assert view.edge_counts() == _through_view(view.conn, gone), gone
