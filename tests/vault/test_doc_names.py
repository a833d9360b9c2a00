"""Names of docs-style vaults (issue 26): a note is named what a reader sees. An index note
(``index.md``/``README.md``/``_index.md``) is named by its H1 and its folder, a frontmatter title
key in any case wins, official abbreviations (the H1's ``(BGB)``, short-name keys) are names, and
a query that is exactly a note's name finds that note before the notes that cite it. An ordinary
Obsidian vault keeps its names. ``status`` says which rule named how many notes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import cli
from core.index.status import index_status
from core.searcher import search_vault
from core.vault.names import abbreviations
from core.vault.notes import names_text, note_names, parse_note
from core.vault.show import show_note


def parse(text: str, rel: str):
    note = parse_note(rel, text.encode())
    assert note is not None
    return note


# ---------------------------------------------------------------- Hugo / mdBook: one folder per note

COURSE = {
    "book/ownership/index.md": "# 所有权\n\n所有权是一组规则，决定程序如何管理内存。每个值都有一个所有者。\n",
    "book/borrowing/index.md": "# 引用与借用\n\n引用让你使用值而不获取其所有权。借用规则很重要。\n",
    "book/slices/_index.md": "# 切片类型\n\n切片让你引用集合中一段连续的元素，而不用引用整个集合。\n",
    "book/structs/README.md": "# 结构体\n\n结构体是一个自定义数据类型，允许你命名和包装多个相关的值。\n",
    "book/intro/index.md": "Notes without a heading: the folder names them.\n",
}


@pytest.fixture(scope="module")
def course(make_vault) -> Path:
    return make_vault(COURSE, name="course")


def test_an_index_note_is_shown_by_its_h1_and_found_by_its_folder_name(course):
    hits = {r.rel_path: r.title for r in search_vault(course, "所有权", mode="fts", limit=10)}
    assert hits["book/ownership/index.md"] == "所有权"
    top = search_vault(course, "ownership", mode="fts")[0]  # the English folder slug is a name too
    assert (top.rel_path, top.title) == ("book/ownership/index.md", "所有权")
    for rel, title in (("book/slices/_index.md", "切片类型"), ("book/structs/README.md", "结构体")):
        assert search_vault(course, title, mode="fts")[0].rel_path == rel
    intro = search_vault(course, "intro", mode="fts")[0]
    assert (intro.rel_path, intro.title) == ("book/intro/index.md", "intro")


def test_show_names_a_note_as_search_does(course, laws):
    assert show_note(course, "book/ownership/index.md").title == "所有权"
    assert show_note(course, "book/intro/index.md").title == "intro"
    assert show_note(laws, "stvo/index.md").title == "Straßenverkehrs-Ordnung"  # TITLE: in capitals


def test_a_folder_slug_shared_by_two_sections_does_not_decide_between_them(make_vault):
    """Both notes live in a folder ``async_function``; the one titled "async function" is the name
    the query says, though the other says the words more often."""
    vault = make_vault(
        {
            "statements/async_function/index.md": "---\ntitle: async function\n---\nDeclares an async function.\n",
            "operators/async_function/index.md": "---\ntitle: async function expression\n---\n"
            + "An async function expression defines an async function inside an expression. " * 3,
        },
        name="slugs",
    )
    assert search_vault(vault, "async function", mode="fts")[0].rel_path == "statements/async_function/index.md"


def test_index_names_and_a_footer_h1_is_no_name():
    note = parse("---\nslug: x\n---\n\n# 所有权\n\ntext\n", "book/ownership/index.md")
    assert note.names == (("所有权", "heading"), ("ownership", "folder"))
    assert names_text(note) == "所有权 ownership"  # the file name "index" is no name of an index note
    footer = parse("Some text first.\n\n# Further reading\n", "book/ownership/index.md")
    assert footer.names == (("ownership", "folder"),)


def test_a_slug_named_note_is_also_named_by_its_h1_but_shown_by_its_file_name(make_vault):
    note = parse("# 所有权\n\n所有权规则。\n", "src/ch04-ownership.md")
    assert note.title == "ch04-ownership" and note.names[1] == ("所有权", "heading")
    vault = make_vault({"src/ch04-ownership.md": "# 所有权\n\n规则。\n", "src/ch05.md": "所有权 所有权 所有权\n"})
    assert search_vault(vault, "所有权", mode="fts")[0].rel_path == "src/ch04-ownership.md"


def test_status_says_which_rule_named_how_many_notes(course, capsys):
    names = index_status(course)["names"]
    assert names["shown"] == {"folder": 1, "heading": 4}
    assert names["names"] == {"folder": 5, "heading": 4}
    assert cli.main(["status", str(course)]) == 0
    out = capsys.readouterr().out
    assert "titles     from folder 1, heading 4" in out
    assert cli.main(["status", str(course), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["names"]["shown"] == {"folder": 1, "heading": 4}


# ---------------------------------------------------------------- German laws: Title:, jurabk, (BGB)


def _law(title: str, abbr: str, body: str, h1: str | None = None) -> str:
    return f"---\nTitle: {title}\njurabk: {abbr}\nlayout: default\n---\n\n# {h1 or f'{title} ({abbr})'}\n\n{body}"


def _citing(n: int, cited: str) -> str:
    return "".join(
        f"## § {i} Anwendung des {cited}\n\nDie Vorschriften des {cited} gelten entsprechend; § {i} {cited} bleibt.\n\n"
        for i in range(1, n + 1)
    )


def _long(n: int, words: str) -> str:
    return "".join(
        f"## § {i}\n\n{words} Absatz {i} regelt die Einzelheiten der Rechtsfähigkeit.\n\n" for i in range(1, n)
    )


LAWS = {
    "bgb/index.md": _law("Bürgerliches Gesetzbuch", "BGB", _long(120, "Die Rechtsfähigkeit des Menschen beginnt.")),
    "zpo/index.md": _law(
        "Zivilprozessordnung", "ZPO", _long(80, "Das Verfahren vor den Landgerichten.") + _citing(2, "BGB")
    ),
    "egbgb/index.md": _law("Einführungsgesetz zum Bürgerlichen Gesetzbuche", "BGBEG", _citing(30, "BGB")),
    "weg/index.md": _law("Wohnungseigentumsgesetz", "WEG", _citing(25, "BGB") + _citing(3, "ZPO")),
    "hgb/index.md": _law("Handelsgesetzbuch", "HGB", _citing(20, "BGB") + _citing(20, "ZPO")),
    # only a frontmatter short-name key says this one's abbreviation (its H1 has none)
    "stvo/index.md": "---\nTITLE: Straßenverkehrs-Ordnung\nacronym: StVO\n---\n\n# Straßenverkehrs-Ordnung\n\n"
    + _long(40, "Die Teilnahme am Straßenverkehr."),
    "bkatv/index.md": _law("Bußgeldkatalog-Verordnung", "BKatV", _citing(25, "StVO")),
}


@pytest.fixture(scope="module")
def laws(make_vault) -> Path:
    return make_vault(LAWS, name="laws")


def test_a_title_key_in_any_case_names_the_note(laws):
    assert parse("---\nTitle: Bürgerliches Gesetzbuch\n---\n# BGB\n", "bgb/index.md").title == "Bürgerliches Gesetzbuch"
    assert parse("---\nTITLE: Upper\n---\n", "a/b.md").title == "Upper"
    assert parse("---\ntitle: lower\nTitle: Upper\n---\n", "a/b.md").title == "lower"  # the exact key first
    hits = {r.rel_path: r.title for r in search_vault(laws, "Straßenverkehrs-Ordnung", mode="fts", limit=10)}
    assert hits["stvo/index.md"] == "Straßenverkehrs-Ordnung"


@pytest.mark.parametrize(
    ("query", "expected"), [("BGB", "bgb/index.md"), ("ZPO", "zpo/index.md"), ("StVO", "stvo/index.md")]
)
@pytest.mark.parametrize("mode", ["fts", "hybrid"])
def test_an_official_abbreviation_finds_its_law_before_the_laws_that_cite_it(laws, query, expected, mode):
    assert search_vault(laws, query, mode=mode, limit=5)[0].rel_path == expected


def test_abbreviations_come_from_the_h1_group_and_short_name_keys():
    assert abbreviations({}, "Bürgerliches Gesetzbuch (BGB)") == ["BGB"]
    assert abbreviations({}, "Gesetz über Produkte (Produktsicherheitsgesetz - ProdSG)") == ["ProdSG"]
    assert abbreviations({}, "Sozialgesetzbuch (SGB V)") == ["SGB V"]
    assert abbreviations({}, "Install (optional)") == []  # not an abbreviation
    assert abbreviations({"slug": "optional"}, "Install (optional)") == ["optional"]  # the vault says it is
    keys = {"Short Name": "GG", "abbr": ["RFC", "a much longer text that is no short name at all here"], "x": "y"}
    assert abbreviations(keys, None) == ["GG", "RFC"]
    law = parse(LAWS["bgb/index.md"], "bgb/index.md")
    assert law.names[:3] == (
        ("Bürgerliches Gesetzbuch", "frontmatter"),
        ("Bürgerliches Gesetzbuch (BGB)", "heading"),
        ("BGB", "abbreviation"),  # the folder "bgb" says the same name: counted once, as the abbreviation
    )


def test_status_counts_the_laws_names(laws):
    names = index_status(laws)["names"]
    assert names["shown"] == {"frontmatter": 7}
    assert names["names"]["abbreviation"] == 7 and names["names"]["heading"] == 6


# ---------------------------------------------------------------- an ordinary Obsidian vault: unchanged

OBSIDIAN = {
    "Help.md": "# Plugins seeking help\nPlugins plugins seeking help.\n",
    "Daily/2024-01-02.md": "---\ntitle: Tuesday\n---\n# Standup\nNotes.\n",
    "README.md": "# Vault readme\nWhat this vault is.\n",
    "Projects/Index.md": "# Project list\nAll projects.\n",
}


def test_an_obsidian_vault_keeps_its_names(make_vault):
    got = {rel: (parse(text, rel).title, note_names(parse(text, rel))) for rel, text in OBSIDIAN.items()}
    assert got == {
        "Help.md": ("Help", ("Help",)),  # a leading H1 of a note named by its file is a heading, not a name
        "Daily/2024-01-02.md": ("Tuesday", ("Tuesday", "2024-01-02")),
        "README.md": ("README", ("README",)),  # at the vault's root: no folder names it
        "Projects/Index.md": ("Project list", ("Project list", "Projects")),  # an index note, in any case
    }
    vault = make_vault(OBSIDIAN, name="obsidian")
    assert index_status(vault)["names"]["shown"] == {"file": 2, "frontmatter": 1, "heading": 1}
    hits = {r.rel_path: r.title for r in search_vault(vault, "plugins seeking help", mode="fts")}
    assert hits["Help.md"] == "Help"
