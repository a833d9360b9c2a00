"""Obsidian names: a note's name is its file name (frontmatter ``title`` overrides), aliases are
names too, a leading H1 is a heading, and a template placeholder is not a title. Names are
searchable and weigh as names, on small vaults and on copies of the real corpora."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.build.builder import build_index
from core.searcher import search_vault
from core.vault.names import is_placeholder_title
from core.vault.notes import names_text, note_names, parse_note
from tests.index.test_builder import copy_corpus, dendron_subset
from tests.paths import DENDRON, POWERSHELL


def parse(text: str, rel: str = "n.md"):
    note = parse_note(rel, text.encode())
    assert note is not None
    return note


def test_title_is_frontmatter_title_else_file_name_and_h1_is_a_heading():
    assert parse("---\ntitle: Given\n---\n# Other\n").title == "Given"
    assert parse("text\n\n# Footer heading\n", "Plugins seeking help.md").title == "Plugins seeking help"
    assert parse("# Leading H1\nbody\n", "dir/file-name.md").title == "file-name"


@pytest.mark.parametrize("title", ["{{title}}", "Daily {{date:YYYY-MM-DD}}", "<% tp.file.title %>"])
def test_a_template_placeholder_is_not_a_title(title):
    assert is_placeholder_title(title)
    assert parse(f"---\ntitle: '{title}'\n---\nbody\n", "Real name.md").title == "Real name"


def test_names_are_title_file_name_and_aliases_without_repeats():
    note = parse("---\ntitle: Schema\naliases: [Blueprint, Schema]\n---\n", "dendron.topic.schema.md")
    assert note_names(note) == ("Schema", "dendron.topic.schema", "Blueprint")
    plain = parse("body\n", "Plain.md")
    assert note_names(plain) == ("Plain",)
    # the name field: title and aliases, plus the file-name words they lack (no word counted twice)
    assert names_text(note) == "Schema Blueprint Schema dendron topic"
    assert names_text(plain) == "Plain"


FILES = {
    # the file name is this note's name; its footer H1 used to become its title
    "Plugins seeking help.md": "A list of community plugins whose authors ask for contributors.\n\n"
    "# Further reading\nSee the help vault for plugins, help pages and how to seek support.\n",
    # notes that say the words more often, in their body and headings
    "Help.md": "# Plugins seeking help\nPlugins plugins plugins seeking help help help: plugins seeking help.\n",
    "Contributing.md": "# Seeking help with plugins\nHelp for plugins. Seeking plugins help. Plugins help.\n",
    "Templated.md": "---\ntitle: '{{title}}'\n---\nA note made from a template.\n",
    "Alias note.md": "---\naliases: [Zettelkasten method]\n---\nSlip-box notes.\n",
}


@pytest.fixture(scope="module")
def names_vault(make_vault) -> Path:
    return make_vault(FILES, name="names")


@pytest.mark.parametrize("mode", ["fts", "hybrid", "auto"])
def test_a_note_is_found_first_by_its_own_file_name(names_vault, mode):
    results = search_vault(names_vault, "Plugins seeking help", mode=mode)
    assert results[0].rel_path == "Plugins seeking help.md"
    assert results[0].title == "Plugins seeking help"


def test_an_alias_and_a_file_name_under_a_placeholder_title_are_searchable(names_vault):
    assert search_vault(names_vault, "zettelkasten method", mode="fts")[0].rel_path == "Alias note.md"
    top = search_vault(names_vault, "templated", mode="fts")[0]
    assert (top.rel_path, top.title) == ("Templated.md", "Templated")


def test_dendron_copy_hierarchical_file_name_finds_its_note(tmp_path):
    vault = copy_corpus(DENDRON, tmp_path / "dendron", dendron_subset())
    build_index(vault)
    results = search_vault(vault, "dendron topic schema", mode="fts")
    assert results[0].rel_path == "dendron.topic.schema.md"
    assert results[0].title == "Schemas"  # Dendron's frontmatter title wins over the file name
    assert search_vault(vault, "dendron topic lookup", mode="fts")[0].rel_path == "dendron.topic.lookup.md"


def powershell_versions_subset() -> list[str]:
    """The CimCmdlets module in every version folder: near-duplicate notes that share file names."""
    return sorted(p.relative_to(POWERSHELL).as_posix() for p in POWERSHELL.glob("*/CimCmdlets/*.md"))


def test_powershell_copy_every_version_of_a_file_name_ranks_first(tmp_path):
    names = powershell_versions_subset()
    vault = copy_corpus(POWERSHELL, tmp_path / "ps", names)
    build_index(vault)
    expected = {n for n in names if n.endswith("/Get-CimClass.md")}
    assert len(expected) >= 2
    results = search_vault(vault, "get cimclass", mode="fts", limit=20)
    assert {r.rel_path for r in results[: len(expected)]} == expected
