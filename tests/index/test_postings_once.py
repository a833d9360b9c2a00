"""A stored part holds each posting list once (issue 29): its term-major arrays, with the term dictionary
among them; the forward rows (``note_terms``, ``chunk_terms``) and the ``terms`` table are a writer's TEMP
working tables, derived from those arrays exactly (core.build.forward_rows)."""

from __future__ import annotations

import shutil
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLE_VAULT

from core.build import delta_stage
from core.build.builder import build_index
from core.build.forward_rows import read_forward
from core.errors import IntegrityError
from core.generations import layout_for
from core.index import verify
from core.ranking.chunk_vectors import load_chunk_vectors
from core.ranking.sparse import SPARSE_GROUP, load_sparse

WORKING = {"terms", "note_terms", "chunk_terms"}


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


def _parts(vault: Path) -> list[Path]:
    return sorted(p for p in layout_for(vault).segments_dir.iterdir() if p.suffix in (".seg", ".del"))


def _written(conn: sqlite3.Connection) -> dict[str, object]:
    """The working rows of a build's connection, decompressed: what the build computed its arrays from."""
    notes = []
    for nid, n, data in conn.execute("SELECT note_id, n_terms, data FROM note_terms ORDER BY note_id"):
        raw = zlib.decompress(data)
        notes.append((nid, raw[: 4 * n], raw[4 * n :]))
    chunks = []
    for nid, c, n, data in conn.execute("SELECT note_id, n_chunks, n_terms, data FROM chunk_terms ORDER BY note_id"):
        raw = zlib.decompress(data)
        chunks.append((nid, raw[: 4 * c], raw[4 * c : 4 * c + 4 * n], raw[4 * c + 4 * n :]))
    return {"terms": dict(conn.execute("SELECT term, id FROM terms")), "notes": notes, "chunks": chunks}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault"))


def test_no_stored_part_holds_forward_rows_or_a_second_dictionary(vault: Path) -> None:
    build_index(vault)
    (cold,) = _parts(vault)
    (vault / "zz-quokka.md").write_text("# Quokka\n\nA quokka line.\n", encoding="utf-8")
    build_index(vault)  # a delta segment of the new note
    (vault / "zz-quokka.md").write_text("# Quokka\n\nA quokka line, edited.\n", encoding="utf-8")
    build_index(vault)  # another, and a tombstone of the first one's note
    parts = _parts(vault)
    assert len(parts) == 4 and cold in parts and {p.suffix for p in parts} == {".seg", ".del"}
    for part in parts:
        assert not _tables(part) & WORKING, part.name
        assert not any(name.startswith("sqlite_autoindex_terms") for name in _tables(part)), part.name


def test_the_rows_a_segment_gives_back_are_the_rows_the_build_wrote(vault: Path) -> None:
    wrote: dict[str, object] = {}

    def keep(conn: sqlite3.Connection) -> int:
        wrote.update(_written(conn))
        return 0

    build_index(vault, before_publish=keep)
    (segment,) = _parts(vault)
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        forward = read_forward(conn)
        some = read_forward(conn, [nid for nid, *_ in wrote["notes"]][1::2])  # type: ignore[index]
    finally:
        conn.close()
    assert forward is not None and some is not None
    assert forward.terms == wrote["terms"] and len(forward.terms) > 100
    notes = [(nid, ids.astype("<i4").tobytes(), tf.astype("<u2").tobytes()) for nid, ids, tf in forward.notes]
    assert notes == wrote["notes"]
    chunks = [
        (nid, lengths.astype("<u4").tobytes(), ids.astype("<i4").tobytes(), tf.astype("<u2").tobytes())
        for nid, lengths, ids, tf in forward.chunks
    ]
    assert chunks == wrote["chunks"]
    assert [r[0] for r in some.notes] == [r[0] for r in forward.notes][1::2]  # the chosen notes only, in order
    assert all(np.array_equal(a[2], b[2]) for a, b in zip(some.chunks, forward.chunks[1::2], strict=True))


def test_a_part_without_arrays_or_working_rows_is_an_integrity_error(vault: Path, tmp_path: Path) -> None:
    """A stored file has nothing left to compute its arrays from: their loss is a typed error, not SQL's."""
    build_index(vault)
    (segment,) = _parts(vault)
    copy = tmp_path / "copy.seg"
    shutil.copyfile(segment, copy)
    copy.chmod(0o644)
    conn = sqlite3.connect(copy)
    try:
        sparse = load_sparse(conn)
        conn.execute("DELETE FROM term_major WHERE name LIKE 'chunks:%'")
        with pytest.raises(IntegrityError, match="neither its term-major arrays nor working"):
            load_chunk_vectors(conn, sparse)
        conn.execute("DELETE FROM term_major WHERE name LIKE ?", (SPARSE_GROUP + "/%",))
        with pytest.raises(IntegrityError, match="neither its term-major arrays nor working"):
            load_sparse(conn)
    finally:
        conn.close()


def _vectors_by_path(vault: Path) -> dict[str, object]:
    """rel_path -> its note vector and its chunks' vectors by term text, from the one segment of ``vault``'s
    generation (a refused delta publishes the whole as one segment)."""
    (segment,) = verify.resolve(layout_for(vault)).parts
    assert segment.kind == "segment"
    conn = sqlite3.connect(f"file:{segment.path}?mode=ro", uri=True)
    try:
        forward = read_forward(conn)
        paths = dict(conn.execute("SELECT id, rel_path FROM notes"))
    finally:
        conn.close()
    assert forward is not None
    word = {i: t for t, i in forward.terms.items()}
    out: dict[str, object] = {}
    for (nid, ids, tf), (cid, lengths, cids, ctf) in zip(forward.notes, forward.chunks, strict=True):
        assert nid == cid
        runs = np.split(np.arange(cids.shape[0]), np.cumsum(lengths)[:-1]) if lengths.size else []
        out[paths[nid]] = (
            sorted((word[int(i)], row.tobytes()) for i, row in zip(ids, tf, strict=True)),
            [sorted((word[int(cids[k])], int(ctf[k])) for k in run) for run in runs],
        )
    return out


@pytest.mark.parametrize("deltas", [0, 2])
def test_a_refused_delta_publishes_every_notes_vectors_as_a_cold_build(
    tmp_path: Path, deltas: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build on a base writes the vectors of its own notes only; when its delta is refused (a rename
    re-resolves another note's link), the one segment it publishes holds every note's vectors, the others'
    derived from the base's segments: the same as a cold build's (a base of 1 and of 3 segments)."""
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nquokka meets [[b]] here.\n\n## Later\n\nzebrafish text\n", encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\nbeta words and a database.\n", encoding="utf-8")
    (root / "c.md").write_text("# Gamma\n\ngamma project search.\n", encoding="utf-8")
    build_index(root)
    for step in range(deltas):
        (root / "c.md").write_text(f"# Gamma\n\ngamma project search, edit {step} numbat.\n", encoding="utf-8")
        assert build_index(root).one_segment_reason is None  # a delta
    assert len([p for p in _parts(root) if p.suffix == ".seg"]) == 1 + deltas
    (root / "b.md").rename(root / "b-moved.md")  # a's link no longer resolves: its edges change
    monkeypatch.setattr(delta_stage, "RELINK_FLOOR", 0)  # a re-published too many: staged on the whole base
    monkeypatch.setattr(delta_stage, "RELINK_SHARE", 0.0)
    assert str(build_index(root).one_segment_reason).startswith("incremental_links_changed")
    cold = tmp_path / "cold"
    shutil.copytree(root, cold, ignore=shutil.ignore_patterns(".vaultsearch"))
    build_index(cold)
    assert _vectors_by_path(root) == _vectors_by_path(cold)
