"""A note's and a skipped file's SHA-256 are stored as their 32 bytes (schema 24; 64 hex digits before,
twice: the row and the ``notes_stat`` index), and every reader gives the lower-case hex digest back."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from conftest import note, write_files

from core import generations as gen
from core.build.builder import build_index
from core.errors import IntegrityError
from core.index.tables import notes, skipped_files

FILES = {"a.md": note("Alpha", "alpha words"), "sub/b.md": note("Beta", "beta words")}


def test_hashes_are_stored_as_bytes_and_read_as_hex(tmp_path: Path) -> None:
    vault = write_files(tmp_path / "v", FILES)
    (vault / "blob.md").write_bytes(b"\x00\x01binary\x00")
    build_index(vault)
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    digest = {rel: hashlib.sha256((vault / rel).read_bytes()).hexdigest() for rel in (*FILES, "blob.md")}
    stored = conn.execute("SELECT typeof(content_sha256), length(content_sha256) FROM notes").fetchall()
    assert set(stored) == {("blob", 32)}
    stored = conn.execute("SELECT typeof(content_sha256), length(content_sha256) FROM skipped_files").fetchall()
    assert stored == [("blob", 32)]
    assert {r[0]: r[2] for r in notes.note_file_rows(conn)} == {rel: digest[rel] for rel in FILES}
    assert dict(skipped_files.source_hashes(conn)) == digest
    assert {r[0]: r[1] for r in skipped_files.source_stats(conn)} == digest
    assert {r[0]: r[1] for r in skipped_files.skipped_file_rows(conn)} == {"blob.md": digest["blob.md"]}
    got = {r[0]: r[1] for r in skipped_files.classified_source_stats_of(conn, ["a.md", "blob.md", "none.md"])}
    assert got == {"a.md": digest["a.md"], "blob.md": digest["blob.md"]}
    row = notes.visible_note_at(conn, "sub/b.md", "1", [])
    assert row is not None and row[3] == digest["sub/b.md"]
    assert {v[0] for v in notes.hit_files(conn, [row[0]]).values()} == {digest["sub/b.md"]}


def test_a_doctored_stored_hash_fails_closed(tmp_path: Path) -> None:
    """A part whose stored 32-byte hash was overwritten in place (same size) is refused by the next reader."""
    vault = write_files(tmp_path / "v", FILES)
    build_index(vault)
    layout = gen.layout_for(vault)
    part = gen.resolve(layout).parts[0].path
    os.chmod(part, 0o644)
    conn = sqlite3.connect(part)
    conn.execute("UPDATE notes SET content_sha256 = zeroblob(32) WHERE rel_path = 'a.md'")
    conn.commit()
    conn.close()
    gen.clear_verify_cache()
    with pytest.raises(IntegrityError) as info:
        gen.resolve(layout)
    assert info.value.reason == "sha256_mismatch"
