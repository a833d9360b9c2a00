"""A tombstone's exact statistics in O(dead note) (issue 29, core.build.tomb_stats).

The reference is what a tombstone held before: every dead note's contribution counted by
``core.ranking.segments.dead_counts`` over the segment's WHOLE arrays (``bench.bench_tombstone.before_rows``,
the writer's code before). A tombstone now
written from the previous one's statistics plus the newly dead notes' own verified postings must hold
exactly the same rows (``dead``, ``dead_classes``, ``dead_df``), over generated vaults and dead sets (notes
whose terms are only in their title, tags, headings or description, CJK and other-language notes, one
note dead in several steps, a second dead note added to a tombstone), and the edit path's tombstones must
be counted that way. Writing one reads a few pieces of the postings, not the whole array.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.bench_tombstone import before_rows
from core.build import incremental, tomb_stats
from core.build.builder import build_index
from core.build.segment_writer import write_tombstone_counted
from core.index import verify
from core.index.layout import layout_for
from core.index.tables import segments as seg
from core.ranking import stored
from tests.conftest import note, write_files


def _tables(stone: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(f"file:{stone}?mode=ro", uri=True)
    try:
        return {
            t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() if t != "dead" else seg.dead_note_ids(conn)
            for t in ("dead", "dead_classes", "dead_df")
        }
    finally:
        conn.close()


def _reference_tables(segment: Path, ids: list[int], dest: Path) -> dict[str, list[tuple]]:
    classes, df = before_rows(segment, ids)
    conn = sqlite3.connect(dest, isolation_level=None)
    try:
        conn.execute("PRAGMA page_size = 1024")
        conn.execute("BEGIN")
        seg.create_tombstone(conn, sorted(ids), classes, df)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return _tables(dest)


def _segment_of(root: Path) -> tuple[Path, list[int]]:
    part = verify.resolve(layout_for(root)).parts[0].path
    conn = sqlite3.connect(f"file:{part}?mode=ro", uri=True)
    try:
        return part, [int(r[0]) for r in conn.execute("SELECT id FROM notes ORDER BY id")]
    finally:
        conn.close()


WORDS = ("alpha", "beta", "running", "postgres", "indexes", "meeting", "vault", "42", "naïve", "Straße")
CJK = ("東京の天気", "検索エンジン", "데이터베이스", "数据库索引")
CLASSES = ("public", "internal", "secret")
_words = st.lists(st.sampled_from(WORDS + CJK), min_size=0, max_size=5).map(" ".join)
_note = st.fixed_dictionaries(
    {
        "title": st.sampled_from(("Solo", "Heading only", "東京", "Tagged")) | _words.filter(bool),
        "body": _words,
        "heading": _words,  # words only in a heading
        "tags": st.lists(st.sampled_from(("tagonly", "ops", "日本")), max_size=2),
        "description": _words,
        "classification": st.sampled_from(CLASSES),
        "lang": st.sampled_from(("", "de", "fr", "ja")),
    }
)


def _text(n: dict[str, Any]) -> str:
    front: dict[str, object] = {"classification": n["classification"]}
    if n["tags"]:
        front["tags"] = n["tags"]
    if n["description"]:
        front["description"] = n["description"]
    if n["lang"]:
        front["lang"] = n["lang"]
    body = (f"# {n['heading']}\n\n" if n["heading"] else "") + n["body"]
    return note(n["title"], body, **front)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notes=st.lists(_note, min_size=2, max_size=7), steps=st.lists(st.integers(0, 2**16), min_size=1, max_size=3))
def test_a_tombstone_built_on_the_previous_one_equals_the_whole_count(notes: list[dict], steps: list[int]) -> None:
    """Each step kills one or two more notes (the same one again too): the tombstone written from the
    previous one plus the new notes' verified postings holds exactly the rows the whole count gives, and
    every note verified (none counted from the whole arrays)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = write_files(Path(tmp) / "vault", {f"n{i}.md": _text(n) for i, n in enumerate(notes)})
        build_index(root)
        segment, ids = _segment_of(root)
        dead: set[int] = set()
        previous = None
        for k, seed in enumerate(steps):
            rng = random.Random(seed)
            dead |= set(rng.sample(ids, min(len(ids), 1 + seed % 2)))
            stone = Path(tmp) / f"t{k}.del"
            written = write_tombstone_counted(stone, segment, dead, previous)
            assert written.how == [tomb_stats.VERIFIED]
            assert _tables(stone) == _reference_tables(segment, sorted(dead), Path(tmp) / f"ref{k}.del")
            previous = stone


def test_a_note_that_does_not_verify_is_counted_from_the_whole_arrays_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note whose stored texts do not give back its terms (here: candidates cut short) is counted the
    old way: the same rows, and ``how`` names it; a previous tombstone without statistics: every id."""
    root = write_files(tmp_path / "vault", {f"n{i}.md": note(f"N{i}", f"alpha beta w{i} gamma") for i in range(4)})
    build_index(root)
    segment, ids = _segment_of(root)
    real = tomb_stats._Segment.candidates
    monkeypatch.setattr(tomb_stats._Segment, "candidates", lambda self, texts, langs: real(self, texts, langs)[:1])
    written = write_tombstone_counted(tmp_path / "a.del", segment, ids[:2])
    assert written.how == [f"{tomb_stats.WHOLE_ROWS}:2"]
    assert _tables(tmp_path / "a.del") == _reference_tables(segment, ids[:2], tmp_path / "ref.del")
    old = tmp_path / "old.del"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE dead(note_id INTEGER PRIMARY KEY)")  # a tombstone of before the statistics
    conn.execute("INSERT INTO dead VALUES (?)", (ids[0],))
    conn.commit()
    conn.close()
    assert write_tombstone_counted(tmp_path / "b.del", segment, ids[:3], old).how == [tomb_stats.WHOLE_OLD]
    assert _tables(tmp_path / "b.del") == _reference_tables(segment, ids[:3], tmp_path / "ref3.del")


def test_repeated_edits_write_tombstones_counted_from_the_dead_notes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edit path (``incremental.delta_parts``) gives each new tombstone its segment's previous one:
    editing one note again and again, then a second note, every tombstone equals the whole count and
    was verified."""
    files = {f"n{i}.md": note(f"Note {i}", f"# Part {i}\n\nalpha beta 東京 w{i}", tags=["t"]) for i in range(6)}
    root = write_files(tmp_path / "vault", files)
    build_index(root)
    seen: list[tuple[Path, Path, list[int], list[str], Path | None]] = []
    real = incremental.write_tombstone_counted

    def spy(dest: Path, segment: Path, ids: Any, previous: Path | None = None) -> Any:
        out = real(dest, segment, ids, previous)
        ref = tmp_path / f"ref{len(seen)}.del"
        assert _tables(dest) == _reference_tables(segment, sorted(set(ids)), ref)
        seen.append((dest, segment, sorted(set(ids)), out.how, previous))
        return out

    monkeypatch.setattr(incremental, "write_tombstone_counted", spy)
    for k in range(3):
        (root / "n1.md").write_text(note("Note 1", f"edited {k} beta gamma", tags=["t"]), encoding="utf-8")
        build_index(root)
    (root / "n4.md").write_text(note("Note 4", "changed too"), encoding="utf-8")
    report = build_index(root)
    assert seen and all(how == [tomb_stats.VERIFIED] for *_, how, _ in seen)
    assert any(previous is not None for *_, previous in seen)  # a tombstone built on its segment's previous one
    assert report.tombstone_whole_notes == 0
    cut = tomb_stats._Segment.candidates  # a note that does not verify: the report counts it
    monkeypatch.setattr(tomb_stats._Segment, "candidates", lambda self, texts, langs: cut(self, texts, langs)[:1])
    (root / "n5.md").write_text(note("Note 5", "changed at last"), encoding="utf-8")
    assert build_index(root).tombstone_whole_notes == 1
    assert seen[-1][3] == [f"{tomb_stats.WHOLE_ROWS}:1"]


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the stored arrays' pieces read from now on (appended as they are read)."""
    read: list[str] = []
    real = stored.Reader.data

    def count(self: stored.Reader, name: str) -> bytes | None:
        read.append(name)
        return real(self, name)

    monkeypatch.setattr(stored.Reader, "data", count)
    return read


def test_a_tombstone_write_reads_a_few_pieces_of_the_postings_not_the_whole_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a segment of 1,200 notes (its postings in 1 KiB pieces here, so that it has many), writing the
    tombstone of one note reads a small share of the pieces of ``docs`` (the whole array before); a note
    holding a term in every piece is then found in the whole array (cheaper), with the same rows."""
    monkeypatch.setattr(stored, "PIECE_BYTES", 1024)
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(4000)]
    files = {f"n{i:04d}.md": note(f"N{i}", " ".join(rng.choices(vocab, k=60))) for i in range(1200)}
    files["n0600.md"] = note("Dead", " ".join(vocab[:15]))  # 16 terms: its title's and 15 words (common ones)
    files["n0601.md"] = note("Long", " ".join(vocab))  # a run in every piece: the whole array is cheaper
    root = write_files(tmp_path / "vault", files)
    build_index(root)
    segment, ids = _segment_of(root)
    read = _count_reads(monkeypatch)
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    total = sum(1 for (name, *_) in conn.execute("SELECT name FROM term_major") if "/docs#" in name)
    conn.close()
    written = write_tombstone_counted(tmp_path / "t.del", segment, [ids[600]])
    docs = [n for n in read if "/docs#" in n]
    assert written.how == [tomb_stats.VERIFIED]
    assert total >= 200
    assert len(docs) <= 2 * 16 and len(docs) <= total // 8, (len(docs), total)  # a piece or two per term
    long = write_tombstone_counted(tmp_path / "l.del", segment, [ids[600], ids[601]], tmp_path / "t.del")
    assert long.how == [f"{tomb_stats.CHEAPER}:1"]
    assert _tables(tmp_path / "l.del") == _reference_tables(segment, [ids[600], ids[601]], tmp_path / "r.del")


def test_a_tombstone_reads_about_one_piece_of_docs_per_candidate_term_however_long_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terms every note holds have runs of many pieces (1,200 rows in 1 KiB pieces): finding the dead note's
    row in each reads about one piece of ``docs`` (where the row would lie, the run's rows spread evenly),
    where bisecting the run read log2 of its pieces; the rows are the whole count's."""
    monkeypatch.setattr(stored, "PIECE_BYTES", 1024)
    rng = random.Random(5)
    common = [f"c{i}" for i in range(12)]
    vocab = [f"w{i}" for i in range(3000)]
    files = {f"n{i:04d}.md": note(f"N{i}", " ".join(common + rng.choices(vocab, k=30))) for i in range(1200)}
    files["n0700.md"] = note("Dead", " ".join(common))
    root = write_files(tmp_path / "vault", files)
    build_index(root)
    segment, ids = _segment_of(root)
    read = _count_reads(monkeypatch)
    written = write_tombstone_counted(tmp_path / "t.del", segment, [ids[700]])
    docs = [n for n in read if "/docs#" in n]
    assert written.how == [tomb_stats.VERIFIED]
    assert len(docs) <= len(common) + 3, len(docs)  # 13 terms (the title's too); bisecting: 3-4 pieces each
    assert _tables(tmp_path / "t.del") == _reference_tables(segment, [ids[700]], tmp_path / "r.del")
