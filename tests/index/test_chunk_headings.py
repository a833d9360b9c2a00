"""A chunk's heading path is stored once per distinct path of a segment (``headings``), named by id from
each chunk row; the ``chunks`` view gives it back per chunk, through a copy into another segment too."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import note, write_files

from core.build.builder import build_index
from core.build.segment_writer import SegmentSource, write_segment
from core.index import verify
from core.index.layout import layout_for
from core.index.settings import IndexConfig
from core.index.tables import chunks, segments
from core.index.tables.meta import get_meta
from core.index.tables.notes import json_cell
from core.vault.chunking import chunk_body
from core.vault.notes import parse_note

_SECTION = "## Parameters\n\n### -Path\n\n" + "words about the path parameter " * 40 + "\n\n## Notes\n\nshort.\n"
FILES = {f"cmd{i}.md": note(f"Cmdlet {i}", _SECTION) for i in range(6)}  # the same headings in six notes


def _rows(segment: Path) -> tuple[list[str], list[tuple]]:
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    try:
        paths = [r[0] for r in conn.execute("SELECT path FROM headings")]
        chunks = conn.execute(
            "SELECT n.rel_path, c.ord, c.heading_path, c.start, c.end FROM chunks c "
            "JOIN notes n ON n.id = c.note_id ORDER BY n.rel_path, c.ord"
        ).fetchall()
        return paths, chunks
    finally:
        conn.close()


def test_a_heading_path_is_stored_once_and_read_per_chunk(tmp_path: Path) -> None:
    vault = write_files(tmp_path / "vault", FILES)
    build_index(vault)
    segment = verify.resolve(layout_for(vault)).parts[0].path
    paths, chunks = _rows(segment)
    assert len(paths) == len(set(paths))  # each distinct path once, for the six notes together
    config = IndexConfig()
    expected = [
        (rel, c.ord, json_cell(c.heading_path), c.start, c.end)
        for rel in sorted(FILES)
        for c in chunk_body(
            parse_note(rel, (vault / rel).read_bytes()).body, size=config.chunk_size, overlap=config.chunk_overlap
        )
    ]
    assert chunks == expected and len(paths) < len(chunks) / 2
    copy = tmp_path / "copy.seg"
    conn = sqlite3.connect(f"file:{segment}?mode=ro", uri=True)
    ids = [r[0] for r in conn.execute("SELECT id FROM notes ORDER BY id")]
    tokenizer = get_meta(conn)["tokenizer"]
    conn.close()
    write_segment(copy, [SegmentSource(segment, ids[3:]), SegmentSource(segment, ids[:3])], tokenizer=tokenizer)
    copied_paths, copied = _rows(copy)
    assert copied == chunks and sorted(copied_paths) == sorted(paths)


def _copy_steps(tmp_path: Path, n: int) -> int:
    """SQLite VM steps (in thousands) of ``copy_chunk_rows`` for ``n`` chunks, each under its own heading path."""
    src = tmp_path / f"src{n}.db"
    db = sqlite3.connect(src)
    db.execute(chunks.DDL_HEADINGS)
    db.execute(chunks.DDL_CHUNK_ROWS)
    db.executemany("INSERT INTO headings VALUES (?, ?)", [(i, f"Section {i:06d}") for i in range(1, n + 1)])
    db.executemany("INSERT INTO chunk_rows VALUES (?, ?, ?, ?, ?, ?)", [(i, i, 0, i, 0, 1) for i in range(1, n + 1)])
    db.commit()
    db.close()
    conn = sqlite3.connect(":memory:")
    conn.execute(chunks.DDL_HEADINGS)
    conn.execute(chunks.DDL_CHUNK_ROWS)
    segments.start_copy(conn, [])
    segments.choose_notes(conn, range(1, n + 1))
    conn.execute("ATTACH DATABASE ? AS src", (str(src),))
    steps = [0]
    conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1), 1000)
    segments.copy_chunk_rows(conn)
    assert conn.execute("SELECT count(*) FROM main.chunk_rows").fetchone()[0] == n
    return steps[0]


def test_copying_chunk_rows_costs_in_proportion_to_their_heading_paths(tmp_path: Path) -> None:
    """Matching heading paths between segments went through an unindexed join: 8x the paths cost 64x the work
    (85 s of a PowerShell docs edit on a base of two segments). Counted in SQLite VM steps, not time."""
    small, large = _copy_steps(tmp_path, 500), _copy_steps(tmp_path, 4000)
    assert large < 16 * max(small, 1), (small, large)


def test_a_chunk_row_is_its_note_ord_heading_and_offsets_only() -> None:
    """No per-chunk digest is stored (schema 22 kept a 32-byte SHA-256 per chunk that nothing read: 60% of
    ``chunk_rows``); the text is the body between the offsets (test_builder checks that)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(chunks.DDL_CHUNK_ROWS)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(chunk_rows)")]
    assert columns == ["id", "note_id", "ord", "heading_id", "start", "end"]
