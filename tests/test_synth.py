"""Quick checks of the synthetic-vault generator (bench/synth.py): the scaling study trusts its output."""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import pytest
import yaml

# bench/ is a script folder at the repo root, not part of the installed package.
_REPO = str(Path(__file__).resolve().parent.parent)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from bench import synth  # noqa: E402

_LINK = re.compile(r"\[\[([^\]|#]+)(?:\|[^\]]*)?\]\]")


def _files(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted(vault.rglob("*.md"))}


def _frontmatter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text[4 : text.index("\n---\n", 4)])


@pytest.fixture(scope="module")
def big_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One vault just over a folder's capacity, shared by the structural tests."""
    out = tmp_path_factory.mktemp("synth") / "vault"
    synth.make_vault(out, synth.FOLDER_SIZE + 5, seed=7)
    return out


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    synth.make_vault(tmp_path / "a", 40, seed=3)
    synth.make_vault(tmp_path / "b", 40, seed=3)
    synth.make_vault(tmp_path / "c", 40, seed=4)
    a, b, c = (_files(tmp_path / name) for name in "abc")
    assert len(a) == 40
    assert a == b
    assert a != c


def test_folders_hold_at_most_folder_size_notes(big_vault: Path) -> None:
    counts = sorted(len(list(d.glob("*.md"))) for d in big_vault.iterdir())
    assert counts == [5, synth.FOLDER_SIZE]


def test_frontmatter_and_structure(big_vault: Path) -> None:
    for path in sorted(big_vault.rglob("*.md"))[:200]:
        text = path.read_text(encoding="utf-8")
        meta = _frontmatter(text)
        assert set(meta) == {"title", "type", "tags", "created", "updated", "classification"}
        assert meta["title"] and meta["type"] in synth.NOTE_TYPES
        assert meta["classification"] in {"public", "lan"}
        assert set(meta["tags"]) <= set(synth.TAGS)
        assert meta["created"] <= meta["updated"]
        body = text.split("\n---\n", 1)[1]
        headings = [line for line in body.splitlines() if line.startswith("## ")]
        paragraphs = [b for b in body.split("\n\n") if b.strip() and not b.startswith("## ")]
        assert 1 <= len(headings) <= 4
        assert 3 <= len(paragraphs) <= 15


def test_links_resolve_to_other_notes_with_real_density(big_vault: Path) -> None:
    stems = {p.stem for p in big_vault.rglob("*.md")}
    degrees = []
    for path in big_vault.rglob("*.md"):
        targets = _LINK.findall(path.read_text(encoding="utf-8"))
        assert all(t in stems and t != path.stem for t in targets)
        degrees.append(len(targets))
    real = synth.load_pool().out_degrees
    assert statistics.mean(degrees) == pytest.approx(statistics.mean(real), rel=0.3)
    assert degrees.count(0) / len(degrees) == pytest.approx(real.count(0) / len(real), abs=0.08)


def test_refuses_non_empty_output(tmp_path: Path) -> None:
    (tmp_path / "keep.md").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError):
        synth.make_vault(tmp_path, 5)


def test_queries_are_deterministic_and_come_from_their_note(big_vault: Path) -> None:
    first = synth.make_queries(big_vault, 25, seed=1)
    assert first == synth.make_queries(big_vault, 25, seed=1)
    assert len({q["_id"] for q in first}) == 25
    for query in first:
        assert query["text"] in (big_vault / query["rel_path"]).read_text(encoding="utf-8")


def test_prose_blocks_drop_code_tables_and_join_wrapped_lines() -> None:
    body = "# Top\n\nOne line\nwrapped here.\n\n```\ncode. Not prose.\n```\n| a | b |\n- item text.\n"
    paragraphs, headings = synth.prose_blocks(body)
    assert headings == ["Top"]
    assert paragraphs == ["One line wrapped here.", "item text."]
    assert synth.split_sentences("First sentence is long enough. Second one, [[x|also]] long enough!") == [
        "First sentence is long enough.",
        "Second one, also long enough!",
    ]
