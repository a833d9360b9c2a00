"""Incremental builds: carry-over of unchanged notes, re-parsing of changed ones, deletions, and
the cases that must force a full rebuild.

Carry-over is proved on the rows themselves: an unchanged note keeps its note id, its chunk ids
and byte-identical rows (notes, chunks, FTS, term vector, tags, links), and a dense vector stored
for it in the active generation survives the next build. Files are backdated so that the
(mtime, size) shortcut applies, as it does for a real vault of old notes.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import note_vectors
from conftest import write_files as write

from core import generations as gen
from core.build.builder import IndexConfig, build_index
from core.build.ingest import field_texts
from core.generations import GenerationRecord, build_lock, layout_for, list_generations, new_staging_path, publish
from core.index.tables import notes_fts
from core.index.tables.notes_fts import stored_texts
from core.vault.notes import parse_note
from tests import paths

DENDRON = paths.DENDRON

NOTES = {
    "alpha.md": "---\ntitle: Alpha\ntags: [greek]\naliases: [first letter]\n---\n# Alpha\n\n"
    "Alpha links to [[beta]] and to [[omega]], which does not exist yet.\n",
    "beta.md": "---\ntitle: Beta\n---\nBeta mentions [[gamma]] and #betatag.\n",
    "gamma.md": "# Gamma\n\nGamma is plain.\n\n## More\n\nSecond section with gammaword.\n",
    "keep/delta.md": "---\ntitle: Delta\ndescription: stays the same\n---\nDelta body links [[alpha]].\n",
}


# --- helpers -------------------------------------------------------------------------------------------


def backdate(root: Path, seconds: float = 3600.0) -> None:
    """Age every file, so that no build treats them as modified within its own timestamp tick."""
    when = time.time() - seconds
    for path in root.rglob("*.md"):
        os.utime(path, (when, when))


def active(vault: Path, index_dir: Path | None = None) -> sqlite3.Connection:
    return gen.connect_readonly(gen.resolve(layout_for(vault, index_dir)))


def note_rows(conn: sqlite3.Connection, rel_path: str) -> dict[str, list[tuple]]:
    """Every row the index holds for one note, ids included."""
    (nid,) = conn.execute("SELECT id FROM notes WHERE rel_path = ?", (rel_path,)).fetchone()
    chunk_ids = "SELECT id FROM chunks WHERE note_id = ?"
    queries = {
        "notes": "SELECT * FROM notes WHERE id = ?",
        "chunks": "SELECT * FROM chunks WHERE note_id = ? ORDER BY ord",
        "tags": "SELECT * FROM note_tags WHERE note_id = ? ORDER BY tag",
        # its columns named: through a generation of several segments the view has a ``rowid`` column too
        "links": "SELECT note_id, target, kind, heading, source, alt_target FROM links WHERE note_id = ? "
        "ORDER BY target",
        "problems": "SELECT * FROM note_problems WHERE note_id = ?",
        "vectors": f"SELECT * FROM chunk_vectors WHERE chunk_id IN ({chunk_ids}) ORDER BY chunk_id",
    }
    rows = {name: conn.execute(sql, (nid,)).fetchall() for name, sql in queries.items()}
    # its stored texts (where they lie in their block depends on the notes written beside it)
    return {**rows, "fts": [stored_texts(conn, [nid])[nid]], "note_terms": note_vectors(conn)[nid]}


def fts_paths(conn: sqlite3.Connection, query: str) -> set[str]:
    """Per segment (a generation the incremental builder published has several; FTS5 MATCH runs on each)."""
    ids = {r[0] for r in notes_fts.matching_rowids(conn, query)}
    return {r[1] for r in conn.execute("SELECT id, rel_path FROM notes") if r[0] in ids}


def edges_by_path(conn: sqlite3.Connection) -> set[tuple[str, str | None, str | None]]:
    """(source path, destination path, the target an unresolved edge keeps: None when resolved) per edge."""
    return set(
        conn.execute(
            "SELECT s.rel_path, d.rel_path, e.target FROM edges e JOIN notes s ON s.id = e.src_id "
            "LEFT JOIN notes d ON d.id = e.dst_id"
        )
    )


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = write(tmp_path / "vault", NOTES)
    backdate(root)
    build_index(root)
    return root


# --- carry-over and changes ----------------------------------------------------------------------------


def test_unchanged_notes_keep_ids_and_byte_identical_rows(vault: Path) -> None:
    before = active(vault)
    kept = {rel: note_rows(before, rel) for rel in ("alpha.md", "keep/delta.md")}
    old_beta_id = before.execute("SELECT id FROM notes WHERE rel_path = 'beta.md'").fetchone()[0]
    write(vault, {"beta.md": "---\ntitle: Beta v2\n---\nBeta now says betanew.\n", "new.md": "# New\n\nfresh\n"})
    (vault / "gamma.md").unlink()
    report = build_index(vault)
    assert (report.reused, report.changed, report.added, report.removed) == (2, 2, 1, 1)
    assert report.full_rebuild_reason is None and not report.up_to_date
    after = active(vault)
    for rel, rows in kept.items():
        assert note_rows(after, rel) == rows, rel
    beta = after.execute("SELECT id, title FROM notes WHERE rel_path = 'beta.md'").fetchone()
    assert beta[1] == "Beta v2" and beta[0] == old_beta_id  # re-parsed, its id kept (issue 29)
    assert fts_paths(after, "betanew") == {"beta.md"} and fts_paths(after, "betatag") == set()
    held = {term for term, _ in note_vectors(after)[old_beta_id]}  # its new vector under its kept id
    assert "en:betanew" in held and "en:betatag" not in held


def test_a_deleted_note_disappears_from_every_table(vault: Path) -> None:
    before = active(vault)
    gid = before.execute("SELECT id FROM notes WHERE rel_path = 'gamma.md'").fetchone()[0]
    assert ("beta.md", "gamma.md", None) in edges_by_path(before)
    (vault / "gamma.md").unlink()
    build_index(vault)
    after = active(vault)
    assert after.execute("SELECT count(*) FROM notes WHERE rel_path = 'gamma.md'").fetchone()[0] == 0
    for table, col in (
        ("chunks", "note_id"),
        ("note_tags", "note_id"),
        ("links", "note_id"),
        ("link_keys", "note_id"),
        ("target_keys", "note_id"),
        ("note_problems", "note_id"),
        ("edges", "src_id"),
        ("edges", "dst_id"),
    ):
        assert after.execute(f"SELECT count(*) FROM {table} WHERE {col} = ?", (gid,)).fetchone()[0] == 0, table
    # a delete moving beta's edge is a delta (beta re-published): gamma's row stays in its segment's FTS5 index,
    # dead there, so no match returns it
    assert after.execute("SELECT count(*) FROM note_text WHERE note_id = ?", (gid,)).fetchone()[0] == 0
    assert fts_paths(after, "gammaword") == set()
    assert ("beta.md", None, "gamma") in edges_by_path(after)  # the link stays, now unresolved


def fts_postings(conn: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
    """Every (term, note path, column, offset) FTS5's inverted index holds: it must be the index of the live texts."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_instances USING fts5vocab(main, notes_fts, instance)")
    rows = conn.execute(
        "SELECT v.term, n.rel_path, v.col, v.offset FROM temp.fts_instances v JOIN notes n ON n.id = v.doc"
    ).fetchall()
    missing = conn.execute("SELECT count(*) FROM temp.fts_instances WHERE doc NOT IN (SELECT id FROM notes)")
    assert missing.fetchone()[0] == 0  # no posting of a removed note survives
    return sorted(rows)


def test_an_edited_note_matches_its_new_words_and_phrases_only(vault: Path) -> None:
    from core.searcher import search_vault

    write(vault, {"beta.md": "---\ntitle: Beta\n---\nBeta watches the harbour lights at dusk.\n"})
    build_index(vault)
    after = active(vault)
    assert fts_paths(after, "betatag") == set() and fts_paths(after, "mentions") == set()
    assert fts_paths(after, '"harbour lights"') == {"beta.md"}
    hits = search_vault(vault, '"harbour lights"', mode="fts").hits
    assert [h.rel_path for h in hits] == ["beta.md"] and "harbour" in hits[0].snippet
    assert [h.rel_path for h in search_vault(vault, "harbour AND dusk", mode="fts", raw=True).hits] == ["beta.md"]
    assert search_vault(vault, "betatag OR mentions", mode="fts", raw=True).hits == ()
    write(vault, {"beta.md": "---\ntitle: Beta\n---\nBeta mentions [[gamma]] and #betatag.\n"})
    build_index(vault)  # back to the first text: FTS5's index is the cold build's
    cold = vault.parent / "cold"
    build_index(vault, index_dir=cold)
    assert fts_postings(active(vault)) == fts_postings(active(vault, cold))


def test_note_text_is_stored_once_compressed(vault: Path) -> None:
    conn = active(vault)
    assert conn.execute("SELECT count(*) FROM notes_fts WHERE body IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'notes_fts_content'").fetchone()[0] == 0
    ids = dict(conn.execute("SELECT rel_path, id FROM notes"))
    texts = stored_texts(conn, ids.values())
    for rel, nid in ids.items():  # exactly the texts FTS5 indexed
        assert texts[nid] == field_texts(parse_note(rel, (vault / rel).read_bytes())), rel


def _but_chunk_ids(rows: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    """A note's rows without its chunks' ids (a note re-published in a delta keeps its id, not its chunks')."""
    return {**rows, "chunks": [row[1:] for row in rows["chunks"]], "vectors": [row[1:] for row in rows["vectors"]]}


def test_a_new_note_resolves_a_link_of_a_carried_over_note(vault: Path) -> None:
    assert ("alpha.md", None, "omega") in edges_by_path(active(vault))
    alpha_before = note_rows(active(vault), "alpha.md")
    write(vault, {"omega.md": "# Omega\n\nthe last one\n"})
    report = build_index(vault)
    assert report.reused == 4 and report.added == 1
    after = active(vault)
    assert ("alpha.md", "omega.md", None) in edges_by_path(after)
    # alpha's edge moved: it is re-published in the delta at its kept id, the same rows but for its chunks' ids
    assert report.relinked_notes == 1
    assert _but_chunk_ids(note_rows(after, "alpha.md")) == _but_chunk_ids(alpha_before)
    assert report.unresolved_links == after.execute("SELECT count(*) FROM edges WHERE dst_id IS NULL").fetchone()[0]


def test_dense_vectors_of_unchanged_notes_survive_and_those_of_changed_notes_go(vault: Path) -> None:
    layout = layout_for(vault)
    base = gen.resolve(layout)
    with build_lock(layout):  # a generation with a (fake) vector for every chunk
        staged = new_staging_path(layout)
        shutil.copyfile(base.parts[0].path, staged)
        conn = sqlite3.connect(staged)
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks")]
        conn.executemany(
            "INSERT INTO chunk_vectors(chunk_id, vector) VALUES (?, ?)",
            [(i, np.full(4, i, dtype="<f4").tobytes()) for i in ids],
        )
        conn.execute("INSERT INTO meta(key, value) VALUES ('dense_model', '\"fake-model\"')")
        conn.commit()
        conn.close()
        record = GenerationRecord(
            source_snapshot_hash=base.source_snapshot_hash or "",
            notes=4,
            chunks=len(ids),
            dense_chunks=len(ids),
            chunker=base.record["chunker"],
            tokenizer=base.record["tokenizer"],
            timings={},
            problems=[],
            dense_model="fake-model",
        )
        publish(layout, staged, record, expected_base=base.generation_id)
    before = active(vault)
    kept = {rel: note_rows(before, rel) for rel in ("alpha.md", "gamma.md", "keep/delta.md")}
    assert all(rows["vectors"] for rows in kept.values())
    write(vault, {"beta.md": "---\ntitle: Beta\n---\nBeta changed.\n"})
    report = build_index(vault)
    assert report.reused == 3 and report.changed == 1
    after = active(vault)
    for rel, rows in kept.items():
        assert note_rows(after, rel) == rows, rel
    assert note_rows(after, "beta.md")["vectors"] == []
    assert gen.active_record(layout)["dense_chunks"] == sum(len(r["vectors"]) for r in kept.values())
    assert gen.verify_full(layout)


# --- nothing to do -------------------------------------------------------------------------------------


def test_an_unchanged_vault_publishes_nothing(vault: Path) -> None:
    layout = layout_for(vault)
    first = gen.resolve(layout).generation_id
    files = sorted([*layout.manifests_dir.iterdir(), *layout.segments_dir.iterdir()])
    report = build_index(vault)
    assert report.up_to_date and report.generation_id == first
    assert (report.changed, report.added, report.removed, report.reused) == (0, 0, 0, 4)
    assert sorted([*layout.manifests_dir.iterdir(), *layout.segments_dir.iterdir()]) == files
    assert len(list_generations(layout)) == 1


def test_a_touched_but_identical_file_is_not_reparsed_and_only_its_mtime_moves(vault: Path) -> None:
    """mtime is a date field (--date-field mtime), so a touch publishes the new mtime; nothing is
    re-parsed, and the next build is up to date (the file is not re-hashed on every build)."""
    now = time.time()
    os.utime(vault / "beta.md", (now, now))
    report = build_index(vault)
    assert not report.up_to_date and (report.changed, report.added, report.removed) == (0, 0, 0)
    assert build_index(vault).up_to_date


def test_a_same_size_edit_in_the_build_tick_is_still_seen(tmp_path: Path) -> None:
    root = write(tmp_path / "vault", {"a.md": "# A\n\nword one\n"})
    build_index(root)  # a.md's mtime is within the racy window of this scan
    stat = (root / "a.md").stat()
    (root / "a.md").write_text("# A\n\nword two\n", encoding="utf-8")
    os.utime(root / "a.md", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    report = build_index(root)
    assert report.changed == 1
    assert fts_paths(active(root), "two") == {"a.md"}


# --- full rebuilds -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [IndexConfig(chunk_size=300, chunk_overlap=30), IndexConfig(tokenizer="unicode61 remove_diacritics 2")],
    ids=["chunker", "tokenizer"],
)
def test_a_chunker_or_tokenizer_change_forces_a_full_rebuild(vault: Path, config: IndexConfig) -> None:
    report = build_index(vault, config=config)
    assert report.full_rebuild_reason == "index_identity_changed"
    assert (report.reused, report.changed) == (0, 4)
    conn = active(vault)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["chunker"] == f'"{config.chunker}"' and meta["tokenizer"] == f'"{config.tokenizer}"'
    assert build_index(vault, config=config).up_to_date


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-4096])


@pytest.mark.parametrize("target", ["manifest", "part"])
@pytest.mark.parametrize(
    ("corrupt", "reason"), [(_flip_byte, "sha256_mismatch"), (_truncate, "size_mismatch"), (Path.unlink, "missing")]
)
def test_a_corrupted_active_generation_is_not_carried_over(vault: Path, corrupt, reason: str, target: str) -> None:
    layout = layout_for(vault)
    broken = gen.resolve(layout)
    path = broken.path if target == "manifest" else broken.parts[0].path
    os.chmod(path, 0o644)
    corrupt(path)
    gen.clear_verify_cache()
    report = build_index(vault)
    assert report.full_rebuild_reason == f"active_generation_rejected:{reason}"
    assert report.reused == 0 and report.changed == 4
    assert report.generation_id != broken.generation_id
    assert gen.verify_full(layout)["generation_id"] == report.generation_id
    assert active(vault).execute("SELECT count(*) FROM notes").fetchone()[0] == 4


# --- incremental == cold, on real notes ------------------------------------------------------------------


def _comparable(conn: sqlite3.Connection) -> dict[str, object]:
    """The index content keyed by paths and ordinals, not by ids (which differ between builds)."""
    cols = [r[1] for r in conn.execute("PRAGMA table_info(notes)") if r[1] != "id"]
    paths_by_id = dict(conn.execute("SELECT id, rel_path FROM notes"))
    terms = {paths_by_id[nid]: vector for nid, vector in note_vectors(conn).items()}
    return {
        "notes": sorted(conn.execute(f"SELECT {', '.join(cols)} FROM notes")),
        "chunks": sorted(
            conn.execute(
                "SELECT n.rel_path, c.ord, c.heading_path, c.start, c.end FROM chunks c "
                "JOIN notes n ON n.id = c.note_id"
            )
        ),
        "fts": sorted((paths_by_id[nid], *texts) for nid, texts in stored_texts(conn, paths_by_id).items()),
        "terms": terms,
        "edges": sorted(edges_by_path(conn), key=repr),
        "tags": sorted(conn.execute("SELECT n.rel_path, t.tag FROM note_tags t JOIN notes n ON n.id = t.note_id")),
        "links": sorted(
            conn.execute(
                "SELECT n.rel_path, l.target, l.kind, l.heading, l.source, "
                "l.alt_target FROM links l JOIN notes n ON n.id = l.note_id"
            ),
            key=repr,
        ),
    }


def test_incremental_build_equals_a_cold_build_on_real_dendron_notes(tmp_path: Path) -> None:
    names = sorted(p.name for p in DENDRON.glob("dendron.topic.*.md"))[:120]
    extra = sorted(p.name for p in DENDRON.glob("dendron.topic.*.md"))[120:123]
    vault = tmp_path / "vault"
    vault.mkdir()
    for name in names:
        shutil.copyfile(DENDRON / name, vault / name)
    backdate(vault)
    build_index(vault)
    for name in names[0:60:12]:  # 5 edits
        with (vault / name).open("a", encoding="utf-8") as fh:
            fh.write("\nAn appended sentence with [[dendron.topic.links]] in it.\n")
    for name in names[5:50:20]:  # 3 deletions
        (vault / name).unlink()
    for name in extra:  # 3 additions
        shutil.copyfile(DENDRON / name, vault / name)
    report = build_index(vault)
    assert (report.changed, report.added, report.removed) == (8, 3, 3)
    cold = build_index(vault, index_dir=tmp_path / "cold")
    assert cold.full_rebuild_reason == "no_active_generation"
    assert _comparable(active(vault)) == _comparable(active(vault, tmp_path / "cold"))


def test_incremental_edges_equal_a_full_resolution(tmp_path: Path) -> None:
    """Content-only changes take the incremental edge path; the edges must be exactly what resolving
    every link from scratch gives, including edges into and out of the re-inserted notes."""
    files = {
        f"n{i}.md": f"# Note {i}\n\nSee [[n{(i + 1) % 6}]] and [[n{(i + 2) % 6}|two ahead]] and [[missing{i}]].\n"
        for i in range(6)
    }
    root = write(tmp_path / "v", files)
    backdate(root)
    build_index(root)
    for i in (1, 4, 5):  # change content only: same paths, same aliases
        (root / f"n{i}.md").write_text(files[f"n{i}.md"] + "\nMore words.\n", encoding="utf-8")
    build_index(root)
    incremental = edges_by_path(active(root))
    full_dir = tmp_path / "full"
    build_index(root, index_dir=full_dir)
    assert incremental == edges_by_path(active(root, full_dir))
    assert ("n4.md", "n5.md", None) in incremental and ("n0.md", "n1.md", None) in incremental
    assert ("n1.md", None, "missing1") in incremental
