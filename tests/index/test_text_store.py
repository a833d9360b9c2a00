"""The stored note texts (``note_text``) of a segment: compressed with the segment's preset dictionary
(``text_dict``) when the build writes enough notes, each cell still readable alone; copied between
segments as they are or re-encoded (``segments.copy_note_texts``); a cell whose dictionary is gone fails
closed."""

from __future__ import annotations

import random
import sqlite3
import zlib
from pathlib import Path

import pytest
from conftest import note, write_files

from core.build.builder import build_index
from core.build.ingest import field_texts
from core.build.segment_writer import SegmentSource, write_segment
from core.build.text_dict import MIN_NOTES
from core.errors import IntegrityError
from core.index import verify
from core.index.layout import layout_for
from core.index.tables.meta import get_meta
from core.index.tables.notes_fts import cell_dict_id, decode_texts, matching_rowids, stored_texts, text_dicts
from core.vault.notes import parse_note

_WORDS = "protein cell receptor binding expression tumour signalling pathway kinase mutation analysis".split()


def _vault(root: Path, count: int) -> Path:
    rnd = random.Random(count)
    files = {}
    for i in range(count):
        body = " ".join(rnd.choice(_WORDS) for _ in range(120))
        files[f"n{i:03d}.md"] = note(f"Note {i}", f"## Results\n\nThe {body}.\n\n## Methods\n\nWe measured {i}.")
    return write_files(root, files)


def _segment(vault: Path) -> Path:
    return verify.resolve(layout_for(vault)).parts[0].path


def _cells(segment: Path) -> dict[int, bytes]:
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT note_id, data FROM note_text"))
    finally:
        conn.close()


def _texts(segment: Path) -> dict[int, tuple[str, ...]]:
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
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
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    (zdict,) = [bytes(r[0]) for r in conn.execute("SELECT data FROM text_dict")]
    paths = dict(conn.execute("SELECT id, rel_path FROM notes"))
    conn.close()
    assert 0 < len(zdict) <= 32768 and b"receptor" in zdict
    cells = _cells(segment)
    assert {cell_dict_id(c) for c in cells.values()} == {zlib.adler32(zdict)}
    texts = _texts(segment)
    for nid, rel in paths.items():  # exactly the texts FTS5 indexed
        assert texts[nid] == field_texts(parse_note(rel, (big / rel).read_bytes()))
    plain = sum(len(zlib.compress(zlib.decompressobj(zdict=zdict).decompress(c), 1)) for c in cells.values())
    assert sum(map(len, cells.values())) < 0.7 * plain  # what the dictionary is for


def test_a_build_of_a_few_notes_stores_no_dictionary(tmp_path: Path) -> None:
    vault = _vault(tmp_path, MIN_NOTES - 1)
    build_index(vault)
    segment = _segment(vault)
    assert {cell_dict_id(c) for c in _cells(segment).values()} == {None}
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    assert conn.execute("SELECT count(*) FROM text_dict").fetchone()[0] == 0
    conn.close()


def test_copies_keep_the_cells_of_a_shared_dictionary_and_re_encode_the_others(big: Path, tmp_path: Path) -> None:
    segment = _segment(big)
    tokenizer = get_meta(sqlite3.connect(f"file:{segment}?mode=ro", uri=True))["tokenizer"]
    ids = sorted(_cells(segment))
    whole, few = tmp_path / "whole.seg", tmp_path / "few.seg"
    write_segment(whole, [SegmentSource(segment, ids)], tokenizer=tokenizer)
    assert _cells(whole) == _cells(segment)  # byte for byte: the same dictionary came along
    write_segment(few, [SegmentSource(segment, ids[:3])], tokenizer=tokenizer)
    assert {cell_dict_id(c) for c in _cells(few).values()} == {None}  # 3 notes: cheaper without one
    merged = tmp_path / "merged.seg"  # the first source has no dictionary: the second one's is taken
    write_segment(merged, [SegmentSource(few, ids[:3]), SegmentSource(segment, ids[3:])], tokenizer=tokenizer)
    expected = _texts(segment)
    for copy in (whole, few, merged):
        assert _texts(copy) == {i: expected[i] for i in _texts(copy)}
    assert sorted(_texts(merged)) == ids


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
    cell = next(iter(_cells(_segment(big)).values()))
    with pytest.raises(IntegrityError, match="dictionary"):
        decode_texts(5, cell, {})
    conn = sqlite3.connect(f"file:{_segment(big)}?mode=ro", uri=True)
    dicts = text_dicts(conn)
    conn.close()
    wrong = {k: (b"another dictionary of the same checksum", *v) for k, v in dicts.items()}
    assert decode_texts(5, cell, wrong)  # two dictionaries of one Adler-32: the one that decodes
