"""The index builder on small vaults made here and on copies of the real corpora.

What a build must show: a complete report, every bad input listed with its path and a stable
reason while the build still publishes, rows that really describe the notes (chunks, FTS,
links), the in-place ``legacy_db`` layout, and the same index whether notes are prepared in
this process or in worker processes. The builder is never mocked: each test builds real vaults.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from conftest import with_working
from conftest import write_files as write

from core import generations as gen
from core.build.builder import BuildReport, IndexConfig, build_index
from core.errors import UsageError
from core.index.tables.notes_fts import note_bodies
from core.index.tables.terms import note_term_rows
from core.vault.notes import parse_note
from tests import paths

DATA = paths.DATA
DENDRON = DATA / "dendron" / "vault"
POWERSHELL = DATA / "powershell-docs" / "reference" / "7.4"
REPORT_KEYS = {
    "generation_id",
    "embedded",
    "watermark",
    "one_segment_reason",
    "segment_limit_merge",
    "whole_base_reason",
    "tombstone_whole_notes",
    "relinked_notes",
    "index_kind",
    "notes",
    "chunks",
    "reused",
    "changed",
    "added",
    "removed",
    "full_rebuild_detail",
    "new_problems",
    "settings",
    "problems",
    "seconds",
    "up_to_date",
    "full_rebuild_reason",
    "links",
    "unresolved_links",
    "timings",
}

NOTES = {
    "alpha.md": "---\ntitle: Alpha\ntags: [greek, first]\n---\n# Alpha\n\nAlpha links to [[beta]] and [[nowhere]].\n",
    "beta.md": "---\ntitle: Beta\ndescription: the second letter\n---\nBeta text with #inline tag.\n",
    "sub/gamma.md": "# Gamma\n\nGamma points to [alpha](../alpha.md).\n\n## Details\n\nMore gamma words.\n",
}


# --- helpers -------------------------------------------------------------------------------------------


def copy_corpus(src: Path, dst: Path, names: list[str]) -> Path:
    """Copy the named files of a read-only corpus into ``dst`` as writable files."""
    for name in names:
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / name, target)
    return dst


def dendron_subset() -> list[str]:
    """~40 Dendron notes that link to each other, and every note with an emoji FTS5 indexes."""
    prefixes = ("dendron.topic.links", "dendron.topic.lookup", "dendron.topic.schema")
    names = sorted(p.name for p in DENDRON.glob("*.md") if p.name.startswith(prefixes))
    return names + ["changelog.release.2020-11-01.md", "dendron._ref.status.md"]


def powershell_subset() -> list[str]:
    return sorted(
        p.relative_to(POWERSHELL).as_posix()
        for folder in ("CimCmdlets", "Microsoft.PowerShell.Archive")
        for p in (POWERSHELL / folder).glob("*.md")
    )


def open_active(vault: Path, index_dir: Path | None = None) -> sqlite3.Connection:
    return gen.connect_readonly(gen.resolve(gen.layout_for(vault, index_dir)))


def table(conn: sqlite3.Connection, sql: str) -> list[tuple]:
    return sorted(conn.execute(sql).fetchall(), key=repr)


def decoded_terms(conn: sqlite3.Connection) -> dict[str, dict[str, tuple[int, ...]]]:
    """rel_path -> {term: per-field tf} from the packed note_terms rows (derived from the stored arrays)."""
    with_working(conn)
    names = dict(conn.execute("SELECT id, term FROM terms"))
    out = {}
    paths = dict(conn.execute("SELECT id, rel_path FROM notes"))
    for nid, tids, tf in note_term_rows(conn, None):
        path = paths[nid]
        ids = np.frombuffer(tids, "<i4")
        matrix = np.frombuffer(tf, "<u2").reshape(len(ids), -1)
        out[path] = {names[int(i)]: tuple(int(x) for x in row) for i, row in zip(ids, matrix)}
    return out


# --- the report ----------------------------------------------------------------------------------------


def test_report_keys_counts_and_what_it_publishes(tmp_path: Path) -> None:
    vault = write(tmp_path / "v", NOTES)
    report = build_index(vault)
    assert isinstance(report, BuildReport) and set(report.to_dict()) == REPORT_KEYS
    assert (report.notes, report.reused, report.changed, report.added, report.removed) == (3, 0, 3, 3, 0)
    assert report.index_kind == "immutable_generation" and not report.up_to_date
    assert report.full_rebuild_reason == "no_active_generation"
    assert set(report.timings) == {"scan", "plan", "write", "links", "validate", "publish"}
    # alpha -> beta, alpha -> nowhere (unresolved), gamma -> alpha
    assert (report.links, report.unresolved_links) == (3, 1)
    assert report.problems == []
    layout = gen.layout_for(vault)
    assert gen.resolve(layout).generation_id == report.generation_id
    assert gen.verify_full(layout)["generation_id"] == report.generation_id
    conn = open_active(vault)
    assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == report.notes
    assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == report.chunks
    record = gen.active_record(layout)
    assert (record["notes"], record["chunks"]) == (report.notes, report.chunks)
    assert (layout.index_dir / ".gitignore").read_text() == "*\n"


def test_notes_rows_hold_the_parsed_metadata(tmp_path: Path) -> None:
    vault = write(tmp_path / "v", NOTES)
    build_index(vault)
    conn = open_active(vault)
    rows = {
        r[0]: r[1:]
        for r in conn.execute("SELECT rel_path, title, description, tags, lower(hex(content_sha256)), size FROM notes")
    }
    for rel, text in NOTES.items():
        data = text.encode()
        assert rows[rel][3:] == (hashlib.sha256(data).hexdigest(), len(data))
    assert rows["alpha.md"][:3] == ("Alpha", None, json.dumps(["first", "greek"]))
    assert rows["beta.md"][:3] == ("Beta", "the second letter", json.dumps(["inline"]))
    assert rows["sub/gamma.md"][0] == "gamma"  # the file name: a leading H1 is a heading, not the name
    assert table(conn, "SELECT tag FROM note_tags") == [("first",), ("greek",), ("inline",)]


def test_fts_finds_every_field_and_one_empty_chunk_keeps_a_bodiless_note_searchable(tmp_path: Path) -> None:
    vault = write(tmp_path / "v", {**NOTES, "bare.md": "---\ntitle: Lonely Title\ntags: [solo]\n---\n"})
    build_index(vault)
    conn = open_active(vault)

    def hits(query: str) -> list[str]:
        return sorted(
            r[0]
            for r in conn.execute(
                "SELECT n.rel_path FROM notes_fts f JOIN notes n ON n.id = f.rowid WHERE notes_fts MATCH ?", (query,)
            )
        )

    assert hits("title:lonely") == ["bare.md"] and hits("tags:solo") == ["bare.md"]
    assert hits("description:second") == ["beta.md"] and hits("headings:details") == ["sub/gamma.md"]
    assert hits("body:gamma") == ["sub/gamma.md"]
    assert conn.execute(
        "SELECT start, end, heading_path FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.rel_path = 'bare.md'"
    ).fetchall() == [(0, 0, "[]")]


# --- bad input -----------------------------------------------------------------------------------------

BAD = {
    "good.md": "---\ntitle: Good\n---\nperfectly fine words\n",
    "yaml.md": "---\ntitle: [unclosed\n---\nbody after broken yaml survives\n",
    "latin1.md": b"---\ntitle: Caf\xe9\n---\nna\xefve bytes but indexed anyway\n",
    "empty.md": "",
    "binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
    "huge.md": "big " * 3000,
}
EXPECTED_PROBLEMS = {
    ("yaml.md", "yaml_invalid"),
    ("latin1.md", "utf8_invalid"),
    ("empty.md", "empty"),
    ("binary.md", "binary"),
    ("huge.md", "too_large"),
}


def test_every_bad_input_is_listed_with_path_and_reason_and_the_build_publishes(tmp_path: Path) -> None:
    vault = write(tmp_path / "v", BAD)
    report = build_index(vault, config=IndexConfig(max_note_bytes=10_000))
    assert {(p["path"], p["reason"]) for p in report.problems} == EXPECTED_PROBLEMS
    assert all(p["detail"] for p in report.problems)
    assert report.generation_id is not None and gen.verify_full(gen.layout_for(vault))
    conn = open_active(vault)
    indexed = {r[0] for r in conn.execute("SELECT rel_path FROM notes")}
    assert indexed == {"good.md", "yaml.md", "latin1.md", "empty.md"}  # indexed as well as they could be
    assert conn.execute("SELECT rel_path, reason FROM skipped_files").fetchall() == [("binary.md", "binary")]
    body_hits = {
        r[0]
        for r in conn.execute(
            "SELECT n.rel_path FROM notes_fts f JOIN notes n ON n.id = f.rowid WHERE notes_fts MATCH 'survives OR anyway'"
        )
    }
    assert body_hits == {"yaml.md", "latin1.md"}
    assert report.notes == 4 and report.added == 5  # the binary file was read too
    recorded = {(p["path"], p["reason"]) for p in gen.active_record(gen.layout_for(vault))["problems"]}
    assert recorded == EXPECTED_PROBLEMS


def test_problems_of_carried_over_notes_are_still_reported(tmp_path: Path) -> None:
    vault = write(tmp_path / "v", BAD)
    config = IndexConfig(max_note_bytes=10_000)
    build_index(vault, config=config)
    write(vault, {"good.md": "---\ntitle: Good\n---\nchanged words\n"})
    report = build_index(vault, config=config)
    assert report.changed == 1 and report.reused == 4
    assert {(p["path"], p["reason"]) for p in report.problems} == EXPECTED_PROBLEMS


def test_a_tokenizer_the_analyzer_cannot_mirror_is_refused() -> None:
    for spec in ("trigram", "ascii", "unicode61 tokenchars '-'", "unicode61 remove_diacritics 3", "porter x"):
        with pytest.raises(UsageError) as caught:
            IndexConfig(tokenizer=spec)
        assert caught.value.reason == "usage"
    assert IndexConfig(tokenizer="unicode61").tokenizer == "unicode61"


# --- real corpora ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dendron(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuildReport]:
    vault = copy_corpus(DENDRON, tmp_path_factory.mktemp("dendron"), dendron_subset())
    return vault, build_index(vault)


def test_real_dendron_subset_is_covered_and_its_chunks_are_the_body(dendron: tuple[Path, BuildReport]) -> None:
    vault, report = dendron
    files = sorted(p.name for p in vault.glob("*.md"))
    conn = open_active(vault)
    assert sorted(r[0] for r in conn.execute("SELECT rel_path FROM notes")) == files
    assert report.notes == len(files) and report.problems == []
    assert report.links > 0 and report.links - report.unresolved_links > 0
    assert conn.execute("SELECT count(*) FROM notes WHERE id NOT IN (SELECT note_id FROM chunks)").fetchone()[0] == 0
    bodies = {name: parse_note(name, (vault / name).read_bytes()).body for name in files}
    stored = note_bodies(conn, [r[0] for r in conn.execute("SELECT id FROM notes")])
    rows = conn.execute("SELECT n.rel_path, n.id, c.start, c.end FROM chunks c JOIN notes n ON n.id = c.note_id")
    for rel, nid, start, end in rows:
        assert stored[nid] == bodies[rel]  # the FTS5 body cell is the parsed body
        assert 0 <= start <= end <= len(stored[nid])  # a chunk's text is the body between its offsets


def test_resolved_edges_point_at_existing_notes(dendron: tuple[Path, BuildReport]) -> None:
    vault, _ = dendron
    conn = open_active(vault)
    dangling = conn.execute(
        "SELECT count(*) FROM edges WHERE dst_id IS NOT NULL AND dst_id NOT IN (SELECT id FROM notes)"
    ).fetchone()[0]
    assert dangling == 0
    pairs = set(
        conn.execute(
            "SELECT s.rel_path, d.rel_path FROM edges e JOIN notes s ON s.id = e.src_id JOIN notes d ON d.id = e.dst_id"
        )
    )
    assert ("dendron.topic.links.commands.go-to.md", "dendron.topic.links.commands.go-to-note.md") in pairs
    links = conn.execute("SELECT count(*) FROM links").fetchone()[0]
    assert conn.execute("SELECT count(*) FROM edges").fetchone()[0] == links  # one edge per link, resolved or not


def test_powershell_subset_builds_with_relative_links(tmp_path: Path) -> None:
    vault = copy_corpus(POWERSHELL, tmp_path / "ps", powershell_subset())
    report = build_index(vault)
    assert report.notes == len(powershell_subset()) and report.links > 0
    conn = open_active(vault)
    resolved = conn.execute(
        "SELECT count(*) FROM edges e JOIN notes s ON s.id = e.src_id JOIN notes d "
        "ON d.id = e.dst_id WHERE e.kind = 'markdown'"
    ).fetchone()[0]
    assert resolved > 0


def test_worker_processes_build_exactly_the_same_index(tmp_path: Path, dendron: tuple[Path, BuildReport]) -> None:
    vault, _ = dendron
    inline = build_index(vault, index_dir=tmp_path / "one", workers=1)
    forked = build_index(vault, index_dir=tmp_path / "two", workers=2)
    assert (inline.notes, inline.chunks, inline.links) == (forked.notes, forked.chunks, forked.links)
    a, b = open_active(vault, tmp_path / "one"), open_active(vault, tmp_path / "two")
    for sql in (
        "SELECT * FROM notes",
        "SELECT * FROM chunks",
        "SELECT rowid, * FROM notes_fts",
        "SELECT * FROM note_text",
        "SELECT * FROM text_blocks",
        "SELECT * FROM term_major",  # the postings and the term dictionary, byte for byte
        "SELECT * FROM edges",
        "SELECT * FROM links",
        "SELECT * FROM note_tags",
        "SELECT * FROM note_problems",
    ):
        assert table(a, sql) == table(b, sql), sql


# --- the in-place legacy layout --------------------------------------------------------------------------


def test_in_place_layout_is_one_index_db_served_as_legacy_and_updated_incrementally(tmp_path: Path) -> None:
    vault = write(tmp_path / "v", NOTES)
    first = build_index(vault, in_place=True)
    layout = gen.layout_for(vault)
    assert first.index_kind == "legacy_db" and first.generation_id is None and first.full_rebuild_reason == "no_index"
    assert layout.legacy_path.is_file() and not layout.state_path.exists()
    assert not list(layout.generations_dir.glob("*.db"))
    resolved = gen.resolve(layout)
    assert resolved.kind == "legacy_db" and resolved.path == layout.legacy_path
    conn = sqlite3.connect(layout.legacy_path)
    ids = dict(conn.execute("SELECT rel_path, id FROM notes"))
    conn.close()

    assert build_index(vault, in_place=True).up_to_date
    write(vault, {"beta.md": "---\ntitle: Beta two\n---\nrewritten\n", "delta.md": "# Delta\n\nnew [[beta]]\n"})
    (vault / "sub" / "gamma.md").unlink()
    again = build_index(vault, in_place=True)
    assert (again.reused, again.changed, again.added, again.removed) == (1, 2, 1, 1)
    conn = sqlite3.connect(layout.legacy_path)
    now = dict(conn.execute("SELECT rel_path, id FROM notes"))
    assert now["alpha.md"] == ids["alpha.md"] and set(now) == {"alpha.md", "beta.md", "delta.md"}
    assert now["beta.md"] == ids["beta.md"] and now["delta.md"] > max(ids.values())  # an edit keeps its id
    into = conn.execute(
        "SELECT e.dst_id FROM edges e JOIN notes d ON d.id = e.dst_id WHERE e.src_id = ? AND d.rel_path = 'beta.md'",
        (now["delta.md"],),
    )
    assert into.fetchall() == [(ids["beta.md"],)]
    assert conn.execute("SELECT title FROM notes WHERE rel_path = 'beta.md'").fetchone() == ("Beta two",)
    assert gen.verify_full(layout)["kind"] == "legacy_db"


def test_in_place_with_another_chunker_rebuilds_from_scratch(tmp_path: Path) -> None:
    vault = write(tmp_path / "v", NOTES)
    build_index(vault, in_place=True)
    report = build_index(vault, in_place=True, config=IndexConfig(chunk_size=200, chunk_overlap=20))
    assert report.full_rebuild_reason == "index_identity_changed" and report.reused == 0 and report.changed == 3
