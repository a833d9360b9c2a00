"""The stored note texts of a segment: a zstd cell per note, compressed with the segment's trained
dictionary (``text_dict``) when the build writes enough notes, each cell still readable alone; the cells
of several notes stored back to back in a block (``text_blocks``, placed by ``note_text``); copied between
segments as they are or re-encoded (``segments.copy_note_texts``), never carrying a note that was left out
or deleted; a cell whose dictionary is gone, or that its block does not hold, fails closed."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import note, write_files
from hypothesis import given, settings
from hypothesis import strategies as st

from core.build.builder import build_index
from core.build.forward_rows import create_working
from core.build.ingest import field_texts
from core.build.segment_writer import SegmentSource, write_segment
from core.build.text_dict import MIN_NOTES, train_text_dict
from core.errors import IntegrityError
from core.index import verify
from core.index.layout import layout_for
from core.index.tables import text_blocks
from core.index.tables.checks import inconsistencies
from core.index.tables.meta import get_meta
from core.index.tables.notes import delete_notes
from core.index.tables.notes_fts import FTS_COLUMNS, matching_rowids, stored_texts
from core.vault.notes import parse_note

_WORDS = "protein cell receptor binding expression tumour signalling pathway kinase mutation analysis".split()


def _vault(root: Path, count: int) -> Path:
    rnd = random.Random(count)
    files = {}
    for i in range(count):
        body = " ".join(rnd.choice(_WORDS) for _ in range(120))
        files[f"n{i:03d}.md"] = note(
            f"Note {i}", f"## Results\n\nThe {body}.\n\n## Methods\n\nWe measured {i} in uniq{i:03d}zz."
        )
    return write_files(root, files)


def _segment(vault: Path) -> Path:
    return verify.resolve(layout_for(vault)).parts[0].path


def _ro(segment: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{segment}?mode=ro", uri=True)


def _blocks(segment: Path) -> dict[int, bytes]:
    conn = _ro(segment)
    try:
        return {int(i): bytes(d) for i, d in conn.execute("SELECT id, data FROM text_blocks")}
    finally:
        conn.close()


def _cells(segment: Path) -> dict[int, bytes]:
    """note id -> its cell, asserting that each block is exactly its notes' cells back to back."""
    conn = _ro(segment)
    try:
        places = conn.execute("SELECT note_id, block, start, size FROM note_text ORDER BY block, start").fetchall()
    finally:
        conn.close()
    blocks, at, out = _blocks(segment), {}, {}
    for nid, block, start, size in places:
        assert start == at.get(block, 0), (nid, block, start)
        at[block] = start + size
        out[nid] = blocks[block][start : start + size]
    assert at == {b: len(data) for b, data in blocks.items()}  # no byte of a block is another's
    return out


def _texts(segment: Path) -> dict[int, tuple[str, ...]]:
    conn = _ro(segment)
    try:
        return stored_texts(conn, [r[0] for r in conn.execute("SELECT id FROM notes")])
    finally:
        conn.close()


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vault = _vault(tmp_path_factory.mktemp("big"), MIN_NOTES + 36)
    build_index(vault)
    return vault


def test_a_build_of_many_notes_stores_one_dictionary_and_every_cell_uses_it(big: Path) -> None:
    segment = _segment(big)
    conn = _ro(segment)
    (zdict,) = [bytes(r[0]) for r in conn.execute("SELECT data FROM text_dict")]
    paths = dict(conn.execute("SELECT id, rel_path FROM notes"))
    conn.close()
    assert 0 < len(zdict) <= text_blocks.DICT_BYTES and b"receptor" in zdict
    cells = _cells(segment)
    assert {text_blocks.cell_dict_id(c) for c in cells.values()} == {text_blocks.dict_id(zdict)} != {None}
    assert len(_blocks(segment)) < len(paths) / 4  # several notes a block
    texts = _texts(segment)
    for nid, rel in paths.items():  # exactly the texts FTS5 indexed
        assert texts[nid] == field_texts(parse_note(rel, (big / rel).read_bytes()))
    plain = sum(len(text_blocks.encode_cell(texts[nid], len(FTS_COLUMNS), None)) for nid in cells)
    assert sum(map(len, cells.values())) + len(zdict) < 0.7 * plain  # what the dictionary is for


def test_a_build_of_a_few_notes_stores_no_dictionary(tmp_path: Path) -> None:
    vault = _vault(tmp_path, MIN_NOTES - 1)
    build_index(vault)
    segment = _segment(vault)
    assert {text_blocks.cell_dict_id(c) for c in _cells(segment).values()} == {None}
    conn = _ro(segment)
    assert conn.execute("SELECT count(*) FROM text_dict").fetchone()[0] == 0
    conn.close()
    assert len(_texts(segment)) == MIN_NOTES - 1


def test_copies_keep_the_cells_of_a_shared_dictionary_and_re_encode_the_others(big: Path, tmp_path: Path) -> None:
    segment = _segment(big)
    tokenizer = get_meta(_ro(segment))["tokenizer"]
    ids = sorted(_cells(segment))
    whole, few = tmp_path / "whole.seg", tmp_path / "few.seg"
    write_segment(whole, [SegmentSource(segment, ids)], tokenizer=tokenizer)
    assert _cells(whole) == _cells(segment)  # byte for byte: the same dictionary came along
    write_segment(few, [SegmentSource(segment, ids[:3])], tokenizer=tokenizer)
    assert {text_blocks.cell_dict_id(c) for c in _cells(few).values()} == {None}  # 3 notes: cheaper without one
    merged = tmp_path / "merged.seg"  # the first source has no dictionary: the second one's is taken
    write_segment(merged, [SegmentSource(few, ids[:3]), SegmentSource(segment, ids[3:])], tokenizer=tokenizer)
    expected = _texts(segment)
    for copy in (whole, few, merged):
        assert _texts(copy) == {i: expected[i] for i in _texts(copy)}
    assert sorted(_texts(merged)) == ids


def test_a_copy_that_leaves_a_note_out_carries_none_of_its_text(big: Path, tmp_path: Path) -> None:
    segment = _segment(big)
    conn = _ro(segment)
    paths = dict(conn.execute("SELECT rel_path, id FROM notes"))
    tokenizer = get_meta(conn)["tokenizer"]
    conn.close()
    left_out = paths["n010.md"]
    before = _cells(segment)
    copy = tmp_path / "copy.seg"
    write_segment(copy, [SegmentSource(segment, sorted(set(paths.values()) - {left_out}))], tokenizer=tokenizer)
    after = _cells(copy)  # every byte of its blocks is a listed note's cell
    assert after == {i: c for i, c in before.items() if i != left_out}
    assert not any(before[left_out] in block for block in _blocks(copy).values())


def test_deleting_notes_writes_their_blocks_again_without_them(big: Path, tmp_path: Path) -> None:
    work = tmp_path / "work.seg"
    shutil.copyfile(_segment(big), work)
    work.chmod(0o644)
    before = _cells(work)
    conn = sqlite3.connect(work, isolation_level=None)
    create_working(conn)  # a build's working database: its TEMP term tables
    try:
        paths = dict(conn.execute("SELECT rel_path, id FROM notes"))
        texts = stored_texts(conn, paths.values())
        gone = [paths["n010.md"], paths["n040.md"]]
        conn.execute("BEGIN")
        delete_notes(conn, gone)
        conn.execute("COMMIT")
        assert stored_texts(conn, paths.values()) == {i: t for i, t in texts.items() if i not in gone}
        assert matching_rowids(conn, "uniq010zz") == [] and matching_rowids(conn, "uniq011zz") == [(paths["n011.md"],)]
    finally:
        conn.close()
    assert _cells(work) == {i: c for i, c in before.items() if i not in gone}
    assert not any(before[i] in block for i in gone for block in _blocks(work).values())


def test_an_edit_reads_through_a_generation_of_several_dictionaries(big: Path) -> None:
    (big / "n007.md").write_text(note("Note 7", "## Results\n\nA kinase quokka.\n"), encoding="utf-8")
    build_index(big)
    conn = verify.connect_readonly(verify.resolve(layout_for(big)))
    try:
        ids = dict(conn.execute("SELECT rel_path, id FROM notes"))
        texts = stored_texts(conn, ids.values())
        assert "quokka" in texts[ids["n007.md"]][-1] and "receptor" in texts[ids["n008.md"]][-1]
        assert matching_rowids(conn, "quokka") == [(ids["n007.md"],)]
        assert len(matching_rowids(conn, '"receptor binding" OR NEAR(kinase tumour, 3)')) > MIN_NOTES
    finally:
        conn.close()


def test_a_cell_whose_dictionary_is_missing_fails_closed(big: Path) -> None:
    nid, cell = next(iter(_cells(_segment(big)).items()))
    with pytest.raises(IntegrityError, match=f"note {nid} .*dictionary"):
        text_blocks.decode_cell(nid, cell, {}, len(FTS_COLUMNS))
    conn = _ro(_segment(big))
    dicts = text_blocks.text_dicts(conn)
    conn.close()
    (zdict,) = [d for found in dicts.values() for d in found]
    other = bytearray(
        train_text_dict([f"another {i} vault of other words, {i * 7} times over".encode() * 40 for i in range(300)])
    )
    other[4:8] = zdict[4:8]  # a dictionary of the same id (the id is the 4 bytes after the magic number)
    assert text_blocks.dict_id(bytes(other)) == text_blocks.dict_id(zdict)
    wrong = {k: (bytes(other), *v) for k, v in dicts.items()}
    assert text_blocks.decode_cell(nid, cell, wrong, len(FTS_COLUMNS))  # two of one id: the one whose checksum holds
    with pytest.raises(IntegrityError, match=f"note {nid} does not decode"):
        text_blocks.decode_cell(nid, cell, {k: (bytes(other),) for k in dicts}, len(FTS_COLUMNS))


def test_a_cell_its_block_does_not_hold_fails_closed(big: Path, tmp_path: Path) -> None:
    segment = _segment(big)
    conn = _ro(segment)
    nid, block, start, size = conn.execute("SELECT note_id, block, start, size FROM note_text LIMIT 1").fetchone()
    dicts = text_blocks.text_dicts(conn)
    conn.close()
    data = _blocks(segment)[block]
    for row in ((nid, start, size + len(data), data), (nid, start, 0, data), (nid, -1, size, data)):
        with pytest.raises(IntegrityError, match=f"note_text of note {nid} does not decode"):
            text_blocks.cells_of([row])
    for cell in (data[start : start + size - 7], data[start + 1 : start + size]):  # truncated, shifted
        with pytest.raises(IntegrityError, match=f"note_text of note {nid} does not decode"):
            text_blocks.decode_cell(nid, cell, dicts, len(FTS_COLUMNS))
    doctored = tmp_path / "doctored.seg"
    shutil.copyfile(segment, doctored)
    doctored.chmod(0o644)
    with sqlite3.connect(doctored) as rw:
        rw.execute("UPDATE note_text SET block = 999999 WHERE note_id = ?", (nid,))
    rw.close()
    conn = _ro(doctored)
    with pytest.raises(IntegrityError, match=f"note_text of note {nid} names a block that is not stored"):
        stored_texts(conn, [nid])
    conn.close()


_TEXTS = st.lists(st.text(max_size=300), min_size=len(FTS_COLUMNS), max_size=len(FTS_COLUMNS)).map(tuple)


_DICT = train_text_dict([" ".join(random.Random(i).choices(_WORDS, k=200)).encode() for i in range(100)])


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXTS, max_size=30), st.integers(1, 2000), st.sampled_from([None, _DICT]))
def test_packed_cells_read_back_exactly_whatever_the_block_size(
    notes: list[tuple[str, ...]], block_bytes: int, zdict: bytes | None
) -> None:
    cells = [text_blocks.encode_cell(t, len(FTS_COLUMNS), zdict) for t in notes]
    packed = text_blocks.pack(cells, block_bytes)
    dicts = {} if zdict is None else {text_blocks.dict_id(zdict): (zdict,)}
    rows = [(i, start, size, packed.blocks[b]) for i, (b, start, size) in enumerate(packed.places)]
    found = text_blocks.cells_of(rows)
    assert {i: text_blocks.decode_cell(i, c, dicts, len(FTS_COLUMNS)) for i, c in found.items()} == dict(
        enumerate(notes)
    )
    for b, block in enumerate(packed.blocks):  # every block is full but its last cell, and only its cells
        mine = [size for blk, _, size in packed.places if blk == b]
        assert sum(mine) == len(block) and sum(mine[:-1]) < block_bytes


def test_the_consistency_checks_find_a_block_no_note_names_and_a_note_without_its_block(
    big: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work.seg"
    shutil.copyfile(_segment(big), work)
    work.chmod(0o644)
    conn = sqlite3.connect(work, isolation_level=None)
    try:
        assert inconsistencies(conn, working=False) == []
        conn.execute("INSERT INTO text_blocks(id, data) VALUES (999, ?)", (b"a deleted note's cell",))
        assert inconsistencies(conn, working=False) == ["text blocks no note names: 1"]
        conn.execute("UPDATE note_text SET block = 1000 WHERE note_id = (SELECT min(note_id) FROM note_text)")
        assert inconsistencies(conn, working=False) == [
            "note texts without their block: 1",
            "text blocks no note names: 1",
        ]
    finally:
        conn.close()


def test_a_dictionary_is_trained_only_on_enough_varied_text() -> None:
    """Too little sample text, or one sample (zstd's trainer refuses it): no dictionary, and the build compresses
    the cells without one (``dictionary_for``); enough: a zstd dictionary of about 1/32 of the samples."""
    assert train_text_dict([b"protein kinase " * 10] * 5) == b""
    assert train_text_dict([b"x" * 200_000]) == b""  # enough bytes, one sample: zstd's ZstdError
    assert 1024 <= len(_DICT) <= 170_000 // 32 and text_blocks.dict_id(_DICT) != 0
