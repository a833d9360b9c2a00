"""``vaultsearch show``: a note, a section or a line range, with line numbers; confined to the vault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import cli
from core.errors import NoteNotFoundError, UsageError, VaultPathError
from core.vault.show import parse_line_range, show_note
from tests.conftest import write_files
from tests.index.test_builder import copy_corpus
from tests.paths import DENDRON

NOTE = (
    "---\ntitle: Garden\ntags: [plants]\n---\n"  # lines 1-4
    "Intro line.\n"  # 5
    "## Soil\n"  # 6
    "Loam is best.\n"  # 7
    "### Worms\n"  # 8
    "Worms help.\n"  # 9
    "```\n# not a heading\n```\n"  # 10-12
    "## Water\n"  # 13
    "Water daily.\n"  # 14
)


@pytest.fixture()
def vault(tmp_path: Path) -> Path:
    return write_files(tmp_path / "vault", {"notes/garden.md": NOTE, "other.md": "x\n"})


def test_whole_note_with_frontmatter_as_data(vault):
    view = show_note(vault, "notes/garden.md")
    assert (view.line_start, view.line_end, view.total_lines) == (1, 14, 14)
    assert view.frontmatter == {"title": "Garden", "tags": ["plants"]} and view.title == "Garden"
    assert view.lines[4] == "Intro line."


def test_a_section_runs_to_the_next_heading_of_its_level_or_higher(vault):
    soil = show_note(vault, "notes/garden", section="Soil")  # .md optional, as in Obsidian links
    assert (soil.line_start, soil.line_end) == (6, 12)  # its ### subsection and the code block are inside
    assert soil.lines[0] == "## Soil" and soil.lines[-1] == "```"
    water = show_note(vault, "notes/garden.md", section="## water")
    assert (water.line_start, water.line_end, water.lines) == (13, 14, ("## Water", "Water daily."))


@pytest.mark.parametrize(("spec", "expected"), [("2:3", (2, 3)), ("5", (5, 5)), (":2", (None, 2)), ("13:", (13, None))])
def test_line_ranges(vault, spec, expected):
    assert parse_line_range(spec) == expected
    view = show_note(vault, "notes/garden.md", lines=expected)
    assert view.line_start == (expected[0] or 1) and view.line_end == min(expected[1] or 14, 14)
    assert view.lines == tuple(NOTE.splitlines()[view.line_start - 1 : view.line_end])


@pytest.mark.parametrize("spec", ["a:b", "0:2", "5:3", "-1", "1:2:3", ""])
def test_a_bad_line_range_is_a_usage_error(spec):
    with pytest.raises(UsageError) as info:
        parse_line_range(spec)
    assert info.value.reason == "usage"


@pytest.mark.parametrize("path", ["../outside.md", "/etc/passwd", "missing.md", "notes", "notes/../../x.md", "a\x00b"])
def test_paths_outside_the_vault_or_missing_are_refused(vault, path):
    (vault.parent / "outside.md").write_text("secret\n", encoding="utf-8")
    with pytest.raises(NoteNotFoundError) as info:
        show_note(vault, path)
    assert info.value.reason == "note_not_found"


def test_a_symlink_out_of_the_vault_is_refused(vault, tmp_path):
    (tmp_path / "secret.md").write_text("secret\n", encoding="utf-8")
    (vault / "link.md").symlink_to(tmp_path / "secret.md")
    with pytest.raises(NoteNotFoundError):
        show_note(vault, "link.md")


def test_missing_section_lines_past_the_end_and_missing_vault(vault, tmp_path):
    with pytest.raises(NoteNotFoundError):
        show_note(vault, "notes/garden.md", section="not a heading")  # inside code: not a heading
    with pytest.raises(NoteNotFoundError):
        show_note(vault, "notes/garden.md", lines=(40, 50))
    with pytest.raises(VaultPathError):
        show_note(tmp_path / "nope", "x.md")


def test_cli_show_text_json_and_exit_codes(vault, capsys):
    assert cli.main(["show", str(vault), "notes/garden.md", "--lines", "6:7"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["6  ## Soil", "7  Loam is best."] and "lines 6-7 of 14" in out[0]
    assert cli.main(["show", str(vault), "notes/garden.md", "--section", "Water", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["frontmatter"]["tags"] == ["plants"] and (d["line_start"], d["line_end"]) == (13, 14)
    assert d["obsidian_uri"] == "obsidian://open?vault=vault&file=notes%2Fgarden"
    assert cli.main(["show", str(vault), "../x.md"]) == 2
    assert "[note_not_found]" in capsys.readouterr().err
    assert cli.main(["show", str(vault), "notes/garden.md", "--lines", "x"]) == 2


def test_dendron_copy_show_a_section(tmp_path):
    vault = copy_corpus(DENDRON, tmp_path / "dendron", ["dendron.topic.schema.md"])
    text = (vault / "dendron.topic.schema.md").read_text(encoding="utf-8").splitlines()
    heading = next(line for line in text if line.startswith("## "))
    view = show_note(vault, "dendron.topic.schema", section=heading[3:])
    assert text[view.line_start - 1] == heading and view.lines == tuple(text[view.line_start - 1 : view.line_end])
