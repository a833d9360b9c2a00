"""A generation of several segments with tombstones, read through one SQL connection (issue 29, step 2a).

The example vault's one-segment generation is split by ``write_segment`` into K segments (1..11) with
random tombstones and published as a format 2 manifest; a second index directory gets ONE segment of the
same live notes. Every read-path query then answers identically on both: the per-note tables through
the views, the generation-level tables, raw FTS5 expressions, phrases, filters' SQL and counts. A
doctored, missing or extra part fails closed naming it; a 12th segment is refused; ranking a
multi-part generation is refused with a typed error until the arrays work lands.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.build.builder import build_index
from core.build.forward_rows import load_working, read_forward
from core.build.lock import build_lock
from core.build.publish_segments import PlannedPart, publish_segments, stage_split
from core.build.segment_writer import SegmentSource, write_segment, write_tombstone
from core.build.source import stored_settings
from core.errors import (
    GenerationChangedError,
    GenerationMissingError,
    Sha256MismatchError,
    SizeMismatchError,
    UnsupportedIndexFormatError,
    UsageError,
    VaultSearchError,
)
from core.index import verify
from core.index.layout import GenerationRecord, IndexLayout, ResolvedIndex, layout_for
from core.index.manifest import MAX_SEGMENTS, manifest_bytes_v2, parse_manifest
from core.index.ownership import is_staging_file
from core.index.state import active_record
from core.index.status import index_status
from core.index.tables import notes_fts
from core.index.tables import segments as segment_tables
from core.index.tables.meta import get_meta
from core.index.tables.segments import GENERATION_TABLES, PER_NOTE_TABLES, dead_statistics
from core.ranking.filters import Filters
from core.ranking.segments import _class_df
from core.ranking.sparse import SPARSE_GROUP, load_sparse
from core.ranking.stored import load_group
from core.searcher import search_vault
from core.serve.tools import ServeConfig, Tools
from tests.conftest import EXAMPLE_VAULT, note

FILTERS = (
    {},
    {"tags_any": ["postgres", "people"]},
    {"tags_all": ["adr"]},
    {"path_prefixes": ["projects/", "people/"]},
    {"since": "2024-01-01", "until": "2026-01-01"},
    {"include_superseded": True, "classifications": ["public", "internal"]},
    {"note_types": ["person", "project"], "status": ["active"]},
)
EXPRESSIONS = ("note", "search OR index", '"the vault"', "NEAR(note link, 5)", "tag*", "title: note", "zzzunknown")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[int], str]:
    """(vault, a copy of its one segment, its note ids, its tokenizer)."""
    root = tmp_path_factory.mktemp("seg") / "vault"
    shutil.copytree(EXAMPLE_VAULT, root)
    build_index(root)
    resolved = verify.resolve(layout_for(root))
    segment = tmp_path_factory.mktemp("src") / "base.seg"
    shutil.copyfile(resolved.parts[0].path, segment)
    conn = sqlite3.connect(segment)
    ids = [r[0] for r in conn.execute("SELECT id FROM notes ORDER BY id")]
    tokenizer = get_meta(conn)["tokenizer"]
    conn.close()
    return root, segment, ids, tokenizer


def split_record(notes: int) -> GenerationRecord:
    return GenerationRecord(
        source_snapshot_hash="split", notes=notes, chunks=0, dense_chunks=0, chunker="c", tokenizer="t",
        timings={}, problems=[],
    )  # fmt: skip


def publish_split(
    layout: IndexLayout, segment: Path, groups: list[list[int]], dead: set[int], tokenizer: str
) -> ResolvedIndex:
    """Publish ``groups`` as segments (oldest first) of ``segment``'s notes, with ``dead`` tombstoned."""
    with build_lock(layout):
        segments, tombstones, live = stage_split(layout, segment, groups, dead, tokenizer)
        base = active_record(layout)
        return publish_segments(
            layout, segments, tombstones, split_record(live), next_ids=(10_000, 100_000),
            expected_base=base["generation_id"] if base else None, grace_s=0.0,
        )  # fmt: skip


def split_ids(ids: list[int], k: int, rng: random.Random) -> list[list[int]]:
    cuts = sorted(rng.sample(range(1, len(ids)), k - 1)) if k > 1 else []
    return [ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(ids)], strict=True)]


def _answers(conn: sqlite3.Connection) -> dict[str, object]:
    out: dict[str, object] = {}
    for table in [*PER_NOTE_TABLES, "chunk_vectors", *GENERATION_TABLES]:
        if table == "note_text":  # where a record lies depends on the notes packed beside it: "texts" below
            continue
        columns = ", ".join(r[1] for r in conn.execute(f"PRAGMA main.table_info({table})"))
        out[table] = sorted(map(repr, conn.execute(f"SELECT {columns} FROM {table}")))
    out["meta"] = {k: v for k, v in get_meta(conn).items() if k not in ("schema_version", "tokenizer")}
    for expr in EXPRESSIONS:
        out[f"fts:{expr}"] = sorted(notes_fts.matching_rowids(conn, expr))
        out[f"fts+tag:{expr}"] = notes_fts.matching_note_ids(
            conn, expr, "n.id IN (SELECT note_id FROM note_tags) AND n.rel_path >= ?", ["a"]
        )
    ids = [r[0] for r in conn.execute("SELECT id FROM notes ORDER BY id")]
    out["texts"] = notes_fts.note_texts(conn, ids)
    out["bodies"] = notes_fts.note_bodies(conn, ids[:5])
    out["count"] = conn.execute("SELECT count(*) FROM notes").fetchone()
    out["linked_from"] = conn.execute(
        "SELECT n.rel_path, count(e.src_id) FROM notes n LEFT JOIN edges e ON e.dst_id = n.id "
        "GROUP BY n.rel_path ORDER BY n.rel_path"
    ).fetchall()
    for i, kw in enumerate(FILTERS):
        clause, vals = Filters.make(**kw).where()
        out[f"filter{i}"] = conn.execute(f"SELECT n.id FROM notes n WHERE {clause} ORDER BY n.id", vals).fetchall()
        out[f"fts+filter{i}"] = notes_fts.matching_note_ids(conn, "note OR project", clause, vals)
    out["tags"] = conn.execute("SELECT tag, count(*) FROM note_tags GROUP BY tag ORDER BY tag").fetchall()
    out["dates"] = conn.execute("SELECT rel_path FROM notes WHERE mtime_ns >= 0 ORDER BY rel_path").fetchall()
    return out


@pytest.mark.parametrize("k", [1, 2, 4, MAX_SEGMENTS])
def test_k_segments_with_tombstones_answer_as_one_segment(
    base: tuple[Path, Path, list[int], str], tmp_path: Path, k: int
) -> None:
    root, segment, ids, tokenizer = base
    rng = random.Random(k)
    dead = set(rng.sample(ids, max(1, len(ids) // 5)))
    live = [i for i in ids if i not in dead]
    split = publish_split(layout_for(root, tmp_path / "split"), segment, split_ids(ids, k, rng), dead, tokenizer)
    one = publish_split(layout_for(root, tmp_path / "one"), segment, [live], dead, tokenizer)
    assert sum(p.kind == "segment" for p in split.parts) == k
    assert len(one.parts) == 1
    status = assert_reads_alike(root, tmp_path / "split", tmp_path / "one", len(live))
    assert [p["kind"] for p in status["parts"]].count("segment") == k


def assert_reads_alike(root: Path, got_dir: Path, want_dir: Path, live: int) -> dict[str, Any]:
    """The generations in ``got_dir`` and ``want_dir`` (``live`` notes) answer every read-path query and
    status count alike; the status of ``got_dir``."""
    got_index, want_index = verify.resolve(layout_for(root, got_dir)), verify.resolve(layout_for(root, want_dir))
    a, b = verify.connect_readonly(got_index), verify.connect_readonly(want_index)
    try:
        got, want = _answers(a), _answers(b)
    finally:
        a.close()
        b.close()
    assert want["count"] == (live,)
    for key in want:
        assert got[key] == want[key], key
    status = [index_status(root, d) for d in (got_dir, want_dir)]
    for key in ("notes", "chunks", "links", "unresolved_links", "names", "skipped_files", "problems", "coverage"):
        assert status[0][key] == status[1][key], key
    return status[0]


def test_multi_part_generation_fails_closed(base: tuple[Path, Path, list[int], str], tmp_path: Path) -> None:
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    resolved = publish_split(layout, segment, split_ids(ids, 3, random.Random(3)), set(ids[:3]), tokenizer)
    stone = next(p for p in resolved.parts if p.kind == "tombstone")
    seg = next(p for p in resolved.parts if p.kind == "segment")
    verify.clear_verify_cache()
    assert verify.verify_full(layout)["parts"][-1]["path"] == str(stone.path)
    stone.path.chmod(0o644)
    with open(stone.path, "r+b") as handle:  # same size, other bytes
        handle.seek(200)
        handle.write(b"\xff")
    verify.clear_verify_cache()
    with pytest.raises(Sha256MismatchError) as err:
        verify.verify_full(layout)
    assert err.value.evidence["path"] == str(stone.path)
    stone.path.unlink()
    verify.clear_verify_cache()
    with pytest.raises(GenerationMissingError) as missing:
        verify.resolve(layout)
    assert missing.value.evidence["path"] == str(stone.path)
    seg.path.unlink()
    with pytest.raises(GenerationMissingError):
        verify.resolve(layout)


@pytest.mark.parametrize("kind", ["segment", "tombstone"])
def test_a_truncated_part_fails_closed_naming_it(
    base: tuple[Path, Path, list[int], str], tmp_path: Path, kind: str
) -> None:
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    resolved = publish_split(layout, segment, split_ids(ids, 3, random.Random(4)), set(ids[-4:]), tokenizer)
    part = [p for p in resolved.parts if p.kind == kind][-1]
    part.path.chmod(0o644)
    with open(part.path, "r+b") as handle:
        handle.truncate(part.size - 512)
    verify.clear_verify_cache()
    for check in (verify.resolve, verify.verify_full):
        with pytest.raises(SizeMismatchError) as err:
            check(layout)
        assert err.value.evidence["path"] == str(part.path)
        assert err.value.evidence["expected"] == part.size


def test_the_builder_rebuilds_a_multi_part_generation_whole(
    base: tuple[Path, Path, list[int], str], tmp_path: Path
) -> None:
    root, segment, ids, tokenizer = base
    vault = tmp_path / "vault"
    shutil.copytree(root, vault, ignore=shutil.ignore_patterns(".vaultsearch"))
    layout = layout_for(vault)
    publish_split(layout, segment, split_ids(ids, 3, random.Random(5)), set(ids[-2:]), tokenizer)
    conn = sqlite3.connect(segment)
    built_with = get_meta(conn)
    conn.close()
    meta = stored_settings(layout, in_place=False)  # peeked from the newest segment, which carries them
    assert meta is not None and meta["settings"] == built_with["settings"]
    report = build_index(vault)
    assert report.full_rebuild_reason == "multi_part_base"
    assert len(verify.resolve(layout).parts) == 1
    assert search_vault(vault, "note", freshness=False).hits


def test_a_twelfth_segment_is_refused(base: tuple[Path, Path, list[int], str], tmp_path: Path) -> None:
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    with build_lock(layout), pytest.raises(UnsupportedIndexFormatError):
        parts = [PlannedPart("segment", sha256="a" * 64, size=1) for _ in range(MAX_SEGMENTS + 1)]
        publish_segments(layout, parts, [], split_record(1), next_ids=(1, 1), expected_base=None)
    entry = {"sha256": "", "size": 1, "notes": 1, "chunks": 0, "dense_chunks": 0}
    raw = manifest_bytes_v2(
        schema=1, analysis={}, source={}, tombstones=[], next_note_id=1, next_chunk_id=1,
        segments=[{**entry, "sha256": f"{i:064x}"} for i in range(MAX_SEGMENTS + 1)],
    )  # fmt: skip
    with pytest.raises(UnsupportedIndexFormatError, match="at most 11"):
        parse_manifest(raw, tmp_path / "m.json", None)
    raw = manifest_bytes_v2(
        schema=1, analysis={}, source={}, next_note_id=1, next_chunk_id=1,
        segments=[{**entry, "sha256": "1" * 64}],
        tombstones=[{"segment": "2" * 64, "sha256": "3" * 64, "size": 1, "notes": 1}],
    )  # fmt: skip
    with pytest.raises(UnsupportedIndexFormatError, match="names no listed segment"):
        parse_manifest(raw, tmp_path / "m.json", None)


def _stats(path: Path) -> dict[str, Any]:
    """A segment's sparse statistics by class name: notes, field-length sums, and df per term (by term text)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        sparse = load_sparse(conn)
    finally:
        conn.close()
    assert sparse.classes is not None
    words = {i: w for w, i in sparse.term_id.items()}
    df = _class_df(sparse.classes, np.asarray(sparse.df, dtype=np.int64))
    out: dict[str, Any] = {}
    for c, name in enumerate(sparse.classes.names):
        out[name] = {
            "docs": int(sparse.classes.docs[c]),
            "field_len": np.asarray(sparse.classes.field_len[c]).tolist(),
            "df": {words[int(t)]: int(df[c, t]) for t in np.flatnonzero(df[c])},
        }
    return out


def _tombstone_stats(stone: Path, segment: Path) -> dict[str, Any]:
    """A tombstone's stored statistics in ``_stats``' form (its term ids named by ``segment``'s dictionary)."""
    conn = sqlite3.connect(f"file:{stone}?mode=ro", uri=True)
    try:
        stored = dead_statistics(conn)
    finally:
        conn.close()
    assert stored is not None
    seg_conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        words = {i: w for w, i in load_sparse(seg_conn).term_id.items()}  # the segment's dictionary: its arrays
    finally:
        seg_conn.close()
    classes, df = stored
    out: dict[str, Any] = {n: {"docs": d, "field_len": json.loads(f), "df": {}} for n, d, f in classes}
    for name, term, n in df:
        out[name]["df"][words[term]] = n
    return out


def _plus(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return a if b is None else b
    if isinstance(a, dict):
        return {k: _plus(a.get(k), b.get(k)) for k in set(a) | set(b)}
    return (np.asarray(a) + np.asarray(b)).tolist()


def _dropped_zero(stats: Any) -> Any:
    if isinstance(stats, dict):
        return {k: _dropped_zero(v) for k, v in stats.items() if v != 0}
    return stats


def test_a_tombstone_carries_the_dead_notes_exact_statistics(
    base: tuple[Path, Path, list[int], str], tmp_path: Path
) -> None:
    """segment statistics == (the same segment without the dead notes) + (its tombstone), per class and
    per term; the tombstone holds only the terms the dead notes hold, so its size follows them (issue 29:
    it was the dead notes written with the segment's WHOLE dictionary and its arrays)."""
    root, segment, ids, tokenizer = base
    dead = sorted(random.Random(7).sample(ids, 7))
    live = tmp_path / "live.seg"
    write_segment(live, [SegmentSource(segment, [i for i in ids if i not in dead])], tokenizer=tokenizer)
    stone = tmp_path / "t.del"
    assert write_tombstone(stone, segment, dead) == len(dead)
    conn = sqlite3.connect(stone)
    assert [r[0] for r in conn.execute("SELECT note_id FROM dead")] == dead
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    stored_pairs = conn.execute("SELECT count(*) FROM dead_df").fetchone()[0]
    conn.close()
    assert tables == {"dead", "dead_classes", "dead_df"}  # no dictionary, no arrays
    whole, rest, gone = _stats(segment), _stats(live), _tombstone_stats(stone, segment)
    assert sum(c["docs"] for c in gone.values()) == len(dead)
    assert _dropped_zero(_plus(rest, gone)) == _dropped_zero(whole)
    dead_terms = set().union(*(set(_note_words(segment, i)) for i in dead))
    assert stored_pairs <= len(dead_terms) * len(gone)  # (class, term) pairs of terms the dead notes hold
    assert stone.stat().st_size <= 4096 * (4 + stored_pairs // 100)  # pages of its rows, not the dictionary's
    with pytest.raises(UsageError, match="only notes of its segment"):
        write_tombstone(tmp_path / "bad.del", live, dead)  # dead ids are not in `live`


def _note_words(segment: Path, note_id: int) -> list[int]:
    """The term ids a note of ``segment`` holds (its vector, derived from the segment's arrays)."""
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        forward = read_forward(conn, [note_id])
    finally:
        conn.close()
    assert forward is not None and len(forward.notes) == 1
    return forward.notes[0][1].tolist()


def _tool_answers(tools: Tools, paths: list[str]) -> list[Any]:
    out: list[Any] = []
    for path in paths:
        for name in ("read_note", "related"):
            try:
                answer = tools.call(name, {"path": path})
            except VaultSearchError as exc:
                answer = exc.to_dict()
            out.append(_without_identity(answer))
    out.append({k: v for k, v in tools.call("status", {}).items() if k in ("notes", "chunks", "links", "problems")})
    return out


def _without_identity(value: Any) -> Any:
    """A tool's answer without what names the generation (its id, manifest hash, parts, age)."""
    if isinstance(value, dict):
        drop = {"index", "generation_id", "sha256", "size", "parts", "age_seconds", "generations", "freshness"}
        return {k: _without_identity(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_without_identity(v) for v in value]
    return value


def test_read_and_related_tools_answer_as_one_segment(base: tuple[Path, Path, list[int], str], tmp_path: Path) -> None:
    root, segment, ids, tokenizer = base
    rng = random.Random(11)
    dead = set(rng.sample(ids, 5))
    live = [i for i in ids if i not in dead]
    publish_split(layout_for(root, tmp_path / "split"), segment, split_ids(ids, 4, rng), dead, tokenizer)
    publish_split(layout_for(root, tmp_path / "one"), segment, [live], dead, tokenizer)
    conn = sqlite3.connect(segment)
    paths = [r[0] for r in conn.execute("SELECT rel_path FROM notes ORDER BY id")][::3]
    conn.close()
    got, want = (_tool_answers(Tools(ServeConfig(root, index_dir=tmp_path / name)), paths) for name in ("split", "one"))
    assert got == want
    served = [a for a in want if isinstance(a, dict) and "reason" not in a]
    assert len(served) > len(paths)  # most notes read and related, not refused


def _vectors(path: Path) -> dict[str, Any]:
    """rel_path -> (its note vector, its chunk vectors) with terms as strings: what a merge must keep."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        load_working(conn)  # the rows a segment's arrays hold (it stores no forward rows)
        term = dict(conn.execute("SELECT id, term FROM terms"))
        path_of = dict(conn.execute("SELECT id, rel_path FROM notes"))
        out: dict[str, Any] = {}
        for nid, n, data in conn.execute("SELECT note_id, n_terms, data FROM note_terms"):
            raw = zlib.decompress(data)
            ids = np.frombuffer(raw, dtype="<i4", count=n)
            tf = np.frombuffer(raw, dtype="<u2", offset=4 * n).reshape(n, -1)
            assert (np.diff(ids) > 0).all()  # ascending term ids, as the loaders expect
            out[path_of[nid]] = [{term[int(i)]: t.tolist() for i, t in zip(ids, tf, strict=True)}]
        for nid, chunks, n, data in conn.execute("SELECT note_id, n_chunks, n_terms, data FROM chunk_terms"):
            raw = zlib.decompress(data)
            lengths = np.frombuffer(raw, dtype="<u4", count=chunks).tolist()
            ids = np.frombuffer(raw, dtype="<i4", offset=4 * chunks, count=n)
            tf = np.frombuffer(raw, dtype="<u2", offset=4 * chunks + 4 * n, count=n)
            at = 0
            for length in lengths:
                assert (np.diff(ids[at : at + length]) > 0).all()
                out[path_of[nid]].append(
                    {term[int(i)]: int(t) for i, t in zip(ids[at : at + length], tf[at : at + length], strict=True)}
                )
                at += length
        return out
    finally:
        conn.close()


def test_a_merge_of_segments_with_other_dictionaries_keeps_every_vector(
    base: tuple[Path, Path, list[int], str], tmp_path: Path
) -> None:
    """Two sources whose term dictionaries differ: the first keeps its ids, the second's vectors are
    remapped (and sorted again); every note's and chunk's vector, by term, is what its source held, and
    the merged segment answers FTS and loads its arrays."""
    root, segment, ids, tokenizer = base
    other = tmp_path / "other"
    other.mkdir()
    (other / "zz-merge-a.md").write_text(
        note("Zebra quokka", "quokka zebra aardvark xylophone words"), encoding="utf-8"
    )
    (other / "zz-merge-b.md").write_text(note("Quokka", "## Heading\n\nyak quokka note vault"), encoding="utf-8")
    build_index(other)
    small = verify.resolve(layout_for(other)).parts[0].path
    conn = sqlite3.connect(f"file:{small}?mode=ro", uri=True)
    taken = {r[0] for r in conn.execute("SELECT id FROM chunks")}
    small_ids = [r[0] for r in conn.execute("SELECT id FROM notes")]
    conn.close()
    conn = sqlite3.connect(segment)
    clash = {r[0] for r in conn.execute("SELECT note_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                                         (json.dumps(sorted(taken)),))}  # fmt: skip
    conn.close()
    rest = [i for i in ids if i not in clash and i not in small_ids]
    merged = tmp_path / "merged.seg"
    counts = write_segment(merged, [SegmentSource(small, small_ids), SegmentSource(segment, rest)], tokenizer=tokenizer)
    assert counts["notes"] == len(small_ids) + len(rest)
    whole = {**_vectors(small), **{p: v for p, v in _vectors(segment).items() if p in _paths(segment, rest)}}
    assert _vectors(merged) == whole
    moved = [t for t, i in _dictionary(segment).items() if _dictionary(merged)[t] != i]
    assert len(moved) > 100  # the second source's ids were remapped, not copied
    conn = sqlite3.connect(f"file:{merged}?mode=ro", uri=True)
    try:
        found = {r[0] for r in notes_fts.matching_rowids(conn, "quokka")}
        assert found == set(small_ids)
        assert load_group(conn, SPARSE_GROUP, ("df",)) is not None
    finally:
        conn.close()


def _paths(path: Path, note_ids: list[int]) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[1] for r in conn.execute("SELECT id, rel_path FROM notes") if r[0] in set(note_ids)}
    finally:
        conn.close()


def _dictionary(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        load_working(conn)
        return dict(conn.execute("SELECT term, id FROM terms"))
    finally:
        conn.close()


@pytest.mark.parametrize("which", ["first", "attached", "tombstone"])
def test_a_part_changed_after_verification_is_not_served(
    base: tuple[Path, Path, list[int], str], tmp_path: Path, which: str
) -> None:
    """Each part is served as the inode that was verified: one rewritten in place between resolve and
    connect (the first segment, an ATTACHed one, a tombstone) is a GenerationChangedError naming it."""
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    resolved = publish_split(layout, segment, split_ids(ids, 3, random.Random(6)), set(ids[-3:]), tokenizer)
    segments = [p for p in resolved.parts if p.kind == "segment"]
    part = {"first": segments[0], "attached": segments[1]}.get(which) or resolved.parts[-1]
    assert (part.kind == "tombstone") == (which == "tombstone")
    part.path.chmod(0o644)
    with open(part.path, "r+b") as handle:  # same inode, same size, new mtime: not what was hashed
        handle.seek(100)
        handle.write(handle.read(1))
    verify.clear_verify_cache()  # a tombstone's ids already read (same bytes, same name) are not read again
    with pytest.raises(GenerationChangedError) as err:
        verify.connect_readonly(resolved).close()
    assert err.value.evidence["path"] == str(part.path)


def test_an_extra_tombstone_file_is_an_orphan_not_a_part(
    base: tuple[Path, Path, list[int], str], tmp_path: Path
) -> None:
    """A ``.del`` no kept manifest lists changes nothing served, is reported by verify and removed by gc."""
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    resolved = publish_split(layout, segment, split_ids(ids, 2, random.Random(8)), set(ids[:2]), tokenizer)
    stray = layout.segments_dir / f"{'e' * 64}.del"
    stray.write_bytes(b"not listed")
    verify.clear_verify_cache()
    assert verify.resolve(layout).generation_id == resolved.generation_id
    assert verify.verify_full(layout)["orphans"] == [str(stray)]
    publish_split(layout, segment, [ids], set(), tokenizer)
    assert not stray.exists()


def test_every_file_a_tombstone_write_creates_is_debris_the_reaper_knows(
    base: tuple[Path, Path, list[int], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file a tombstone write creates beside its staged part has a staging name: a SIGKILL before it
    finished left ``<hex>.db.tmp.scratch`` (its scratch segment, gone since the statistics are counted from
    the segment's arrays) that no build ever reaped (CI's random-kill soak found it in ``staging/``)."""
    root, segment, ids, tokenizer = base
    staging = tmp_path / "staging"
    staging.mkdir()
    seen: list[str] = []
    real = segment_tables.create_tombstone

    def look(*args: Any) -> Any:
        seen.extend(p.name for p in staging.iterdir())  # what a kill here would leave
        return real(*args)

    monkeypatch.setattr(segment_tables, "create_tombstone", look)
    dest = staging / f"{'ab' * 16}.db.tmp"
    write_tombstone(dest, segment, ids[:3])
    assert dest.name in seen
    assert [name for name in seen if not is_staging_file(name)] == []


def test_links_and_edges_counted_per_segment_equal_the_views_counts(
    base: tuple[Path, Path, list[int], str], tmp_path: Path
) -> None:
    root, segment, ids, tokenizer = base
    layout = layout_for(root, tmp_path / "idx")
    resolved = publish_split(layout, segment, split_ids(ids, 3, random.Random(6)), set(ids[-3:]), tokenizer)
    conn = verify.connect_readonly(resolved)
    try:
        assert conn.execute("SELECT count(*) FROM temp.vs_dead").fetchone()[0]  # dead rows are left out
        assert segment_tables.live_links_and_edges(conn) == segment_tables.links_and_edges(conn)
        # a destination dead in every segment drops the edges into it (the split path wrote none: say it is)
        dst, n = conn.execute("SELECT dst_id, count(*) FROM edges WHERE dst_id IS NOT NULL GROUP BY dst_id").fetchone()
        before = segment_tables.links_and_edges(conn)
        conn.execute("INSERT OR IGNORE INTO temp.vs_gone(id) VALUES (?)", (dst,))
        assert (
            segment_tables.live_links_and_edges(conn)
            == segment_tables.links_and_edges(conn)
            == (before[0], before[1] - n)
        )
    finally:
        conn.close()
