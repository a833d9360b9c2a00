"""Term-major arrays stored in the generation (core.ranking.stored): what the build stores is exactly
what the row readers compute, readers load it without touching the rows, and a damaged or foreign
group is refused or not used."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import note, with_working

from core import generations as gen
from core.errors import IntegrityError
from core.index.tables import term_major
from core.ranking import bm25f, stored
from core.ranking.chunk_vectors import CHUNK_GROUP, compute_chunk_vectors, load_chunk_vectors
from core.ranking.filters import Filters
from core.ranking.sparse import (
    SPARSE_ARRAYS,
    SPARSE_GROUP,
    RankParams,
    bm25_scores,
    compute_sparse,
    gather_postings,
    load_sparse,
)
from core.searcher import search_vault

FILES = {
    "a.md": note("Alpha", "# Soil\n\nalpha soil compost " * 40, tags=["x"]),
    "b.md": note("Beta", "beta compost water", description="wet things"),
    "c.md": note("Gamma", "gamma ünïcödé wörds and soil"),
    "empty.md": "---\ntitle: Bare\n---\n",
}
SPARSE = SPARSE_ARRAYS
CHUNKS = (
    "indptr",
    "chunks",
    "tf",
    "lengths",
    "group_starts",
    "group_rows",
    "chunk_ids",
    "group_of_row",
    "idf",
    "factors",
)


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def writable_copy(vault: Path, tmp_path: Path) -> sqlite3.Connection:
    copy = tmp_path / "copy.db"
    shutil.copyfile(gen.resolve(gen.layout_for(vault)).parts[0].path, copy)
    copy.chmod(0o644)
    return with_working(sqlite3.connect(copy))


def same(a: object, b: object, names: tuple[str, ...]) -> None:
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name


def test_stored_arrays_are_exactly_what_the_rows_give(vault: Path) -> None:
    conn = with_working(gen.connect_readonly(gen.resolve(gen.layout_for(vault))))
    loaded, computed = load_sparse(conn), compute_sparse(conn)
    same(loaded, computed, SPARSE)
    assert loaded.term_id == computed.term_id
    same(load_chunk_vectors(conn, loaded), compute_chunk_vectors(conn, computed), CHUNKS)


def test_loading_reads_the_stored_group_not_the_rows(vault: Path, tmp_path: Path) -> None:
    db = writable_copy(vault, tmp_path)
    expected = load_sparse(db)
    expected_chunks = load_chunk_vectors(db, expected)
    db.executescript("DELETE FROM note_terms; DELETE FROM chunk_terms; DELETE FROM terms;")
    same(load_sparse(db), expected, SPARSE)
    same(load_chunk_vectors(db, expected), expected_chunks, CHUNKS)
    assert len(compute_sparse(db).term_id) == 0  # the rows are really gone


def test_other_parameters_score_from_the_same_stored_group(vault: Path, tmp_path: Path) -> None:
    """No stored number depends on the ranking parameters (BM25F is computed at query time): other
    parameters read the stored arrays, not the rows, and score as the rows computed under them do."""
    db = writable_copy(vault, tmp_path)
    other = RankParams(k1=1.7, b=(0.2, 0.5, 0.3, 0.9, 0.4))
    computed = compute_sparse(db, other)
    db.executescript("DELETE FROM note_terms; DELETE FROM chunk_terms; DELETE FROM terms;")
    loaded = load_sparse(db, other)
    same(loaded, computed, SPARSE)
    terms = ["en:soil", "en:compost"]
    assert all(np.array_equal(a, b) for a, b in zip(bm25_scores(loaded, terms), bm25_scores(computed, terms)))
    assert not np.array_equal(bm25_scores(loaded, terms)[0], bm25_scores(load_sparse(db), terms)[0])


def test_a_group_of_an_older_layout_is_not_used(vault: Path, tmp_path: Path) -> None:
    """A generation stored before the layout changed (v3 held idf arrays, v2 BM25F weights) is
    computed from its rows, never read as the current layout (which would lack arrays)."""
    db = writable_copy(vault, tmp_path)
    old = "sparse:v3"
    db.execute(
        "UPDATE term_major SET name = ? || substr(name, ?) WHERE name LIKE ?",
        (old, len(SPARSE_GROUP) + 1, SPARSE_GROUP + "/%"),
    )
    assert db.execute("SELECT count(*) FROM term_major WHERE name LIKE ?", (SPARSE_GROUP + "%",)).fetchone()[0] == 0
    same(load_sparse(db), compute_sparse(db), SPARSE)


def test_a_chunk_group_of_the_idf_weighted_layout_is_not_used(vault: Path, tmp_path: Path) -> None:
    """Chunk arrays stored before issue 29 (group ``chunks:<slope>``: weights with idf and the pivot
    folded in) are never read as today's idf-free ones: the vectors are computed from the rows."""
    db = writable_copy(vault, tmp_path)
    db.execute(
        "UPDATE term_major SET name = 'chunks:0.3' || substr(name, ?) WHERE name LIKE ?",
        (len(CHUNK_GROUP) + 1, f"{CHUNK_GROUP}/%"),
    )
    assert db.execute("SELECT count(*) FROM term_major WHERE name LIKE 'chunks:0.3/%'").fetchone()[0] > 0
    db.execute("UPDATE term_major SET data = substr(data, 1, 4) WHERE name = 'chunks:0.3/tf'")  # read: an error
    sparse = load_sparse(db)
    same(load_chunk_vectors(db, sparse), compute_chunk_vectors(db, sparse), CHUNKS)


@pytest.mark.parametrize("array", ["sparse_docs", "chunk_tf"])
def test_truncated_stored_array_is_an_integrity_error(vault: Path, tmp_path: Path, array: str) -> None:
    db = writable_copy(vault, tmp_path)
    group, name = (SPARSE_GROUP, "docs") if array == "sparse_docs" else (CHUNK_GROUP, "tf")
    db.execute("UPDATE term_major SET data = substr(data, 1, 4) WHERE name = ?", (f"{group}/{name}",))
    with pytest.raises(IntegrityError):
        load_chunk_vectors(db, load_sparse(db))


def test_missing_array_of_a_group_is_an_integrity_error(vault: Path, tmp_path: Path) -> None:
    db = writable_copy(vault, tmp_path)
    db.execute("DELETE FROM term_major WHERE name = ?", (f"{SPARSE_GROUP}/side_ptr",))
    with pytest.raises(IntegrityError):
        load_sparse(db)


# --- postings stored in pieces, read on demand ------------------------------------------------------

POSTINGS = {"sparse": ("docs", "field_mask", "body_tf", "side_tf"), "chunks": ("chunks", "tf")}


@pytest.fixture(scope="module")
def pieced(make_vault, tmp_path_factory) -> Path:
    """A vault built with tiny pieces, so that every posting array is stored in several of them."""
    words = [f"w{i:03d}" for i in range(300)]
    files = {
        f"n{k}.md": note(f"Note {k}", f"# {' '.join(words[k::11])}\n\n" + " ".join(words[k::7] * 3) + f" soil{k % 5}")
        for k in range(40)
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stored, "PIECE_BYTES", 256)
        return make_vault(files)


def _reader(vault: Path) -> stored.Reader:
    return stored.Reader(gen.connect_readonly(gen.resolve(gen.layout_for(vault)), any_thread=True))


def test_posting_arrays_are_stored_in_pieces_and_read_back_exactly(pieced: Path) -> None:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(pieced)))
    names = [r[0] for r in conn.execute("SELECT name FROM term_major WHERE name LIKE '%#%'")]
    for name in POSTINGS["sparse"]:
        assert sum(n.startswith(f"{SPARSE_GROUP}/{name}#") for n in names) > 2, name
    assert not [n for n in names if "/note_ids#" in n or "/term_text#" in n]  # per-term/per-note arrays: whole
    eager, lazy = load_sparse(conn), load_sparse(conn, reader=_reader(pieced))
    computed = compute_sparse(with_working(conn))  # from the rows the arrays hold
    same(eager, computed, SPARSE)
    assert all(isinstance(getattr(lazy, n), stored.StoredArray) for n in POSTINGS["sparse"])
    same(type("Whole", (), {n: np.asarray(getattr(lazy, n)) for n in SPARSE})(), computed, SPARSE)
    vectors = load_chunk_vectors(conn, lazy, reader=_reader(pieced))
    assert isinstance(vectors.chunks, stored.StoredArray)
    same(
        type("Whole", (), {n: np.asarray(getattr(vectors, n)) for n in CHUNKS})(),
        load_chunk_vectors(conn, eager),
        CHUNKS,
    )


def test_pieces_are_compressed_and_wide_integers_stored_narrow(pieced: Path) -> None:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(pieced)))
    rows = {name: (dtype, shape, size) for name, dtype, shape, size in term_major.group_listing(conn, SPARSE_GROUP)}
    codecs = {name: json.loads(rows[f"{SPARSE_GROUP}/{name}"][1])["codec"] for name in POSTINGS["sparse"]}
    z, delta = stored.ZSTD, stored.ZSTD_DELTA
    assert codecs == {"docs": delta, "field_mask": z, "body_tf": z, "side_tf": z}
    whole = load_sparse(conn)
    docs_bytes = sum(size for name, (_, _, size) in rows.items() if name.startswith(f"{SPARSE_GROUP}/docs#"))
    assert 0 < docs_bytes < whole.docs.nbytes / 2
    dtype, shape, size = rows[f"{SPARSE_GROUP}/indptr"]
    spec = json.loads(shape)  # narrowed to int32 (half its bytes), then compressed as differences
    assert (dtype, spec["dtype"], spec["codec"]) == ("<i4", "<i8", delta) and 0 < size < whole.indptr.nbytes // 8
    assert whole.indptr.dtype == np.int64 and not whole.indptr.flags.writeable


@pytest.mark.parametrize("seed", range(5))
def test_a_piece_of_differences_decodes_to_its_values_across_run_breaks_and_extremes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs = [np.sort(rng.integers(-(2**31), 2**31 - 1, rng.integers(0, 50))) for _ in range(20)]
    values = np.concatenate([*runs, np.array([2**31 - 1, -(2**31), 0], np.int64)]).astype("<i4")
    for codec in (stored.ZSTD, stored.ZSTD_DELTA):
        got = stored._decode(stored._encode(values, codec), codec, np.dtype("<i4"), "x")
        assert got.dtype == values.dtype and np.array_equal(got, values) and not got.flags.writeable


def test_a_stored_array_answers_every_index_as_the_whole_array(pieced: Path) -> None:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(pieced)))
    lazy = load_sparse(conn, reader=_reader(pieced)).body_tf
    whole = load_sparse(conn).body_tf
    n = whole.shape[0]
    rng = np.random.default_rng(7)
    keys: list[object] = [
        slice(None),
        slice(3, 200),
        slice(n - 5, n + 10),
        slice(10, 5),
        slice(0, n, 3),
        0,
        n - 1,
        -1,
        np.int64(17),
        np.arange(40, 180),
        np.concatenate([np.arange(100, 130), np.arange(5, 9), np.arange(300, 301)]),
        rng.integers(0, n, 500),  # scattered: more runs than MAX_RUNS
        rng.integers(-n, n, (4, 6)),
        np.array([], dtype=np.int64),
        whole > np.median(whole),
    ]
    for key in keys:
        fresh = load_sparse(conn, reader=_reader(pieced)).body_tf  # nothing read yet
        for array in (fresh, lazy):  # ... and one that has read pieces already
            got, want = array[key], whole[key]
            assert np.asarray(got).dtype == want.dtype and np.array_equal(got, want), key
    with pytest.raises(IndexError):
        lazy[np.array([n])]
    assert np.array_equal(np.asarray(lazy), whole) and lazy.shape == whole.shape and lazy.nbytes == whole.nbytes


def test_a_query_reads_only_the_pieces_of_its_terms(pieced: Path) -> None:
    reader = _reader(pieced)
    read: list[str] = []
    original = reader.data

    def counting(name: str) -> bytes | None:
        read.append(name)
        return original(name)

    reader.data = counting  # type: ignore[method-assign]
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(pieced)))
    lazy, whole = load_sparse(conn, reader=reader), load_sparse(conn)
    assert read == []
    terms = ["en:w007", "en:soil3"]
    got, want = bm25_scores(lazy, terms), bm25_scores(whole, terms)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    total = sum(-(-getattr(lazy, n).nbytes // 256) for n in POSTINGS["sparse"])
    assert 0 < len(read) < total / 4, (len(read), total)


def test_a_missing_or_short_piece_is_an_integrity_error(pieced: Path, tmp_path: Path) -> None:
    db = writable_copy(pieced, tmp_path)
    name = f"{SPARSE_GROUP}/docs#000001"
    db.execute("UPDATE term_major SET data = substr(data, 1, 8) WHERE name = ?", (name,))
    db.commit()
    with pytest.raises(IntegrityError):
        load_sparse(db)  # read whole
    lazy = load_sparse(db, reader=stored.Reader(db)).docs
    lazy[:8]  # piece 0 is intact
    with pytest.raises(IntegrityError):
        lazy[70:80]
    db.execute("DELETE FROM term_major WHERE name = ?", (name,))
    with pytest.raises(IntegrityError):
        np.asarray(load_sparse(db, reader=stored.Reader(db)).docs)


def test_stored_arrays_outlive_the_loading_connection_and_serve_every_thread(pieced: Path) -> None:
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(pieced)))
    whole = load_sparse(conn)
    lazy = load_sparse(conn, reader=_reader(pieced))
    conn.close()  # the search's connection goes; the reader has its own
    n = whole.docs.shape[0]
    starts = list(range(0, n - 50, 37))
    errors: list[BaseException] = []

    def gather(offset: int) -> None:
        try:
            for s in starts[offset::4]:
                pos = np.arange(s, s + 50)
                assert np.array_equal(lazy.docs[pos], whole.docs[pos]) and np.array_equal(
                    lazy.body_tf[pos], whole.body_tf[pos]
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=gather, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_the_stored_default_mask_is_what_the_filter_sql_gives(make_vault) -> None:
    """The build stores which notes the default filters let through (not superseded); a search without
    filters uses it instead of querying every note (core.modes.context.mask)."""
    files = {
        "old.md": note("Old", "orchid clay", superseded_by="new"),
        "new.md": note("New", "orchid bark", supersedes="old"),
        "gone.md": note("Gone", "orchid nobody follows", status="superseded"),
        "linked.md": note("Linked", "orchid linked away"),
        "later.md": note("Later", "orchid later", supersedes="[[linked]]"),
        "plain.md": note("Plain", "orchid plain"),
    }
    vault = make_vault(files)
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    sp = load_sparse(conn)
    rows = dict(conn.execute("SELECT id, rel_path FROM notes"))
    clause, vals = Filters().where()
    allowed = {r[0] for r in conn.execute(f"SELECT n.id FROM notes n WHERE {clause}", vals)}
    assert sp.default_mask is not None and sp.default_mask.dtype == bool
    assert (
        {rows[i] for i, keep in zip(sp.note_ids.tolist(), sp.default_mask.tolist()) if keep}
        == {rows[i] for i in allowed}
        == {"new.md", "later.md", "plain.md"}
    )
    assert np.array_equal(sp.default_mask, stored_mask_of(conn, sp))
    assert {r.rel_path for r in search_vault(vault, "orchid", freshness=False)} == {"new.md", "later.md", "plain.md"}
    assert len(search_vault(vault, "orchid", include_superseded=True, freshness=False)) == 6


def stored_mask_of(conn: sqlite3.Connection, sp: object) -> np.ndarray:
    from core.ranking.sparse import default_filter_mask

    return default_filter_mask(conn, sp.note_ids)  # type: ignore[attr-defined]


def test_a_long_lived_process_reads_the_whole_array_after_many_gathers(pieced: Path) -> None:
    """A one-shot search reads the pieces it needs; after WHOLE_AFTER_GATHERS gathers the array is read
    once whole and indexed directly (a server's warm queries skip the run bookkeeping), same values."""
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(pieced)))
    lazy, whole = load_sparse(conn, reader=_reader(pieced)).body_tf, load_sparse(conn).body_tf
    for k in range(stored.WHOLE_AFTER_GATHERS):
        positions = np.arange(k, k + 3)
        assert np.array_equal(lazy[positions], whole[positions])
    assert lazy._full is None and len(lazy._pieces) < -(-lazy.nbytes // 256)
    positions = np.array([5, 1, whole.shape[0] - 1])
    assert np.array_equal(lazy[positions], whole[positions])
    assert lazy._full is not None and np.array_equal(lazy._full, whole)


# --- nothing stored depends on collection statistics ------------------------------------------------


def _per_note(vault: Path) -> tuple[set[str], dict[tuple[str, str], tuple[int, ...]], dict[str, tuple]]:
    """(stored sparse array names, per (term, note path): its field counts, per note path: its field
    lengths and name terms) of the vault's active generation, read from the stored group."""
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    names = {r[0].split("/", 1)[1] for r in conn.execute("SELECT name FROM term_major WHERE name LIKE 'sparse:%'")}
    sp = load_sparse(conn)
    path = dict(conn.execute("SELECT id, rel_path FROM notes"))
    term_of = {i: t for t, i in sp.term_id.items()}
    postings: dict[tuple[str, str], tuple[int, ...]] = {}
    for term, tid in sp.term_id.items():
        ids = np.asarray([tid])
        pos, _ = gather_postings(sp.indptr, ids)
        side, _ = gather_postings(sp.side_ptr, ids)
        tf = bm25f.posting_tf(sp.field_mask[pos], sp.body_tf[pos], sp.side_tf[side])
        for row, counts in zip(sp.docs[pos].tolist(), tf.tolist()):
            postings[(term, path[int(sp.note_ids[row])])] = tuple(counts)
    notes = {}
    for row, nid in enumerate(sp.note_ids.tolist()):
        held = sp.name_terms[sp.name_ptr[row] : sp.name_ptr[row + 1]]
        notes[path[nid]] = (tuple(sp.field_len[row].tolist()), tuple(term_of[int(t)] for t in held))
    return names, postings, notes


def test_no_stored_number_depends_on_collection_statistics(make_vault) -> None:
    """The stored group holds raw counts only (no BM25F weight, idf or name idf): adding a note that
    shares the others' words moves N, df and the average lengths, and no other note's stored numbers."""
    extra = {"zz.md": note("Soil compost alpha", "# Soil\n\nsoil compost beta gamma water " * 30, tags=["x"])}
    before_names, before, before_notes = _per_note(make_vault(FILES))
    after_names, after, after_notes = _per_note(make_vault({**FILES, **extra}))
    assert not before_names & {"bm25", "bm25_idf", "name_idf"} and before_names == after_names
    assert {k: v for k, v in after.items() if k[1] != "zz.md"} == before
    assert {k: v for k, v in after_notes.items() if k != "zz.md"} == before_notes
    assert any(k[1] == "zz.md" for k in after) and after_notes["zz.md"][1]  # the new note is there, with names


def test_a_large_whole_array_is_stored_compressed_and_read_back_exactly() -> None:
    """Arrays stored whole (the dictionary, the vocabulary, the term pointers) are compressed above
    WHOLE_RAW_BYTES, the ascending int32 ones as differences; each loads back with its dtype and shape."""
    conn = sqlite3.connect(":memory:")
    conn.execute(term_major.DDL_TERM_MAJOR)
    arrays = {
        "ptr": np.arange(0, 30_000, 3, dtype=np.int64),  # narrowed to int32, then differences
        "text": np.frombuffer(b'["en:soil", "en:compost"]' * 400, dtype=np.uint8),
        "grid": np.arange(6_000, dtype=np.uint32).reshape(2_000, 3),
        "small": np.arange(5, dtype=np.int64),
        "delta_sized": np.arange(400, dtype=np.int32) * 7,  # 1.6 KB: a one-note delta's term pointers
    }
    stored.save_group(conn, "g", arrays, (), ("ptr",))
    rows = {name: (json.loads(shape), size) for name, _, shape, size in term_major.group_listing(conn, "g")}
    assert rows["g/ptr"][0]["codec"] == stored.ZSTD_DELTA and rows["g/ptr"][1] < 1_000
    assert rows["g/text"][0]["codec"] == stored.ZSTD and rows["g/text"][1] < 1_000
    assert rows["g/grid"][0]["codec"] == stored.ZSTD and "codec" not in rows["g/small"][0]  # small: raw bytes
    assert rows["g/delta_sized"][0]["codec"] == stored.ZSTD and rows["g/delta_sized"][1] < 800
    loaded = stored.load_group(conn, "g", tuple(arrays))
    assert loaded is not None
    for name, array in arrays.items():
        got = loaded[name]
        assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array), name
        assert not got.flags.writeable, name


def test_only_the_named_arrays_are_listed_and_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """``load_group(..., only=True)``: the named arrays alone, looked up by name (a tombstone writer reads a few
    arrays of a group of thousands of pieces); a pieced one stays lazy with a reader; a missing one fails."""
    conn = sqlite3.connect(":memory:")
    conn.execute(term_major.DDL_TERM_MAJOR)
    big = np.arange(3 * stored.PIECE_BYTES, dtype=np.int32)
    stored.save_group(conn, "g", {"small": np.arange(5), "big": big, "other": np.ones(7)}, ("big",), ("big",))
    monkeypatch.setattr(term_major, "group_listing", None)  # never listed whole
    got = stored.load_group(conn, "g", ("small",), only=True)
    assert got is not None and set(got) == {"small"} and got["small"].tolist() == list(range(5))
    lazy = stored.load_group(conn, "g", ("small", "big"), reader=stored.Reader(conn), only=True)
    assert lazy is not None and isinstance(lazy["big"], stored.StoredArray) and lazy["big"][5:8].tolist() == [5, 6, 7]
    with pytest.raises(IntegrityError, match="lacks"):
        stored.load_group(conn, "g", ("small", "nope"), only=True)


def test_a_small_group_read_whole_takes_one_query_for_its_bytes(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group of at most ``HELD_GROUP_BYTES`` read whole (a delta segment's, in a new process) is listed and read
    in two queries, not one per array and piece; its arrays equal those read one query each."""
    part = gen.resolve(gen.layout_for(vault)).parts[0].path
    conn = sqlite3.connect(f"file:{part}?mode=ro", uri=True)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        held = stored.load_group(conn, SPARSE_GROUP, SPARSE)
        reads = [s for s in statements if "FROM term_major" in s]
        monkeypatch.setattr(stored, "HELD_GROUP_BYTES", 0)
        statements.clear()
        one_by_one = stored.load_group(conn, SPARSE_GROUP, SPARSE)
    finally:
        conn.close()
    assert held is not None and one_by_one is not None and held.keys() == one_by_one.keys()
    assert len(reads) == 2 and len([s for s in statements if "FROM term_major" in s]) > len(held)
    for name, array in held.items():
        assert array.dtype == one_by_one[name].dtype and np.array_equal(array, one_by_one[name]), name
