"""The vector mode's chunk vectors: stored counts, load and scores against a plain-Python reference."""

from __future__ import annotations

import dataclasses
import json
import math
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import note, with_working

from core import generations as gen
from core.index.tables.notes_fts import note_bodies
from core.index.tables.terms import CHUNK_FIELD_UNITS, CHUNK_UNIT, chunk_term_rows
from core.ranking.analysis import language_analyzer_for
from core.ranking.chunk_vectors import (
    VECTOR_B,
    VECTOR_IDF_POWER,
    VECTOR_K1,
    ChunkVectors,
    compute_chunk_vectors,
    load_chunk_vectors,
    vector_scores,
)
from core.ranking.sparse import load_sparse
from core.searcher import search_vault
from core.vault.chunking import headings
from core.vault.notes import names_text, parse_note

LONG = "\n\n".join(f"Paragraph {i} talks about gardens, soil and compost in some detail." for i in range(30))
FILES = {
    "garden.md": note(
        "Garden",
        f"# Soil\n\n{LONG}\n\n# Compost heaps\n\nTurn the compost weekly.",
        tags=["outdoor"],
        description="Growing vegetables",
    ),
    "compost.md": note("Compost", "Compost needs air and water."),
    "kitchen.md": note("Kitchen", "# Knives\n\nKeep knives sharp. Soil on vegetables washes off."),
    "empty.md": "---\ntitle: Bare soil\n---\n",
    "quokka.md": note("Quokka", "Quokka."),
    "blob.md": note("Blob", "Compost " + "ab" * 700 + " soil"),  # a word longer than a chunk: hard cuts
}
QUERIES = ["compost", "soil", "compost heaps", "garden soil vegetables", "sharp knives", "air water compost"]


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


@pytest.fixture(scope="module")
def conn(vault):
    return with_working(gen.connect_readonly(gen.resolve(gen.layout_for(vault))))


def reference_scores(vault: Path, conn, query: str) -> dict[str, float]:
    """The vector score of each note, recomputed from the chunk texts with dicts and loops."""
    analyzer = language_analyzer_for("en")
    bodies = note_bodies(conn, [r[0] for r in conn.execute("SELECT id FROM notes")])
    rows = [
        (rel, ord_, path, bodies[nid][start:end])
        for rel, nid, ord_, path, start, end in conn.execute(
            "SELECT n.rel_path, n.id, c.ord, c.heading_path, c.start, c.end FROM chunks c "
            "JOIN notes n ON n.id = c.note_id ORDER BY n.id, c.ord"
        )
    ]
    notes = {rel: parse_note(rel, (vault / rel).read_bytes()) for rel, *_ in rows}
    n_docs = len(notes)
    df: Counter[str] = Counter()
    for parsed in notes.values():
        fields = [
            names_text(parsed),
            parsed.description or "",
            " ".join(parsed.tags),
            "\n".join(headings(parsed.body)),
            parsed.body,
        ]
        df.update({t for f in fields for t in analyzer.terms(f)})
    idf: dict[str, float] = {}
    for t in set(df) | {t for parsed in notes.values() for t in analyzer.terms(parsed.body)}:
        idf[t] = math.log((1 + n_docs) / (1 + df[t])) + 1  # df 0: a fragment of a hard-cut word
    vectors, prev = [], {}
    for rel, ord_, path_json, text in rows:
        parsed, path = notes[rel], json.loads(path_json)
        first_of_section = prev.get(rel) != path_json
        prev[rel] = path_json
        fields = [names_text(parsed), parsed.description or "", " ".join(parsed.tags)] if ord_ == 0 else ["", "", ""]
        fields += [path[-1] if (path and first_of_section) else "", text]
        tf: Counter[str] = Counter()
        for units, field_text in zip(CHUNK_FIELD_UNITS, fields):
            for term in analyzer.terms(field_text):
                tf[term] += units / CHUNK_UNIT
        vectors.append((rel, dict(tf)))  # the chunk's own counts: nothing of other notes
    lengths = [sum(v.values()) for _, v in vectors]
    avg = sum(x for x in lengths if x) / sum(1 for x in lengths if x)
    qtf = Counter(t for t in analyzer.terms(query) if t in idf)
    q = {t: (1 + math.log(c)) * idf[t] ** VECTOR_IDF_POWER for t, c in qtf.items()}  # the query carries idf
    qn = math.sqrt(sum(w * w for w in q.values()))
    out: dict[str, float] = {}
    for (rel, vec), length in zip(vectors, lengths):
        if any(t in vec for t in q):
            k = VECTOR_K1 * (1 - VECTOR_B + VECTOR_B * length / avg)  # BM25's length normalisation
            score = sum(q[t] * vec[t] * (VECTOR_K1 + 1) / (vec[t] + k) for t in q if t in vec) / qn
            out[rel] = max(out.get(rel, 0.0), score)
    return out


@pytest.mark.parametrize("query", QUERIES)
def test_scores_match_a_plain_python_reference(vault, conn, query):
    sparse = load_sparse(conn)
    vectors = load_chunk_vectors(conn, sparse)
    analyzer = language_analyzer_for("en")
    scores, matched, _ = vector_scores(sparse, vectors, analyzer.terms(query))
    path_of = dict(conn.execute("SELECT id, rel_path FROM notes"))
    got = {path_of[int(nid)]: float(s) for nid, s, m in zip(sparse.note_ids, scores, matched) if m > 0}
    assert got == pytest.approx(reference_scores(vault, conn, query), rel=1e-4)


def test_a_vector_hit_shows_the_chunk_that_scored_best(vault, conn):
    results = search_vault(vault, "compost heaps weekly", mode="vector")
    garden = next(r for r in results if r.rel_path == "garden.md")
    # garden.md's best chunk is the short "Compost heaps" section, not its long Soil section
    assert json.loads(garden.heading_path) == ["Compost heaps"] and "Turn the compost weekly" in garden.matched_text


def test_the_vector_mode_uses_the_cached_chunk_vectors(vault):
    from core.ranking.sparse import CHUNK_CACHE

    search_vault(vault, "compost", mode="vector")
    loads = CHUNK_CACHE.loads
    search_vault(vault, "soil", mode="hybrid")
    assert CHUNK_CACHE.loads == loads  # same generation: loaded once
    search_vault(vault, "soil", mode="fts")
    assert CHUNK_CACHE.loads == loads  # fts never loads them


def test_every_chunk_has_a_stored_vector_and_ids_ascend(conn):
    per_note = dict(conn.execute("SELECT note_id, count(*) FROM chunks GROUP BY note_id"))
    rows = list(chunk_term_rows(conn, None))
    assert {nid for nid, *_ in rows} == set(per_note)
    for nid, lengths, ids, tf in rows:
        runs = np.frombuffer(lengths, "<u4")
        assert runs.shape[0] == per_note[nid] and runs.sum() * 4 == len(ids) and len(tf) * 2 == len(ids)
        bounds = [0, *np.cumsum(runs).tolist()]
        terms = np.frombuffer(ids, "<i4")
        for a, b in zip(bounds, bounds[1:]):
            assert np.all(np.diff(terms[a:b]) > 0)  # each chunk's term ids ascend


def test_chunk_terms_that_disagree_with_the_chunks_table_are_an_integrity_error(vault, tmp_path):
    import shutil
    import sqlite3

    from core.errors import IntegrityError

    copy = tmp_path / "copy.db"
    shutil.copyfile(gen.resolve(gen.layout_for(vault)).parts[0].path, copy)
    copy.chmod(0o644)
    db = with_working(sqlite3.connect(copy))
    db.execute("DELETE FROM chunk_terms WHERE note_id = (SELECT max(note_id) FROM chunk_terms)")
    db.commit()
    with pytest.raises(IntegrityError):
        compute_chunk_vectors(db, load_sparse(db))  # the row reader the build stores from


@pytest.mark.parametrize("table", ["note_terms", "chunk_terms"])
@pytest.mark.parametrize("data", [b"not zlib", zlib.compress(b"short")])
def test_a_vector_row_that_does_not_decode_is_an_integrity_error(vault, tmp_path, table, data):
    import shutil
    import sqlite3

    from core.errors import IntegrityError
    from core.ranking.sparse_rows import compute_sparse

    copy = tmp_path / "copy.db"
    shutil.copyfile(gen.resolve(gen.layout_for(vault)).parts[0].path, copy)
    copy.chmod(0o644)
    db = with_working(sqlite3.connect(copy))
    db.execute(f"UPDATE {table} SET data = ? WHERE note_id = (SELECT max(note_id) FROM {table})", (data,))
    db.commit()
    with pytest.raises(IntegrityError, match=f"{table} row of note"):
        compute_chunk_vectors(db, compute_sparse(db))  # the row readers the build stores from


@pytest.mark.parametrize("block", [1, 3, 17])
def test_loading_in_small_blocks_gives_the_same_structure(conn, monkeypatch, block):
    import core.ranking.postings

    sparse = load_sparse(conn)
    whole = load_chunk_vectors(conn, sparse)
    monkeypatch.setattr(core.ranking.postings, "BLOCK", block)  # many blocks, chunks straddling block edges
    pieces = compute_chunk_vectors(conn, sparse)  # the row reader the build stores from
    for name in (f.name for f in dataclasses.fields(ChunkVectors)):  # every array, stored and computed
        assert np.array_equal(getattr(whole, name), getattr(pieces, name)), name
    for t in range(whole.indptr.shape[0] - 1):  # chunk rows ascend within each term
        assert np.all(np.diff(pieces.chunks[pieces.indptr[t] : pieces.indptr[t + 1]]) > 0)


def test_a_legacy_in_place_index_is_read_fresh_after_each_update(make_vault):
    from core.build.builder import build_index
    from core.ranking.sparse import CHUNK_CACHE

    root = make_vault({"a.md": note("A", "lighthouse keeper notes")}, in_place=True, name="legacy-vector")
    loads = CHUNK_CACHE.loads
    assert [r.rel_path for r in search_vault(root, "lighthouse", mode="vector")] == ["a.md"]
    (root / "b.md").write_text("---\ntitle: B\n---\nA second lighthouse, far older.\n", encoding="utf-8")
    build_index(root, in_place=True)
    hits = search_vault(root, "lighthouse older", mode="hybrid")
    assert [r.rel_path for r in hits][0] == "b.md" and hits.index.kind == "legacy_db"
    assert CHUNK_CACHE.loads == loads  # a mutable index.db is never cached


def _stored_chunks_of(vault: Path, rel: str) -> dict[int, tuple[dict[str, float], float]]:
    """chunk ord -> ({term: stored tf}, stored length) of note ``rel``, read from the stored arrays."""
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    sparse = load_sparse(conn)
    vectors = load_chunk_vectors(conn, sparse)
    text_of = {tid: t for t, tid in sparse.term_id.items()}
    ords = dict(
        conn.execute("SELECT c.id, c.ord FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.rel_path = ?", (rel,))
    )
    rows = {row: ords[int(cid)] for row, cid in enumerate(vectors.chunk_ids) if int(cid) in ords}
    out: dict[int, tuple[dict[str, float], float]] = {o: ({}, float(vectors.lengths[r])) for r, o in rows.items()}
    chunks, weights = np.asarray(vectors.chunks), np.asarray(vectors.tf)
    for t in range(vectors.indptr.shape[0] - 1):
        for p in range(int(vectors.indptr[t]), int(vectors.indptr[t + 1])):
            if int(chunks[p]) in rows:
                out[rows[int(chunks[p])]][0][text_of.get(t, f"#{t}")] = float(weights[p])
    return out


def test_editing_one_note_leaves_every_other_notes_stored_chunk_numbers_as_they_are(make_vault):
    """Issue 29: the stored chunk numbers (tf, length) depend on the chunk alone (idf and the mean
    length are applied per query), so an edit that moves df, N and the mean length rewrites nothing
    of the other notes (the idf-weighted, pivoted weights stored before did move)."""
    from core.build.builder import build_index

    files = {
        "garden.md": note("Garden", f"# Soil\n\n{LONG}\n\n# Compost heaps\n\nTurn the compost weekly."),
        "kitchen.md": note("Kitchen", "Keep knives sharp. Soil on vegetables washes off."),
    }
    root = make_vault(files, name="edit-one")
    before = _stored_chunks_of(root, "garden.md")
    (root / "kitchen.md").write_text(note("Kitchen", "Compost, soil, gardens, paragraphs: detail. " * 3), "utf-8")
    (root / "shed.md").write_text(note("Shed", "Soil and compost in the shed."), "utf-8")  # N and df move
    build_index(root)
    after = _stored_chunks_of(root, "garden.md")
    assert before and after == before
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(root)))  # two segments: the edit is a delta
    assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 3  # the rebuild did see the edit
    conn.close()
