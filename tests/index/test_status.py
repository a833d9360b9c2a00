"""``staleness`` and ``index_status``: what changed in the vault since the active index, and what
the index is. Each case changes one thing in a freshly built vault."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import write_files as write

from core import generations as gen
from core.build.builder import IndexConfig, build_index
from core.errors import IndexMissingError
from core.index.status import index_status, staleness

FILES = {
    "a.md": "---\ntitle: A\n---\nA links to [[b]] and [[missing]].\n",
    "b.md": "# B\n\nbee\n",
    "dir/c.md": "---\ntitle: [broken\n---\nsee\n",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = write(tmp_path / "vault", FILES)
    build_index(root)
    return root


def test_a_fresh_index_is_not_stale(vault: Path) -> None:
    assert staleness(vault) == {"stale": False, "added": [], "modified": [], "removed": [], "source_files": 3}


def test_added_modified_and_removed_files_are_each_reported(vault: Path) -> None:
    write(vault, {"new.md": "# New\n", "b.md": "# B\n\nbee changed\n"})
    (vault / "dir" / "c.md").unlink()
    found = staleness(vault)
    assert found == {
        "stale": True,
        "added": ["new.md"],
        "modified": ["b.md"],
        "removed": ["dir/c.md"],
        "source_files": 3,
    }
    build_index(vault)
    assert not staleness(vault)["stale"]


def test_a_same_size_edit_is_modified(vault: Path) -> None:
    (vault / "b.md").write_text("# B\n\nbea\n", encoding="utf-8")
    assert staleness(vault)["modified"] == ["b.md"]


def test_touched_or_rewritten_identical_files_are_not_stale(vault: Path) -> None:
    later = time.time() + 10
    os.utime(vault / "a.md", (later, later))
    (vault / "b.md").write_text(FILES["b.md"], encoding="utf-8")
    assert not staleness(vault)["stale"]


def test_a_skipped_binary_file_counts_as_seen(tmp_path: Path) -> None:
    root = write(tmp_path / "vault", {**FILES, "blob.md": b"\x00\x01binary"})
    build_index(root)
    assert staleness(root) == {"stale": False, "added": [], "modified": [], "removed": [], "source_files": 4}
    (root / "blob.md").write_bytes(b"\x00\x02binary")
    assert staleness(root)["modified"] == ["blob.md"]


def test_index_status_of_a_generation(vault: Path) -> None:
    report = build_index(vault)  # up to date: the same generation
    status = index_status(vault)
    layout = gen.layout_for(vault)
    assert status["index_kind"] == "immutable_generation" and status["generation_id"] == report.generation_id
    assert status["sha256"] == gen.resolve(layout).sha256 and status["size"] > 0
    assert (status["notes"], status["skipped_files"]) == (3, 0) and status["chunks"] >= 3
    assert status["coverage"] == {"indexed_notes": 3, "source_files": 3}
    assert (status["links"], status["unresolved_links"]) == (2, 1)
    assert status["dense"] == {
        "chunks_with_vectors": 0,
        "chunks": status["chunks"],
        "coverage": 0.0,
        "model": None,
        "seconds_left": None,
        "chunks_per_s": None,
        "estimate": "no_embed_run_measured",
    }
    assert status["problems"] == [
        {"path": "dir/c.md", "reason": "yaml_invalid", "detail": status["problems"][0]["detail"]}
    ]
    assert status["staleness"]["stale"] is False and 0 <= status["age_seconds"] < 600
    assert [g["generation_id"] for g in status["generations"]] == [report.generation_id]
    assert status["chunker"] == "heading-v1:600:60" and status["tokenizer"] == "porter unicode61 remove_diacritics 2"


def test_index_status_of_the_legacy_layout(tmp_path: Path) -> None:
    root = write(tmp_path / "vault", FILES)
    build_index(root, in_place=True)
    status = index_status(root)
    assert status["index_kind"] == "legacy_db" and status["generation_id"] is None and status["generations"] == []
    assert status["notes"] == 3 and not status["staleness"]["stale"]


def test_status_without_an_index_is_index_missing(tmp_path: Path) -> None:
    root = write(tmp_path / "vault", FILES)
    for call in (staleness, index_status):
        with pytest.raises(IndexMissingError) as caught:
            call(root)
        assert caught.value.reason == "index_missing"


def test_a_file_over_the_builds_own_size_limit_is_not_reported_as_added(tmp_path: Path) -> None:
    root = write(tmp_path / "v", {**FILES, "big.md": "# Big\n\n" + "word " * 400})  # ~2 KB
    report = build_index(root, config=IndexConfig(max_note_bytes=1000))
    assert any(p["path"] == "big.md" and p["reason"] == "too_large" for p in report.problems)
    stale = staleness(root)
    assert not stale["stale"] and stale["added"] == []
