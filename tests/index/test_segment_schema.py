"""What a segment does not store: indexes by note on the name and key tables (no query of a segment uses
them); raw FTS5 phrases and NEAR still match."""

from __future__ import annotations

from pathlib import Path

from conftest import note, write_files

from core.build.builder import build_index
from core.index import verify
from core.index.layout import layout_for
from core.index.tables.notes_fts import matching_rowids


def test_a_segment_has_no_index_by_note_on_the_name_and_key_tables(tmp_path: Path) -> None:
    vault = write_files(
        tmp_path / "v", {"a.md": note("Alpha", "red green blue [[b]]"), "b.md": note("Beta", "blue red")}
    )
    build_index(vault)
    conn = verify.connect_readonly(verify.resolve(layout_for(vault)))
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM main.sqlite_master")}
        indexed = {r[0] for r in conn.execute("SELECT tbl_name FROM main.sqlite_master WHERE type = 'index'")}
        assert not indexed & {"note_names", "link_keys", "target_keys"}  # their primary keys only
        assert "notes_fts_data" in names
        ids = dict(conn.execute("SELECT rel_path, id FROM notes"))
        assert matching_rowids(conn, '"green blue"') == [(ids["a.md"],)]
        assert sorted(matching_rowids(conn, "NEAR(red blue, 2)")) == sorted([(ids["a.md"],), (ids["b.md"],)])
    finally:
        conn.close()
