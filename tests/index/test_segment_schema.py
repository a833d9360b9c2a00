"""What a segment does not store: indexes by note on the name and key tables (no query of a segment uses
them), a resolved edge's target, an index of every edge's kind; raw FTS5 phrases and NEAR still match."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import note, write_files

from core.build import segment_writer
from core.build.builder import build_index
from core.build.optimize import MERGED, optimize_index
from core.build.segment_writer import SMALL_PAGE, SMALL_VAULT_PAGE, SegmentSource
from core.errors import ValidationError
from core.index import verify
from core.index.layout import layout_for
from core.index.tables.checks import inconsistencies
from core.index.tables.links import unresolved_targets
from core.index.tables.meta import meta_value
from core.index.tables.notes import NOTE_COLUMNS, note_extra
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


def test_an_edge_stores_its_target_only_while_unresolved_and_supersession_reads_a_partial_index(
    tmp_path: Path,
) -> None:
    """A resolved edge's target is its link's (stored once, in ``links``); an unresolved one keeps it (what
    ``related`` lists), also when a delete leaves it unresolved; the filter mask's supersession test reads
    the partial index of ``supersedes`` edges in every segment of a generation, not every edge."""
    files = {
        "a.md": note("Alpha", "see [[b]] and [[gone]]"),
        "b.md": note("Beta", "blue"),
        "c.md": "---\nsupersedes: [b]\n---\n# Gamma\n\nnew\n",
    }
    vault = write_files(tmp_path / "v", files)
    build_index(vault)
    (vault / "b.md").unlink()
    build_index(vault)  # a delta segment and a tombstone: the edge a -> b is resolved again, to nothing
    conn = verify.connect_readonly(verify.resolve(layout_for(vault)))
    try:
        a = conn.execute("SELECT id FROM notes WHERE rel_path = 'a.md'").fetchone()[0]
        assert list(unresolved_targets(conn, a)) == [("b", "wikilink"), ("gone", "wikilink")]
        stored = conn.execute("SELECT dst_id IS NULL, target FROM edges ORDER BY src_id, rowid").fetchall()
        assert all((target is None) != unresolved for unresolved, target in stored)
        plan = " ".join(
            r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + supersedes_sql(), ())
        )  # every segment's edges through the generation's view
        segments = len(list(layout_for(vault).segments_dir.glob("*.seg")))
        assert segments == 2 and plan.count("USING INDEX edges_superseded") == segments, plan  # the base, the delta
        assert not re.search(r"SCAN \w+\.edges", plan), plan  # no segment's edges read whole
    finally:
        conn.close()


def supersedes_sql() -> str:
    """The query ``links.supersedes_targets`` runs."""
    return "SELECT DISTINCT dst_id FROM edges WHERE kind = 'supersedes' AND dst_id IS NOT NULL"


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def test_a_small_vault_s_whole_segments_have_2_kb_pages_and_its_deltas_512_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold build's segment and a merge's of less than ``SMALL_VAULT_BYTES`` of Markdown: 2 KB pages (a
    table's last page, half empty on average, is a larger share of a small segment); a one-note delta and a
    tombstone: 512 bytes; the threshold is the notes' file bytes, so a larger vault keeps SQLite's 4 KB."""
    files = {f"n{i}.md": note(f"Note {i}", f"body {i} [[n{(i + 1) % 5}]]") for i in range(5)}
    vault = write_files(tmp_path / "v", files)
    build_index(vault)
    (base,) = verify.resolve(layout_for(vault)).parts
    assert _page_size(base.path) == SMALL_VAULT_PAGE
    (vault / "n1.md").write_text(note("Note 1", "edited"), encoding="utf-8")
    build_index(vault)
    delta = [p for p in verify.resolve(layout_for(vault)).parts if p.path != base.path]
    assert sorted(_page_size(p.path) for p in delta) == [SMALL_PAGE, SMALL_PAGE]  # its segment and tombstone
    assert optimize_index(vault, one_segment=True, grace_s=0.0).outcome == MERGED
    (merged,) = verify.resolve(layout_for(vault)).parts
    assert _page_size(merged.path) == SMALL_VAULT_PAGE
    monkeypatch.setattr(segment_writer, "SMALL_VAULT_BYTES", 100)  # as if the notes held more than the threshold
    (vault / "n2.md").write_text(note("Note 2", "edited"), encoding="utf-8")
    build_index(vault)
    assert optimize_index(vault, one_segment=True, grace_s=0.0).outcome == MERGED
    (merged,) = verify.resolve(layout_for(vault)).parts
    assert _page_size(merged.path) == 4096


def test_a_path_is_indexed_once_and_two_rows_of_one_path_fail_the_checks(tmp_path: Path) -> None:
    """``rel_path`` has no UNIQUE index of its own: ``notes_stat`` (path first) is the only index over it and
    every lookup by path reads it; a segment holding one path twice fails the consistency checks."""
    vault = write_files(tmp_path / "v", {"a.md": note("Alpha", "red"), "b.md": note("Beta", "blue")})
    build_index(vault)
    (part,) = verify.resolve(layout_for(vault)).parts
    work = tmp_path / "work.seg"
    shutil.copyfile(part.path, work)
    work.chmod(0o644)
    conn = sqlite3.connect(work, isolation_level=None)
    try:
        indexes = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'notes'")
        assert sorted(name for name, sql in indexes if "rel_path" in (sql or "rel_path")) == ["notes_stat"]
        plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN SELECT id FROM notes WHERE rel_path = 'a.md'"))
        assert "USING COVERING INDEX notes_stat" in plan, plan
        assert inconsistencies(conn, working=False) == []
        columns = ", ".join(NOTE_COLUMNS[1:])
        conn.execute(f"INSERT INTO notes(id, {columns}) SELECT 99, {columns} FROM notes WHERE rel_path = 'a.md'")
        assert inconsistencies(conn, working=False)[0] == "paths held by two notes: 1"
    finally:
        conn.close()


def test_a_text_frontmatter_id_is_stored_once_and_read_back_in_extra(tmp_path: Path) -> None:
    files = {
        "a.md": "---\nid: abc123\nlang: de\n---\n# Alpha\n\nrot\n",
        "b.md": "---\nid: 123\n---\n# Beta\n\nblue\n",  # an integer id: its text differs from the value
        "c.md": "---\nid: abc\nalias: x\n---\n# Gamma\n\ngreen\n",
    }
    vault = write_files(tmp_path / "v", files)
    build_index(vault)
    conn = verify.connect_readonly(verify.resolve(layout_for(vault)))
    try:
        rows = {
            rel: (nid, extra, fid)
            for rel, nid, extra, fid in conn.execute("SELECT rel_path, id, extra, frontmatter_id FROM notes")
        }
        assert {rel: (extra, fid) for rel, (_, extra, fid) in rows.items()} == {
            "a.md": ('{"lang": "de"}', "abc123"),
            "b.md": ('{"id": 123}', "123"),
            "c.md": ('{"alias": "x"}', "abc"),
        }
        assert note_extra(conn, rows["a.md"][0]) == {"id": "abc123", "lang": "de"}
        assert note_extra(conn, rows["b.md"][0]) == {"id": 123}
        assert note_extra(conn, rows["c.md"][0]) == {"alias": "x", "id": "abc"}
    finally:
        conn.close()


def test_a_segment_written_with_one_path_twice_is_refused(tmp_path: Path) -> None:
    """Merging segments copies their rows; two live notes of one path (ids that differ: a note re-inserted at a
    new id, its old one not marked dead) are refused while the segment is written, not published."""
    one = write_files(tmp_path / "one", {"a.md": note("Alpha", "red"), "b.md": note("Beta", "blue")})
    two = write_files(tmp_path / "two", {f"{i}.md": note(f"N{i}", "x") for i in range(3)} | {"a.md": note("A", "y")})
    parts = []
    for vault in (one, two):
        build_index(vault)
        (part,) = verify.resolve(layout_for(vault)).parts
        conn = verify.connect_readonly(verify.resolve(layout_for(vault)))
        try:
            ids = dict(conn.execute("SELECT rel_path, id FROM notes"))
            tokenizer = str(meta_value(conn, "tokenizer"))
        finally:
            conn.close()
        parts.append((part.path, ids))
    (path_one, ids_one), (path_two, ids_two) = parts
    assert ids_two["a.md"] not in ids_one.values()  # distinct ids: only the path is held twice
    sources = [SegmentSource(path_one, list(ids_one.values())), SegmentSource(path_two, [ids_two["a.md"]])]
    with pytest.raises(ValidationError, match="paths held by two notes: 1"):
        segment_writer.write_segment(tmp_path / "merged.seg", sources, tokenizer=tokenizer)
    good = [SegmentSource(path_one, [ids_one["b.md"]]), SegmentSource(path_two, [ids_two["a.md"]])]
    assert segment_writer.write_segment(tmp_path / "fine.seg", good, tokenizer=tokenizer)["notes"] == 2
