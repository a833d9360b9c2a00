"""The floor under the cold-build ratio: the least a vaultsearch build must do, timed.

A real build (``core.build.builder.build_index``) also chunks, counts chunk vectors, maps words to
FTS5 terms, resolves links, writes nine tables, validates, hashes and fsyncs. This skeleton
keeps only the steps no design of this index can skip, run the way the build runs them
(the same two forked workers, batches of 64 notes, one writer inserting as batches arrive):

    workers   read each file, parse it (YAML frontmatter, tags, links, headings: the SPEC's
              "Notes"), cut and count each note's words per field (the BM25F statistics
              ``fts`` ranks by), and send texts and counts back;
    writer    insert each note's ``notes_fts`` row (same columns, same tokenizer) and its one
              stored copy of the texts (compressed cells in ``text_blocks``, placed by ``note_text``), as the build does.

Nothing else is written. If this alone costs more than a target ratio allows, no tuning of
the rest of the build reaches that ratio; ``bench_build`` reports it beside the cold build.

    python -m bench.build_floor VAULT DB
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import time
from pathlib import Path

from core.build.builder import DEFAULT_TOKENIZER
from core.build.ingest import field_texts
from core.index.tables import text_blocks
from core.index.tables.notes_fts import FTS_COLUMNS, ddl_notes_fts, insert_fts_rows, insert_text_blocks
from core.ranking.analysis import LocalVector, WordTable
from core.vault.notes import parse_note
from core.vault.scan import read_file, scan_vault

BATCH = 64
WORKERS = 2
_table: WordTable | None = None


def _prepare(batch: list[tuple[str, str]]) -> tuple[list[tuple[str, ...]], text_blocks.Packed, list[LocalVector]]:
    """Worker: the field texts (and their compressed cells packed in blocks) and word counts of a batch
    of (rel_path, path)."""
    global _table
    if _table is None:
        _table = WordTable(len(FTS_COLUMNS))
    texts = []
    for rel_path, path in batch:
        data, _sha256 = read_file(Path(path))
        note = parse_note(rel_path, data)
        if note is not None:
            texts.append(field_texts(note))
    _new_words, vectors = _table.count(texts)
    packed = text_blocks.pack(text_blocks.encode_cell(cells, len(FTS_COLUMNS), None) for cells in texts)
    return texts, packed, vectors


def build_floor(vault: Path, db_path: Path) -> float:
    """Run the skeleton build of ``vault`` into a fresh ``db_path``; return its wall seconds."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    start = time.perf_counter()
    files = [(f.rel_path, f.os_path) for f in scan_vault(vault).files]
    batches = [files[i : i + BATCH] for i in range(0, len(files), BATCH)]
    conn = sqlite3.connect(db_path)
    try:
        conn.execute("PRAGMA journal_mode=MEMORY")  # as the builder's staging file (it fsyncs once at the end)
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute(ddl_notes_fts(DEFAULT_TOKENIZER))
        conn.execute(text_blocks.DDL_NOTE_TEXT)
        conn.execute(text_blocks.DDL_TEXT_BLOCKS)
        next_id = next_block = 1
        with multiprocessing.get_context("fork").Pool(WORKERS) as pool, conn:
            for texts, packed, _vectors in pool.imap(_prepare, batches):
                insert_text_blocks(conn, [(next_block + i, block) for i, block in enumerate(packed.blocks)])
                rows = [
                    (next_id + i, next_block + b, start, size, *cells)
                    for i, (cells, (b, start, size)) in enumerate(zip(texts, packed.places, strict=True))
                ]
                insert_fts_rows(conn, rows)
                next_id, next_block = next_id + len(texts), next_block + len(packed.blocks)
    finally:
        conn.close()
    return time.perf_counter() - start


if __name__ == "__main__":
    print(f"{build_floor(Path(sys.argv[1]), Path(sys.argv[2])):.3f} s")
