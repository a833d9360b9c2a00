"""search_vault(vault_dir, query, max_results, mode): the reference design's signature, and the
fields an agent cites: file line ranges of the best chunk and the note's content SHA-256."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from core.build.builder import IndexConfig, build_index
from core.errors import UsageError
from core.searcher import search_vault
from tests.conftest import write_files

NOTE = (
    "---\n"
    "title: Lines\n"
    "tags: [x]\n"
    "---\n"
    "\n"
    "# Lines\n"
    "\n"
    "Opening words about apples and more apples here.\n"
    "\n"
    "## Pears\n"
    "\n"
    "Pears are the topic of this second section entirely.\n"
    "Another pear line follows.\n"
    "\n"
    "## Plums\n"
    "\n"
    "Plums close the note.\n"
)


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_files(tmp_path_factory.mktemp("sig"), {"lines.md": NOTE, "other.md": "# Other\n\napples.\n"})
    build_index(root, config=IndexConfig(chunk_size=60, chunk_overlap=0))
    return root


def test_positional_and_keyword_forms_are_the_same_call(vault):
    a = search_vault(vault, "apples", 1, "fts")
    b = search_vault(vault_dir=vault, query="apples", max_results=1, mode="fts")
    c = search_vault(vault, "apples", mode="fts", limit=1)
    assert [r.rel_path for r in a] == [r.rel_path for r in b] == [r.rel_path for r in c] and len(a) == 1
    assert a.actual_mode == "fts"


def test_a_misspelled_keyword_is_a_type_error_naming_the_valid_ones(vault):
    with pytest.raises(TypeError) as info:
        search_vault(vault, "apples", max_result=3)
    assert "max_result'" in str(info.value) and "max_results" in str(info.value) and "tags_all" in str(info.value)


def test_the_old_positional_mode_is_a_type_error(vault):
    with pytest.raises(TypeError):
        search_vault(vault, "apples", "fts")


def test_max_results_and_limit_must_agree(vault):
    with pytest.raises(UsageError) as info:
        search_vault(vault, "apples", 3, limit=5)
    assert info.value.reason == "usage"


def test_line_ranges_are_the_file_lines_of_the_best_chunk(vault):
    lines = (vault / "lines.md").read_text().split("\n")
    for query, expect in (("pears topic", "Pears are the topic"), ("plums close", "Plums close the note.")):
        hit = next(r for r in search_vault(vault, query, 5, "fts") if r.rel_path == "lines.md")
        covered = lines[hit.line_start - 1 : hit.line_end]
        assert any(expect in line for line in covered), (query, hit.line_start, hit.line_end)
        assert hit.line_start >= 6 and hit.line_end <= len(lines)  # never the frontmatter
        assert hit.line_end - hit.line_start < 6  # one small chunk, not the whole note


def test_content_sha256_is_the_hash_of_the_note_file(vault):
    for r in search_vault(vault, "apples", 5, "fts"):
        assert r.content_sha256 == hashlib.sha256((vault / r.rel_path).read_bytes()).hexdigest()
        assert r.to_dict()["content_sha256"] == r.content_sha256


def test_passages_false_leaves_the_line_range_empty(vault):
    r = search_vault(vault, "apples", 1, "fts", passages=False)[0]
    assert (r.line_start, r.line_end, r.snippet) == (None, None, "")
