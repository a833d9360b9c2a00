"""A delta that re-publishes carried-over notes (their edges or mtime moved: ``core.build.delta_stage``)
carries their dense vectors from the base: chunk rows store no digest of their text (schema 23), so a
chunk is matched by its note, ord and offsets in the same content (the note's SHA-256 is checked first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.embed import embed_index
from core.index import verify
from core.index.layout import layout_for
from tests.index.test_link_deltas import CHANGES, _vault
from tests.minilm_fixture import FP32


def _state(root: Path) -> tuple[dict[tuple[str, int], bytes], set[tuple[str, int]], dict[str, bytes]]:
    """Vectors by (path, chunk ord), every chunk's (path, ord), each note's content hash."""
    conn = verify.connect_readonly(verify.resolve(layout_for(root)))
    try:
        rows = conn.execute(
            "SELECT n.rel_path, c.ord, v.vector FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
            "JOIN notes n ON n.id = c.note_id"
        ).fetchall()
        chunks = set(conn.execute("SELECT n.rel_path, c.ord FROM chunks c JOIN notes n ON n.id = c.note_id"))
        shas = dict(conn.execute("SELECT rel_path, content_sha256 FROM notes"))
    finally:
        conn.close()
    return {(rel, ord_): bytes(vector) for rel, ord_, vector in rows}, chunks, shas


@pytest.mark.parametrize("name", ["touch", "alias_change"])
def test_relinked_notes_keep_their_vectors(tmp_path: Path, model_dirs: dict[str, Path], name: str) -> None:
    root = _vault(tmp_path / "vault")
    build_index(root)
    embed_index(root, model=model_dirs[FP32])
    before, chunks, shas = _state(root)
    assert set(before) == chunks  # every chunk embedded
    change, relinked = CHANGES[name]
    change(root)
    report = build_index(root)
    assert report.relinked_notes == relinked and report.whole_base_reason is None, report
    after, chunks, now = _state(root)
    changed = {rel for rel, sha in now.items() if shas.get(rel) != sha}  # read again: embedded by a later run
    kept = {k for k in chunks if k[0] not in changed}  # the re-published notes' chunks among them
    assert {k: after.get(k) for k in kept} == {k: before[k] for k in kept}
